// What a Runtime holds. Member order is destruction order reversed: the decisions that point
// into the plugins go first; the plugins, shared with other Runtimes, are let go of (the last
// holder shuts each down) before this Runtime's allocator, which then counts what is still alive.
#pragma once

#include "config/config.hpp"
#include "dispatch/decision_cache.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/fallback_counters.hpp"
#include "loader/discovery.hpp"
#include "services/host_services.hpp"

#include <deltakern/runtime.hpp>

#include <filesystem>
#include <optional>
#include <vector>

namespace deltakern {

struct Runtime::Impl {
  explicit Impl(RuntimeOptions runtime_options);

  // The hot path: a lookup, or on a new signature a decision made and cached.
  const detail::CachedDecision& decision_for(const detail::SignatureFields& signature, const dk_call& call) {
    if (const auto* cached = decisions.find(detail::key_of(signature))) [[likely]]
      return *cached;
    return decide_and_cache(signature, call);
  }
  const detail::CachedDecision& decide_and_cache(const detail::SignatureFields& signature,
                                                 const dk_call& call);

  // The backend that serves this call. On the hot path, the cached fit, which admits the call's
  // dimensions with a few compares; else (a limit turns the fit away, or an ABI 1.0 plugin's
  // supports() must see the call) the decision made for this call alone, which is counted as a
  // fallback or refused as the signature's would be. Throws Error(unsupported) on refusal.
  detail::Served serve(const detail::SignatureFields& signature, const dk_call& call,
                       const detail::CallDims& dims) {
    const detail::CachedDecision& decision = decision_for(signature, call);
    const detail::CachedFit& fit = decision.fit;
    if (fit.op != nullptr && !fit.supports_per_call && fit.admits(dims)) [[likely]] {
      if (decision.fallback_count != nullptr) [[unlikely]]
        decision.fallback_count->fetch_add(1, std::memory_order_relaxed);
      return {fit.op, fit.instance, fit.backend};
    }
    return serve_one(signature, call, dims, decision);
  }
  detail::Served serve_one(const detail::SignatureFields& signature, const dk_call& call,
                           const detail::CallDims& dims, const detail::CachedDecision& decision);

  // The ops end to end (calls.cpp): out null for the op, set for its out-variant.
  DLManagedTensor* varlen(const CausalConv1dVarlenArgs& args, const DLTensor* out);
  DLManagedTensor* update(const CausalConv1dUpdateArgs& args, const DLTensor* out);

  RuntimeOptions options;
  detail::Config config;
  std::optional<detail::ForcedBackend> forced;
  std::vector<std::filesystem::path> search_path;
  detail::RuntimeAllocator allocator;
  detail::Plugins plugins;
  detail::FallbackCounters fallbacks;  // before `decisions`, which points into it
  detail::DecisionCache decisions;
};

namespace detail {

// The global runtime's allocator (built on first use): what VarlenMetadata::upload allocates
// through.
RuntimeAllocator& global_allocator();

// Calls a backend's op with `allocator` serving its allocations (none: the default one),
// turning a failure status into Error naming the backend (when known), the op and the
// plugin's message. returns_tensor: the op returns a tensor (false: an out-variant, -> ()),
// and a backend that answers otherwise fails the call.
DLManagedTensor* run_op(const dk_op& op, void* instance, const dk_call& call, const char* backend,
                        RuntimeAllocator* allocator, bool returns_tensor);

}  // namespace detail
}  // namespace deltakern
