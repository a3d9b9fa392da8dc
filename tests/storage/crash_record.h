// The records storage_crash_writer commits and crash_test.cc expects back:
// both sides derive them from the commit number, so the test can check every
// acknowledged record byte for byte. Test-only; thread-safe (pure functions).
#ifndef TUNEFARM_TESTS_STORAGE_CRASH_RECORD_H_
#define TUNEFARM_TESTS_STORAGE_CRASH_RECORD_H_

#include <cstdint>
#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr char kCrashSweepId[] = "crash-sweep";

// Round `i` (i >= 1) of the crash sweep: a chain, each round the child of
// the one before, with a payload big enough to span several disk blocks.
inline v1::Round CrashRound(int64_t i) {
  v1::Round r;
  r.set_sweep_id(kCrashSweepId);
  r.set_round_id(i);
  r.set_parent_round(i == 1 ? -1 : i - 1);  // round 1 plays the baseline
  r.set_stage("tiling");
  r.set_state(v1::ROUND_STATE_DONE);
  (*r.mutable_params())["block_m"].set_int_value(16 * i);
  (*r.mutable_params())["tag"].set_string_value("round-" + std::to_string(i));
  r.mutable_result()->set_outcome(v1::OUTCOME_OK);
  r.mutable_result()->mutable_measurement()->set_median_us(1000.0 / i);
  r.set_decision_reason(std::string(3000 + (i % 97), 'a' + (i % 26)));
  r.set_created_unix_ms(1700000000000 + i);
  return r;
}

// Event `i`: the ROUND_FINISHED event of round i, seq i.
inline v1::SweepEvent CrashEvent(int64_t i) {
  v1::SweepEvent e;
  e.set_sweep_id(kCrashSweepId);
  e.set_seq(i);
  e.set_time_unix_ms(1700000000000 + i);
  e.set_kind(v1::EVENT_KIND_ROUND_FINISHED);
  e.set_message("round " + std::to_string(i) + " finished");
  *e.mutable_round() = CrashRound(i);
  return e;
}

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_STORAGE_CRASH_RECORD_H_
