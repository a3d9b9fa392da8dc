#include "common/speedup.h"

#include "absl/strings/str_cat.h"

namespace tunefarm {

double LeaseSpeedup(const v1::Sweep& sweep) {
  return sweep.best_us() > 0 && sweep.baseline_us() > 0
             ? sweep.baseline_us() / sweep.best_us()
             : 0;
}

bool CheckedSideBySide(const v1::Sweep& sweep) {
  return sweep.closing_check().speedup() > 0;
}

double SweepSpeedup(const v1::Sweep& sweep) {
  return CheckedSideBySide(sweep) ? sweep.closing_check().speedup()
                                  : LeaseSpeedup(sweep);
}

const char* SpeedupBasis(const v1::Sweep& sweep) {
  return CheckedSideBySide(sweep) ? "side by side" : "two leases' medians";
}

bool NotShownFaster(const v1::ClosingCheck& check) {
  return check.speedup_low() > 0 && check.speedup_low() <= 1;
}

std::string ClosingCheckText(const v1::ClosingCheck& check) {
  if (!check.outcome().empty()) return check.outcome();
  return absl::StrCat("round ", check.round_id(), " times the best, round ",
                      check.best_round(),
                      ", against the baseline side by side");
}

}  // namespace tunefarm
