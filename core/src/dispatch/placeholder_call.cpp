#include "dispatch/placeholder_call.hpp"

#include <algorithm>

namespace deltakern::detail {
namespace {

constexpr int64_t kDim = 64, kTokens = 16;

}  // namespace

PlaceholderCall::PlaceholderCall(const SignatureFields& s) {
  const int64_t width = std::max<int64_t>(s.width, 1), state_len = std::max<int64_t>(width - 1, 1);
  size_t next = 0;
  // Describes argument `position` as a row-major tensor with the given dims (strides may be
  // overridden afterwards); returns it for that.
  const auto add = [&](size_t position, DLDataType dtype, std::initializer_list<int64_t> dims) -> DLTensor& {
    const size_t i = next++;
    DLTensor& t = tensors_[i];
    t.device = s.device;
    t.dtype = dtype;
    t.ndim = static_cast<int>(dims.size());
    std::copy(dims.begin(), dims.end(), shapes_[i].begin());
    int64_t stride = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      strides_[i][d] = stride;
      stride *= shapes_[i][d];
    }
    t.shape = shapes_[i].data();
    t.strides = strides_[i].data();
    arguments_[position] = &t;
    return t;
  };
  const bool channel_last = s.layout == Layout::channel_last;

  const bool out_variant = is_out_variant(s.op);
  if (base_of(s.op) == OpId::causal_conv1d_varlen) {
    add(DK_VARLEN_X, s.x, {kDim, kTokens});
    if (channel_last) strides_[0] = {1, kDim, 0};
    if (out_variant) {
      add(DK_VARLEN_OUT, s.x, {kDim, kTokens});
      if (channel_last) strides_[next - 1] = {1, kDim, 0};
    }
    add(DK_VARLEN_WEIGHT, s.weight, {kDim, width});
    if (s.bias) add(DK_VARLEN_BIAS, *s.bias, {kDim});
    add(DK_VARLEN_CONV_STATES, s.state, {1, kDim, state_len});
    add(DK_VARLEN_QUERY_START_LOC, DLDataType{kDLInt, 32, 1}, {2});
    scalars_[DK_VARLEN_ACTIVATION] = {DK_SCALAR_STRING, 0, 0.0, "none"};
    scalars_[DK_VARLEN_PAD_SLOT_ID] = {DK_SCALAR_INT, -1, 0.0, nullptr};
    scalars_[DK_VARLEN_MAX_SEQ_LEN] = s.max_seq_len_given ? dk_scalar{DK_SCALAR_INT, kTokens, 0.0, nullptr}
                                                          : dk_scalar{DK_SCALAR_NONE, 0, 0.0, nullptr};
    call_ = {sizeof(dk_call),
             nullptr,
             out_variant ? size_t{DK_VARLEN_OUT_N_TENSORS} : size_t{DK_VARLEN_N_TENSORS},
             arguments_.data(),
             DK_VARLEN_N_SCALARS,
             scalars_.data(),
             sizeof(dk_scalar)};
  } else {
    if (channel_last) {
      add(DK_UPDATE_X, s.x, {1, kDim, 2});
      strides_[0] = {2 * kDim, 1, kDim};
    } else {
      add(DK_UPDATE_X, s.x, {1, kDim});
    }
    if (out_variant) {
      const DLTensor& x = tensors_[next - 1];
      DLTensor& out = add(DK_UPDATE_OUT, s.x, {1, kDim});
      out.ndim = x.ndim;
      shapes_[next - 1] = shapes_[next - 2];
      strides_[next - 1] = strides_[next - 2];
    }
    add(DK_UPDATE_CONV_STATE, s.state, {1, kDim, state_len});
    add(DK_UPDATE_WEIGHT, s.weight, {kDim, width});
    if (s.bias) add(DK_UPDATE_BIAS, *s.bias, {kDim});
    scalars_[DK_UPDATE_ACTIVATION] = {DK_SCALAR_STRING, 0, 0.0, "none"};
    scalars_[DK_UPDATE_PAD_SLOT_ID] = {DK_SCALAR_INT, -1, 0.0, nullptr};
    call_ = {sizeof(dk_call),
             nullptr,
             out_variant ? size_t{DK_UPDATE_OUT_N_TENSORS} : size_t{DK_UPDATE_N_TENSORS},
             arguments_.data(),
             DK_UPDATE_N_SCALARS,
             scalars_.data(),
             sizeof(dk_scalar)};
  }
}

}  // namespace deltakern::detail
