#include "probe_child.hpp"

#include "loaded_objects.hpp"
#include "log.hpp"
#include "plugin_library.hpp"
#include "probe_protocol.hpp"
#include "probe_verdict.hpp"
#include "rejection.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
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

// How long the first life waits between init and shutdown, so that a thread the plugin
// started in init and that crashes soon after does it here. A cost on every child (but not on
// a cached verdict): kept small, it cannot catch what comes later.
constexpr auto kSettleAfterInit = std::chrono::milliseconds(50);

std::optional<long> number(std::string_view text) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

struct Arguments {
  int verdict_fd = -1;
  pid_t parent = 0;
  spdlog::level::level_enum log_level = spdlog::level::warn;
  std::filesystem::path library;
};

std::optional<Arguments> parse(int argc, char** argv) {
  Arguments a;
  int i = 1;
  for (; i + 1 < argc && std::string_view(argv[i]) != "--"; i += 2) {
    const std::string_view key(argv[i]);
    const auto value = number(argv[i + 1]);
    if (!value) return std::nullopt;
    if (key == "--verdict-fd")
      a.verdict_fd = static_cast<int>(*value);
    else if (key == "--parent")
      a.parent = static_cast<pid_t>(*value);
    else if (key == "--log-level" && *value >= spdlog::level::trace && *value <= spdlog::level::off)
      a.log_level = static_cast<spdlog::level::level_enum>(*value);
    else
      return std::nullopt;
  }
  if (i + 2 != argc || std::string_view(argv[i]) != "--" || a.verdict_fd < 0) return std::nullopt;
  a.library = argv[i + 1];
  return a;
}

// Unbuffered, whole lines: what was written before a crash has reached the parent.
void write_line(int fd, std::string_view tag, std::string_view text) {
  std::string line = fmt::format("{} {}\n", tag, text);
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent has gone or given up: nothing to tell
    rest.remove_prefix(static_cast<size_t>(n));
  }
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
  } catch (const Rejection& e) {
    info.reason = e.what();
  } catch (const std::exception& e) {
    info.reason = fmt::format("unexpected failure while loading: {}", e.what());
  } catch (...) {
    info.reason = "unexpected failure while loading";
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

// A sanitizer runtime (or anything else) linked into the helper may have installed crash
// handlers that turn a segfault into a report and exit(1). The verdict needs the crash
// itself: the signal is what names it. A plugin may still install its own.
void default_crash_signals() {
  for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
  }
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
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (args->parent != 0 && ::getppid() != args->parent) return protocol::kExitOrphaned;
  default_crash_signals();
  // A process the plugin starts must not inherit the pipe: the parent reads to end of file.
  ::fcntl(args->verdict_fd, F_SETFD, FD_CLOEXEC);
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
