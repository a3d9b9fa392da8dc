// Diagnosis intake: what the coordinator does with a diagnosis an analyzer
// sent it over the pipeline (the transport is wired in main.cc): check it,
// attribute it to the analyzer the transport authenticated, have the core
// record it (Coordinator::RecordDiagnosis, on the control loop), and answer.
//
// The acknowledgement rule: a diagnosis is acked only once it is durable,
// already recorded (duplicate), or never recordable (rejected, saying why).
// Any other failure (store unavailable, disk full) gets no ack, so the
// analyzer and the agent behind it re-send it.
//
// Stateless functions; thread-safe. `record` runs on the caller's thread
// and must hand the diagnosis to the control loop itself.
#ifndef TUNEFARM_COORDINATOR_DIAGNOSIS_INTAKE_H_
#define TUNEFARM_COORDINATOR_DIAGNOSIS_INTAKE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "tunefarm/v1/pipeline.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// `diagnosis` as it is recorded: who sent it is who the transport
// authenticated (`identity`, its allow-list name; "" when unauthenticated),
// and what it claims is kept only below that name.
v1::Diagnosis AttributeDiagnosis(v1::Diagnosis diagnosis,
                                 const std::string& identity);

// The reply to `diagnosis` after recording it returned `recorded`; nullopt
// when it must not be acked (it will be re-sent).
std::optional<v1::PipelineMessage> DiagnosisAck(const v1::Diagnosis& diagnosis,
                                                const absl::Status& recorded);

// The whole intake of one diagnosis from `identity`: one without a
// bundle_id is rejected unrecorded; otherwise it is attributed and
// recorded through `record`. Returns the reply to send, or nullopt.
std::optional<v1::PipelineMessage> IntakeDiagnosis(
    v1::Diagnosis diagnosis, const std::string& identity,
    const std::function<absl::Status(const v1::Diagnosis&)>& record);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_DIAGNOSIS_INTAKE_H_
