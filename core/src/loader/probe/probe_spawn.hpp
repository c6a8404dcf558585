// Probing one plugin library in a child process: the probe helper is started as a
// ChildProcess (child_process.hpp), given a time-out after which it is killed, and whatever
// happens to it becomes a verdict with a reason.
#pragma once

#include "loader/probe/probe_verdict.hpp"
#include "subprocess/child_process.hpp"  // signal_label

#include <spdlog/common.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace deltakern::detail {

struct ChildProbe {
  std::filesystem::path helper;  // deltakern-probe
  std::chrono::milliseconds timeout;
  spdlog::level::level_enum log_level;  // the child logs the plugin's messages to stderr at this level
};

struct ChildOutcome {
  // A verdict on the library, or none when the helper itself did not work (it could not
  // be started, or failed before it touched the library): then helper_failure says why.
  std::optional<ProbeVerdict> verdict;
  std::string helper_failure;
  std::chrono::milliseconds took{0};
};

ChildOutcome probe_in_child(const ChildProbe& how, const std::filesystem::path& library);

}  // namespace deltakern::detail
