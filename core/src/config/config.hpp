// The configuration (TOML; config/deltakern.toml documents every key) as the core uses it.
// Every error names the file, the line and the key.
#pragma once

#include "ops.hpp"

#include <spdlog/common.h>
#include <deltakern/runtime_types.hpp>

#include <array>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace deltakern::detail {

// An ordered list of backend names, and where each came from, so that a name found unknown
// only after discovery can still be reported at its line.
struct BackendOrder {
  std::vector<std::string> names;
  std::vector<uint32_t> lines;  // per name; 0 for the built-in defaults
  std::string key;              // "dispatch.order", "dispatch.ops.<op>.order" or "...backend"
  bool single = false;          // from `backend = "name"`: reported without an index
};

struct OpConfig {
  std::optional<BackendOrder> order;
  std::optional<bool> validate;
};

// How a candidate plugin is judged before it is loaded into this process (plugins.probe*).
enum class ProbeMode { child, in_process };

struct ProbeConfig {
  ProbeMode mode = ProbeMode::child;
  std::chrono::milliseconds timeout{10000};  // generous: a CUDA plugin's probe creates a context
  // Unset: $XDG_CACHE_HOME (or ~/.cache)/deltakern/probe-verdicts.json. Empty: no cache.
  std::optional<std::filesystem::path> cache;
  spdlog::level::level_enum child_log_level = spdlog::level::warn;  // the config's logging.level
};

struct Config {
  std::filesystem::path file;                       // empty: the built-in defaults
  std::vector<std::filesystem::path> search_paths;  // absolute, or relative to the file's directory
  ProbeConfig probe;
  BackendOrder order{{"native", "portable"}, {0, 0}, "dispatch.order", false};
  bool validate = false;
  // A call the op's first choice cannot serve is an error, not a fallback. strict_source
  // says who set it, for the messages: "dispatch.strict" or "DELTAKERN_STRICT=1".
  bool strict = false;
  std::string strict_source;
  std::array<OpConfig, kOpCount> ops;
  spdlog::level::level_enum log_level = spdlog::level::warn;
  // Found while reading, logged by the Runtime once log_level is in force.
  std::vector<std::string> warnings;

  const BackendOrder& order_for(OpId op) const {
    const auto& per_op = ops[index_of(op)].order;
    return per_op ? *per_op : order;
  }
  bool validate_for(OpId op) const { return ops[index_of(op)].validate.value_or(validate); }
};

// Reads $DELTAKERN_CONFIG, else options.config_file, else the installed default, else uses
// the built-in defaults; applies $DELTAKERN_STRICT (0 or 1, over dispatch.strict),
// $DELTAKERN_LOG_LEVEL and the $DELTAKERN_PROBE* overrides. Throws Error(ErrorCode::config).
Config load_config(const RuntimeOptions& options);

// Backend names are known only after discovery: each must be a discovered plugin's or one
// of the well-known ones. Throws Error(ErrorCode::config) at the first unknown name.
void check_backend_names(const Config& config, const std::vector<std::string>& discovered);

}  // namespace deltakern::detail
