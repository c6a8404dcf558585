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

std::vector<int64_t> shape_of(const DLTensor& t) { return {t.shape, t.shape + t.ndim}; }
std::vector<int64_t> strides_of(const DLTensor& t) {
  std::vector<int64_t> s(static_cast<size_t>(t.ndim));
  for (int d = 0; d < t.ndim; ++d) s[static_cast<size_t>(d)] = stride(t, d);
  return s;
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

AddressRange address_range(const DLTensor& t) {
  if (numel(t) <= 0) return {};
  int64_t lo = 0, hi = 0;  // element offsets of the lowest and highest element
  for (int d = 0; d < t.ndim; ++d) {
    const int64_t reach = stride(t, d) * (t.shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  const auto size = static_cast<int64_t>(element_size(t));
  const auto base = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  return {base + static_cast<uintptr_t>(lo * size), base + static_cast<uintptr_t>(hi * size + size)};
}

HostImage::HostImage(std::vector<std::byte> bytes, int64_t base, DType dtype, std::vector<int64_t> shape,
                     std::vector<int64_t> strides)
    : owned_(std::move(bytes)),
      data_(owned_.data()),
      bytes_size_(owned_.size()),
      base_(base),
      size_(size_of(dtype)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)) {
  numel_ = 1;
  for (int64_t s : shape_) numel_ *= s;
}

HostImage HostImage::view(const std::vector<std::byte>& bytes, int64_t base, DType dtype,
                          std::vector<int64_t> shape, std::vector<int64_t> strides) {
  HostImage image({}, base, dtype, std::move(shape), std::move(strides));
  image.data_ = bytes.data();
  image.bytes_size_ = bytes.size();
  return image;
}

HostImage::HostImage(const HostImage& other) { *this = other; }

HostImage& HostImage::operator=(const HostImage& other) {
  if (this == &other) return *this;
  const bool is_view = other.data_ != other.owned_.data();
  owned_ = other.owned_;
  data_ = is_view ? other.data_ : owned_.data();
  bytes_size_ = other.bytes_size_;
  base_ = other.base_;
  numel_ = other.numel_;
  size_ = other.size_;
  dtype_ = other.dtype_;
  shape_ = other.shape_;
  strides_ = other.strides_;
  return *this;
}

int64_t HostImage::offset_of(int64_t linear) const {
  int64_t off = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(shape_[d], 1);
    off += (linear % extent) * strides_[d];
    linear /= extent;
  }
  return base_ + off * static_cast<int64_t>(size_);
}

uint32_t HostImage::bits_at(int64_t i0, int64_t i1, int64_t i2) const {
  const int64_t idx[3] = {i0, i1, i2};
  int64_t off = 0;
  for (size_t d = 0; d < shape_.size() && d < 3; ++d) off += idx[d] * strides_[d];
  return bits_at_offset(base_ + off * static_cast<int64_t>(size_));
}

std::vector<uint32_t> HostImage::all_bits() const {
  std::vector<uint32_t> out(static_cast<size_t>(std::max<int64_t>(numel_, 0)));
  const auto size = static_cast<int64_t>(size_);
  for_each_element(shape_, strides_, [&](int64_t linear, int64_t off) {
    out[static_cast<size_t>(linear)] = load_bits(data_ + base_ + off * size, size_);
  });
  return out;
}

HostImage image_of(const DLTensor& t) {
  const DType dtype = from_dl(t.dtype);
  const AddressRange r = address_range(t);
  std::vector<std::byte> host(r.hi - r.lo);
  if (!host.empty()) copy_to_host(t.device, host.data(), reinterpret_cast<const void*>(r.lo), host.size());
  const auto first = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  return HostImage(std::move(host), static_cast<int64_t>(first - r.lo), dtype, shape_of(t), strides_of(t));
}

std::vector<uint32_t> read_bits(const DLTensor& t) { return image_of(t).all_bits(); }

std::vector<double> read_values(const DLTensor& t) {
  const HostImage image = image_of(t);
  std::vector<double> values(static_cast<size_t>(std::max<int64_t>(image.numel(), 0)));
  const auto bits = image.all_bits();
  for (size_t i = 0; i < values.size(); ++i) values[i] = decode(image.dtype(), bits[i]);
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

std::optional<TensorBuf> TensorBuf::compact_if(bool present, DLDevice device, DType dtype,
                                               std::vector<int64_t> shape) {
  if (!present) return std::nullopt;
  return compact(device, dtype, std::move(shape));
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

std::optional<int64_t> TensorBuf::element_at_byte(size_t byte) const {
  const auto size = static_cast<int64_t>(size_of(dtype_));
  int64_t rest = static_cast<int64_t>(byte) - base_bytes();
  if (rest < 0) return std::nullopt;
  rest /= size;
  // The suite's layouts nest (each stride spans the dimensions below it), so the element is
  // found by dividing by the strides from the largest down.
  std::vector<size_t> order;
  for (size_t d = 0; d < shape_.size(); ++d)
    if (shape_[d] > 1) order.push_back(d);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides_[a] > strides_[b]; });
  std::vector<int64_t> idx(shape_.size(), 0);
  for (size_t d : order) {
    idx[d] = rest / strides_[d];
    if (idx[d] >= shape_[d]) return std::nullopt;
    rest -= idx[d] * strides_[d];
  }
  if (rest != 0) return std::nullopt;
  int64_t linear = 0;
  for (size_t d = 0; d < shape_.size(); ++d) linear = linear * shape_[d] + idx[d];
  return linear;
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

HostImage TensorBuf::image() const { return HostImage(bytes(), base_bytes(), dtype_, shape_, strides_); }

HostImage TensorBuf::view_of(const std::vector<std::byte>& bytes) const {
  if (bytes.size() != memory_.size()) throw std::logic_error("TensorBuf::view_of: size mismatch");
  return HostImage::view(bytes, base_bytes(), dtype_, shape_, strides_);
}

void TensorBuf::copy_elements(std::vector<std::byte>& image, const std::vector<std::byte>& from,
                              const std::function<bool(int64_t linear)>& keep) const {
  const auto size = static_cast<int64_t>(size_of(dtype_));
  const int64_t base = base_bytes();
  for_each_element(shape_, strides_, [&](int64_t linear, int64_t off) {
    if (!keep(linear)) return;
    const auto at = static_cast<size_t>(base + off * size);
    std::memcpy(image.data() + at, from.data() + at, static_cast<size_t>(size));
  });
}

void TensorBuf::fill(const std::function<uint32_t(int64_t linear)>& bits_of) {
  const size_t size = size_of(dtype_);
  const int64_t base = base_bytes();
  const auto write = [&](std::byte* image) {
    for_each_element(shape_, strides_, [&](int64_t linear, int64_t off) {
      store_bits(image + base + off * static_cast<int64_t>(size), size, bits_of(linear));
    });
  };
  if (device_.device_type == kDLCPU) {  // host memory already: written where it lies
    write(static_cast<std::byte*>(memory_.get()));
    return;
  }
  auto host = bytes();
  write(host.data());
  set_bytes(host);
}

void TensorBuf::set_bits(std::span<const uint32_t> bits) {
  if (static_cast<int64_t>(bits.size()) != std::max<int64_t>(numel(), 0))
    throw std::logic_error("TensorBuf::set_bits: element count mismatch");
  fill([&](int64_t linear) { return bits[static_cast<size_t>(linear)]; });
}

void TensorBuf::set_values(std::span<const double> values) {
  if (static_cast<int64_t>(values.size()) != std::max<int64_t>(numel(), 0))
    throw std::logic_error("TensorBuf::set_values: element count mismatch");
  fill([&](int64_t linear) { return encode(dtype_, values[static_cast<size_t>(linear)]); });
}

}  // namespace deltakern::conformance
