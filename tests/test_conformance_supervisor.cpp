// run_isolated(), the supervisor of the conformance worker: against the real worker on the
// standin backend (the same verdicts as run() in this process), and against fake workers,
// shell scripts that write the worker's protocol and then misbehave in one way each, so that
// every way a worker can end early is seen to give a verdict to the right case and the run
// to go on (or stop, for a setup) as it should.
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include <deltakern/conformance.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace deltakern;
using namespace deltakern::conformance;
using deltakern::test::contains;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct Verdicts {
  Summary summary;
  std::vector<std::string> started;  // "op name", as on_start saw them
  std::vector<double> milliseconds;  // as on_result got them
};

Verdicts run_with(const fs::path& worker, const std::vector<Target>& targets,
                  const SuiteOptions& options = {}, double case_timeout_s = 30,
                  const RuntimeOptions& base = {}) {
  Verdicts v;
  Isolation isolation;
  isolation.worker = worker;
  isolation.case_timeout = std::chrono::duration<double>(case_timeout_s);
  isolation.on_start = [&](const Target&, const std::string& op, const std::string& name) {
    v.started.push_back(op + " " + name);
  };
  v.summary = run_isolated(base, targets, options, isolation,
                           [&](const CaseResult&, auto took) { v.milliseconds.push_back(took.count()); });
  return v;
}

const std::vector<Target> kFake{{"fake", {kDLCPU, 0}}};

// A fake worker: `body` runs with $first set to the index it is asked to start from, and
// writes protocol lines on descriptor 3 with `say`.
fs::path fake_worker(const deltakern::test::TempDir& dir, const std::string& body) {
  const fs::path script = dir.write("worker.sh",
                                    "#!/bin/sh\n"
                                    "for request; do :; done\n"
                                    "first=$(printf '%s' \"$request\" | sed -n "
                                    "'s/.*\"first\":\\([0-9]*\\).*/\\1/p')\n"
                                    "say() { printf '%s\\n' \"$1\" >&3; }\n"
                                    "plan() { say '{\"event\":\"plan\",\"cases\":'\"$1\"'}'; }\n"
                                    "start() { say '{\"event\":\"start\",\"index\":'$1',\"op\":"
                                    "\"op\",\"name\":\"'$2'\"}'; }\n"
                                    "pass() { say '{\"event\":\"end\",\"index\":'$1',\"passed\":"
                                    "true,\"detail\":\"\",\"ms\":'${2:-1}'}'; }\n"
                                    "done_at() { say '{\"event\":\"done\",\"index\":'$1'}'; }\n" +
                                        body);
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

const std::string kThreeCases = R"([["op","a"],["op","b"],["op","c"]])";

std::string outcome(const CaseResult& r) { return (r.passed ? "PASS " : "FAIL ") + r.op + " " + r.name; }

std::vector<std::string> outcomes(const Summary& s) {
  std::vector<std::string> out;
  for (const auto& r : s.results) out.push_back(outcome(r));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_real_worker_gives_the_verdicts_run_gives_in_this_process) {
  const RuntimeOptions base = deltakern::test::base_options();
  const std::vector<Target> standin{{"standin", {kDLCPU, 0}}};
  const Summary here = run(base, standin);
  const Verdicts isolated = run_with(worker_program(), standin, {}, 60, base);
  BOOST_TEST(here.results.size() > 300u);
  BOOST_TEST(outcomes(isolated.summary) == outcomes(here), boost::test_tools::per_element());
  BOOST_TEST(isolated.summary.passed == here.passed);
  BOOST_TEST(isolated.started.size() == here.results.size());
}

BOOST_AUTO_TEST_CASE(the_real_worker_runs_named_cases_and_sweep_cases_by_name) {
  const RuntimeOptions base = deltakern::test::base_options();
  const std::vector<Target> standin{{"standin", {kDLCPU, 0}}};
  Isolation isolation;
  isolation.case_names = {"sweep/5/3", "causal_conv1d_update/declaration", "no such case"};
  const Summary s = run_isolated(base, standin, {}, isolation);
  BOOST_TEST(outcomes(s) == (std::vector<std::string>{"PASS " + s.results.at(0).op + " sweep/5/3",
                                                      "PASS contract causal_conv1d_update/declaration"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_worker_that_dies_between_cases_fails_the_case_due_next_and_a_fresh_one_goes_on) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; pass 0 7; exit 3; fi
start 2 c; pass 2; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"PASS op a", "FAIL op b", "PASS op c"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(1).detail ==
             "[op b] the worker process exited with status 3 after the previous case's verdict, before this "
             "case started");
  BOOST_TEST(v.started == (std::vector<std::string>{"op a", "op c"}), boost::test_tools::per_element());
  BOOST_TEST(v.milliseconds.at(0) == 7.0);  // the worker's own time of the case
}

BOOST_AUTO_TEST_CASE(a_worker_killed_by_a_signal_during_a_case_fails_that_case) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; pass 0; start 1 b; kill -SEGV $$; fi
start 2 c; pass 2; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"PASS op a", "FAIL op b", "PASS op c"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(1).detail ==
             "[op b] the worker process was killed by signal 11 (SIGSEGV) during this case");
}

BOOST_AUTO_TEST_CASE(a_case_past_the_time_out_fails_and_its_worker_is_killed) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; exec sleep 30; fi
start 1 b; pass 1; start 2 c; pass 2; done_at 3
)");
  const auto start = Clock::now();
  const Verdicts v = run_with(worker, kFake, {}, 1);
  BOOST_TEST(std::chrono::duration<double>(Clock::now() - start).count() < 10);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL op a", "PASS op b", "PASS op c"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(0).detail ==
             "[op a] exceeded the per-case time-out of 1 s; the worker was killed");
  BOOST_TEST(v.milliseconds.at(0) >= 1000.0);
}

BOOST_AUTO_TEST_CASE(a_worker_silent_between_cases_past_the_time_out_fails_the_case_due_next) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, R"(plan '[["op","a"],["op","b"]]'
start 0 a; pass 0; exec sleep 30
)");
  const Verdicts v = run_with(worker, kFake, {}, 1);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"PASS op a", "FAIL op b"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(1).detail ==
             "[op b] the worker process went silent for the per-case time-out of 1 s after the previous "
             "case's verdict, before this case started; it was killed");
}

BOOST_AUTO_TEST_CASE(an_unreadable_line_fails_the_case_in_flight) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; say 'not json'; exec sleep 30; fi
start 1 b; pass 1; start 2 c; pass 2; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL op a", "PASS op b", "PASS op c"}),
             boost::test_tools::per_element());
  const std::string& detail = v.summary.results.at(0).detail;
  BOOST_TEST(contains(detail, "[op a] the worker's report is unreadable ("), detail);
  BOOST_TEST(contains(detail, "); the worker was killed"), detail);
}

BOOST_AUTO_TEST_CASE(lines_out_of_order_are_unreadable) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; pass 1; exec sleep 30; fi
start 1 b; pass 1; start 2 c; pass 2; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL op a", "PASS op b", "PASS op c"}),
             boost::test_tools::per_element());
  BOOST_TEST(contains(v.summary.results.at(0).detail, "a verdict for case 1, which had not started"),
             v.summary.results.at(0).detail);
}

BOOST_AUTO_TEST_CASE(a_worker_that_dies_before_its_first_case_fails_the_setup_and_the_target_stops) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "kill -ABRT $$\n");
  const Verdicts v = run_with(worker, {{"fake", {kDLCPU, 0}}, {"other", {kDLCPU, 0}}});
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL setup runtime", "FAIL setup runtime"}),
             boost::test_tools::per_element());
  BOOST_TEST(
      v.summary.results.at(0).detail ==
      "[setup] the worker process was killed by signal 6 (SIGABRT) before its first case (while loading "
      "the plugins and building the runtime)");
  BOOST_TEST(v.summary.results.at(1).target.backend == "other");  // each target on its own
}

BOOST_AUTO_TEST_CASE(a_worker_that_lists_no_cases_within_the_time_out_fails_the_setup) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "exec sleep 30\n");
  const Verdicts v = run_with(worker, kFake, {}, 1);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL setup runtime"}));
  BOOST_TEST(v.summary.results.at(0).detail ==
             "[setup] the worker process listed no cases within the per-case time-out of 1 s (while loading "
             "the plugins and building the runtime); it was killed");
}

BOOST_AUTO_TEST_CASE(a_fresh_worker_that_lists_other_cases_stops_the_target) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, R"(
if [ "$first" = 0 ]; then plan '[["op","a"],["op","b"],["op","c"]]'; start 0 a; exit 0; fi
plan '[["op","a"],["op","x"],["op","c"]]'; start 1 x; pass 1; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL op a", "FAIL setup runtime"}),
             boost::test_tools::per_element());
  BOOST_TEST(
      v.summary.results.at(0).detail ==
      "[op a] the worker process exited with status 0 during this case, before its verdict (the backend "
      "called exit?)");
  BOOST_TEST(v.summary.results.at(1).detail ==
             "[setup] a fresh worker listed other cases than the first one did (the case list is not "
             "deterministic); 2 cases of this target did not run");
}

BOOST_AUTO_TEST_CASE(a_worker_that_ends_its_run_early_leaves_no_case_without_a_verdict) {
  const deltakern::test::TempDir dir;
  const auto worker = fake_worker(dir, "plan '" + kThreeCases + R"('
if [ "$first" = 0 ]; then start 0 a; pass 0; done_at 1; exit 0; fi
start 2 c; pass 2; done_at 3
)");
  const Verdicts v = run_with(worker, kFake);
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"PASS op a", "FAIL op b", "PASS op c"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(1).detail == "[op b] the worker process ended its run before this case");
}

BOOST_AUTO_TEST_CASE(a_worker_that_cannot_be_started_fails_each_targets_setup) {
  const Verdicts v = run_with("/nonexistent/worker", {{"fake", {kDLCPU, 0}}, {"other", {kDLCPU, 0}}});
  BOOST_TEST(outcomes(v.summary) == (std::vector<std::string>{"FAIL setup runtime", "FAIL setup runtime"}),
             boost::test_tools::per_element());
  BOOST_TEST(v.summary.results.at(0).detail ==
             "[setup] cannot start the conformance worker /nonexistent/worker: No such file or directory");
}
