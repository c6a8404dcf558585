// Typed tensors on a device with their DLTensor views, and host images of any DLTensor (a
// backend's result included) read by its own shape and strides. Everything here is sized
// for engine-sized calls: no per-element or per-byte side tables, elements decoded on demand.
#pragma once

#include "device.hpp"
#include "dtype.hpp"
#include "guard.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace deltakern::conformance {

int64_t numel(const DLTensor& t);
int64_t stride(const DLTensor& t, int dim);  // elements; compact row-major when strides is null

// Calls f(linear, offset) for every element of a view, in row-major order of `shape`; offset
// is in elements from element 0.
template <class F>
void for_each_element(std::span<const int64_t> shape, std::span<const int64_t> strides, F&& f) {
  const size_t rank = shape.size();
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n <= 0) return;
  if (rank == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  const int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t base = 0;
  for (int64_t linear = 0; linear < n; linear += inner) {
    for (int64_t k = 0; k < inner; ++k) f(linear + k, base + k * inner_stride);
    for (size_t d = rank - 1; d-- > 0;) {  // the odometer over the outer dimensions
      if (++idx[d] < shape[d]) {
        base += strides[d];
        break;
      }
      base -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Absolute addresses [lo, hi) that the view's elements occupy; empty for no elements.
struct AddressRange {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
  bool overlaps(const AddressRange& o) const { return !empty() && !o.empty() && lo < o.hi && o.lo < hi; }
};
AddressRange address_range(const DLTensor& t);

// A host copy of a tensor's bytes and where its elements lie in it. It owns its bytes, or
// views bytes someone else keeps alive (a snapshot taken before a call).
class HostImage {
 public:
  HostImage() = default;
  // `base`: byte offset of element 0 in `bytes`; strides in elements.
  HostImage(std::vector<std::byte> bytes, int64_t base, DType dtype, std::vector<int64_t> shape,
            std::vector<int64_t> strides);
  static HostImage view(const std::vector<std::byte>& bytes, int64_t base, DType dtype,
                        std::vector<int64_t> shape, std::vector<int64_t> strides);
  HostImage(const HostImage& other);
  HostImage& operator=(const HostImage& other);
  HostImage(HostImage&&) noexcept = default;
  HostImage& operator=(HostImage&&) noexcept = default;

  DType dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  const std::vector<int64_t>& strides() const noexcept { return strides_; }
  int64_t numel() const noexcept { return numel_; }
  const std::byte* data() const noexcept { return data_; }
  size_t byte_size() const noexcept { return bytes_size_; }

  // Byte offset in data() of the element with row-major index `linear`.
  int64_t offset_of(int64_t linear) const;
  uint32_t bits(int64_t linear) const { return bits_at_offset(offset_of(linear)); }
  double value(int64_t linear) const { return decode(dtype_, bits(linear)); }
  // By multi-index (rank <= 3; missing trailing indices are 0).
  uint32_t bits_at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0) const;
  double value_at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0) const {
    return decode(dtype_, bits_at(i0, i1, i2));
  }
  uint32_t bits_at_offset(int64_t byte_offset) const {
    const std::byte* p = data_ + byte_offset;
    if (size_ == 4) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    if (size_ == 2) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return h;
    }
    return static_cast<uint8_t>(*p);
  }
  // Every element's bits, row-major (for small tensors).
  std::vector<uint32_t> all_bits() const;

 private:
  std::vector<std::byte> owned_;
  const std::byte* data_ = nullptr;
  size_t bytes_size_ = 0;
  int64_t base_ = 0, numel_ = 0;
  size_t size_ = 0;
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_, strides_;
};

// Copies the bytes the view's elements span to the host (CUDA: sync the stream first).
HostImage image_of(const DLTensor& t);
// Every element's bits and values, row-major (for small tensors).
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
  // An optional argument: compact where present, none where not.
  static std::optional<TensorBuf> compact_if(bool present, DLDevice device, DType dtype,
                                             std::vector<int64_t> shape);
  TensorBuf(TensorBuf&& other) noexcept;
  TensorBuf& operator=(TensorBuf&&) = delete;
  TensorBuf(const TensorBuf&) = delete;
  TensorBuf& operator=(const TensorBuf&) = delete;
  ~TensorBuf() = default;

  const DLTensor* dl() const noexcept { return &dl_; }
  DType dtype() const noexcept { return dtype_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  const std::vector<int64_t>& strides() const noexcept { return strides_; }
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
  // Byte offset of element 0 from the allocation's start.
  int64_t base_bytes() const noexcept { return offset_ * static_cast<int64_t>(size_of(dtype_)); }
  // The element (row-major index) byte `byte` of the allocation belongs to; none for slack.
  std::optional<int64_t> element_at_byte(size_t byte) const;

  std::vector<std::byte> bytes() const;  // the whole allocation, slack included
  void set_bytes(std::span<const std::byte> bytes);
  // The whole allocation on the host, its elements addressable: a copy, or a view of a
  // snapshot of its bytes that the caller keeps alive.
  HostImage image() const;
  HostImage view_of(const std::vector<std::byte>& bytes) const;
  // Copies, into `image` (a copy of the allocation), the bytes of every element for which
  // keep(linear) holds from `from`: what an element-wise "only these may change" check needs.
  void copy_elements(std::vector<std::byte>& image, const std::vector<std::byte>& from,
                     const std::function<bool(int64_t linear)>& keep) const;

  std::vector<double> values() const { return read_values(dl_); }
  std::vector<uint32_t> bits() const { return read_bits(dl_); }
  // Writes every element (bits_of(linear) zero-extended); bytes outside the view keep theirs.
  void fill(const std::function<uint32_t(int64_t linear)>& bits_of);
  // Writes every element (rounded to the dtype once).
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
