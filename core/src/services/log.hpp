// The core's spdlog logger, "deltakern". An engine that registers a logger of that name
// before the first call gets the core's and the plugins' messages in its own sinks.
#pragma once

#include <spdlog/spdlog.h>

#include <optional>
#include <string_view>

namespace deltakern::detail {

spdlog::logger& logger();

// trace, debug, info, warn, error, off.
std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name);
inline constexpr std::string_view kLogLevelNames = "trace, debug, info, warn, error, off";

}  // namespace deltakern::detail
