// A dk_call for a signature alone (explain() has no real call): tensors with the
// signature's device, dtypes, width and layout, small consistent shapes and no data. Enough
// for a backend's supports(), which must not touch memory.
#pragma once

#include "dispatch/decision_cache.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <array>

namespace deltakern::detail {

class PlaceholderCall {
 public:
  explicit PlaceholderCall(const SignatureFields& signature);
  PlaceholderCall(const PlaceholderCall&) = delete;  // the call points into this object
  PlaceholderCall& operator=(const PlaceholderCall&) = delete;

  const dk_call& call() const { return call_; }

 private:
  static constexpr size_t kMaxTensors = 8, kMaxRank = 3;
  std::array<DLTensor, kMaxTensors> tensors_{};
  std::array<std::array<int64_t, kMaxRank>, kMaxTensors> shapes_{}, strides_{};
  std::array<const DLTensor*, kMaxTensors> arguments_{};
  std::array<dk_scalar, 4> scalars_{};
  dk_call call_{};
};

}  // namespace deltakern::detail
