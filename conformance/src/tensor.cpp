#include "tensor.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace deltakern::conformance {

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

int64_t stride(const DLTensor& t, int dim) {
  if (t.strides != nullptr) return t.strides[dim];
  int64_t s = 1;
  for (int d = t.ndim - 1; d > dim; --d) s *= t.shape[d];
  return s;
}

namespace {

size_t element_size(const DLTensor& t) { return (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8; }

// Row-major walk over the multi-index, adding strides as it goes.
std::vector<int64_t> offsets_in_elements(const DLTensor& t) {
  const int64_t n = numel(t);
  std::vector<int64_t> out;
  if (n <= 0) return out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(static_cast<size_t>(t.ndim), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(off);
    for (int d = t.ndim - 1; d >= 0; --d) {
      const auto ud = static_cast<size_t>(d);
      if (++idx[ud] < t.shape[d]) {
        off += stride(t, d);
        break;
      }
      off -= stride(t, d) * (t.shape[d] - 1);
      idx[ud] = 0;
    }
  }
  return out;
}

// Copies the bytes the view spans to the host; `base` receives the first one's offset.
std::vector<std::byte> fetch_span(const DLTensor& t, const std::vector<int64_t>& offsets, int64_t& base) {
  base = 0;
  if (offsets.empty()) return {};
  const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
  base = *lo;
  const size_t bytes = static_cast<size_t>(*hi - *lo) + element_size(t);
  std::vector<std::byte> host(bytes);
  copy_to_host(t.device, host.data(), static_cast<const char*>(t.data) + t.byte_offset + base, bytes);
  return host;
}

uint32_t load_bits(const std::byte* p, size_t size) {
  uint32_t v = 0;
  if (size == 1) v = static_cast<uint8_t>(*p);
  if (size == 2) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    v = h;
  }
  if (size == 4) std::memcpy(&v, p, 4);
  return v;
}

void store_bits(std::byte* p, size_t size, uint32_t v) {
  if (size == 1) *p = static_cast<std::byte>(v & 0xFFu);
  if (size == 2) {
    const auto h = static_cast<uint16_t>(v);
    std::memcpy(p, &h, 2);
  }
  if (size == 4) std::memcpy(p, &v, 4);
}

}  // namespace

std::vector<int64_t> element_byte_offsets(const DLTensor& t) {
  auto offs = offsets_in_elements(t);
  const auto size = static_cast<int64_t>(element_size(t));
  for (auto& o : offs) o *= size;
  return offs;
}

AddressRange address_range(const DLTensor& t) {
  const auto offs = element_byte_offsets(t);
  if (offs.empty()) return {};
  const auto [lo, hi] = std::minmax_element(offs.begin(), offs.end());
  const auto base = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  return {base + static_cast<uintptr_t>(*lo), base + static_cast<uintptr_t>(*hi) + element_size(t)};
}

std::vector<uint32_t> read_bits(const DLTensor& t) {
  const auto offs = element_byte_offsets(t);
  int64_t base = 0;
  const auto host = fetch_span(t, offs, base);
  const size_t size = element_size(t);
  std::vector<uint32_t> bits;
  bits.reserve(offs.size());
  for (int64_t o : offs) bits.push_back(load_bits(host.data() + (o - base), size));
  return bits;
}

std::vector<double> read_values(const DLTensor& t) {
  const DType dtype = from_dl(t.dtype);
  const auto bits = read_bits(t);
  std::vector<double> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = decode(dtype, bits[i]);
  return values;
}

std::string index_string(std::span<const int64_t> shape, int64_t linear) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(shape[d], 1);
    idx[d] = linear % extent;
    linear /= extent;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

TensorBuf::TensorBuf(DLDevice device, DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                     int64_t offset, int64_t extra, bool offset_in_byte_offset)
    : device_(device),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      offset_in_byte_offset_(offset_in_byte_offset) {
  if (shape_.size() != strides_.size()) throw std::logic_error("TensorBuf: shape and strides differ in rank");
  int64_t last = offset_;  // the furthest element the view reaches
  bool empty = false;
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 0) empty = true;
    if (shape_[d] > 0 && strides_[d] < 0) throw std::logic_error("TensorBuf: negative strides are not used");
    if (shape_[d] > 0) last += (shape_[d] - 1) * strides_[d];
  }
  const int64_t elements = (empty ? offset_ : last + 1) + extra;
  memory_ = GuardedMemory(device_, static_cast<size_t>(std::max<int64_t>(elements, 1)) * size_of(dtype_));
  // A fixed pattern everywhere, slack included, so every byte has a known value to compare
  // (the guard zones around it hold their own).
  const std::vector<std::byte> pattern(memory_.size(), std::byte{0xA5});
  copy_from_host(device_, memory_.get(), pattern.data(), pattern.size());
  bind();
}

TensorBuf TensorBuf::compact(DLDevice device, DType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  return TensorBuf(device, dtype, std::move(shape), std::move(strides));
}

TensorBuf::TensorBuf(TensorBuf&& other) noexcept
    : device_(other.device_),
      dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      strides_(std::move(other.strides_)),
      offset_(other.offset_),
      offset_in_byte_offset_(other.offset_in_byte_offset_),
      memory_(std::move(other.memory_)) {
  bind();
}

void TensorBuf::bind() noexcept {
  const auto byte_offset = static_cast<uint64_t>(offset_) * size_of(dtype_);
  dl_.data = static_cast<char*>(memory_.get()) + (offset_in_byte_offset_ ? 0 : byte_offset);
  dl_.byte_offset = offset_in_byte_offset_ ? byte_offset : 0;
  dl_.device = device_;
  dl_.ndim = static_cast<int32_t>(shape_.size());
  dl_.dtype = to_dl(dtype_);
  dl_.shape = shape_.data();
  dl_.strides = strides_.data();
}

int64_t TensorBuf::numel() const { return conformance::numel(dl_); }

std::vector<int64_t> TensorBuf::alloc_offsets() const {
  auto offs = element_byte_offsets(dl_);
  const auto base = static_cast<int64_t>(offset_ * static_cast<int64_t>(size_of(dtype_)));
  for (auto& o : offs) o += base;
  return offs;
}

std::vector<std::byte> TensorBuf::bytes() const {
  std::vector<std::byte> out(memory_.size());
  copy_to_host(device_, out.data(), memory_.get(), out.size());
  return out;
}

void TensorBuf::set_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != memory_.size()) throw std::logic_error("TensorBuf::set_bytes: size mismatch");
  copy_from_host(device_, memory_.get(), bytes.data(), bytes.size());
}

void TensorBuf::set_bits(std::span<const uint32_t> bits) {
  const auto offs = alloc_offsets();
  if (bits.size() != offs.size()) throw std::logic_error("TensorBuf::set_bits: element count mismatch");
  auto host = bytes();
  for (size_t i = 0; i < offs.size(); ++i) store_bits(host.data() + offs[i], size_of(dtype_), bits[i]);
  set_bytes(host);
}

void TensorBuf::set_values(std::span<const double> values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = encode(dtype_, values[i]);
  set_bits(bits);
}

}  // namespace deltakern::conformance
