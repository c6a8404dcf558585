// Decodes fuzz input (argument_wire.hpp) into the tensor arguments of one call, each with
// its exact geometry computed in 128-bit arithmetic: the fuzzer's own account of where a
// tensor's elements lie, independent of the validator's, to judge what the validator accepts.
#pragma once

#include "argument_wire.hpp"

#include <dlpack/dlpack.h>
#include <deltakern/deltakern.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace deltakern::fuzz {

// Where a tensor's elements lie, exactly as long as the quantities stay far beyond int64's
// range (past 2^100 they saturate, which changes no judgement made with them).
struct Geometry {
  bool known = false;                     // the shape is readable and no size is negative
  bool empty = true;                      // some size is 0: no element at all
  __int128 lowest = 0, highest = 0;       // element offsets of the lowest and highest element
  __int128 first_byte = 0, end_byte = 0;  // their addresses [first, end), unwrapped
  __int128 elements = 0;
};
Geometry geometry_of(const DLTensor& t);

struct DecodedTensor {
  bool present = false;
  DLTensor dl{};
  std::vector<int64_t> shape, strides;
  std::vector<std::byte> buffer;  // its own memory (data kOwnBuffer), exactly its extent
  Geometry geometry;
  bool backed = false;  // every element lies inside a live buffer: its contents may be read
};

// Owns the tensors the argument structs point to; not movable, so the pointers stay valid.
class DecodedCall {
 public:
  explicit DecodedCall(std::span<const uint8_t> input);
  DecodedCall(const DecodedCall&) = delete;
  DecodedCall& operator=(const DecodedCall&) = delete;

  bool varlen = true;
  bool check_contents = false;
  std::array<DecodedTensor, kVarlenTensors> tensors;  // the op's first kUpdateTensors/kVarlenTensors

  size_t count() const { return varlen ? kVarlenTensors : kUpdateTensors; }
  CausalConv1dVarlenArgs varlen_args() const;
  CausalConv1dUpdateArgs update_args() const;

 private:
  const DLTensor* arg(size_t i) const { return tensors[i].present ? &tensors[i].dl : nullptr; }
  int32_t activation_ = 0;
  int64_t pad_slot_id_ = -1;
  std::optional<int64_t> max_seq_len_;
};

}  // namespace deltakern::fuzz
