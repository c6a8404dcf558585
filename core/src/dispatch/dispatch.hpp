// Backend selection (see dispatch.cpp): for a call signature, the candidates that can serve
// it; for one call, the first of them whose limits admit the call's dimensions.
#pragma once

#include "config/config.hpp"
#include "dispatch/decision_cache.hpp"
#include "loader/discovery.hpp"

#include <deltakern/runtime_types.hpp>

#include <optional>
#include <string>
#include <vector>

namespace deltakern::detail {

struct ForcedBackend {
  std::string name;
  std::string source;  // "DELTAKERN_BACKEND" or "RuntimeOptions::force_backend"
};

struct Choice {
  Decision decision;
  const Backend* backend = nullptr;  // null: nobody can serve the call
  const dk_op* op = nullptr;
  // Every candidate that can serve calls of the signature, in preference order, with what it
  // still checks per call: what the decision cache keeps.
  std::vector<CachedFit> fits;
  bool first_fit_is_first_choice = false;
  std::string refused_fallback;                 // strict mode: the backend that could have served instead
  const PluginInfo* forced_rejected = nullptr;  // the forced backend's library, found but rejected
  std::string fallback_reason;  // the first choice's reason without the call's sizes: the counter's key
  // A backend that declares everything the call needs cannot use the device here (no driver, no
  // GPU, a core without CUDA): a refusal is then ErrorCode::unavailable, not unsupported.
  bool unavailable_here = false;
};

// Without dims, the decision for a signature: limits are not checked (fits lists them) and an
// ABI 1.0 plugin's supports() is not asked (its answer may depend on shapes). With dims, the
// decision for one call: both are. `call` is what supports() sees: the real call, or
// placeholders that carry the signature's dtypes for explain().
Choice decide(const SignatureFields& signature, const dk_call& call, const Plugins& plugins,
              const Config& config, const std::optional<ForcedBackend>& forced,
              const CallDims* dims = nullptr, uint32_t dims_known = ~0u);

// The one-line form of a signature for messages: "cpu:0, x bfloat16, width 4, time_contiguous",
// and the call's dimensions when given.
std::string summary(const SignatureFields& signature, const CallDims* dims = nullptr,
                    uint32_t dims_known = ~0u);

// The kind of error a refused call throws: unavailable when a backend would serve it on a
// machine where the device works (and no strict-dispatch rule refused it), else unsupported.
ErrorCode refusal_code(const Choice& choice);

// Why a call of this signature is refused, for the Error it throws.
std::string refusal(const SignatureFields& signature, const Choice& choice, const Config& config,
                    const std::optional<ForcedBackend>& forced, const CallDims* dims = nullptr);

// The warning logged once when a new kind of fallback is first seen.
std::string fallback_warning(const SignatureFields& signature, const Decision& decision,
                             const Config& config);

}  // namespace deltakern::detail
