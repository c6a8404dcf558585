// Small pieces every case file needs: the op's declaration, names of the case axes.
#pragma once

#include "reference.hpp"

#include <deltakern/conformance.hpp>
#include <deltakern/runtime.hpp>

#include <string>
#include <string_view>

namespace deltakern::conformance {

// The declaration of `op` by the target's backend; throws when it declares none.
const OpInfo& op_info(const Runtime& runtime, const Target& target, std::string_view op);

inline const char* act_name(reference::Act a) { return a == reference::Act::silu ? "silu" : "none"; }
inline Activation to_api(reference::Act a) {
  return a == reference::Act::silu ? Activation::silu : Activation::none;
}

// "[causal_conv1d_varlen bf16/w4/...] " in front of every message.
inline std::string prefix(std::string_view op, std::string_view name) {
  return "[" + std::string(op) + " " + std::string(name) + "] ";
}

}  // namespace deltakern::conformance
