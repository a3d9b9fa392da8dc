// Process-wide logging setup over spdlog. Call InitLogging once from main().
#ifndef TUNEFARM_COMMON_LOGGING_H_
#define TUNEFARM_COMMON_LOGGING_H_

#include <string>

#include "spdlog/spdlog.h"

namespace tunefarm {

// Logs to stderr with the component name and pid in each line. `level` is
// one of trace, debug, info, warn, error; unknown falls back to info.
void InitLogging(const std::string& component, const std::string& level);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_LOGGING_H_
