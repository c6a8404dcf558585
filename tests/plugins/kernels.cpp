#include "kernels.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

namespace deltakern::testplugins {

using plugin::data_of;
using plugin::Failure;
using plugin::stride_of;

const DLDataType kFloatDtypes[3] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}};
const DLDataType kF32Only[1] = {{kDLFloat, 32, 1}};
const dk_device_caps kCpu[1] = {{sizeof(dk_device_caps), kDLCPU, 0, 0}};

namespace {

// What a device error word is on a GPU: set by the kernels, read and cleared by check_errors.
std::atomic<uint32_t> error_word{0};

bool skip_line(int64_t line, int64_t pad_slot_id, int64_t lines, Defect defect) {
  if (line == pad_slot_id) return true;
  if (line >= 0 && line < lines) return false;
  if (defect == Defect::writes_out_of_range_line) return false;
  if (defect != Defect::skips_out_of_range_silently)
    error_word.fetch_or(DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
  return true;
}

float to_bf16(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

// acc + w * v, as a float32 kernel computes it, or with the numeric defect.
float accumulate(float acc, float w, float v, Defect defect) {
  if (defect == Defect::rounds_products_to_bf16) return acc + to_bf16(w * v);
  if (defect == Defect::rounds_sum_to_bf16) return to_bf16(acc + w * v);
  return acc + w * v;
}

// Element access by dtype; f16 and bf16 by hand. (clang 14, which the sanitizer and fuzzing
// builds use, has no _Float16 on x86 before AVX512-FP16.) The f16 conversions were checked
// against GCC's _Float16 over every half and every float: identical except NaN payloads.
float half_from_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | mantissa << 13);
  if (exponent != 0) return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // subnormal: exact in float
  return sign != 0 ? -magnitude : magnitude;
}

// Rounded to nearest even.
uint16_t bits_of_half(float v) {
  const uint32_t f = std::bit_cast<uint32_t>(v);
  const auto sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t magnitude = f & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu);  // NaN, quiet
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // rounds past 65504: infinity
  if (magnitude >= 0x38800000u) {                       // a normal half
    const uint32_t rebiased = magnitude - 0x38000000u;
    return sign | static_cast<uint16_t>((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13);
  }
  if (magnitude <= 0x33000000u) return sign;  // at most half the smallest subnormal: zero
  const uint32_t shift = 126 - (magnitude >> 23);
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  uint32_t q = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u) != 0)) ++q;
  return sign | static_cast<uint16_t>(q);
}

float load(const DLTensor& t, int64_t off) {
  if (plugin::is_f32(t.dtype)) return data_of<const float>(t)[off];
  const uint16_t bits = data_of<const uint16_t>(t)[off];
  if (plugin::is_f16(t.dtype)) return half_from_bits(bits);
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

void store(const DLTensor& t, int64_t off, float v) {
  if (plugin::is_f32(t.dtype)) {
    data_of<float>(t)[off] = v;
  } else if (plugin::is_f16(t.dtype)) {
    data_of<uint16_t>(t)[off] = bits_of_half(v);
  } else {
    uint32_t u = std::bit_cast<uint32_t>(v);
    u += 0x7FFFu + ((u >> 16) & 1u);  // nearest even; inputs here are finite
    data_of<uint16_t>(t)[off] = static_cast<uint16_t>(u >> 16);
  }
}

int32_t index_at(const DLTensor& t, int64_t i) { return data_of<const int32_t>(t)[i * stride_of(t, 0)]; }

float activate(plugin::Activation a, float v) {
  return a == plugin::Activation::silu ? v / (1.0f + std::exp(-v)) : v;
}

DLManagedTensor* fresh_like(const dk_host& host, const DLTensor& x, void* stream) {
  return plugin::make_compact_result(host, x.device, x.dtype, x.ndim, x.shape, stream);
}

// Copies `out` into x element by element: what the lying plugin does behind its schema.
void overwrite_x(const DLTensor& x, const DLTensor& out) {
  std::vector<int64_t> idx(static_cast<size_t>(x.ndim), 0);
  const int64_t n = plugin::numel(x);
  for (int64_t i = 0; i < n; ++i) {
    int64_t ox = 0, oo = 0, rest = i;
    for (int d = x.ndim - 1; d >= 0; --d) {
      const int64_t k = rest % x.shape[d];
      rest /= x.shape[d];
      ox += k * stride_of(x, d);
      oo += k * stride_of(out, d);
    }
    store(x, ox, load(out, oo));
  }
}

// The two lies about a fresh output, applied after an honest computation of it. Both see
// the output as compact (fresh_like() makes it so) and f32 (the liars declare only f32).
// `found`: the output's elements as the allocator handed them over.
std::vector<float> elements_of(const DLTensor& out) {
  std::vector<float> v(static_cast<size_t>(plugin::numel(out)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = load(out, static_cast<int64_t>(i));
  return v;
}
void lie_about_output(const DLTensor& out, const std::vector<float>& found, Behaviour behaviour) {
  const int64_t n = plugin::numel(out);
  if (n == 0) return;
  // An off-by-one loop bound: one element after the last one (1.0f, whose bytes hold no guard
  // byte, so the stray write is always seen from its first byte).
  if (behaviour.write_past_end) store(out, n, 1.0f);
  // A kernel that takes NaN for "not yet written": every fifth element is left as found
  // unless it found a NaN there. A NaN-poisoned output comes back fully written.
  if (behaviour.fill_only_nan)
    for (int64_t i = 4; i < n; i += 5)
      if (!std::isnan(found[static_cast<size_t>(i)])) store(out, i, found[static_cast<size_t>(i)]);
}

void varlen(const plugin::VarlenArgs& a, const DLTensor& out, const int32_t* qsl_host, Defect defect) {
  const DLTensor& x = *a.x;
  const DLTensor& st = *a.conv_states;
  const int64_t D = a.dim(), W = a.width(), S = a.state_len(), lines = st.shape[0];
  if (defect == Defect::crashes_when_long && a.tokens() > 4096) std::raise(SIGSEGV);
  const bool in_place = out.data == x.data && out.byte_offset == x.byte_offset;
  for (int64_t b = 0; b < a.batch(); ++b) {
    const int64_t begin = qsl_host != nullptr ? qsl_host[b] : index_at(*a.query_start_loc, b);
    const int64_t end = qsl_host != nullptr ? qsl_host[b + 1] : index_at(*a.query_start_loc, b + 1);
    const int64_t L = end - begin;
    const int64_t line = a.cache_indices != nullptr ? index_at(*a.cache_indices, b) : b;
    if (skip_line(line, a.pad_slot_id, lines, defect)) {
      if (!in_place)  // a fresh output holds zeros for a skipped sequence
        for (int64_t d = 0; d < D; ++d)
          for (int64_t t = begin; t < end; ++t)
            store(out, d * stride_of(out, 0) + t * stride_of(out, 1), 0.0f);
      continue;
    }
    const bool initial =
        a.has_initial_state != nullptr &&
        data_of<const uint8_t>(*a.has_initial_state)[b * stride_of(*a.has_initial_state, 0)] != 0 &&
        !(defect == Defect::drops_initial_state_in_long_sequence && L > 1000);
    for (int64_t d = 0; d < D; ++d) {
      const auto x_at = [&](int64_t t) { return d * stride_of(x, 0) + (begin + t) * stride_of(x, 1); };
      const auto out_at = [&](int64_t t) { return d * stride_of(out, 0) + (begin + t) * stride_of(out, 1); };
      const auto st_at = [&](int64_t i) {
        return line * stride_of(st, 0) + d * stride_of(st, 1) + i * stride_of(st, 2);
      };
      const auto prior = [&](int64_t i) { return initial ? load(st, st_at(i)) : 0.0f; };
      // The new state is read before x is overwritten: the last S of concat(prior, x_b).
      std::vector<float> tail(static_cast<size_t>(S));
      for (int64_t i = 0; i < S; ++i)
        tail[static_cast<size_t>(i)] = L + i < S ? prior(L + i) : load(x, x_at(L + i - S));
      std::array<float, 16> history{};
      for (int64_t k = 0; k < W - 1; ++k) history[static_cast<size_t>(k)] = prior(S - (W - 1) + k);
      const bool no_bias = defect == Defect::wrong_at_wide_channels && d >= 1000;
      const float bias = a.bias != nullptr && !no_bias ? load(*a.bias, d * stride_of(*a.bias, 0)) : 0.0f;
      for (int64_t t = 0; t < L; ++t) {
        const float xv = load(x, x_at(t));
        float acc = bias;
        for (int64_t k = 0; k < W - 1; ++k)
          acc = accumulate(acc, load(*a.weight, d * stride_of(*a.weight, 0) + k * stride_of(*a.weight, 1)),
                           history[static_cast<size_t>(k)], defect);
        acc =
            accumulate(acc, load(*a.weight, d * stride_of(*a.weight, 0) + (W - 1) * stride_of(*a.weight, 1)),
                       xv, defect);
        if (!(defect == Defect::skips_token_in_long_sequence && L > 1000 && t == 1000))
          store(out, out_at(t), activate(a.activation, acc));
        for (int64_t k = 0; k + 1 < W - 1; ++k)
          history[static_cast<size_t>(k)] = history[static_cast<size_t>(k + 1)];
        if (W > 1) history[static_cast<size_t>(W - 2)] = xv;
      }
      for (int64_t i = 0; i < S; ++i) store(st, st_at(i), tail[static_cast<size_t>(i)]);
    }
  }
}

void update(const plugin::UpdateArgs& a, const DLTensor& out, Defect defect) {
  const DLTensor& x = *a.x;
  const DLTensor& st = *a.conv_state;
  const int64_t D = a.dim(), W = a.width(), S = a.state_len(), Tq = a.tokens(), lines = st.shape[0];
  const bool three_d = x.ndim == 3;
  const bool in_place = out.data == x.data && out.byte_offset == x.byte_offset;
  for (int64_t b = 0; b < a.batch(); ++b) {
    const int64_t line = a.conv_state_indices != nullptr ? index_at(*a.conv_state_indices, b) : b;
    const auto x_at = [&](const DLTensor& t, int64_t d, int64_t k) {
      return b * stride_of(t, 0) + d * stride_of(t, 1) + (three_d ? k * stride_of(t, 2) : 0);
    };
    if (skip_line(line, a.pad_slot_id, lines, defect)) {
      if (!in_place)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t t = 0; t < Tq; ++t) store(out, x_at(out, d, t), 0.0f);
      continue;
    }
    for (int64_t d = 0; d < D; ++d) {
      const auto st_at = [&](int64_t i) {
        return line * stride_of(st, 0) + d * stride_of(st, 1) + i * stride_of(st, 2);
      };
      const auto w = [&](int64_t k) {
        return load(*a.weight, d * stride_of(*a.weight, 0) + k * stride_of(*a.weight, 1));
      };
      const bool no_bias = defect == Defect::wrong_at_wide_channels && d >= 1000;
      const float bias = a.bias != nullptr && !no_bias ? load(*a.bias, d * stride_of(*a.bias, 0)) : 0.0f;
      // A wrong tap for draft tokens from 3 on: the newest weight applied twice.
      const auto extra = [&](int64_t t, float v) {
        return defect == Defect::wrong_beyond_tq3 && t >= 3 ? w(W - 1) * v : 0.0f;
      };
      std::vector<float> xs(static_cast<size_t>(Tq));
      for (int64_t t = 0; t < Tq; ++t) xs[static_cast<size_t>(t)] = load(x, x_at(x, d, t));
      if (a.cache_seqlens != nullptr) {
        const int64_t n = index_at(*a.cache_seqlens, b);
        const auto wrap = [S](int64_t i) { return ((i % S) + S) % S; };
        for (int64_t t = 0; t < Tq; ++t) {
          float acc = bias;
          for (int64_t j = 0; j < W - 1; ++j)
            acc = accumulate(acc, w(j), load(st, st_at(wrap(n + t - (W - 1) + j))), defect);
          acc = accumulate(acc, w(W - 1), xs[static_cast<size_t>(t)], defect) +
                extra(t, xs[static_cast<size_t>(t)]);
          store(st, st_at(wrap(n + t)), xs[static_cast<size_t>(t)]);
          store(out, x_at(out, d, t), activate(a.activation, acc));
        }
      } else {
        std::vector<float> e(static_cast<size_t>(S + Tq));
        for (int64_t i = 0; i < S; ++i) e[static_cast<size_t>(i)] = load(st, st_at(i));
        for (int64_t t = 0; t < Tq; ++t) e[static_cast<size_t>(S + t)] = xs[static_cast<size_t>(t)];
        for (int64_t t = 0; t < Tq; ++t) {
          float acc = bias;
          for (int64_t k = 0; k < W; ++k)
            acc = accumulate(acc, w(k), e[static_cast<size_t>(S + t - (W - 1) + k)], defect);
          acc += extra(t, xs[static_cast<size_t>(t)]);
          store(out, x_at(out, d, t), activate(a.activation, acc));
        }
        for (int64_t i = 0; i < S; ++i) store(st, st_at(i), e[static_cast<size_t>(Tq + i)]);
      }
    }
  }
}

void require_cpu(const DLTensor& x) {
  if (x.device.device_type != kDLCPU)
    throw Failure(DK_ERR_UNSUPPORTED, "this test plugin runs on the CPU only");
}

}  // namespace

// The run-level defects: where a fresh output comes from, what is done to it and to the
// inputs after an honest computation, and what the result finally is.
namespace defects {

// A non-owning result at `data`, shaped like `like`, compact.
DLManagedTensor* view_at(void* data, const DLTensor& like) {
  DLTensor t = like;
  int64_t strides[4] = {};
  int64_t step = 1;
  for (int d = like.ndim - 1; d >= 0; --d) {
    strides[d] = step;
    step *= like.shape[d];
  }
  t.data = data;
  t.byte_offset = 0;
  t.strides = strides;
  return plugin::make_view_result(t);
}

size_t bytes_of(const DLTensor& x) {
  return static_cast<size_t>(plugin::numel(x)) * ((x.dtype.bits * x.dtype.lanes + 7) / 8);
}

DLManagedTensor* make_output(const dk_host& host, const DLTensor& x, void* stream, Defect defect) {
  if (defect == Defect::static_workspace) {
    static std::vector<std::byte> workspace;
    if (workspace.size() < bytes_of(x)) workspace.resize(bytes_of(x));
    return view_at(workspace.data(), x);
  }
  if (defect == Defect::reuses_first_buffer) {
    static void* kept = nullptr;
    static size_t kept_bytes = 0;
    if (kept == nullptr || kept_bytes < bytes_of(x)) {
      if (host.alloc(host.ctx, x.device, std::max<size_t>(bytes_of(x), 1), stream, &kept) != DK_OK)
        throw Failure(DK_ERR_OUT_OF_MEMORY, "allocation failed");
      kept_bytes = bytes_of(x);
    }
    return view_at(kept, x);
  }
  DLManagedTensor* out = fresh_like(host, x, stream);
  if (defect == Defect::throwing_deleter) {
    static void (*honest)(DLManagedTensor*) = nullptr;
    honest = out->deleter;
    out->deleter = [](DLManagedTensor* self) {
      honest(self);
      throw std::runtime_error("throwing_deleter: the deleter throws after releasing the result");
    };
  }
  return out;
}

// Read through a volatile so the compiler cannot see the null and turn the store into a trap.
int* volatile nowhere = nullptr;

// The defects that take the process down, before the call computes anything.
void strike(const plugin::VarlenArgs& a, Defect defect) {
  if (defect == Defect::exit_in_run) std::exit(0);
  if (defect == Defect::hang_in_run && a.width() == 3 && a.bias == nullptr &&
      a.activation == plugin::Activation::silu)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}
void strike(const plugin::UpdateArgs& a, Defect defect) {
  if (defect == Defect::abort_in_run && a.width() == 2) std::abort();
  if (defect == Defect::segfault_in_run) *nowhere = 42;
}

// Far enough to leave any heap this process has: the first unmapped page ends it.
void write_far_past(const DLTensor& out) {
  auto* end = plugin::data_of<unsigned char>(out) + bytes_of(out);
  auto* volatile at = end;
  for (size_t offset = 0; offset <= size_t{64} << 20; offset += 4096) at[offset] = 0x5A;
}

// Joined before the next call and when the library is unloaded.
struct LateWriter {
  std::thread thread;
  ~LateWriter() {
    if (thread.joinable()) thread.join();
  }
};
LateWriter late_writer;

// After the honest computation: the defect's side effects on the inputs and the output, and the
// result to return in place of `out` (which it then owns or releases).
DLManagedTensor* finish(const DLTensor& x, const DLTensor* bias, const DLTensor& states, DLManagedTensor* out,
                        int64_t tokens, int64_t batch, int64_t dim, Defect defect,
                        std::atomic<bool>* returned) {
  const DLTensor& o = out->dl_tensor;
  switch (defect) {
    case Defect::writes_x_when_long:
      if (tokens > 2048) store(x, 0, load(x, 0) + 1.0f);
      break;
    case Defect::writes_past_end_when_long:
      if (tokens >= 2048) store(o, plugin::numel(o), 1.0f);
      break;
    case Defect::writes_bias_when_wide:
      if (bias != nullptr && dim >= 64) store(*bias, 0, load(*bias, 0) + 1.0f);
      break;
    case Defect::returns_bias_at_batch1:
      if (batch == 1 && bias != nullptr) {
        for (int64_t i = 0; i < std::min(plugin::numel(o), bias->shape[0]); ++i) store(*bias, i, load(o, i));
        out->deleter(out);
        return view_at(plugin::data_of<void>(*bias), x);
      }
      break;
    case Defect::result_in_conv_states:
      out->deleter(out);
      return view_at(plugin::data_of<void>(states), x);
    case Defect::late_write: {
      float* first = plugin::data_of<float>(x);
      if (first != nullptr && plugin::numel(x) > 0)
        late_writer.thread = std::thread([first, returned] {
          while (!returned->load()) std::this_thread::yield();
          *first += 1.0f;
        });
      break;
    }
    default:
      break;
  }
  return out;
}

// The out-variants' defects, after an honest result in out.
void after_out_variant(const DLTensor& x, const DLTensor& out, Defect defect) {
  if (defect == Defect::out_variant_writes_x) overwrite_x(x, out);
  if (defect == Defect::out_variant_writes_slack && plugin::numel(out) > 0) {
    int64_t last = 0;  // the offset of out's last element in memory
    for (int d = 0; d < out.ndim; ++d) last += (out.shape[d] - 1) * stride_of(out, d);
    store(out, last + 1, 1.0f);
  }
}

}  // namespace defects

int32_t run_varlen(void* plugin_ptr, const dk_call* call, DLManagedTensor** result, char* error,
                   size_t error_size, Behaviour behaviour) {
  static std::atomic<bool> returned{false};
  if (defects::late_writer.thread.joinable()) defects::late_writer.thread.join();
  returned = false;
  const int32_t status = plugin::guarded(error, error_size, [&] {
    const auto& host = *static_cast<const dk_host*>(plugin_ptr);
    const auto a = plugin::unpack_varlen(*call, behaviour.out_variant);
    require_cpu(*a.x);
    defects::strike(a, behaviour.defect);
    std::vector<int32_t> qsl;
    if (behaviour.read_qsl_always) {
      qsl.resize(static_cast<size_t>(a.query_start_loc->shape[0]));
      if (host.read_to_host(host.ctx, qsl.data(), a.query_start_loc, a.stream) != DK_OK)
        throw Failure(DK_ERR_RUNTIME, "read_to_host failed");
    }
    const int32_t* qsl_host = behaviour.read_qsl_always ? qsl.data() : nullptr;
    if (behaviour.out_variant) {
      varlen(a, *a.out, qsl_host, behaviour.defect);
      defects::after_out_variant(*a.x, *a.out, behaviour.defect);
      return;
    }
    if (behaviour.in_place) {
      varlen(a, *a.x, qsl_host, behaviour.defect);
      *result = plugin::make_view_result(*a.x);
      return;
    }
    DLManagedTensor* out = defects::make_output(host, *a.x, a.stream, behaviour.defect);
    try {
      const auto found = behaviour.fill_only_nan ? elements_of(out->dl_tensor) : std::vector<float>{};
      varlen(a, out->dl_tensor, qsl_host, behaviour.defect);
      lie_about_output(out->dl_tensor, found, behaviour);
      if (behaviour.also_write_x) overwrite_x(*a.x, out->dl_tensor);
    } catch (...) {
      out->deleter(out);
      throw;
    }
    *result = defects::finish(*a.x, a.bias, *a.conv_states, out, a.tokens(), a.batch(), a.dim(),
                              behaviour.defect, &returned);
  });
  returned = true;
  return status;
}

int32_t run_update(void* plugin_ptr, const dk_call* call, DLManagedTensor** result, char* error,
                   size_t error_size, Behaviour behaviour) {
  static std::atomic<bool> returned{false};
  if (defects::late_writer.thread.joinable()) defects::late_writer.thread.join();
  returned = false;
  const int32_t status = plugin::guarded(error, error_size, [&] {
    const auto& host = *static_cast<const dk_host*>(plugin_ptr);
    const auto a = plugin::unpack_update(*call, behaviour.out_variant);
    require_cpu(*a.x);
    defects::strike(a, behaviour.defect);
    if (behaviour.out_variant) {
      update(a, *a.out, behaviour.defect);
      defects::after_out_variant(*a.x, *a.out, behaviour.defect);
      return;
    }
    if (behaviour.in_place) {
      update(a, *a.x, behaviour.defect);
      *result = plugin::make_view_result(*a.x);
      return;
    }
    DLManagedTensor* out = defects::make_output(host, *a.x, a.stream, behaviour.defect);
    try {
      const auto found = behaviour.fill_only_nan ? elements_of(out->dl_tensor) : std::vector<float>{};
      update(a, out->dl_tensor, behaviour.defect);
      lie_about_output(out->dl_tensor, found, behaviour);
      if (behaviour.also_write_x) overwrite_x(*a.x, out->dl_tensor);
    } catch (...) {
      out->deleter(out);
      throw;
    }
    *result = defects::finish(*a.x, a.bias, *a.conv_state, out, a.batch() * a.tokens(), a.batch(), a.dim(),
                              behaviour.defect, &returned);
    if (behaviour.defect == Defect::writes_far_in_run && a.width() == 4)
      defects::write_far_past((*result)->dl_tensor);
  });
  returned = true;
  return status;
}

int32_t init_keep_host(const dk_host* host, void** plugin_ptr, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    if (!plugin::usable_host(host)) throw Failure(DK_ERR_INTERNAL, "host table too small");
    *plugin_ptr = const_cast<dk_host*>(host);
  });
}

int32_t probe_cpu_only(void*, int32_t device_type, char* why, size_t why_size) {
  if (device_type == kDLCPU) return DK_OK;
  plugin::write_message(why, why_size, "test plugins run on the CPU only");
  return DK_ERR_UNAVAILABLE;
}

void shutdown_nothing(void*) {}

int32_t check_errors_cpu(void*, DLDevice device, void*, uint32_t* flags, char* msg, size_t msg_size) {
  if (flags == nullptr) return DK_ERR_INVALID_ARGUMENT;
  *flags = device.device_type == kDLCPU ? error_word.exchange(0) : 0;
  plugin::write_message(msg, msg_size, *flags != 0 ? "a cache index out of range was skipped" : "");
  return DK_OK;
}

}  // namespace deltakern::testplugins
