#include "tensor_decoder.hpp"

#include <algorithm>
#include <cstring>

namespace deltakern::fuzz {
namespace {

// Reads fields front to back; past the end every field is zero (argument_wire.hpp).
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> input) : input_(input) {}

  template <class T>
  T read() {
    T value{};
    const size_t n = std::min(sizeof(T), input_.size() - pos_);
    std::memcpy(&value, input_.data() + pos_, n);  // little-endian hosts only, as CI's is
    pos_ += n;
    return value;
  }

  std::span<const uint8_t> bytes(size_t n) {
    n = std::min(n, input_.size() - pos_);
    const auto out = input_.subspan(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  std::span<const uint8_t> input_;
  size_t pos_ = 0;
};

// Buffers bigger than this are not allocated: the tensor gets a pointer to nothing.
constexpr __int128 kMaxBufferBytes = 1 << 20;

// A pointer that is never dereferenced (no argument check reads data), aligned like a
// real allocation so that only its validity differs.
void* dangling_pointer() { return reinterpret_cast<void*>(uintptr_t{1} << 44); }

__int128 element_bytes(DLDataType t) { return (__int128{t.bits} * t.lanes + 7) / 8; }

__int128 address_of(const void* p) { return static_cast<__int128>(reinterpret_cast<uintptr_t>(p)); }

// Geometry arithmetic saturates here: far past any int64 quantity, so the judgement of a
// shape (is it addressable?) is unchanged, and 128 bits never overflow.
constexpr __int128 kHuge = __int128{1} << 100;
__int128 saturate(__int128 v) { return v > kHuge ? kHuge : v < -kHuge ? -kHuge : v; }
__int128 saturating_mul(__int128 a, __int128 b) {  // |a|, |b| <= kHuge
  if (a == 0 || b == 0) return 0;
  const __int128 magnitude_a = a < 0 ? -a : a, magnitude_b = b < 0 ? -b : b;
  if (magnitude_a > kHuge / magnitude_b) return (a < 0) != (b < 0) ? -kHuge : kHuge;
  return saturate(a * b);
}

struct DataChoice {
  uint8_t mode = kNullData, other = 0;
  uint32_t offset = 0;
  std::span<const uint8_t> content;
};

}  // namespace

Geometry geometry_of(const DLTensor& t) {
  Geometry g;
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) return g;
  __int128 compact = 1;
  g.elements = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const int64_t size = t.shape[d];
    if (size < 0) return g;
    const __int128 stride = t.strides != nullptr ? __int128{t.strides[d]} : compact;
    compact = saturating_mul(compact, size);
    g.elements = saturating_mul(g.elements, size);
    if (size == 0) continue;
    const __int128 reach = saturating_mul(size - 1, stride);
    __int128& end = reach < 0 ? g.lowest : g.highest;
    end = saturate(end + reach);
  }
  g.known = true;
  g.empty = g.elements == 0;
  const __int128 base = address_of(t.data) + t.byte_offset;
  g.first_byte = base + g.lowest * element_bytes(t.dtype);
  g.end_byte = base + (g.highest + 1) * element_bytes(t.dtype);
  return g;
}

DecodedCall::DecodedCall(std::span<const uint8_t> input) {
  ByteReader in(input);
  varlen = in.read<uint8_t>() % 2 == 0;
  const auto flags = in.read<uint8_t>();
  check_contents = (flags & kCheckContents) != 0;
  activation_ = in.read<int32_t>();
  pad_slot_id_ = in.read<int64_t>();
  const auto max_seq_len = in.read<int64_t>();
  if ((flags & kMaxSeqLenGiven) != 0) max_seq_len_ = max_seq_len;

  std::array<DataChoice, kVarlenTensors> choices;
  for (size_t i = 0; i < count(); ++i) {
    DecodedTensor& t = tensors[i];
    t.present = in.read<uint8_t>() != 0;
    if (!t.present) continue;
    const auto ndim = in.read<int8_t>();
    t.dl.dtype.code = in.read<uint8_t>();
    t.dl.dtype.bits = in.read<uint8_t>();
    t.dl.dtype.lanes = in.read<uint16_t>();
    t.dl.device.device_type = static_cast<DLDeviceType>(in.read<int32_t>());
    t.dl.device.device_id = in.read<int32_t>();
    const auto geometry = in.read<uint8_t>() % 3;
    // Exactly ndim entries, as DLPack promises, so that reading past them shows; an ndim past
    // kMaxRank is cut to it so that the claim and the array stay in step.
    t.dl.ndim = std::min<int>(ndim, kMaxRank);
    t.shape.resize(std::max(t.dl.ndim, 0));
    for (auto& s : t.shape) s = in.read<int64_t>();
    if (geometry == kExplicitStrides) {
      t.strides.resize(t.shape.size());
      for (auto& s : t.strides) s = in.read<int64_t>();
    }
    t.dl.shape = geometry == kNullShape || t.shape.empty() ? nullptr : t.shape.data();
    t.dl.strides = t.strides.empty() ? nullptr : t.strides.data();
    t.dl.byte_offset = in.read<uint64_t>();
    DataChoice& c = choices[i];
    c.mode = in.read<uint8_t>() % 4;
    c.other = in.read<uint8_t>();
    c.offset = in.read<uint32_t>();
    c.content = in.bytes(in.read<uint16_t>());
  }

  // Own buffers first, exactly the extent, so that other tensors may point into them.
  for (size_t i = 0; i < count(); ++i) {
    DecodedTensor& t = tensors[i];
    if (!t.present || choices[i].mode != kOwnBuffer) continue;
    const Geometry g = geometry_of(t.dl);  // data is still null: offsets from the base
    const __int128 bytes = g.end_byte - g.first_byte;
    if (!g.known || g.empty || bytes <= 0 || bytes > kMaxBufferBytes) continue;
    t.buffer.resize(static_cast<size_t>(bytes));
    const auto& content = choices[i].content;
    for (size_t b = 0; b < t.buffer.size() && !content.empty(); ++b)
      t.buffer[b] = static_cast<std::byte>(content[b % content.size()]);
    // Chosen so that the lowest element is the buffer's first byte; the pointer itself may
    // lie outside the buffer, as DLPack allows with byte_offset.
    t.dl.data = reinterpret_cast<void*>(static_cast<uintptr_t>(address_of(t.buffer.data()) - g.first_byte));
  }
  for (size_t i = 0; i < count(); ++i) {
    DecodedTensor& t = tensors[i];
    if (!t.present) continue;
    const DataChoice& c = choices[i];
    if (c.mode == kOtherBuffer) {
      const auto& other = tensors[c.other % count()].buffer;
      t.dl.data = other.empty() ? dangling_pointer()
                                : const_cast<std::byte*>(other.data()) + c.offset % (other.size() + 1);
    } else if (c.mode == kDanglingPointer || (c.mode == kOwnBuffer && t.buffer.empty())) {
      t.dl.data = dangling_pointer();
    }
    t.geometry = geometry_of(t.dl);
    t.backed = t.geometry.known && t.geometry.empty;
    for (size_t j = 0; j < count() && !t.backed; ++j) {
      const auto& buffer = tensors[j].buffer;
      t.backed = !buffer.empty() && t.geometry.first_byte >= address_of(buffer.data()) &&
                 t.geometry.end_byte <= address_of(buffer.data()) + static_cast<__int128>(buffer.size());
    }
  }
}

CausalConv1dVarlenArgs DecodedCall::varlen_args() const {
  CausalConv1dVarlenArgs a;
  a.x = arg(0);
  a.weight = arg(1);
  a.bias = arg(2);
  a.conv_states = arg(3);
  a.query_start_loc = arg(4);
  a.cache_indices = arg(5);
  a.has_initial_state = arg(6);
  a.activation = static_cast<Activation>(activation_);
  a.pad_slot_id = pad_slot_id_;
  a.max_seq_len = max_seq_len_;
  return a;
}

CausalConv1dUpdateArgs DecodedCall::update_args() const {
  CausalConv1dUpdateArgs a;
  a.x = arg(0);
  a.conv_state = arg(1);
  a.weight = arg(2);
  a.bias = arg(3);
  a.conv_state_indices = arg(4);
  a.cache_seqlens = arg(5);
  a.activation = static_cast<Activation>(activation_);
  a.pad_slot_id = pad_slot_id_;
  return a;
}

}  // namespace deltakern::fuzz
