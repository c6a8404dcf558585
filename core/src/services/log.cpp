#include "services/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <memory>

namespace deltakern::detail {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get("deltakern")) return existing;
    auto created = spdlog::stderr_color_mt("deltakern");
    created->set_level(spdlog::level::warn);
    return created;
  }();
  return *instance;
}

std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name) {
  if (name == "trace") return spdlog::level::trace;
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  return std::nullopt;
}

}  // namespace deltakern::detail
