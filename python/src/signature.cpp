#include "signature.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_sdk.hpp>

#include <utility>

namespace deltakern::python {
namespace {

bool has_rank(const DLTensor* t, int ndim) { return t != nullptr && t->ndim == ndim; }

// The layout by the SDK's rule (the one the core validates with), x's channels at `channel_dim`.
std::optional<Layout> layout_of(const DLTensor& x, int channel_dim) {
  switch (plugin::layout_of(x, channel_dim)) {
    case DK_LAYOUT_TIME_CONTIGUOUS:
      return Layout::time_contiguous;
    case DK_LAYOUT_CHANNEL_LAST:
      return Layout::channel_last;
    default:
      return std::nullopt;
  }
}

void set_dtypes(CallSignature& s, const DLTensor& x, const DLTensor& weight, const DLTensor& states,
                const DLTensor* bias) {
  s.device = x.device;
  s.dtype = x.dtype;
  s.weight_dtype = weight.dtype;
  s.state_dtype = states.dtype;
  if (bias != nullptr) s.bias_dtype = bias->dtype;
}

}  // namespace

std::optional<CallSignature> varlen_signature(const CausalConv1dVarlenArgs& a, std::string op) {
  if (!has_rank(a.x, 2) || !has_rank(a.weight, 2) || !has_rank(a.conv_states, 3) ||
      !has_rank(a.query_start_loc, 1))
    return std::nullopt;
  const auto layout = layout_of(*a.x, 0);
  if (!layout) return std::nullopt;
  CallSignature s;
  s.op = std::move(op);
  set_dtypes(s, *a.x, *a.weight, *a.conv_states, a.bias);
  s.width = static_cast<int>(a.weight->shape[1]);
  s.layout = *layout;
  s.max_seq_len_given = a.max_seq_len.has_value();
  // DK_DIMS_CAUSAL_CONV1D_VARLEN, as the core derives them from a call.
  s.dims = {{"dim", a.x->shape[0]},
            {"tokens", a.x->shape[1]},
            {"batch", a.query_start_loc->shape[0] - 1},
            {"width", a.weight->shape[1]},
            {"state_len", a.conv_states->shape[2]},
            {"lines", a.conv_states->shape[0]}};
  return s;
}

std::optional<CallSignature> update_signature(const CausalConv1dUpdateArgs& a, std::string op) {
  if (a.x == nullptr || (a.x->ndim != 2 && a.x->ndim != 3) || !has_rank(a.weight, 2) ||
      !has_rank(a.conv_state, 3))
    return std::nullopt;
  const auto layout = layout_of(*a.x, 1);
  if (!layout) return std::nullopt;
  CallSignature s;
  s.op = std::move(op);
  set_dtypes(s, *a.x, *a.weight, *a.conv_state, a.bias);
  s.width = static_cast<int>(a.weight->shape[1]);
  s.layout = *layout;
  s.max_seq_len_given = true;  // update has no max_seq_len
  // DK_DIMS_CAUSAL_CONV1D_UPDATE.
  s.dims = {{"batch", a.x->shape[0]},
            {"dim", a.x->shape[1]},
            {"tokens_per_update", a.x->ndim == 3 ? a.x->shape[2] : 1},
            {"width", a.weight->shape[1]},
            {"state_len", a.conv_state->shape[2]},
            {"lines", a.conv_state->shape[0]}};
  return s;
}

const OpInfo* serving_op(const Runtime& runtime, const Decision& decision, std::string_view op) {
  if (!decision.backend) return nullptr;
  const PluginInfo* plugin = runtime.plugin(*decision.backend);
  if (plugin == nullptr) return nullptr;
  for (const OpInfo& info : plugin->ops)
    if (info.name == op) return &info;
  return nullptr;
}

std::optional<Contract> kept_contract(const Runtime& runtime, const CallSignature& signature) {
  return runtime.explain(signature).contract;
}

void require_contract(const Runtime& runtime, const CallSignature& signature, Contract required,
                      std::string_view api_name) {
  const Decision decision = runtime.explain(signature);
  const OpInfo* op = serving_op(runtime, decision, signature.op);
  // No backend: the call itself is refused with the core's reason, before anything is written.
  if (op == nullptr) return;
  if (decision.contract == required) return;
  const std::string backend = "backend '" + *decision.backend + "'";
  const std::string schema = " (schema: " + op->schema + ")";
  if (required == Contract::in_place)
    throw Error(ErrorCode::unsupported,
                std::string(api_name) + ": " + backend + " serves " + signature.op +
                    " with a fresh output and leaves x untouched" + schema +
                    "; the in-place op needs a backend that convolves x in place. Use the out-variant, which "
                    "every backend serves, or a backend that keeps the in-place contract");
  throw Error(ErrorCode::unsupported,
              std::string(api_name) + ": " + backend + " serves " + signature.op +
                  " by convolving x in place" + schema +
                  "; a fresh output was demanded (inplace=False). Use the out-variant, which every "
                  "backend serves, or a backend that writes a fresh output");
}

}  // namespace deltakern::python
