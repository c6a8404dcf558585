// The public face of the suite: which targets exist here, the case list of a target
// (case_lists.hpp builds it per tier), and running it against a runtime that forces the backend.
#include "case_lists.hpp"
#include "case_util.hpp"
#include "device.hpp"
#include "poison.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/conformance.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>

namespace deltakern::conformance {

std::string Target::label() const {
  if (device.device_type == kDLCUDA) return backend + "/cuda:" + std::to_string(device.device_id);
  if (device.device_type == kDLCPU) return backend + "/cpu";
  return backend + "/device" + std::to_string(device.device_type) + ":" + std::to_string(device.device_id);
}

std::vector<Target> targets(const Runtime& runtime) {
  std::vector<Target> out;
  for (const auto& p : runtime.plugins()) {
    if (p.state != PluginInfo::State::loaded) continue;
    for (const auto& d : p.devices) {
      if (!d.available) continue;
      if (d.type == kDLCPU) out.push_back({p.name, {kDLCPU, 0}});
      // CUDA device 0: the suite needs its own CUDA build to make device tensors.
      if (d.type == kDLCUDA && cuda_usable(0)) out.push_back({p.name, {kDLCUDA, 0}});
    }
  }
  return out;
}

const char* to_string(Tier tier) {
  switch (tier) {
    case Tier::quick:
      return "quick";
    case Tier::full:
      return "full";
    case Tier::large:
      return "large";
  }
  return "?";
}

std::optional<Tier> tier_from_string(std::string_view name) {
  for (Tier t : {Tier::quick, Tier::full, Tier::large})
    if (name == to_string(t)) return t;
  return std::nullopt;
}

namespace {

std::vector<const OpInfo*> served_ops(const PluginInfo& plugin, const Target& target) {
  std::vector<const OpInfo*> served;
  for (const auto& op : plugin.ops)
    if (serves(op, target)) served.push_back(&op);
  return served;
}

}  // namespace

std::vector<Case> cases(const Runtime& runtime, const Target& target, const SuiteOptions& options) {
  std::vector<Case> out;
  const PluginInfo* plugin = runtime.plugin(target.backend);
  if (plugin == nullptr) {
    out.push_back({"contract", "loaded", [](Runtime&, const Target& t) {
                     return "backend '" + t.backend + "' is not loaded in this runtime";
                   }});
    return out;
  }
  const auto served = served_ops(*plugin, target);
  add_contract_cases(out, served, options);
  for (const OpInfo* op : served) {
    // An out-variant runs its op's cases with the result going into a caller's out.
    if (is_varlen_op(op->name)) add_varlen_cases(out, *op, target, options);
    if (is_update_op(op->name)) add_update_cases(out, *op, target, options);
    add_out_of_range_cases(out, *op, target, options);
    add_size_cases(out, *op, target, options);
  }
  // A case outside a declared limit is no claim of the backend's: the core would not route it there.
  std::erase_if(out, [&](const Case& c) {
    for (const OpInfo* op : served)
      if (op->name == c.op)
        for (const auto& limit : op->limits)
          for (const auto& [dim, value] : c.dims)
            if (dim == limit.dim && (value < limit.min || value > limit.max)) return true;
    return false;
  });
  return out;
}

Case sweep_case(const Runtime& runtime, const Target& target, const SuiteOptions& options, uint64_t k) {
  const PluginInfo* plugin = runtime.plugin(target.backend);
  std::vector<const OpInfo*> served;
  if (plugin != nullptr)
    for (const OpInfo* op : served_ops(*plugin, target))
      if (is_varlen_op(op->name) || is_update_op(op->name)) served.push_back(op);
  return make_sweep_case(served, options, k);
}

std::optional<Case> case_named(const Runtime& runtime, const Target& target, const SuiteOptions& options,
                               std::string_view name) {
  constexpr std::string_view sweep = "sweep/";
  if (name.substr(0, sweep.size()) == sweep) {
    const std::string_view rest = name.substr(sweep.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    try {
      size_t used = 0;
      const std::string seed_text(rest.substr(0, slash)), k_text(rest.substr(slash + 1));
      SuiteOptions o = options;
      o.seed = std::stoull(seed_text, &used);
      if (used != seed_text.size()) return std::nullopt;
      const uint64_t k = std::stoull(k_text, &used);
      if (used != k_text.size()) return std::nullopt;
      return sweep_case(runtime, target, o, k);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  for (auto& c : cases(runtime, target, options))
    if (c.name == name) return c;
  return std::nullopt;
}

CaseResult run_case(Runtime& runtime, const Target& target, const Case& c) {
  CaseResult r{target, c.op, c.name, false, {}};
  (void)take_release_violations();  // left by the results of an earlier case, already judged
  try {
    r.detail = c.run(runtime, target);
  } catch (const Error& e) {
    r.detail = std::string("threw deltakern::Error: ") + e.what();
  } catch (const std::exception& e) {
    r.detail = std::string("threw: ") + e.what();
  } catch (...) {
    r.detail = "threw a non-standard exception";
  }
  r.passed = r.detail.empty();
  if (!r.passed) r.detail = prefix(c.op, c.name) + r.detail;
  return r;
}

std::unique_ptr<Runtime> make_runtime(const RuntimeOptions& base, const Target& target) {
  RuntimeOptions options = base;
  options.force_backend = target.backend;
  auto runtime = std::make_unique<Runtime>(options);
  const auto forced = runtime->forced_backend();
  if (!forced || *forced != target.backend)
    throw std::runtime_error("the runtime forces '" + forced.value_or("no backend") + "', not '" +
                             target.backend + "' (is DELTAKERN_BACKEND set?)");
  runtime->set_allocator(poisoning_allocator());
  return runtime;
}

Summary run(const RuntimeOptions& base, const std::vector<Target>& targets,
            const std::function<void(const CaseResult&)>& on_result, const SuiteOptions& options,
            const std::vector<std::string>& case_names) {
  Summary summary;
  const auto record = [&](CaseResult r) {
    (r.passed ? summary.passed : summary.failed) += 1;
    if (on_result) on_result(r);
    summary.results.push_back(std::move(r));
    summary.stopped = options.max_failures > 0 && static_cast<size_t>(summary.failed) >= options.max_failures;
    return !summary.stopped;
  };
  for (const auto& target : targets) {
    std::unique_ptr<Runtime> runtime;
    std::vector<Case> list;
    try {
      runtime = make_runtime(base, target);
      list = selected_cases(*runtime, target, options, case_names);
    } catch (const std::exception& e) {
      if (!record({target, "setup", "runtime", false,
                   std::string("[setup] could not build the forcing runtime: ") + e.what()}))
        return summary;
      continue;
    }
    for (const auto& c : list)
      if (!record(run_case(*runtime, target, c))) return summary;
    if (options.sweeps() && case_names.empty()) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(options.budget_seconds));
      for (uint64_t k = 0; options.sweep_runs(k, deadline); ++k)
        if (!record(run_case(*runtime, target, sweep_case(*runtime, target, options, k)))) return summary;
    }
  }
  return summary;
}

}  // namespace deltakern::conformance
