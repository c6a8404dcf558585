// The dispatcher's whole decision. For a call signature, the candidates are the forced
// backend alone (never a silent fallback), else the op's preference order from the config.
// The first candidate that is loaded, declares the op, the device (available here, with a
// high-enough compute capability), x's dtype, the width and the layout, and whose
// supports() accepts the call, serves it. Every other backend gets its reason. When that is
// not the first candidate, the decision is a fallback: counted per call, or with strict
// dispatch an error (a forced backend is the only candidate, so it never falls back).
#include "dispatch/dispatch.hpp"

#include "loader/plugin_exception.hpp"
#include "services/cuda_services.hpp"
#include "services/dlpack_util.hpp"
#include "status.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <utility>

namespace deltakern::detail {
namespace {

// A plugin that died before it declared its name is known by its file: lib<name>.so,
// libdeltakern_<name>.so and the like.
bool file_names(const std::filesystem::path& file, std::string_view name) {
  std::string stem = file.stem().string();
  if (stem.starts_with("lib")) stem.erase(0, 3);
  if (stem == name) return true;
  return stem.size() > name.size() && stem.ends_with(name) &&
         (stem[stem.size() - name.size() - 1] == '_' || stem[stem.size() - name.size() - 1] == '-');
}

// The library found for `name` and turned away: by the name it declared, else by its file name.
const PluginInfo* rejected_named(const Plugins& plugins, std::string_view name) {
  for (const auto& info : plugins.infos)
    if (info.state == PluginInfo::State::rejected && info.name == name) return &info;
  for (const auto& info : plugins.infos)
    if (info.state == PluginInfo::State::rejected && info.name.empty() && file_names(info.path, name))
      return &info;
  return nullptr;
}

std::string rejection_of(const PluginInfo& info) {
  return fmt::format("rejected at load: {} ({}{})", info.reason, info.path.string(),
                     info.name.empty() ? ", known by its file name: it failed before declaring one" : "");
}

// Why `backend` cannot serve calls of the signature; nullopt when it can. `candidate` is
// cleared when the backend does not declare the call's device: it was never a candidate.
// `only_unavailable` is set when the one reason is that the device cannot be used here: the
// backend declares everything else the call needs.
std::optional<std::string> unfit(const Backend& backend, const Plugins& plugins, const SignatureFields& s,
                                 const dk_call& call, bool ask_supports, bool& candidate,
                                 bool& only_unavailable) {
  const dk_op* op = backend.ops[index_of(s.op)];
  if (op == nullptr) return fmt::format("does not declare {}", op_name(s.op));
  const PluginInfo& plugin = plugins.info(backend);
  const OpInfo& declared = plugin.ops[backend.op_info[index_of(s.op)]];
  const std::string device_type = device_type_name(s.device.device_type);

  int min_capability = INT_MAX;
  for (const auto& d : declared.devices)
    if (d.type == s.device.device_type) min_capability = std::min(min_capability, d.min_compute_capability);
  if (min_capability == INT_MAX) {
    candidate = false;
    return fmt::format("does not declare device {}", device_type);
  }
  std::optional<std::string> mismatch;
  if (std::none_of(declared.dtypes.begin(), declared.dtypes.end(),
                   [&](DLDataType t) { return same_dtype(t, s.x); }))
    mismatch = fmt::format("does not declare dtype {}", dtype_name(s.x));
  else if (s.width < declared.min_width || s.width > declared.max_width)
    mismatch = fmt::format("width {} outside {}..{}", s.width, declared.min_width, declared.max_width);
  else if (std::find(declared.layouts.begin(), declared.layouts.end(), s.layout) == declared.layouts.end())
    mismatch = fmt::format("layout {} not declared", to_string(s.layout));
  // A device the plugin cannot use here is its first reason; supports() is not asked about it.
  for (const auto& status : plugin.devices)
    if (status.type == s.device.device_type && !status.available) {
      only_unavailable = !mismatch;
      return fmt::format("unavailable on {}: {}", device_type, status.reason);
    }
  if (s.device.device_type == kDLCUDA && min_capability > 0) {
    int capability = 0;
    if (cuda::Failure f = cuda::compute_capability(s.device.device_id, capability))
      return fmt::format("cannot query {}: {}", device_name(s.device), f);
    if (capability < min_capability)
      return fmt::format("needs compute capability {} or higher, {} has {}", min_capability,
                         device_name(s.device), capability);
  }
  if (mismatch) return mismatch;

  if (op->supports != nullptr && ask_supports) {
    char why[512] = {};
    int32_t status = DK_ERR_INTERNAL;
    try {
      status = op->supports(backend.instance, &call, why, sizeof why);
    } catch (...) {
      return "supports(): threw " + current_exception_text();
    }
    why[sizeof why - 1] = '\0';
    if (status != DK_OK)
      return fmt::format("supports(): {}",
                         why[0] != '\0' ? std::string(why) : std::string(status_name(status)));
  }
  return std::nullopt;
}

// A 1.0 plugin could not declare limits, so its supports() may look at shapes: it is asked per call.
bool supports_per_call(const Backend& backend, const Plugins& plugins, OpId op) {
  return plugins.info(backend).abi_minor == 0 && backend.ops[index_of(op)]->supports != nullptr;
}

CachedFit fit_of(const Backend& backend, const Plugins& plugins, OpId op) {
  CachedFit fit;
  fit.op = backend.ops[index_of(op)];
  fit.instance = backend.instance;
  fit.backend = backend.name.c_str();
  fit.supports_per_call = supports_per_call(backend, plugins, op);
  for (const auto& limit : plugins.info(backend).ops[backend.op_info[index_of(op)]].limits)
    fit.limits[fit.n_limits++] = {*dim_index(op, limit.dim), limit.min, limit.max};  // checked at load
  return fit;
}

// The first limit of `fit` the call's known dimensions break: the reason with the call's size,
// and without it (what a fallback counter is keyed on, so that sizes do not multiply counters).
std::optional<std::pair<std::string, std::string>> outside_limits(const CachedFit& fit, OpId op,
                                                                  const CallDims& dims, uint32_t known) {
  for (uint8_t i = 0; i < fit.n_limits; ++i) {
    const LimitCheck& l = fit.limits[i];
    if ((known & (1u << l.dim)) == 0 || (dims[l.dim] >= l.min && dims[l.dim] <= l.max)) continue;
    const std::string_view name = kOps[index_of(op)].dims[l.dim];
    return std::pair{fmt::format("{} {} outside {}..{}", name, dims[l.dim], l.min, l.max),
                     fmt::format("{} outside {}..{}", name, l.min, l.max)};
  }
  return std::nullopt;
}

}  // namespace

Choice decide(const SignatureFields& s, const dk_call& call, const Plugins& plugins, const Config& config,
              const std::optional<ForcedBackend>& forced, const CallDims* dims, uint32_t dims_known) {
  Choice choice;
  Decision& d = choice.decision;
  std::vector<std::string> candidates;
  std::string unlisted;  // the reason given to loaded backends that were never candidates
  if (forced) {
    candidates = {forced->name};
    d.why = forced->source == "DELTAKERN_BACKEND"
                ? fmt::format("forced by DELTAKERN_BACKEND={}", forced->name)
                : fmt::format("forced by {}", forced->source);
    unlisted = "not the forced backend";
  } else {
    const BackendOrder& order = config.order_for(s.op);
    candidates = order.names;
    d.why = fmt::format("first in {} [{}] that can serve the call", order.key, fmt::join(order.names, ", "));
    unlisted = fmt::format("not in {}", order.key);
  }

  // Each candidate's reason (none: it serves), and the first one that declares the device:
  // the first choice a fallback is counted from.
  std::vector<std::optional<std::string>> reasons(candidates.size());
  std::vector<std::string> keys(candidates.size());  // the reasons without the call's sizes
  size_t served = candidates.size(), first_choice = candidates.size(), first_fit = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& name = candidates[i];
    const Backend* backend = plugins.find(name);
    bool candidate = true, only_unavailable = false;
    std::optional<std::string>& reason = reasons[i];
    if (backend == nullptr) {
      const PluginInfo* rejected = rejected_named(plugins, name);
      reason = rejected != nullptr ? rejection_of(*rejected) : std::string("not installed");
      if (forced && rejected != nullptr) {
        choice.forced_rejected = rejected;
        d.why = fmt::format("forced backend '{}' ({}) was {}", forced->name, forced->source, *reason);
      }
    } else {
      const bool per_call =
          backend->ops[index_of(s.op)] != nullptr && supports_per_call(*backend, plugins, s.op);
      reason = unfit(*backend, plugins, s, call, dims != nullptr || !per_call, candidate, only_unavailable);
      choice.unavailable_here = choice.unavailable_here || only_unavailable;
      if (!reason) {
        if (choice.fits.empty()) first_fit = i;
        choice.fits.push_back(fit_of(*backend, plugins, s.op));
        if (dims != nullptr)
          if (auto outside = outside_limits(choice.fits.back(), s.op, *dims, dims_known)) {
            reason = std::move(outside->first);
            keys[i] = std::move(outside->second);
          }
      }
    }
    if (reason && keys[i].empty()) keys[i] = *reason;
    if (candidate && first_choice == candidates.size()) first_choice = i;
    if (!reason && served == candidates.size()) served = i;
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i > served)
      d.passed_over.push_back(
          {candidates[i], fmt::format("lower in preference than '{}'", candidates[served])});
    else if (i < served)
      d.passed_over.push_back({candidates[i], *reasons[i]});
  }
  if (served < candidates.size()) {
    const Backend* backend = plugins.find(candidates[served]);
    d.backend = candidates[served];
    choice.backend = backend;
    choice.op = backend->ops[index_of(s.op)];
    const OpInfo& served = plugins.info(*backend).ops[backend->op_info[index_of(s.op)]];
    d.limits = served.limits;
    d.contract = served.contract();
    d.supports_per_call = supports_per_call(*backend, plugins, s.op);
  } else if (!forced) {
    const BackendOrder& order = config.order_for(s.op);
    d.why = fmt::format("nothing in {} [{}] can serve the call", order.key, fmt::join(order.names, ", "));
  }
  choice.first_fit_is_first_choice = first_fit == first_choice && first_fit < candidates.size();
  d.strict = config.strict && !forced;
  if (d.backend && served != first_choice) {
    d.fallback_from = Decision::PassedOver{candidates[first_choice], *reasons[first_choice]};
    choice.fallback_reason = keys[first_choice];
    if (d.strict) {
      const BackendOrder& order = config.order_for(s.op);
      d.passed_over.insert(
          d.passed_over.begin() + static_cast<std::ptrdiff_t>(served),
          {*d.backend,
           fmt::format("would serve as a fallback, refused by strict dispatch ({})", config.strict_source)});
      d.why = fmt::format("strict dispatch ({}): only the first choice in {} [{}] may serve the call",
                          config.strict_source, order.key, fmt::join(order.names, ", "));
      choice.refused_fallback = *std::exchange(d.backend, std::nullopt);
      d.contract.reset();
      choice.backend = nullptr;
      choice.op = nullptr;
    }
  }
  for (const auto& backend : plugins.backends)
    if (std::find(candidates.begin(), candidates.end(), backend->name) == candidates.end())
      d.passed_over.push_back({backend->name, unlisted});
  return choice;
}

std::string summary(const SignatureFields& s, const CallDims* dims, uint32_t dims_known) {
  std::string text = fmt::format("{}, x {}, width {}, {}", device_name(s.device), dtype_name(s.x), s.width,
                                 to_string(s.layout));
  if (dims == nullptr) return text;
  const DimNames& names = kOps[index_of(s.op)].dims;
  for (size_t i = 0; i < kMaxDims; ++i)
    if (!names[i].empty() && names[i] != "width" && (dims_known & (1u << i)) != 0)
      text += fmt::format(", {} {}", names[i], (*dims)[i]);
  return text;
}

ErrorCode refusal_code(const Choice& choice) {
  return choice.unavailable_here && choice.refused_fallback.empty() ? ErrorCode::unavailable
                                                                    : ErrorCode::unsupported;
}

std::string refusal(const SignatureFields& s, const Choice& choice, const Config& config,
                    const std::optional<ForcedBackend>& forced, const CallDims* dims) {
  const auto summary = [&](const SignatureFields& f) { return detail::summary(f, dims); };
  const Decision& decision = choice.decision;
  if (!choice.refused_fallback.empty()) {
    return fmt::format(
        "{}: strict dispatch ({}): first choice '{}' in {} cannot serve this call ({}): {}; '{}' would "
        "serve it as a fallback",
        op_name(s.op), config.strict_source, decision.fallback_from->backend, config.order_for(s.op).key,
        summary(s), decision.fallback_from->reason, choice.refused_fallback);
  }
  if (forced && choice.forced_rejected != nullptr)
    return fmt::format("{}: forced backend '{}' ({}) was {}", op_name(s.op), forced->name, forced->source,
                       rejection_of(*choice.forced_rejected));
  if (forced) {
    const std::string reason =
        decision.passed_over.empty() ? std::string("unknown") : decision.passed_over[0].reason;
    return fmt::format("{}: forced backend '{}' ({}) cannot serve this call ({}): {}", op_name(s.op),
                       forced->name, forced->source, summary(s), reason);
  }
  std::vector<std::string> reasons;
  for (const auto& p : decision.passed_over) reasons.push_back(fmt::format("{}: {}", p.backend, p.reason));
  return fmt::format("{}: no backend can serve this call ({}): {}", op_name(s.op), summary(s),
                     fmt::join(reasons, "; "));
}

std::string fallback_warning(const SignatureFields& s, const Decision& decision, const Config& config) {
  return fmt::format(
      "{}: '{}' serves calls ({}) in place of first choice '{}' in {}: {}; each such call is counted "
      "(Runtime::fallback_counts()), dispatch.strict = true makes it an error",
      op_name(s.op), *decision.backend, summary(s), decision.fallback_from->backend,
      config.order_for(s.op).key, decision.fallback_from->reason);
}

}  // namespace deltakern::detail

std::string deltakern::Decision::describe() const {
  std::string text = fmt::format("backend: {}\nwhy: {}\n", backend ? *backend : std::string("none"), why);
  if (contract)
    text += fmt::format("contract: {}\n",
                        *contract == Contract::in_place ? "in_place (the result is x, convolved in place)"
                        : *contract == Contract::fresh  ? "fresh (a new result; x untouched)"
                                                        : "out (the result is in out; x untouched)");
  if (fallback_from && backend)
    text += fmt::format(
        "fallback: from first choice '{}' ({}); counted per call, an error under strict dispatch\n",
        fallback_from->backend, fallback_from->reason);
  if (backend && !limits.empty()) {
    std::vector<std::string> ranges;
    for (const auto& l : limits) ranges.push_back(fmt::format("{} {}..{}", l.dim, l.min, l.max));
    text += fmt::format("limits: {} (a call outside them goes to the next backend that admits it)\n",
                        fmt::join(ranges, ", "));
  }
  if (backend && supports_per_call) text += "supports(): asked on every call (an ABI 1.0 plugin)\n";
  if (passed_over.empty()) return text + "passed over: none";
  text += "passed over:";
  for (const auto& p : passed_over) text += fmt::format("\n  {}: {}", p.backend, p.reason);
  return text;
}
