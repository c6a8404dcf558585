// run_isolated(): each target's cases in worker processes, read as they happen. Whatever
// ends a worker early is the verdict of the case it was running, and a fresh worker goes on
// from the next case, until every case of the plan has a verdict and the sweep's time is up.
#include "case_util.hpp"
#include "subprocess/child_process.hpp"
#include "worker_protocol.hpp"

#include <dlfcn.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace deltakern::conformance {
namespace {

namespace protocol = worker_protocol;
using detail::ChildEnd;
using detail::ChildProcess;
using Clock = protocol::Clock;
using Milliseconds = std::chrono::duration<double, std::milli>;
// Records a verdict; false once the run must stop (SuiteOptions::max_failures).
using Record = std::function<bool(CaseResult, Milliseconds)>;

constexpr const char* kWorkerName = "deltakern-conformance-worker";
// How long a worker may take to exit once its report has ended.
constexpr auto kExitGrace = std::chrono::seconds(2);

std::string seconds(std::chrono::duration<double> d) { return fmt::format("{:g} s", d.count()); }

// "the worker process was killed by signal 11 (SIGSEGV)", "the worker process exited with status 0".
std::string worker_ended(const ChildEnd& end) {
  return std::string("the worker process ") + (end.kind == ChildEnd::Kind::killed ? "was " : "") +
         end.describe();
}

// Why the case the worker was running failed.
std::string died_during(const ChildEnd& end, std::chrono::duration<double> timeout) {
  switch (end.kind) {
    case ChildEnd::Kind::timed_out:
      return fmt::format("exceeded the per-case time-out of {}; the worker was killed", seconds(timeout));
    case ChildEnd::Kind::exited:
      return worker_ended(end) + " during this case, before its verdict (the backend called exit?)";
    default:
      return worker_ended(end) + " during this case";
  }
}

// Why the case the worker was about to start failed: it ended (or hung) between two cases.
std::string died_before(const ChildEnd& end, std::chrono::duration<double> timeout) {
  if (end.kind == ChildEnd::Kind::timed_out)
    return fmt::format(
        "the worker process went silent for the per-case time-out of {} after the previous case's "
        "verdict, before this case started; it was killed",
        seconds(timeout));
  return worker_ended(end) + " after the previous case's verdict, before this case started";
}

// One target: its plan (from the first worker), how far its verdicts have come, its sweep.
class TargetRun {
 public:
  TargetRun(const RuntimeOptions& base, const Target& target, const SuiteOptions& options,
            const Isolation& isolation, std::filesystem::path worker, const Record& record)
      : base_(base),
        target_(target),
        options_(options),
        isolation_(isolation),
        worker_(std::move(worker)),
        record_(record),
        sweeps_(isolation.case_names.empty() && options.sweeps()) {}

  void run() {
    while (!one_worker()) {
    }
  }

 private:
  struct InFlight {
    uint64_t index = 0;
    std::string op, name;
    Clock::time_point since;
  };

  // Runs one worker until it ends; true when the target is finished.
  bool one_worker() {
    protocol::Request request{base_, target_, options_, isolation_.case_names, next_, sweep_deadline_};
    auto started = ChildProcess::start({worker_,
                                        {"--report-fd", std::to_string(protocol::kReportFd), "--parent",
                                         std::to_string(::getpid()), "--", protocol::to_json(request)},
                                        protocol::kReportFd});
    if (const auto* failure = std::get_if<detail::StartFailure>(&started))
      return setup_failed(fmt::format("[setup] cannot start the conformance worker {}: {}", worker_.string(),
                                      failure->text()));
    ChildProcess& child = std::get<ChildProcess>(started);

    const auto timeout = std::chrono::duration_cast<Clock::duration>(isolation_.case_timeout);
    std::optional<InFlight> current;
    bool listed = false;  // this worker's plan has come
    auto deadline = Clock::now() + timeout;
    for (std::string line;;) {
      const auto read = child.read_line(deadline, line);
      if (read == ChildProcess::Read::deadline) return blame(child.time_out(), current, listed);
      if (read == ChildProcess::Read::ended) {
        // The report ends as the worker does; one still running a moment later has lost its
        // report descriptor (the backend closed it) and can tell nothing more.
        if (auto end = child.wait_until(std::min(deadline, Clock::now() + kExitGrace)))
          return blame(*end, current, listed);
        child.time_out();
        return unreadable("it closed the report while still running", current, listed);
      }
      protocol::Event e;
      try {
        e = protocol::parse_event(line);
        check(e, current, listed);
      } catch (const std::exception& error) {
        child.time_out();
        return unreadable(error.what(), current, listed);
      }
      deadline = Clock::now() + timeout;
      switch (e.kind) {
        case protocol::Event::Kind::plan:
          listed = true;
          if (!plan_) {
            plan_ = std::move(e.plan);
            advance(next_);
          } else if (*plan_ != e.plan) {
            child.time_out();
            return setup_failed(
                "[setup] a fresh worker listed other cases than the first one did (the case list is not "
                "deterministic)" +
                left_unrun());
          }
          break;
        case protocol::Event::Kind::start:
          current = InFlight{e.index, e.op, e.name, Clock::now()};
          if (isolation_.on_start) isolation_.on_start(target_, e.op, e.name);
          break;
        case protocol::Event::Kind::end:
          if (!record_({target_, current->op, current->name, e.passed, e.detail},
                       Milliseconds(e.milliseconds))) {
            child.time_out();
            return true;
          }
          advance(e.index + 1);
          current.reset();
          break;
        case protocol::Event::Kind::sweep:
          sweep_deadline_ = e.deadline;
          break;
        case protocol::Event::Kind::setup_failed:
          if (!child.wait_until(deadline)) child.time_out();
          return setup_failed(e.detail + left_unrun());
        case protocol::Event::Kind::done:
          if (!child.wait_until(deadline)) child.time_out();
          return next_ >= plan_->size() || fail_next("the worker process ended its run before this case");
      }
    }
  }

  // The worker's lines must follow the protocol's order; a plugin writing on the report
  // descriptor is the likely reason when they do not.
  void check(const protocol::Event& e, const std::optional<InFlight>& current, bool listed) const {
    using Kind = protocol::Event::Kind;
    if (e.kind == Kind::plan && listed) throw std::runtime_error("a second list of cases");
    if (e.kind != Kind::plan && e.kind != Kind::setup_failed && !listed)
      throw std::runtime_error("a line before the list of cases");
    if (e.kind == Kind::start && (current || e.index != next_))
      throw std::runtime_error(fmt::format("case {} started where case {} was due", e.index, next_));
    if (e.kind == Kind::end && (!current || current->index != e.index))
      throw std::runtime_error(fmt::format("a verdict for case {}, which had not started", e.index));
  }

  // The sweep's clock starts when its fixed cases are done. The worker that begins the sweep
  // says when it ends (its sweep line); until then this one counts, so that workers dying
  // before they say so cannot keep the sweep going forever.
  void advance(uint64_t next) {
    next_ = next;
    if (sweeps_ && !sweep_deadline_ && next_ >= plan_->size())
      sweep_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.budget_seconds));
  }

  bool sweep_left() const {
    if (!sweeps_ || next_ < plan_->size()) return sweeps_;
    return options_.sweep_cases > 0 ? next_ - plan_->size() < options_.sweep_cases
                                    : !sweep_deadline_ || Clock::now() < *sweep_deadline_;
  }
  bool finished() const { return next_ >= plan_->size() && !sweep_left(); }

  // The worker ended (or was killed) before the end of its run: the verdict of the case it was
  // running, or else of the case it was about to start. True when the target is finished.
  bool blame(const ChildEnd& end, const std::optional<InFlight>& current, bool listed) {
    if (!listed) {
      const std::string why =
          end.kind == ChildEnd::Kind::timed_out
              ? fmt::format(
                    "the worker process listed no cases within the per-case time-out of {} (while loading "
                    "the plugins and building the runtime); it was killed",
                    seconds(isolation_.case_timeout))
              : worker_ended(end) +
                    " before its first case (while loading the plugins and building the runtime)";
      return setup_failed("[setup] " + why + left_unrun());
    }
    if (current) return fail_current(*current, died_during(end, isolation_.case_timeout));
    return fail_next(died_before(end, isolation_.case_timeout));
  }

  bool unreadable(const std::string& what, const std::optional<InFlight>& current, bool listed) {
    const std::string why = "the worker's report is unreadable (" + what + "); the worker was killed";
    if (!listed) return setup_failed("[setup] " + why + left_unrun());
    if (current) return fail_current(*current, why);
    return fail_next(why);
  }

  bool fail_current(const InFlight& c, const std::string& why) {
    if (!record_({target_, c.op, c.name, false, prefix(c.op, c.name) + why}, Clock::now() - c.since))
      return true;
    advance(c.index + 1);
    return finished();
  }

  // Nothing was running: the case due next takes the verdict (a sweep case's op is not known
  // before the worker builds it), or, after the last one, the worker's teardown.
  bool fail_next(const std::string& why) {
    std::string op = "teardown", name = "worker";
    if (next_ < plan_->size()) {
      std::tie(op, name) = (*plan_)[next_];
    } else if (sweep_left()) {
      op = "sweep";
      name = fmt::format("sweep/{}/{}", options_.seed, next_ - plan_->size());
    }
    if (!record_({target_, op, name, false, prefix(op, name) + why}, Milliseconds(0))) return true;
    if (op == "teardown") return true;
    advance(next_ + 1);
    return finished();
  }

  // The target stops here.
  bool setup_failed(std::string detail) {
    record_({target_, "setup", "runtime", false, std::move(detail)}, Milliseconds(0));
    return true;
  }

  std::string left_unrun() const {
    if (!plan_) return "";
    const size_t left = next_ < plan_->size() ? plan_->size() - next_ : 0;
    if (left == 0 && !sweep_left()) return "";
    return fmt::format("; {} case{}{} of this target did not run", left, left == 1 ? "" : "s",
                       sweep_left() ? " and the sweep" : "");
  }

  const RuntimeOptions& base_;
  const Target& target_;
  const SuiteOptions& options_;
  const Isolation& isolation_;
  const std::filesystem::path worker_;
  const Record& record_;
  const bool sweeps_;
  std::optional<std::vector<std::pair<std::string, std::string>>> plan_;
  uint64_t next_ = 0;  // the index of the first case without a verdict
  std::optional<Clock::time_point> sweep_deadline_;
};

}  // namespace

std::filesystem::path worker_program() {
  if (const char* overridden = std::getenv("DELTAKERN_CONFORMANCE_WORKER"); overridden && *overridden)
    return overridden;
  // Beside this library, as the probe helper is beside libdeltakern: <libdir>/deltakern/.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&worker_program), &info) != 0 && info.dli_fname != nullptr) {
    std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path();
    std::error_code ec;
    if (auto canonical = std::filesystem::weakly_canonical(dir, ec); !ec) dir = canonical;  // not bin/../lib
    return dir / "deltakern" / kWorkerName;
  }
  return kWorkerName;
}

Summary run_isolated(const RuntimeOptions& base, const std::vector<Target>& targets,
                     const SuiteOptions& options, const Isolation& isolation,
                     const std::function<void(const CaseResult&, Milliseconds took)>& on_result) {
  Summary summary;
  const Record record = [&](CaseResult r, Milliseconds took) {
    (r.passed ? summary.passed : summary.failed) += 1;
    if (on_result) on_result(r, took);
    summary.results.push_back(std::move(r));
    summary.stopped = options.max_failures > 0 && static_cast<size_t>(summary.failed) >= options.max_failures;
    return !summary.stopped;
  };
  const auto worker = isolation.worker.empty() ? worker_program() : isolation.worker;
  for (const auto& target : targets) {
    TargetRun(base, target, options, isolation, worker, record).run();
    if (summary.stopped) break;
  }
  return summary;
}

}  // namespace deltakern::conformance
