#include "worker.hpp"

#include "subprocess/child_process.hpp"
#include "worker_protocol.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace deltakern::conformance {
namespace {

namespace protocol = worker_protocol;
namespace child_side = detail::child_side;
using Clock = protocol::Clock;

struct Arguments {
  int report_fd = -1;
  pid_t parent = 0;
  std::string request;
};

std::optional<Arguments> parse(int argc, char** argv) {
  const auto given = child_side::parse_arguments(argc, argv, {"--report-fd", "--parent"});
  if (!given || !given->numbers.contains("--report-fd")) return std::nullopt;
  Arguments a;
  a.report_fd = static_cast<int>(given->numbers.at("--report-fd"));
  if (const auto it = given->numbers.find("--parent"); it != given->numbers.end())
    a.parent = static_cast<pid_t>(it->second);
  a.request = given->last;
  if (a.report_fd < 0) return std::nullopt;
  return a;
}

}  // namespace

int run_worker(int argc, char** argv) {
  const auto args = parse(argc, argv);
  std::optional<protocol::Request> request;
  if (args) try {
      request = protocol::request_from_json(args->request);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "deltakern-conformance-worker: bad request: %s\n", e.what());
    }
  if (!request) {
    std::fprintf(stderr,
                 "usage: deltakern-conformance-worker --report-fd N --parent PID -- REQUEST\n"
                 "(started by deltakern conformance to run a backend's cases out of its process)\n");
    return protocol::kExitUsage;
  }
  // A worker whose supervisor died (Ctrl-C while a plugin hangs) must not run on forever.
  if (!child_side::die_with_parent(args->parent)) return protocol::kExitOrphaned;
  // A crash of the backend must end this process by its signal: that is what names it.
  child_side::default_crash_signals();
  child_side::keep_from_exec(args->report_fd);
  const auto report = [fd = args->report_fd](const std::string& line) { child_side::write_line(fd, line); };
  const Target& target = request->target;

  // As run() does: the same runtime and case list, here from the request.
  std::unique_ptr<Runtime> runtime;
  std::vector<Case> list;
  try {
    runtime = make_runtime(request->runtime, target);
    list = selected_cases(*runtime, target, request->suite, request->case_names);
  } catch (const std::exception& e) {
    report(
        protocol::setup_failed_line(std::string("[setup] could not build the forcing runtime: ") + e.what()));
    std::_Exit(0);
  }
  report(protocol::plan_line(list));

  uint64_t index = request->first;
  const auto run_one = [&](const Case& c) {
    report(protocol::start_line(index, c));
    const auto start = Clock::now();
    const CaseResult result = run_case(*runtime, target, c);
    const std::chrono::duration<double, std::milli> took = Clock::now() - start;
    report(protocol::end_line(index, result, took.count()));
    ++index;
  };
  for (; index < list.size();) run_one(list[index]);
  if (request->case_names.empty() && request->suite.sweeps()) {
    const auto deadline = request->sweep_deadline.value_or(
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(request->suite.budget_seconds)));
    report(protocol::sweep_line(deadline));
    while (request->suite.sweep_runs(index - list.size(), deadline))
      run_one(sweep_case(*runtime, target, request->suite, index - list.size()));
  }
  report(protocol::done_line(index));
  // Nothing after the last verdict may change it: no exit handlers, no static destructors,
  // no backend shutdown.
  std::_Exit(0);
}

}  // namespace deltakern::conformance
