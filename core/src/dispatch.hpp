// Backend selection for one call signature (see dispatch.cpp).
#pragma once

#include "config.hpp"
#include "decision_cache.hpp"
#include "discovery.hpp"

#include <deltakern/runtime.hpp>

#include <optional>
#include <string>

namespace deltakern::detail {

struct ForcedBackend {
  std::string name;
  std::string source;  // "DELTAKERN_BACKEND" or "RuntimeOptions::force_backend"
};

struct Choice {
  Decision decision;
  const Backend* backend = nullptr;  // null: nobody can serve the call
  const dk_op* op = nullptr;
  std::string refused_fallback;                 // strict mode: the backend that could have served instead
  const PluginInfo* forced_rejected = nullptr;  // the forced backend's library, found but rejected
};

// `call` is what the chosen backend's supports() sees: the real call, or placeholders that
// carry the signature's dtypes for explain().
Choice decide(const SignatureFields& signature, const dk_call& call, const Plugins& plugins,
              const Config& config, const std::optional<ForcedBackend>& forced);

// The one-line form of a signature for messages: "cpu:0, x bfloat16, width 4, time_contiguous".
std::string summary(const SignatureFields& signature);

// Why a call of this signature is refused, for the Error it throws.
std::string refusal(const SignatureFields& signature, const Choice& choice, const Config& config,
                    const std::optional<ForcedBackend>& forced);

// The warning logged once when a new kind of fallback is first seen.
std::string fallback_warning(const SignatureFields& signature, const Decision& decision,
                             const Config& config);

}  // namespace deltakern::detail
