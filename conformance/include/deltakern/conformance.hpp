// The conformance suite as a library: the checks that every backend must pass, run
// against one backend forced through the dispatcher, on one device. The Boost.Test
// suite (tests/) and `deltakern conformance` both run these; the float64 reference
// lives here and shares no code with any backend.
#pragma once

#include <deltakern/runtime.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltakern::conformance {

// One backend on one device it can run on here.
struct Target {
  std::string backend;
  DLDevice device{kDLCPU, 0};
  std::string label() const;  // "portable/cpu", "native/cuda:0"
};

// Every loaded backend x every device it declares and can use on this machine.
std::vector<Target> targets(const Runtime& runtime);

// How much of the suite to run. quick: small shapes only, for CI speed (every declared
// dtype, width, layout and flag, edge lengths). full (the command line's default): quick plus
// the shapes engines use, within each op's declarations: D up to 4096 on the CPU and 8192 and
// 12288 on CUDA, calls of 4k to 32k tokens, single sequences longer than 4096, 64 mixed
// lengths, update batches 1, 64 and 1024, Tq up to 64. large: full plus GPU-sized calls (128k
// tokens on CUDA).
enum class Tier { quick, full, large };
const char* to_string(Tier tier);
std::optional<Tier> tier_from_string(std::string_view name);

struct SuiteOptions {
  Tier tier = Tier::quick;
  // The random sweep of shapes and flags within the declared limits: case k of `seed` is
  // sweep_case(..., k). The sweep runs for `budget_seconds` after the fixed cases (0: none),
  // or, where `sweep_cases` > 0, for exactly that many cases whatever the time: a run whose
  // verdicts must not depend on the machine's speed (a sanitizer build is 3-10x slower).
  uint64_t seed = 1;
  double budget_seconds = 0;
  uint64_t sweep_cases = 0;
  bool sweeps() const { return budget_seconds > 0 || sweep_cases > 0; }
  // Whether sweep case k runs: below the count where one is set, else before `deadline`.
  bool sweep_runs(uint64_t k, std::chrono::steady_clock::time_point deadline) const {
    return sweep_cases > 0 ? k < sweep_cases : std::chrono::steady_clock::now() < deadline;
  }
  // A run stops once this many cases have failed (a CI gate that needs one reason, not all of
  // them); 0: every case runs.
  size_t max_failures = 0;
};

struct Case {
  std::string op;    // "causal_conv1d_varlen", "causal_conv1d_update", or "contract"
  std::string name;  // unique within the target: "bf16/w4/channel_last/bias/silu/init"
  // Runs the case against `runtime`, which must force the target's backend. Returns an
  // empty string when every check held, else what failed (first differing element...).
  std::function<std::string(Runtime& runtime, const Target& target)> run;
  // The call's sizes by the op's dimension names (op_schemas.h, DK_DIMS_*): a case outside a
  // limit the backend declares is not among its cases (the core would route the call elsewhere).
  std::vector<std::pair<std::string, int64_t>> dims;
};

// The case list for a target: every dtype, width, layout the backend declares, bias
// on/off, activations, initial state on/off, edge lengths, padded slots, contracts,
// sync counts, derived-vs-host bit identity, prefill-then-updates equivalence.
std::vector<Case> cases(const Runtime& runtime, const Target& target, const SuiteOptions& options = {});

// Case k (0, 1, ...) of the seeded random sweep: named "sweep/<seed>/<k>", so that a failing
// one is reproduced by its name alone (case_named()).
Case sweep_case(const Runtime& runtime, const Target& target, const SuiteOptions& options, uint64_t k);

// The case of that name in cases() or, for "sweep/<seed>/<k>", that sweep case; none when
// there is no such case.
std::optional<Case> case_named(const Runtime& runtime, const Target& target, const SuiteOptions& options,
                               std::string_view name);

struct CaseResult {
  Target target;
  std::string op, name;
  bool passed = false;
  std::string detail;
};

struct Summary {
  std::vector<CaseResult> results;
  int passed = 0, failed = 0;
  bool stopped = false;  // SuiteOptions::max_failures was reached: later cases did not run
};

// ---- Added by the conformance suite's implementation (additive; the above is unchanged).

// The allocator run() installs: every fresh output gets a guard zone on each side (checked
// after the call: a write past either end fails the case) and comes filled with poison,
// NaN bytes in a case's first call and finite bytes in its second, so an element a
// backend never writes fails the comparison or the two results' bit identity.
Allocator poisoning_allocator();

// The Runtime run() uses for `target`: `base` with force_backend = target.backend and
// poisoning_allocator() installed. Throws when the environment overrides the forced
// backend (DELTAKERN_BACKEND names another one).
std::unique_ptr<Runtime> make_runtime(const RuntimeOptions& base, const Target& target);

// Runs one case; an exception it throws is a failure whose detail names it.
CaseResult run_case(Runtime& runtime, const Target& target, const Case& c);

// Builds a Runtime forcing each target's backend (from `base`), runs its cases: the ones
// named (no sweep), or every case and then the sweep of `options`.
// In this process: a case that crashes takes the caller with it (see run_isolated()).
Summary run(const RuntimeOptions& base, const std::vector<Target>& targets,
            const std::function<void(const CaseResult&)>& on_result = {}, const SuiteOptions& options = {},
            const std::vector<std::string>& case_names = {});

// ---- Out of process (additive): each target's cases run in a worker process,
// deltakern-conformance-worker, so that a backend that crashes, exits, hangs or corrupts
// memory fails the case it was running instead of taking the run with it.

// The fixed cases a run executes for `target`: the ones named (each through case_named();
// a name the target lacks is left out), or cases() when `names` is empty.
std::vector<Case> selected_cases(const Runtime& runtime, const Target& target, const SuiteOptions& options,
                                 const std::vector<std::string>& names);

struct Isolation {
  // Run only these cases, and no sweep (a "sweep/<seed>/<k>" name is that sweep case);
  // empty: selected_cases() of the whole suite, then the sweep of SuiteOptions.
  std::vector<std::string> case_names;
  // A case still running after this fails, and its worker is killed; a worker that lists no
  // cases within it (loading the plugins, building the runtime) fails the target's setup.
  std::chrono::duration<double> case_timeout = std::chrono::seconds(300);
  // The worker program; empty: worker_program().
  std::filesystem::path worker;
  // Called as a case starts in a worker, before its verdict.
  std::function<void(const Target& target, const std::string& op, const std::string& name)> on_start;
};

// DELTAKERN_CONFORMANCE_WORKER when set, else <libdir>/deltakern/deltakern-conformance-worker
// beside this library (found relative to the library itself, so the build tree works the same).
std::filesystem::path worker_program();

// What run() does, with each target's cases in a worker process that builds the runtime from
// `base` (and the environment) as this process would, forces the target's backend
// (make_runtime()) and reports each case as it starts and ends. A case during which the
// worker dies, exits or exceeds isolation.case_timeout fails with that reason, and the run
// goes on with the next case in a fresh worker (the sweep keeps its deadline). A worker that
// dies before its first case fails the target's setup case, and that target stops.
// `on_result` gets each verdict as it arrives, with the case's time.
Summary run_isolated(
    const RuntimeOptions& base, const std::vector<Target>& targets, const SuiteOptions& options,
    const Isolation& isolation,
    const std::function<void(const CaseResult&, std::chrono::duration<double, std::milli> took)>& on_result =
        {});

}  // namespace deltakern::conformance
