// Small host tensors for the unit tests that make calls: owned bytes, a DLTensor view,
// and a valid causal_conv1d_varlen / causal_conv1d_update call to break one piece of.
#pragma once

#include <deltakern/deltakern.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace deltakern::test {

class HostTensor {
 public:
  HostTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {})
      : shape_(std::move(shape)), strides_(std::move(strides)) {
    if (strides_.empty()) {
      strides_.assign(shape_.size(), 1);
      for (size_t d = shape_.size(); d-- > 1;)
        strides_[d - 1] = strides_[d] * std::max<int64_t>(shape_[d], 1);
    }
    int64_t span = 1;
    for (size_t d = 0; d < shape_.size(); ++d) span += std::max<int64_t>(shape_[d] - 1, 0) * strides_[d];
    bytes_.assign(static_cast<size_t>(span) * ((dtype.bits * dtype.lanes + 7) / 8) + 16, std::byte{0});
    dl_ = DLTensor{bytes_.data(),
                   {kDLCPU, 0},
                   static_cast<int32_t>(shape_.size()),
                   dtype,
                   shape_.data(),
                   strides_.data(),
                   0};
  }
  HostTensor(const HostTensor& o) : shape_(o.shape_), strides_(o.strides_), bytes_(o.bytes_), dl_(o.dl_) {
    rebind();
  }
  HostTensor& operator=(const HostTensor&) = delete;

  DLTensor* dl() { return &dl_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  template <class T>
  void fill(const std::vector<T>& values) {  // compact element order; tests use compact tensors
    std::memcpy(bytes_.data(), values.data(), values.size() * sizeof(T));
  }
  void set_device(DLDevice d) { dl_.device = d; }

 private:
  void rebind() {
    dl_.data = bytes_.data();
    dl_.shape = shape_.data();
    dl_.strides = strides_.data();
  }
  std::vector<int64_t> shape_, strides_;
  std::vector<std::byte> bytes_;
  DLTensor dl_{};
};

inline constexpr DLDataType kF32{kDLFloat, 32, 1};
inline constexpr DLDataType kF16{kDLFloat, 16, 1};
inline constexpr DLDataType kBF16{kDLBfloat, 16, 1};
inline constexpr DLDataType kF64{kDLFloat, 64, 1};
inline constexpr DLDataType kI32{kDLInt, 32, 1};
inline constexpr DLDataType kI64{kDLInt, 64, 1};
inline constexpr DLDataType kU8{kDLUInt, 8, 1};

inline std::vector<float> ramp(size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f + scale * static_cast<float>(i % 97);
  return v;
}

// A valid varlen call on the CPU, f32: D = 8, W = 4, S = 3, lengths {4, 6}, 4 pool lines.
struct VarlenCall {
  static constexpr int64_t D = 8, W = 4, S = 3, T = 10, lines = 4;
  DLDataType dtype;
  std::optional<HostTensor> x, weight, bias, states, qsl, indices, initial;
  std::optional<int64_t> max_seq_len = 6;
  std::optional<bool> validate;
  Activation activation = Activation::silu;
  int64_t pad_slot_id = -1;

  explicit VarlenCall(DLDataType dt = kF32) : dtype(dt) {
    x.emplace(dt, std::vector<int64_t>{D, T});
    weight.emplace(dt, std::vector<int64_t>{D, W});
    bias.emplace(dt, std::vector<int64_t>{D});
    states.emplace(dt, std::vector<int64_t>{lines, D, S});
    qsl.emplace(kI32, std::vector<int64_t>{3});
    indices.emplace(kI32, std::vector<int64_t>{2});
    initial.emplace(kU8, std::vector<int64_t>{2});
    if (dt.bits == 32) {
      x->fill(ramp(D * T));
      weight->fill(ramp(D * W, 0.02f));
      bias->fill(ramp(D, 0.03f));
      states->fill(ramp(lines * D * S, 0.05f));
    }
    qsl->fill(std::vector<int32_t>{0, 4, 10});
    indices->fill(std::vector<int32_t>{3, 1});
    initial->fill(std::vector<uint8_t>{1, 0});
  }

  CausalConv1dVarlenArgs args() {
    CausalConv1dVarlenArgs a;
    a.x = x ? x->dl() : nullptr;
    a.weight = weight ? weight->dl() : nullptr;
    a.bias = bias ? bias->dl() : nullptr;
    a.conv_states = states ? states->dl() : nullptr;
    a.query_start_loc = qsl ? qsl->dl() : nullptr;
    a.cache_indices = indices ? indices->dl() : nullptr;
    a.has_initial_state = initial ? initial->dl() : nullptr;
    a.activation = activation;
    a.pad_slot_id = pad_slot_id;
    a.max_seq_len = max_seq_len;
    a.validate = validate;
    return a;
  }
  std::vector<std::vector<std::byte>> snapshot() const {
    std::vector<std::vector<std::byte>> s;
    for (const auto* t : {&x, &weight, &bias, &states, &qsl, &indices, &initial})
      s.push_back(*t ? (*t)->bytes() : std::vector<std::byte>{});
    return s;
  }
};

// A valid update call on the CPU, f32: batch 3, D = 8, W = 4, S = 3, 5 pool lines.
struct UpdateCall {
  static constexpr int64_t B = 3, D = 8, W = 4, S = 3, lines = 5;
  std::optional<HostTensor> x, states, weight, bias, indices, seqlens;
  std::optional<bool> validate;
  Activation activation = Activation::none;
  int64_t pad_slot_id = -1;

  UpdateCall() {
    x.emplace(kF32, std::vector<int64_t>{B, D});
    states.emplace(kF32, std::vector<int64_t>{lines, D, S});
    weight.emplace(kF32, std::vector<int64_t>{D, W});
    bias.emplace(kF32, std::vector<int64_t>{D});
    indices.emplace(kI32, std::vector<int64_t>{B});
    x->fill(ramp(B * D));
    states->fill(ramp(lines * D * S, 0.05f));
    weight->fill(ramp(D * W, 0.02f));
    bias->fill(ramp(D, 0.03f));
    indices->fill(std::vector<int32_t>{4, 0, 2});
  }
  CausalConv1dUpdateArgs args() {
    CausalConv1dUpdateArgs a;
    a.x = x ? x->dl() : nullptr;
    a.conv_state = states ? states->dl() : nullptr;
    a.weight = weight ? weight->dl() : nullptr;
    a.bias = bias ? bias->dl() : nullptr;
    a.conv_state_indices = indices ? indices->dl() : nullptr;
    a.cache_seqlens = seqlens ? seqlens->dl() : nullptr;
    a.activation = activation;
    a.pad_slot_id = pad_slot_id;
    a.validate = validate;
    return a;
  }
  std::vector<std::vector<std::byte>> snapshot() const {
    std::vector<std::vector<std::byte>> s;
    for (const auto* t : {&x, &states, &weight, &bias, &indices, &seqlens})
      s.push_back(*t ? (*t)->bytes() : std::vector<std::byte>{});
    return s;
  }
};

}  // namespace deltakern::test
