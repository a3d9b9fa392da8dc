#include "tuning_db/warm_start.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ops/catalog.h"

namespace tunefarm {

WarmStart ResolveWarmStart(const TuningDb& db, absl::string_view db_name,
                           const v1::OperatorManifest& op,
                           absl::string_view board_kind, absl::string_view chip,
                           const v1::Workload& workload) {
  std::map<std::string, int64_t> dims(workload.dims().begin(),
                                      workload.dims().end());
  const Lookup found =
      LookupConfig(db, op.name(), board_kind, chip, workload.dtype(), dims);
  WarmStart ws;
  const std::string shape =
      absl::StrCat(op.name(), " on ", board_kind,
                   chip.empty() ? "" : absl::StrCat(" (", chip, ")"), " ",
                   workload.dtype(), " {", DimsText(dims), "}");
  if (found.entry == nullptr) {
    ws.source = absl::StrCat("tuning db ", db_name, ": no entry for ", shape,
                             "; the manifest default");
    return ws;
  }
  const TunedEntry& e = *found.entry;
  std::vector<std::string> skipped;
  for (auto it = e.params.begin(); it != e.params.end(); ++it) {
    const v1::ParameterDomain* p = FindParameter(op, it.key());
    absl::StatusOr<v1::ParamValue> v = ParamValueFromJson(*it);
    if (p == nullptr || !v.ok()) {
      skipped.push_back(it.key());
      continue;
    }
    // JSON writes 2.0 as 2.0 but hand-edited files may say 2.
    if (v->has_int_value() && p->values_size() > 0 &&
        p->values(0).has_double_value()) {
      v->set_double_value(static_cast<double>(v->int_value()));
    }
    ParamMap single = DefaultParams(op);
    single[it.key()] = *v;
    if (!ValidateParams(op, single).ok()) {
      skipped.push_back(it.key());
      continue;
    }
    ws.params[it.key()] = *v;
  }
  ws.source =
      absl::StrFormat("tuning db %s: %s entry %s%s, sweep %s round %d, %.2f µs",
                      db_name, LookupSourceName(found.source), e.Key(),
                      found.source == Lookup::Source::kNearest
                          ? absl::StrFormat(" (distance %.3f)", found.distance)
                          : "",
                      e.sweep_id, e.round, e.time_us);
  if (!skipped.empty()) {
    absl::StrAppend(&ws.source, "; not in this operator's space (left at ",
                    "the default): ", absl::StrJoin(skipped, ", "));
  }
  return ws;
}

std::string TuningDbForOperator(const TuningDb& db, absl::string_view op) {
  TuningDb out;
  for (const TunedEntry& e : db.entries) {
    if (e.op == op) out.entries.push_back(e);
  }
  for (const OperatorDefault& d : db.defaults) {
    if (d.op == op) out.defaults.push_back(d);
  }
  return TuningDbToJson(out).dump();
}

}  // namespace tunefarm
