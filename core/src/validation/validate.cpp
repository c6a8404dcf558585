#include "validation/validate.hpp"

#include <deltakern/plugin_sdk.hpp>

#include "services/dlpack_util.hpp"
#include "services/host_services.hpp"

#include <deltakern/op_schemas.h>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace deltakern::detail {
namespace {

std::string shape_text(const DLTensor& t) {
  std::vector<int64_t> dims(t.shape, t.shape + t.ndim);
  return fmt::format("({})", fmt::join(dims, ", "));
}

std::string strides_text(const DLTensor& t) {
  // Compact strides are products of the sizes, which may not fit int64 in a rejected call.
  if (t.strides == nullptr) return "none (compact)";
  std::vector<int64_t> strides;
  for (int d = 0; d < t.ndim; ++d) strides.push_back(stride_of(t, d));
  return fmt::format("({})", fmt::join(strides, ", "));
}

bool is_float_type(DLDataType t) {
  return same_dtype(t, kFloat32) || same_dtype(t, kFloat16) || same_dtype(t, kBfloat16);
}

// A tensor argument's geometry, read once (strides resolved, byte range computed) so that
// every later check is a load and a compare: these checks run on every call.
struct View {
  const DLTensor* t = nullptr;  // null: an omitted optional argument
  ByteRange range;              // empty for an omitted one
  int64_t shape[3], stride[3];  // the first ndim are set
};

// The checks of one call. The success path is loads and compares; messages are built only
// in reject(), kept out of line so the hot path stays small.
class Checker {
 public:
  explicit Checker(const char* op) : op_(op) {}

  template <class... Args>
  [[noreturn, gnu::cold, gnu::noinline]] void reject(const char* argument, fmt::format_string<Args...> format,
                                                     Args&&... args) const {
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: {}: {}", op_, argument, fmt::format(format, std::forward<Args>(args)...)));
  }

  // Presence and rank, then the invariants every tensor argument shares.
  template <int Rank>
  [[gnu::always_inline]] View tensor(const char* name, const DLTensor* t, const char* dims) const {
    if (t == nullptr) [[unlikely]]
      reject(name, "expected a tensor, got none");
    if (t->ndim != Rank) [[unlikely]]
      reject(name, "expected {} dimension{} {}, got {}", Rank, Rank == 1 ? "" : "s", dims, t->ndim);
    return read<Rank>(name, *t);
  }

  // The rank is checked by the caller; as a template parameter it unrolls the loop.
  template <int Rank>
  [[gnu::always_inline]] View read(const char* name, const DLTensor& t) const {
    static_assert(Rank >= 1 && Rank <= 3);
    if (t.shape == nullptr) [[unlikely]]
      reject(name, "expected a shape, got none");
    device_type(name, t.device);
    View v;
    v.t = &t;
    // Sizes and strides come from the caller: every product and sum is checked, since a
    // wrapped one would make a huge tensor look small (or empty) to every later check.
    int64_t compact_stride = 1, signs = 0, elements = 1, highest = 0;
    bool overflow = false, empty = false;
    for (int d = Rank - 1; d >= 0; --d) {
      const int64_t size = t.shape[d];
      const int64_t stride = t.strides != nullptr ? t.strides[d] : compact_stride;
      overflow |= __builtin_mul_overflow(compact_stride, size, &compact_stride);
      v.shape[d] = size;
      v.stride[d] = stride;
      signs |= size | stride;
      empty |= size == 0;
      overflow |= __builtin_mul_overflow(elements, size, &elements);
      int64_t last = 0, reach = 0;
      overflow |= __builtin_sub_overflow(size, 1, &last);
      overflow |= __builtin_mul_overflow(last, stride, &reach);
      overflow |= __builtin_add_overflow(highest, reach, &highest);
    }
    if (signs < 0) [[unlikely]]
      negative(name, t);
    // Backends form data + byte_offset even for an empty tensor: it must not wrap either.
    uintptr_t base = 0;
    const bool base_wraps = __builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, &base);
    if (!empty) {
      if (t.data == nullptr) [[unlikely]]
        reject(name, "expected data, got a null pointer");
      const auto element = static_cast<uintptr_t>(element_bytes(t.dtype));
      uintptr_t bytes = 0, end = 0;
      overflow |= base_wraps;
      overflow |= __builtin_mul_overflow(static_cast<uint64_t>(highest) + 1, element, &bytes);
      overflow |= __builtin_add_overflow(base, bytes, &end);
      if (overflow) [[unlikely]]
        too_large(name, t);
      // A kernel loads whole elements; a misaligned one faults on a GPU. (A dtype of zero bits has
      // no alignment to check: the dtype checks reject it.)
      if (element > 1 && base % element != 0) [[unlikely]]
        reject(
            name,
            "expected data aligned to its {}-byte elements ({}), got address 0x{:x} (data + byte_offset {})",
            element, dtype_name(t.dtype), base, t.byte_offset);
      v.range = {base, end};
    } else if (base_wraps && t.data != nullptr) [[unlikely]] {
      too_large(name, t);
    }
    return v;
  }

  // DLPack is C: a caller may store any int in the enum field, and C++ may not read a value
  // outside the enum's range as the enum. So the field is read as an int, and a value that
  // names no DLPack device is rejected before anything reads it as a DLDeviceType.
  [[gnu::always_inline]] void device_type(const char* name, const DLDevice& device) const {
    static_assert(sizeof(DLDeviceType) == sizeof(int32_t));
    int32_t type = 0;
    std::memcpy(&type, &device.device_type, sizeof type);
    constexpr uint32_t known = 1u << kDLCPU | 1u << kDLCUDA | 1u << kDLCUDAHost | 1u << kDLOpenCL |
                               1u << kDLVulkan | 1u << kDLMetal | 1u << kDLVPI | 1u << kDLROCM |
                               1u << kDLROCMHost | 1u << kDLExtDev | 1u << kDLCUDAManaged;
    if (static_cast<uint32_t>(type) >= 32 || (known >> type & 1u) == 0) [[unlikely]]
      reject(name, "expected a DLPack device type (DLDeviceType), got device_type {}", type);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void too_large(const char* name, const DLTensor& t) const {
    reject(name,
           "expected a shape and strides whose extent fits the address space, got shape {} with strides {}",
           shape_text(t), strides_text(t));
  }

  [[noreturn, gnu::cold, gnu::noinline]] void negative(const char* name, const DLTensor& t) const {
    for (int d = 0; d < t.ndim; ++d)
      if (t.shape[d] < 0) reject(name, "expected non-negative sizes, got {}", shape_text(t));
    reject(name, "expected non-negative strides, got {}", strides_text(t));
  }

  [[gnu::always_inline]] void on_device_of_x(const char* name, const DLTensor& t, const DLTensor& x) const {
    if (!same_device(t.device, x.device)) [[unlikely]]
      reject(name, "expected a tensor on {} (x's device), got {}", device_name(x.device),
             device_name(t.device));
  }

  [[gnu::always_inline]] void dtype_x_or_f32(const char* name, const DLTensor& t, DLDataType x) const {
    if (same_dtype(t.dtype, x) || same_dtype(t.dtype, kFloat32)) [[likely]]
      return;
    if (same_dtype(x, kFloat32)) reject(name, "expected dtype float32, got {}", dtype_name(t.dtype));
    reject(name, "expected dtype {} (x's) or float32, got {}", dtype_name(x), dtype_name(t.dtype));
  }

  void float_x(const DLTensor& x) const {
    if (!is_float_type(x.dtype)) [[unlikely]]
      reject("x", "expected dtype float32, float16 or bfloat16, got {}", dtype_name(x.dtype));
    if (x.device.device_id < 0) [[unlikely]]
      reject("x", "expected a device id >= 0, got {}", device_name(x.device));
  }

  // An index or mask tensor: (entries) of `dtype`, on x's device, contiguous. entries < 0:
  // any length.
  [[gnu::always_inline]] View index(const char* name, const DLTensor* t, DLDataType dtype, int64_t entries,
                                    const DLTensor& x, const char* dims) const {
    if (t == nullptr) [[unlikely]]
      reject(name, "expected a tensor, got none");
    if (t->ndim != 1) [[unlikely]]
      reject(name, "expected 1 dimension {}, got {}", fmt::format(fmt::runtime(dims), entries), t->ndim);
    View v = read<1>(name, *t);
    on_device_of_x(name, *t, x);
    if (!same_dtype(t->dtype, dtype)) [[unlikely]]
      reject(name, "expected dtype {}, got {}", dtype_name(dtype), dtype_name(t->dtype));
    if (entries >= 0 && v.shape[0] != entries) [[unlikely]]
      reject(name, "expected shape {}, got {}", fmt::format(fmt::runtime(dims), entries), shape_text(*t));
    if (v.shape[0] > 1 && v.stride[0] != 1) [[unlikely]]
      reject(name, "expected a contiguous tensor (stride 1), got stride {}", v.stride[0]);
    return v;
  }

  [[gnu::always_inline]] View weight(const DLTensor* w, const DLTensor& x, int64_t dim) const {
    View v = tensor<2>("weight", w, "(D, W)");
    on_device_of_x("weight", *w, x);
    if (v.shape[0] != dim) [[unlikely]]
      reject("weight", "expected shape (D={}, W) with D matching x, got {}", dim, shape_text(*w));
    if (v.shape[1] < 1) [[unlikely]]
      reject("weight", "expected width W >= 1, got shape {}", shape_text(*w));
    dtype_x_or_f32("weight", *w, x.dtype);
    return v;
  }

  [[gnu::always_inline]] View bias(const DLTensor* b, const DLTensor& x, int64_t dim) const {
    View v;
    if (b == nullptr) return v;
    v = tensor<1>("bias", b, "(D)");
    on_device_of_x("bias", *b, x);
    if (v.shape[0] != dim) [[unlikely]]
      reject("bias", "expected shape (D={}), got {}", dim, shape_text(*b));
    dtype_x_or_f32("bias", *b, x.dtype);
    return v;
  }

  // (lines, D, S) with S >= W-1.
  [[gnu::always_inline]] View states(const char* name, const DLTensor* s, const DLTensor& x, int64_t dim,
                                     int64_t width) const {
    View v = tensor<3>(name, s, "(lines, D, S)");
    on_device_of_x(name, *s, x);
    if (v.shape[1] != dim) [[unlikely]]
      reject(name, "expected shape (lines, D={}, S) with D matching x, got {}", dim, shape_text(*s));
    if (v.shape[0] < 1) [[unlikely]]
      reject(name, "expected at least 1 line, got {}", shape_text(*s));
    if (v.shape[2] < width - 1) [[unlikely]]
      reject(name, "expected state length S >= W-1 = {}, got S={}", width - 1, v.shape[2]);
    dtype_x_or_f32(name, *s, x.dtype);
    return v;
  }

  void identity_lines(const char* states_name, const char* indices_name, int64_t lines, int64_t batch) const {
    if (lines < batch) [[unlikely]]
      reject(states_name, "expected at least batch={} lines ({} is none: sequence b uses line b), got {}",
             batch, indices_name, lines);
  }

  // The (channel, time) pair of x: time-contiguous, or channel-last as a slice of a fused
  // projection is; the rule, degenerate extents included, is the SDK's plugin::layout_of, which
  // the plugins use too.
  [[gnu::always_inline]] Layout layout(const View& x, int channel_dim, const char* name = "x") const {
    const int time_dim = channel_dim + 1;
    const int64_t dim = x.shape[channel_dim];
    switch (plugin::layout_of(dim, x.shape[time_dim], x.stride[channel_dim], x.stride[time_dim])) {
      case DK_LAYOUT_TIME_CONTIGUOUS:
        return Layout::time_contiguous;
      case DK_LAYOUT_CHANNEL_LAST:
        return Layout::channel_last;
      default:
        bad_layout(name, *x.t, channel_dim, dim);
    }
  }

  [[noreturn, gnu::cold, gnu::noinline]] void bad_layout(const char* name, const DLTensor& x, int channel_dim,
                                                         int64_t dim) const {
    reject(name,
           "expected time-contiguous (stride({}) == 1) or channel-last (stride({}) == 1, stride({}) >= D={}) "
           "layout, "
           "got strides {}",
           channel_dim + 1, channel_dim, channel_dim + 1, dim, strides_text(x));
  }

  // x may be written in place and the states are, so no two of their elements may share
  // memory (a broadcast stride of 0 is the usual way to get that wrong). A sufficient
  // test: in order of stride, each stride reaches past the extent of the dimensions below.
  [[gnu::always_inline]] void no_self_overlap(const char* name, const View& v) const {
    if (v.range.empty()) return;
    int64_t strides[3], sizes[3];
    int n = 0;
    for (int d = 0; d < v.t->ndim; ++d) {
      if (v.shape[d] <= 1) continue;
      int i = n++;
      for (; i > 0 && strides[i - 1] > v.stride[d]; --i) {
        strides[i] = strides[i - 1];
        sizes[i] = sizes[i - 1];
      }
      strides[i] = v.stride[d];
      sizes[i] = v.shape[d];
    }
    int64_t extent = 1;
    for (int i = 0; i < n; ++i) {
      if (strides[i] < extent) [[unlikely]]
        reject(name, "expected elements that do not overlap, got shape {} with strides {}", shape_text(*v.t),
               strides_text(*v.t));
      extent = strides[i] * sizes[i];
    }
  }

  // x and the states are written; no read-only argument may share memory with them, nor
  // they with each other. Every tensor is on x's device by now, so overlapping byte ranges
  // mean shared memory. Tested without branches; the cold path finds which pair it was.
  template <size_t N>
  [[gnu::always_inline]] void apart(const std::pair<const char*, const View*> (&read_only)[N], const View& x,
                                    const char* states_name, const View& states) const {
    bool shared = touches(states.range, x.range);
    for (const auto& entry : read_only)
      shared |= touches(entry.second->range, x.range) | touches(entry.second->range, states.range);
    if (shared) [[unlikely]]
      shared_memory(read_only, N, x, states_name, states);
  }

  // An omitted or empty tensor's range is {0, 0}, which touches nothing.
  static bool touches(const ByteRange& a, const ByteRange& b) {
    return static_cast<bool>(static_cast<int>(a.begin < b.end) & static_cast<int>(b.begin < a.end));
  }

  [[noreturn, gnu::cold, gnu::noinline]] void shared_memory(
      const std::pair<const char*, const View*>* read_only, size_t n, const View& x, const char* states_name,
      const View& states) const {
    if (touches(states.range, x.range))
      reject(states_name, "expected memory apart from x, got overlapping byte ranges");
    for (size_t i = 0; i < n; ++i) {
      const auto& [name, v] = read_only[i];
      if (touches(v->range, x.range))
        reject(name, "expected memory apart from x, got overlapping byte ranges");
      if (touches(v->range, states.range))
        reject(name, "expected memory apart from {}, got overlapping byte ranges", states_name);
    }
    reject(states_name, "expected memory apart from x, got overlapping byte ranges");
  }

  // An out-variant's out: x's shape, dtype, device and layout, its elements distinct; its own
  // strides and alignment otherwise.
  [[gnu::always_inline]] View out(const DLTensor* o, const View& x, int channel_dim, Layout x_layout) const {
    if (o == nullptr) [[unlikely]]
      reject("out", "expected a tensor, got none");
    if (o->ndim != x.t->ndim) [[unlikely]]
      reject("out", "expected {} dimensions (x's shape {}), got {}", x.t->ndim, shape_text(*x.t), o->ndim);
    const View v = o->ndim == 3 ? read<3>("out", *o) : read<2>("out", *o);
    for (int d = 0; d < o->ndim; ++d)
      if (v.shape[d] != x.shape[d]) [[unlikely]]
        reject("out", "expected x's shape {}, got {}", shape_text(*x.t), shape_text(*o));
    on_device_of_x("out", *o, *x.t);
    if (!same_dtype(o->dtype, x.t->dtype)) [[unlikely]]
      reject("out", "expected dtype {} (x's), got {}", dtype_name(x.t->dtype), dtype_name(o->dtype));
    const Layout layout = o->ndim == channel_dim + 2 ? this->layout(v, channel_dim, "out") : x_layout;
    if (layout != x_layout) [[unlikely]]
      reject("out", "expected x's layout ({}), got {} (strides {})", to_string(x_layout), to_string(layout),
             strides_text(*o));
    no_self_overlap("out", v);
    return v;
  }

  // out is written while every other argument is read or written: it may share memory with none.
  template <size_t N>
  [[gnu::always_inline]] void out_apart(const std::pair<const char*, const View*> (&others)[N],
                                        const View& out) const {
    bool shared = false;
    for (const auto& entry : others) shared |= touches(entry.second->range, out.range);
    if (shared) [[unlikely]]
      for (const auto& [name, v] : others)
        if (touches(v->range, out.range))
          reject("out", "expected memory apart from {}, got overlapping byte ranges", name);
  }

  void activation(Activation a) const {
    if (a != Activation::none && a != Activation::silu) [[unlikely]]
      reject("activation", "expected none or silu, got {}", static_cast<int>(a));
  }

  void pad_slot_id(int64_t pad) const {
    if (pad < std::numeric_limits<int32_t>::min() || pad > std::numeric_limits<int32_t>::max()) [[unlikely]]
      reject("pad_slot_id", "expected a value that fits int32 (cache indices are int32), got {}", pad);
  }

  const char* op_;
};

// The op a message names: the out-variant when there is an out.
const char* out_variant_named(const DLTensor* out, const char* op, const char* out_op) {
  return out != nullptr ? out_op : op;
}

void check_cache_indices(const Checker& check, const char* name, std::span<const int32_t> indices,
                         int64_t lines, int64_t pad) {
  std::vector<std::pair<int32_t, size_t>> live;
  live.reserve(indices.size());
  for (size_t b = 0; b < indices.size(); ++b) {
    const int32_t line = indices[b];
    if (line == pad) continue;
    if (line < 0 || line >= lines)
      check.reject(name, "expected {}[{}] in [0, {}) or pad_slot_id = {}, got {}", name, b, lines, pad, line);
    live.emplace_back(line, b);
  }
  std::sort(live.begin(), live.end());
  for (size_t i = 1; i < live.size(); ++i)
    if (live[i].first == live[i - 1].first)
      check.reject(name, "expected distinct lines for live sequences, got line {} for sequences {} and {}",
                   live[i].first, live[i - 1].second, live[i].second);
}

}  // namespace

VarlenGeometry check_varlen_arguments(const CausalConv1dVarlenArgs& a, const DLTensor* out) {
  const Checker check(out_variant_named(out, DK_OP_CAUSAL_CONV1D_VARLEN, DK_OP_CAUSAL_CONV1D_VARLEN_OUT));
  const View x = check.tensor<2>("x", a.x, "(D, T)");
  check.float_x(*a.x);
  VarlenGeometry g{};
  g.dim = x.shape[0];
  g.tokens = x.shape[1];
  if (g.dim < 1) [[unlikely]]
    check.reject("x", "expected D >= 1 channels, got shape {}", shape_text(*a.x));
  g.layout = check.layout(x, 0);
  check.no_self_overlap("x", x);

  const View weight = check.weight(a.weight, *a.x, g.dim);
  g.width = weight.shape[1];
  const View bias = check.bias(a.bias, *a.x, g.dim);
  const View states = check.states("conv_states", a.conv_states, *a.x, g.dim, g.width);
  g.lines = states.shape[0];
  g.state_len = states.shape[2];
  check.no_self_overlap("conv_states", states);

  const View offsets = check.index("query_start_loc", a.query_start_loc, kInt32, -1, *a.x, "(batch+1)");
  if (offsets.shape[0] < 1) [[unlikely]]
    check.reject("query_start_loc", "expected shape (batch+1) with at least 1 entry, got {}",
                 shape_text(*a.query_start_loc));
  g.batch = offsets.shape[0] - 1;
  View indices, initial;
  if (a.cache_indices != nullptr)
    indices = check.index("cache_indices", a.cache_indices, kInt32, g.batch, *a.x, "(batch={})");
  else
    check.identity_lines("conv_states", "cache_indices", g.lines, g.batch);
  if (a.has_initial_state != nullptr)
    initial = check.index("has_initial_state", a.has_initial_state, kUint8, g.batch, *a.x, "(batch={})");

  const std::pair<const char*, const View*> read_only[] = {{"weight", &weight},
                                                           {"bias", &bias},
                                                           {"query_start_loc", &offsets},
                                                           {"cache_indices", &indices},
                                                           {"has_initial_state", &initial}};
  check.apart(read_only, x, "conv_states", states);
  if (out != nullptr) {
    const View o = check.out(out, x, 0, g.layout);
    const std::pair<const char*, const View*> others[] = {
        {"x", &x},   {"conv_states", &states}, read_only[0], read_only[1], read_only[2], read_only[3],
        read_only[4]};
    check.out_apart(others, o);
  }

  check.activation(a.activation);
  check.pad_slot_id(a.pad_slot_id);
  if (a.max_seq_len && *a.max_seq_len < 0) [[unlikely]]
    check.reject("max_seq_len", "expected >= 0, got {}", *a.max_seq_len);
  return g;
}

UpdateGeometry check_update_arguments(const CausalConv1dUpdateArgs& a, const DLTensor* out) {
  const Checker check(out_variant_named(out, DK_OP_CAUSAL_CONV1D_UPDATE, DK_OP_CAUSAL_CONV1D_UPDATE_OUT));
  if (a.x == nullptr) [[unlikely]]
    check.reject("x", "expected a tensor, got none");
  if (a.x->ndim != 2 && a.x->ndim != 3) [[unlikely]]
    check.reject("x", "expected 2 or 3 dimensions (batch, D) or (batch, D, Tq), got {}", a.x->ndim);
  const View x = a.x->ndim == 3 ? check.read<3>("x", *a.x) : check.read<2>("x", *a.x);
  check.float_x(*a.x);
  UpdateGeometry g{};
  g.batch = x.shape[0];
  g.dim = x.shape[1];
  g.tokens = a.x->ndim == 3 ? x.shape[2] : 1;
  if (g.dim < 1) [[unlikely]]
    check.reject("x", "expected D >= 1 channels, got shape {}", shape_text(*a.x));
  g.layout = a.x->ndim == 3 ? check.layout(x, 1) : Layout::time_contiguous;
  check.no_self_overlap("x", x);

  const View weight = check.weight(a.weight, *a.x, g.dim);
  g.width = weight.shape[1];
  const View bias = check.bias(a.bias, *a.x, g.dim);
  const View state = check.states("conv_state", a.conv_state, *a.x, g.dim, g.width);
  g.lines = state.shape[0];
  g.state_len = state.shape[2];
  check.no_self_overlap("conv_state", state);

  View indices, seqlens;
  if (a.conv_state_indices != nullptr)
    indices = check.index("conv_state_indices", a.conv_state_indices, kInt32, g.batch, *a.x, "(batch={})");
  else
    check.identity_lines("conv_state", "conv_state_indices", g.lines, g.batch);
  if (a.cache_seqlens != nullptr)
    seqlens = check.index("cache_seqlens", a.cache_seqlens, kInt32, g.batch, *a.x, "(batch={})");

  const std::pair<const char*, const View*> read_only[] = {
      {"weight", &weight}, {"bias", &bias}, {"conv_state_indices", &indices}, {"cache_seqlens", &seqlens}};
  check.apart(read_only, x, "conv_state", state);
  if (out != nullptr) {
    const View o = check.out(out, x, 1, g.layout);
    const std::pair<const char*, const View*> others[] = {{"x", &x},    {"conv_state", &state}, read_only[0],
                                                          read_only[1], read_only[2],           read_only[3]};
    check.out_apart(others, o);
  }

  check.activation(a.activation);
  check.pad_slot_id(a.pad_slot_id);
  return g;
}

void check_varlen_contents(const CausalConv1dVarlenArgs& a, const VarlenGeometry& g) {
  const Checker check(DK_OP_CAUSAL_CONV1D_VARLEN);
  const auto batch = static_cast<size_t>(g.batch);
  std::vector<int32_t> offsets(batch + 1), indices(a.cache_indices != nullptr ? batch : 0);
  std::vector<uint8_t> initial(a.has_initial_state != nullptr ? batch : 0);
  std::vector<HostRead> reads{{offsets.data(), a.query_start_loc}};
  if (a.cache_indices != nullptr) reads.push_back({indices.data(), a.cache_indices});
  if (a.has_initial_state != nullptr) reads.push_back({initial.data(), a.has_initial_state});
  read_to_host(reads, a.stream);

  if (offsets[0] != 0)
    check.reject("query_start_loc", "expected query_start_loc[0] == 0, got {}", offsets[0]);
  int64_t longest = 0;
  for (size_t b = 0; b < batch; ++b) {
    if (offsets[b + 1] < offsets[b])
      check.reject("query_start_loc",
                   "expected non-decreasing offsets, got query_start_loc[{}] = {} < query_start_loc[{}] = {}",
                   b + 1, offsets[b + 1], b, offsets[b]);
    longest = std::max<int64_t>(longest, offsets[b + 1] - offsets[b]);
  }
  if (offsets[batch] != g.tokens)
    check.reject("query_start_loc", "expected query_start_loc[{}] == T = {}, got {}", batch, g.tokens,
                 offsets[batch]);
  if (a.max_seq_len && *a.max_seq_len < longest)
    check.reject("max_seq_len", "expected >= the longest sequence ({}), got {}", longest, *a.max_seq_len);
  check_cache_indices(check, "cache_indices", indices, g.lines, a.pad_slot_id);
  for (size_t b = 0; b < initial.size(); ++b)
    if (initial[b] > 1)
      check.reject("has_initial_state", "expected has_initial_state[{}] in {{0, 1}}, got {}", b, initial[b]);
}

void check_update_contents(const CausalConv1dUpdateArgs& a, const UpdateGeometry& g) {
  const Checker check(DK_OP_CAUSAL_CONV1D_UPDATE);
  const auto batch = static_cast<size_t>(g.batch);
  std::vector<int32_t> indices(a.conv_state_indices != nullptr ? batch : 0);
  std::vector<int32_t> seqlens(a.cache_seqlens != nullptr ? batch : 0);
  std::vector<HostRead> reads;
  if (a.conv_state_indices != nullptr) reads.push_back({indices.data(), a.conv_state_indices});
  if (a.cache_seqlens != nullptr) reads.push_back({seqlens.data(), a.cache_seqlens});
  if (reads.empty()) return;  // nothing on the device to check: no sync
  read_to_host(reads, a.stream);
  check_cache_indices(check, "conv_state_indices", indices, g.lines, a.pad_slot_id);
  for (size_t b = 0; b < seqlens.size(); ++b)
    if (seqlens[b] < 0)
      check.reject("cache_seqlens", "expected cache_seqlens[{}] >= 0, got {}", b, seqlens[b]);
}

}  // namespace deltakern::detail
