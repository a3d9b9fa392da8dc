#include "common/logging.h"

#include "spdlog/sinks/stdout_sinks.h"

namespace tunefarm {

void InitLogging(const std::string& component, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(component);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%n %P] %v");
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") lvl = spdlog::level::info;
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace tunefarm
