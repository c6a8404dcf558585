// The free functions of deltakern.hpp: the process-wide runtime's calls, and small helpers.
#include <fmt/core.h>
#include <deltakern/deltakern.hpp>
#include <deltakern/runtime.hpp>

namespace deltakern {

Tensor causal_conv1d_varlen(const CausalConv1dVarlenArgs& args) {
  return Runtime::global().causal_conv1d_varlen(args);
}

Tensor causal_conv1d_update(const CausalConv1dUpdateArgs& args) {
  return Runtime::global().causal_conv1d_update(args);
}

void causal_conv1d_varlen_out(const CausalConv1dVarlenArgs& args, const DLTensor& out) {
  Runtime::global().causal_conv1d_varlen_out(args, out);
}

void causal_conv1d_update_out(const CausalConv1dUpdateArgs& args, const DLTensor& out) {
  Runtime::global().causal_conv1d_update_out(args, out);
}

void check_errors(DLDevice device, void* stream) { Runtime::global().check_errors(device, stream); }

std::vector<FallbackCount> fallback_counts() { return Runtime::global().fallback_counts(); }

void reset_fallback_counts() { Runtime::global().reset_fallback_counts(); }

Activation activation_from_string(std::string_view name) {
  if (name == "none") return Activation::none;
  if (name == "silu" || name == "swish") return Activation::silu;
  throw Error(ErrorCode::invalid_argument,
              fmt::format("activation: expected none, silu or swish, got '{}'", name));
}

const char* to_string(Contract contract) {
  switch (contract) {
    case Contract::in_place:
      return "in_place";
    case Contract::fresh:
      return "fresh";
    case Contract::out:
      return "out";
  }
  return "unknown";
}

Contract OpInfo::contract() const {
  if (!returns_tensor) return Contract::out;
  return returns_alias_of == "x" ? Contract::in_place : Contract::fresh;
}

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::time_contiguous:
      return "time_contiguous";
    case Layout::channel_last:
      return "channel_last";
  }
  return "unknown";
}

}  // namespace deltakern
