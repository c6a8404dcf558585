// Typed tensors on a device with their DLTensor views, and reading any DLTensor (a
// backend's result included) back to the host by its own shape and strides.
#pragma once

#include "device.hpp"
#include "dtype.hpp"
#include "guard.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deltakern::conformance {

int64_t numel(const DLTensor& t);
int64_t stride(const DLTensor& t, int dim);  // elements; compact row-major when strides is null
// Byte offsets of every element, in row-major order of the shape, from data + byte_offset.
std::vector<int64_t> element_byte_offsets(const DLTensor& t);

// Absolute addresses [lo, hi) that the view's elements occupy; empty for no elements.
struct AddressRange {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
  bool overlaps(const AddressRange& o) const { return !empty() && !o.empty() && lo < o.hi && o.lo < hi; }
};
AddressRange address_range(const DLTensor& t);

// The raw bits (zero-extended) and the values of every element, row-major.
std::vector<uint32_t> read_bits(const DLTensor& t);
std::vector<double> read_values(const DLTensor& t);

// "[3, 17]": the multi-index of row-major element `linear` of `shape`.
std::string index_string(std::span<const int64_t> shape, int64_t linear);

// An owned allocation and one view of it. Not copyable; moves keep the view valid.
class TensorBuf {
 public:
  // Shape and strides in elements. `offset`: elements from the allocation's start to
  // element 0, carried in the data pointer or, with `offset_in_byte_offset`, in
  // DLTensor::byte_offset (both are valid DLPack). `extra`: elements allocated past the
  // last one the view reaches (slack that must stay untouched).
  TensorBuf(DLDevice device, DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
            int64_t offset = 0, int64_t extra = 0, bool offset_in_byte_offset = false);
  static TensorBuf compact(DLDevice device, DType dtype, std::vector<int64_t> shape);
  TensorBuf(TensorBuf&& other) noexcept;
  TensorBuf& operator=(TensorBuf&&) = delete;
  TensorBuf(const TensorBuf&) = delete;
  TensorBuf& operator=(const TensorBuf&) = delete;
  ~TensorBuf() = default;

  const DLTensor* dl() const noexcept { return &dl_; }
  DType dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  int64_t numel() const;
  size_t alloc_bytes() const noexcept { return memory_.size(); }
  // The whole allocation's addresses, slack included.
  AddressRange allocation() const noexcept {
    const auto lo = reinterpret_cast<uintptr_t>(memory_.get());
    return {lo, lo + memory_.size()};
  }
  // The allocation with its guard zones: memory no result may share.
  AddressRange with_guards() const noexcept {
    const AddressRange a = allocation();
    return {a.lo - kGuardBytes, a.hi + kGuardBytes};
  }
  // Empty when nothing was written into the guard zones around the allocation.
  std::string check_guards(std::string_view name) const { return memory_.check(name); }
  // Byte offsets of the view's elements from the allocation's start, row-major.
  std::vector<int64_t> alloc_offsets() const;

  std::vector<std::byte> bytes() const;  // the whole allocation, slack included
  void set_bytes(std::span<const std::byte> bytes);
  std::vector<double> values() const { return read_values(dl_); }
  std::vector<uint32_t> bits() const { return read_bits(dl_); }
  // Writes every element (rounded to the dtype once); bytes outside the view keep theirs.
  void set_values(std::span<const double> values);
  void set_bits(std::span<const uint32_t> bits);

 private:
  void bind() noexcept;
  DLDevice device_;
  DType dtype_;
  std::vector<int64_t> shape_, strides_;
  int64_t offset_;
  bool offset_in_byte_offset_;
  GuardedMemory memory_;
  DLTensor dl_{};
};

}  // namespace deltakern::conformance
