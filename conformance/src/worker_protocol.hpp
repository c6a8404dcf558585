// What the conformance worker (deltakern-conformance-worker) and run_isolated(), which
// starts it, agree on. The worker is given one Request as a JSON argument and writes one
// JSON object a line on the report descriptor, unbuffered, as things happen:
//
//   plan          the fixed cases, in order (once the runtime and the case list are built)
//   start / end   around each case it runs: fixed case i has index i, sweep case k index n + k
//   sweep         as it begins the sweep: the sweep's deadline
//   setup_failed  the runtime or the case list could not be built (then it exits)
//   done          after its last case; nothing follows
//
// A worker that dies leaves the last line it wrote: what it was doing is what it died of.
#pragma once

#include <deltakern/conformance.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltakern::conformance::worker_protocol {

inline constexpr int kReportFd = 3;
// The worker's own failures (bad arguments, its parent gone): no verdict on anything.
inline constexpr int kExitUsage = 64;
inline constexpr int kExitOrphaned = 65;

using Clock = std::chrono::steady_clock;

struct Request {
  RuntimeOptions runtime;
  Target target;
  SuiteOptions suite;
  std::vector<std::string> case_names;  // empty: the whole suite, then the sweep
  uint64_t first = 0;                   // the index of the first case to run
  // Where the sweep stops, when an earlier worker began it. A steady_clock time, which is
  // CLOCK_MONOTONIC on Linux: one clock for every process on the machine. None: the sweep's
  // clock starts when this worker reaches it.
  std::optional<Clock::time_point> sweep_deadline;
};
std::string to_json(const Request& request);
Request request_from_json(std::string_view text);  // throws on anything malformed

struct Event {
  enum class Kind { plan, start, end, sweep, setup_failed, done };
  Kind kind = Kind::done;
  uint64_t index = 0;                                     // start, end; done: the next index
  std::string op, name;                                   // start
  bool passed = false;                                    // end
  std::string detail;                                     // end, setup_failed
  double milliseconds = 0;                                // end
  Clock::time_point deadline;                             // sweep
  std::vector<std::pair<std::string, std::string>> plan;  // plan: (op, name) of each fixed case
};
std::string plan_line(const std::vector<Case>& cases);
std::string start_line(uint64_t index, const Case& c);
std::string end_line(uint64_t index, const CaseResult& result, double milliseconds);
std::string sweep_line(Clock::time_point deadline);
std::string setup_failed_line(const std::string& detail);
std::string done_line(uint64_t next);
Event parse_event(std::string_view line);  // throws on anything malformed

}  // namespace deltakern::conformance::worker_protocol
