// DLTensor geometry and names shared by validation, host services and messages.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltakern::detail {

// Strides in elements; NULL strides mean compact row-major (DLPack's convention).
inline int64_t stride_of(const DLTensor& t, int dim) noexcept {
  if (t.strides != nullptr) return t.strides[dim];
  int64_t stride = 1;
  for (int d = t.ndim - 1; d > dim; --d) stride *= t.shape[d];
  return stride;
}

inline int64_t numel(const DLTensor& t) noexcept {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

inline size_t element_bytes(DLDataType dtype) noexcept { return (size_t{dtype.bits} * dtype.lanes + 7) / 8; }

inline bool same_dtype(DLDataType a, DLDataType b) noexcept {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline constexpr DLDataType kFloat32{kDLFloat, 32, 1};
inline constexpr DLDataType kFloat16{kDLFloat, 16, 1};
inline constexpr DLDataType kBfloat16{kDLBfloat, 16, 1};
inline constexpr DLDataType kInt32{kDLInt, 32, 1};
inline constexpr DLDataType kUint8{kDLUInt, 8, 1};

// The bytes a tensor's elements occupy, [begin, end); empty for a tensor of no elements.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const noexcept { return begin == end; }
  bool overlaps(const ByteRange& other) const noexcept {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
};

inline ByteRange byte_range(const DLTensor& t) noexcept {
  if (numel(t) == 0) return {};
  int64_t lowest = 0, highest = 0;  // element offsets; strides may be negative
  for (int d = 0; d < t.ndim; ++d) {
    const int64_t reach = (t.shape[d] - 1) * stride_of(t, d);
    (reach < 0 ? lowest : highest) += reach;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  const auto bytes = static_cast<int64_t>(element_bytes(t.dtype));
  return {base + static_cast<uintptr_t>(lowest * bytes),
          base + static_cast<uintptr_t>((highest + 1) * bytes)};
}

inline bool same_device(DLDevice a, DLDevice b) noexcept {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

// True when a and b share elements: same device and overlapping byte ranges.
inline bool memory_overlaps(const DLTensor& a, const DLTensor& b) noexcept {
  return same_device(a.device, b.device) && byte_range(a).overlaps(byte_range(b));
}

// Memory the host can read directly.
inline bool host_accessible(int32_t device_type) noexcept {
  return device_type == kDLCPU || device_type == kDLCUDAHost;
}

// "float32", "bfloat16", "int32", "uint8"; others spelled out.
std::string dtype_name(DLDataType dtype);           // plugin::dtype_name: one spelling everywhere
std::string device_type_name(int32_t device_type);  // plugin::device_type_name
// "cpu:0", "cuda:1".
std::string device_name(DLDevice device);

}  // namespace deltakern::detail
