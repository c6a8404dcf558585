#include "loader/probe/probe_child.hpp"

#include "subprocess/child_process.hpp"

#include "loader/loaded_objects.hpp"
#include "loader/plugin_library.hpp"
#include "loader/probe/probe_protocol.hpp"
#include "loader/probe/probe_verdict.hpp"
#include "loader/rejection.hpp"
#include "services/log.hpp"

#include <fmt/core.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace deltakern::detail {
namespace {

namespace protocol = probe_protocol;
namespace child_side = detail::child_side;

// How long the first life waits between init and shutdown, so that a thread the plugin
// started in init and that crashes soon after does it here. A cost on every child (but not on
// a cached verdict): kept small, it cannot catch what comes later.
constexpr auto kSettleAfterInit = std::chrono::milliseconds(50);

struct Arguments {
  int verdict_fd = -1;
  pid_t parent = 0;
  spdlog::level::level_enum log_level = spdlog::level::warn;
  std::filesystem::path library;
};

std::optional<Arguments> parse(int argc, char** argv) {
  const auto given = child_side::parse_arguments(argc, argv, {"--verdict-fd", "--parent", "--log-level"});
  if (!given) return std::nullopt;
  Arguments a;
  const auto number = [&](std::string_view name, long fallback) {
    const auto it = given->numbers.find(name);
    return it == given->numbers.end() ? fallback : it->second;
  };
  a.verdict_fd = static_cast<int>(number("--verdict-fd", -1));
  a.parent = static_cast<pid_t>(number("--parent", 0));
  const long level = number("--log-level", spdlog::level::warn);
  if (a.verdict_fd < 0 || level < spdlog::level::trace || level > spdlog::level::off) return std::nullopt;
  a.log_level = static_cast<spdlog::level::level_enum>(level);
  a.library = given->last;
  return a;
}

// "<tag> <text>", one whole line.
void write_line(int fd, std::string_view tag, std::string_view text) {
  child_side::write_line(fd, fmt::format("{} {}", tag, text));
}

ProbeVerdict verdict_of(const PluginInfo& info) {
  ProbeVerdict verdict;
  verdict.passed = info.state == PluginInfo::State::loaded;
  verdict.reason = verdict.passed ? std::string() : info.reason;
  verdict.name = info.name;
  verdict.version = info.version;
  verdict.abi_major = info.abi_major;
  verdict.abi_minor = info.abi_minor;
  return verdict;
}

// The library's whole life, twice over on one mapping: load; init, probe, a short wait,
// shutdown; init, probe, shutdown again; unload. The engine may do each of these, and a
// Runtime created after the last one holding the plugin was destroyed starts it again in the
// same process. Returns the verdict with the non-system libraries that loading it added.
ProbeVerdict live_twice(const std::filesystem::path& path, const PhaseListener& on_phase) {
  PluginInfo info;
  info.path = path;
  info.state = PluginInfo::State::rejected;
  const auto before = loaded_objects();
  std::optional<PluginLibrary> library;
  try {
    library.emplace(path, info, on_phase, nullptr);
    library->start(info, on_phase);
    on_phase("waiting after init (a thread the plugin started?)", info);
    std::this_thread::sleep_for(kSettleAfterInit);
    on_phase("shutting down", info);
    library->stop();
    PluginInfo again = info;
    library->start(again, on_phase, kStartAgain);
    on_phase("shutting down after the second init", info);
    library->stop();
    info.state = PluginInfo::State::loaded;
  } catch (...) {
    info.reason = rejection_reason();
  }
  ProbeVerdict verdict = verdict_of(info);
  if (library) {
    // A failing verdict depends on them as much as a passing one: a fixed dependency may fix it.
    if (const auto plugin = identity_of(path))
      verdict.dependencies = non_system_additions(before, loaded_objects(), *plugin);
    on_phase("unloading", info);
    library.reset();  // its static destructors, as it is unmapped
  }
  return verdict;
}

// A plugin's strings may hold any bytes; the line must stay valid JSON.
std::string json_line(const ProbeVerdict& verdict) {
  return nlohmann::json(verdict).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int run_probe_child(int argc, char** argv) {
  const auto args = parse(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: deltakern-probe --verdict-fd N --parent PID --log-level LEVEL -- LIBRARY\n"
                 "(started by libdeltakern to check a plugin library before loading it)\n");
    return protocol::kExitUsage;
  }
  // A child whose engine died (Ctrl-C while a plugin hangs) must not hang on forever.
  if (!child_side::die_with_parent(args->parent)) return protocol::kExitOrphaned;
  child_side::default_crash_signals();
  child_side::keep_from_exec(args->verdict_fd);
  // What the core itself says about this library the parent says again; the child adds only
  // errors (and a plugin's own messages at the engine's level, as they would come in-process).
  logger().set_level(args->log_level);

  bool named = false;
  const auto on_phase = [&](std::string_view phase, const PluginInfo& so_far) {
    if (!named && !so_far.name.empty()) {
      write_line(args->verdict_fd, protocol::kNamed, json_line(verdict_of(so_far)));
      named = true;
    }
    write_line(args->verdict_fd, protocol::kPhase, phase);
  };
  const ProbeVerdict verdict = live_twice(args->library, on_phase);
  write_line(args->verdict_fd, protocol::kVerdict, json_line(verdict));
  // Nothing after the verdict may change it: no exit handlers, no static destructors.
  std::_Exit(0);
}

}  // namespace deltakern::detail
