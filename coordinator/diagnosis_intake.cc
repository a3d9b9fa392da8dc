#include "coordinator/diagnosis_intake.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tunefarm {

v1::Diagnosis AttributeDiagnosis(v1::Diagnosis diagnosis,
                                 const std::string& identity) {
  if (!identity.empty() && diagnosis.analyzer_id() != identity) {
    diagnosis.set_analyzer_id(
        diagnosis.analyzer_id().empty()
            ? identity
            : absl::StrCat(identity, "/", diagnosis.analyzer_id()));
  }
  return diagnosis;
}

std::optional<v1::PipelineMessage> DiagnosisAck(const v1::Diagnosis& diagnosis,
                                                const absl::Status& recorded) {
  v1::PipelineMessage reply;
  v1::PipelineAck* ack = reply.mutable_ack();
  ack->set_bundle_id(diagnosis.bundle_id());
  ack->set_sweep_id(diagnosis.sweep_id());
  ack->set_round_id(diagnosis.round_id());
  if (absl::IsAlreadyExists(recorded)) {
    ack->set_duplicate(true);
  } else if (absl::IsNotFound(recorded) ||
             absl::IsFailedPrecondition(recorded) ||
             absl::IsInvalidArgument(recorded)) {
    spdlog::warn("diagnosis rejected: {}", recorded.ToString());
    ack->set_rejected(std::string(recorded.message()));
  } else if (!recorded.ok()) {
    spdlog::warn(
        "diagnosis of bundle {} not recorded, not acked (it will be "
        "re-sent): {}",
        diagnosis.bundle_id(), recorded.ToString());
    return std::nullopt;
  }
  return reply;
}

std::optional<v1::PipelineMessage> IntakeDiagnosis(
    v1::Diagnosis diagnosis, const std::string& identity,
    const std::function<absl::Status(const v1::Diagnosis&)>& record) {
  if (diagnosis.bundle_id().empty()) {
    return DiagnosisAck(
        diagnosis, absl::InvalidArgumentError("diagnosis without a bundle_id"));
  }
  diagnosis = AttributeDiagnosis(std::move(diagnosis), identity);
  return DiagnosisAck(diagnosis, record(diagnosis));
}

}  // namespace tunefarm
