// The conformance suite as a library: the checks that every backend must pass, run
// against one backend forced through the dispatcher, on one device. The Boost.Test
// suite (tests/) and `deltakern conformance` both run these; the float64 reference
// lives here and shares no code with any backend.
#pragma once

#include <deltakern/runtime.hpp>

#include <functional>
#include <memory>
#include <string>
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

struct Case {
  std::string op;    // "causal_conv1d_varlen", "causal_conv1d_update", or "contract"
  std::string name;  // unique within the target: "bf16/w4/channel_last/bias/silu/init"
  // Runs the case against `runtime`, which must force the target's backend. Returns an
  // empty string when every check held, else what failed (first differing element...).
  std::function<std::string(Runtime& runtime, const Target& target)> run;
};

// The case list for a target: every dtype, width, layout the backend declares, bias
// on/off, activations, initial state on/off, edge lengths, padded slots, contracts,
// sync counts, derived-vs-host bit identity, prefill-then-updates equivalence.
std::vector<Case> cases(const Runtime& runtime, const Target& target);

struct CaseResult {
  Target target;
  std::string op, name;
  bool passed = false;
  std::string detail;
};

struct Summary {
  std::vector<CaseResult> results;
  int passed = 0, failed = 0;
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

// Builds a Runtime forcing each target's backend (from `base`), runs every case.
Summary run(const RuntimeOptions& base, const std::vector<Target>& targets,
            const std::function<void(const CaseResult&)>& on_result = {});

}  // namespace deltakern::conformance
