// Small pieces every case file needs: the op's declaration, names of the case axes.
#pragma once

#include <deltakern/op_schemas.h>

#include "reference.hpp"

#include <deltakern/conformance.hpp>
#include <deltakern/runtime.hpp>

#include <string>
#include <string_view>

namespace deltakern::conformance {

// The declaration of `op` by the target's backend; throws when it declares none.
const OpInfo& op_info(const Runtime& runtime, const Target& target, std::string_view op);

// The ops by family: an out-variant runs its op's cases, into an out.
inline bool is_varlen_op(std::string_view op) {
  return op == DK_OP_CAUSAL_CONV1D_VARLEN || op == DK_OP_CAUSAL_CONV1D_VARLEN_OUT;
}
inline bool is_update_op(std::string_view op) {
  return op == DK_OP_CAUSAL_CONV1D_UPDATE || op == DK_OP_CAUSAL_CONV1D_UPDATE_OUT;
}
inline bool is_out_variant_op(std::string_view op) {
  return op == DK_OP_CAUSAL_CONV1D_VARLEN_OUT || op == DK_OP_CAUSAL_CONV1D_UPDATE_OUT;
}

inline const char* act_name(reference::Act a) { return a == reference::Act::silu ? "silu" : "none"; }
inline Activation to_api(reference::Act a) {
  return a == reference::Act::silu ? Activation::silu : Activation::none;
}

// "[causal_conv1d_varlen bf16/w4/...] " in front of every message.
inline std::string prefix(std::string_view op, std::string_view name) {
  return "[" + std::string(op) + " " + std::string(name) + "] ";
}

}  // namespace deltakern::conformance
