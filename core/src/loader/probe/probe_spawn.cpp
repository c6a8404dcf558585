#include "loader/probe/probe_spawn.hpp"

#include "loader/probe/probe_protocol.hpp"
#include "services/log.hpp"
#include "subprocess/child_process.hpp"

#include <fmt/core.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <variant>

namespace deltakern::detail {
namespace {

namespace protocol = probe_protocol;
using Clock = std::chrono::steady_clock;

// What the child may write before the parent stops keeping it: a verdict is a few hundred bytes.
constexpr size_t kMaxOutput = 1 << 20;

std::string error_text(int error) { return std::strerror(error); }

// The child's lines, read as far as they got.
struct Transcript {
  std::string last_phase;             // empty: it never reached the library
  std::optional<ProbeVerdict> named;  // its name, version and ABI, once it had read them
  std::optional<ProbeVerdict> verdict;
  std::string garbled;  // a verdict line that did not parse
};

// One whole line of the child's report.
void add_line(Transcript& t, std::string_view line) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return;
  const std::string_view tag = line.substr(0, space), rest = line.substr(space + 1);
  if (tag == protocol::kPhase) {
    t.last_phase = rest;
  } else if (tag == protocol::kNamed || tag == protocol::kVerdict) {
    try {
      (tag == protocol::kNamed ? t.named : t.verdict) = nlohmann::json::parse(rest).get<ProbeVerdict>();
    } catch (const std::exception& e) {
      if (tag == protocol::kVerdict) t.garbled = e.what();
    }
  }
}

std::string where(const Transcript& t) { return "while " + t.last_phase; }

}  // namespace

ChildOutcome probe_in_child(const ChildProbe& how, const std::filesystem::path& library) {
  ChildOutcome outcome;
  const auto start = Clock::now();
  const auto fail_helper = [&](std::string why) {
    outcome.helper_failure = std::move(why);
    outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return outcome;
  };
  if (::access(how.helper.c_str(), X_OK) != 0)
    return fail_helper(
        fmt::format("probe helper {} is not executable: {}", how.helper.string(), error_text(errno)));

  std::variant<ChildProcess, StartFailure> started = ChildProcess::start(
      {how.helper,
       {"--verdict-fd", std::to_string(protocol::kVerdictFd), "--parent", std::to_string(::getpid()),
        "--log-level", std::to_string(static_cast<int>(how.log_level)), "--", library.string()},
       protocol::kVerdictFd});
  if (const auto* failure = std::get_if<StartFailure>(&started)) {
    if (failure->step == StartFailure::Step::pipe)
      return fail_helper(fmt::format("pipe: {}", failure->text()));
    return fail_helper(fmt::format("cannot start probe helper {}: {}", how.helper.string(), failure->text()));
  }
  ChildProcess& child = std::get<ChildProcess>(started);

  const auto deadline = start + how.timeout;
  Transcript t;
  size_t kept = 0;
  bool timed_out = false;
  for (std::string line;;) {
    const auto read = child.read_line(deadline, line);
    if (read == ChildProcess::Read::deadline) {
      timed_out = true;
      break;
    }
    if (read == ChildProcess::Read::ended) break;
    if (kept < kMaxOutput) add_line(t, line);
    kept += line.size() + 1;
  }
  std::optional<ChildEnd> end;
  if (!timed_out) end = child.wait_until(deadline);
  if (!end) {
    timed_out = true;
    child.time_out();
  }
  outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);

  const auto died = [&](std::string reason) {
    ProbeVerdict v;
    v.passed = false;
    v.reason = std::move(reason);
    if (const auto& named = t.verdict ? t.verdict : t.named) {  // it got as far as naming itself
      v.name = named->name;
      v.version = named->version;
      v.abi_major = named->abi_major;
      v.abi_minor = named->abi_minor;
    }
    outcome.verdict = std::move(v);
    return outcome;
  };
  if (timed_out) {
    died(fmt::format("probe timed out after {} ms {}; the child was killed", how.timeout.count(),
                     t.last_phase.empty() ? "before it reached the library" : where(t)));
    outcome.verdict->timed_out = true;
    outcome.verdict->timeout_ms = static_cast<uint32_t>(how.timeout.count());
    return outcome;
  }
  if (end->kind == ChildEnd::Kind::lost) {
    // SIGCHLD ignored: no exit status to read, so the transcript is all there is.
    if (t.verdict)
      outcome.verdict = t.verdict;
    else if (t.last_phase.empty())
      return fail_helper("probe helper ended without a word (its exit status was lost)");
    else
      return died(fmt::format("probe child ended without a verdict {}", where(t)));
    return outcome;
  }
  if (end->kind == ChildEnd::Kind::killed) {
    if (t.last_phase.empty())
      return fail_helper(fmt::format("probe helper killed by signal {} before it reached the library",
                                     signal_label(end->value)));
    return died(fmt::format("probe child killed by signal {} {}", signal_label(end->value), where(t)));
  }
  const int code = end->value;
  if (t.last_phase.empty())
    return fail_helper(fmt::format("probe helper exited with status {} before it reached the library", code));
  if (code != 0) return died(fmt::format("probe child exited with status {} {}", code, where(t)));
  if (!t.verdict)
    return died(t.garbled.empty() ? fmt::format("probe child exited without a verdict {}", where(t))
                                  : fmt::format("probe child's verdict is unreadable: {}", t.garbled));
  outcome.verdict = t.verdict;
  return outcome;
}

}  // namespace deltakern::detail
