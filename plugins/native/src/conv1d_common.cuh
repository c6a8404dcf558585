// Device helpers shared by the native kernels: element conversions, 16-byte vectors, the
// window arithmetic and the bounds-checked lookups of the index tensors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <deltakern/plugin_abi.h>
#include <deltakern/plugin_sdk_cuda_convert.cuh>
#include <deltakern/plugin_sdk_cuda_pdl.cuh>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "conv1d.h"
#include "instantiations.cuh"

namespace deltakern::native {

// Taps are right-aligned in a width-4 window: tap k multiplies the element 3-k tokens back.
// A narrower conv leaves taps [0, 4-width) at zero and skips them (at compile time in the
// varlen kernels, instantiated per width; at run time in the update kernels), with the same
// arithmetic as a kernel of exactly that width.
constexpr int kMaxWidth = 4;
constexpr int kHalo = kMaxWidth - 1;

template <int kBytes>
struct BytesToType;
template <>
struct BytesToType<16> {
  using Type = uint4;
};
template <>
struct BytesToType<8> {
  using Type = uint2;
};
template <>
struct BytesToType<4> {
  using Type = uint32_t;
};
template <>
struct BytesToType<2> {
  using Type = uint16_t;
};

using ::deltakern::plugin::cuda::allow_next_grid;
using ::deltakern::plugin::cuda::from_float;  // deltakern/plugin_sdk_cuda_convert.cuh
using ::deltakern::plugin::cuda::to_float;
using ::deltakern::plugin::cuda::wait_for_previous_grid;  // deltakern/plugin_sdk_cuda_pdl.cuh

// Elements whose dtype is only known at run time (weight, bias, states): the branch is
// uniform across the grid, and these are read once per sequence or per channel.
__device__ __forceinline__ float load_float(const void* p, int64_t i, ScalarType dtype) {
  switch (dtype) {
    case ScalarType::f32:
      return static_cast<const float*>(p)[i];
    case ScalarType::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
__device__ __forceinline__ void store_float(void* p, int64_t i, ScalarType dtype, float v) {
  switch (dtype) {
    case ScalarType::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case ScalarType::f16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
  }
}

// kN consecutive elements of T as floats, through one vector access when kN > 1 (the caller
// guarantees alignment to sizeof(T) * kN).
template <typename T, int kN>
__device__ __forceinline__ void load_elems(const T* p, float (&out)[kN]) {
  if constexpr (kN == 1) {
    out[0] = to_float(*p);
  } else {
    using Vec = typename BytesToType<sizeof(T) * kN>::Type;
    union {
      Vec v;
      T e[kN];
    } u;
    u.v = *reinterpret_cast<const Vec*>(p);
#pragma unroll
    for (int i = 0; i < kN; ++i) out[i] = to_float(u.e[i]);
  }
}
// Rounds kN floats into T, a pair per conversion instruction for 16-bit T (one at a time, the
// compiler converts each into its own register and merges them: two more instructions a pair).
template <typename T, int kN>
__device__ __forceinline__ void round_into(T (&out)[kN], const float (&in)[kN]) {
  if constexpr (std::is_same_v<T, float> || kN % 2 != 0) {
#pragma unroll
    for (int i = 0; i < kN; ++i) out[i] = from_float<T>(in[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kN; i += 2) {
      if constexpr (std::is_same_v<T, __half>) {
        const __half2 h = __floats2half2_rn(in[i], in[i + 1]);
        out[i] = h.x;
        out[i + 1] = h.y;
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(in[i], in[i + 1]);
        out[i] = h.x;
        out[i + 1] = h.y;
      }
    }
  }
}
template <typename T, int kN>
__device__ __forceinline__ void store_elems(T* p, const float (&in)[kN]) {
  if constexpr (kN == 1) {
    *p = from_float<T>(in[0]);
  } else {
    using Vec = typename BytesToType<sizeof(T) * kN>::Type;
    union {
      Vec v;
      T e[kN];
    } u;
    round_into(u.e, in);
    *reinterpret_cast<Vec*>(p) = u.v;
  }
}

// silu through the fast exponential and divide (two MUFU ops): within a few ulp of float; the
// IEEE divide would cost more instructions than the whole convolution. For bf16 outputs one
// MUFU op does: sigmoid(v) = 0.5 + 0.5 tanh(v/2) with tanh.approx (relative error ~2^-11, far
// below bf16's rounding), which keeps the MUFU pipe off the critical path of the varlen kernels.
__device__ __forceinline__ float activate(float v, bool silu) {
  return silu ? __fdividef(v, 1.f + __expf(-v)) : v;
}
__device__ __forceinline__ float tanh_approx(float v) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
template <typename T>
__device__ __forceinline__ float activate_for(float v, bool silu) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (!silu) return v;
    const float h = 0.5f * v;
    return fmaf(h, tanh_approx(h), h);  // v * (0.5 + 0.5 tanh(v/2))
  } else {
    return activate(v, silu);
  }
}

// Weights of one channel, right-aligned in the width-4 window, and its bias.
struct ChannelTaps {
  float w[kMaxWidth];
  float bias;
};
__device__ __forceinline__ ChannelTaps load_taps(const ConvCommon& c, int64_t chan) {
  ChannelTaps t;
  const int first = kMaxWidth - c.width;
#pragma unroll
  for (int k = 0; k < kMaxWidth; ++k)
    t.w[k] = k >= first
                 ? load_float(c.weight, chan * c.w_chan_stride + (k - first) * c.w_tap_stride, c.w_dtype)
                 : 0.f;
  t.bias = c.bias != nullptr ? load_float(c.bias, chan * c.bias_stride, c.bias_dtype) : 0.f;
  return t;
}

// The taps of channels c0 .. c0 + kC - 1 (c0 a multiple of kC). In the common layout (width 4,
// weight (D, 4) compact and bias contiguous, both in T) they are kC * 4 consecutive elements and
// kC more: a few 16-byte loads instead of kC * 5 scalar ones, each behind a dtype switch, which
// were most of a decode kernel's instructions and a visible share of a prefill thread's start.
template <typename T, int kC>
__device__ __forceinline__ void load_taps_vec(const ConvCommon& conv, int64_t c0, ChannelTaps (&taps)[kC]) {
  constexpr ScalarType kDtype = kScalarTypeOf<T>;
  constexpr int kWBytes = kC * kMaxWidth * static_cast<int>(sizeof(T));
  constexpr int kBBytes = kC * static_cast<int>(sizeof(T));
  static_assert(kWBytes % 16 == 0 && kBBytes <= 16);
  using BiasVec = typename BytesToType<kBBytes>::Type;
  const T* w = static_cast<const T*>(conv.weight) + c0 * conv.w_chan_stride;
  const T* b = conv.bias != nullptr ? static_cast<const T*>(conv.bias) + c0 * conv.bias_stride : nullptr;
  const bool vec_w = conv.width == kMaxWidth && conv.w_dtype == kDtype && conv.w_tap_stride == 1 &&
                     conv.w_chan_stride == kMaxWidth && (reinterpret_cast<uintptr_t>(w) & 15) == 0;
  const bool vec_b = b != nullptr && conv.bias_dtype == kDtype && conv.bias_stride == 1 &&
                     (reinterpret_cast<uintptr_t>(b) & (kBBytes - 1)) == 0;
  if (!vec_w || (b != nullptr && !vec_b)) {
#pragma unroll
    for (int i = 0; i < kC; ++i) taps[i] = load_taps(conv, c0 + i);
    return;
  }
  union {
    uint4 v[kWBytes / 16];
    T e[kC * kMaxWidth];
  } wv;
#pragma unroll
  for (int j = 0; j < kWBytes / 16; ++j) wv.v[j] = __ldg(reinterpret_cast<const uint4*>(w) + j);
  union {
    BiasVec v;
    T e[kC];
  } bv;
  if (b != nullptr) {
    bv.v = __ldg(reinterpret_cast<const BiasVec*>(b));
  } else {
#pragma unroll
    for (int i = 0; i < kC; ++i) bv.e[i] = from_float<T>(0.f);
  }
#pragma unroll
  for (int i = 0; i < kC; ++i) {
#pragma unroll
    for (int k = 0; k < kMaxWidth; ++k) taps[i].w[k] = to_float(wv.e[i * kMaxWidth + k]);
    taps[i].bias = to_float(bv.e[i]);
  }
}

// One output: bias + sum_k w[k] * e[t-3+k], taps below `first` skipped so that a padded tap
// never turns an infinite input into NaN, rounded once by the caller.
template <typename T = float>
__device__ __forceinline__ float conv_point(const ChannelTaps& taps, int first, float e0, float e1, float e2,
                                            float e3, bool silu) {
  float acc = taps.bias;
  if (first <= 0) acc = fmaf(taps.w[0], e0, acc);
  if (first <= 1) acc = fmaf(taps.w[1], e1, acc);
  if (first <= 2) acc = fmaf(taps.w[2], e2, acc);
  acc = fmaf(taps.w[3], e3, acc);
  return activate_for<T>(acc, silu);
}

__device__ __forceinline__ int32_t load_index(const IndexView& v, int64_t i) {
  return static_cast<const int32_t*>(v.data)[i * v.stride];
}

// query_start_loc entries clamped into [0, tokens]: malformed offsets can never address x out
// of bounds (validate = true is what rejects them).
__device__ __forceinline__ int64_t seq_offset(const VarlenParams& p, int64_t i) {
  const int64_t q = load_index(p.query_start_loc, i);
  return q < 0 ? 0 : (q > p.tokens ? p.tokens : q);
}

// The state line of sequence/row b, or -1 when it is skipped: a padded slot, or an index out of
// [0, lines), which is also flagged in the device error word when `flag` is set.
__device__ __forceinline__ int64_t state_line(const IndexView& indices, int64_t b, const StateView& st,
                                              const ConvCommon& c, bool flag) {
  const int64_t line = indices.data != nullptr ? load_index(indices, b) : b;
  if (line == c.pad_slot_id) return -1;
  if (line < 0 || line >= st.lines) {
    if (flag) atomicOr(c.error_word, static_cast<uint32_t>(DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE));
    return -1;
  }
  return line;
}

__device__ __forceinline__ bool has_initial_state(const VarlenParams& p, int64_t b) {
  return p.has_initial_state.data != nullptr &&
         static_cast<const uint8_t*>(p.has_initial_state.data)[b * p.has_initial_state.stride] != 0;
}

__device__ __forceinline__ int64_t state_offset(const StateView& st, int64_t line, int64_t chan,
                                                int64_t pos) {
  return line * st.line_stride + chan * st.chan_stride + pos * st.pos_stride;
}

// Smallest b in [0, batch] with query_start_loc[b+1] >= pos (batch when none).
__device__ __forceinline__ int32_t first_sequence_ending_at_or_after(const VarlenParams& p, int64_t pos) {
  int32_t lo = 0, hi = p.batch;
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    if (seq_offset(p, mid + 1) >= pos)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The same, found by a whole warp with 32-way probes: log32(batch) dependent loads instead of
// log2(batch). Every lane of the warp must call it (convergent); all get the answer.
__device__ __forceinline__ int32_t warp_first_sequence_ending_at_or_after(const VarlenParams& p,
                                                                          int64_t pos) {
  const int lane = threadIdx.x % 32;
  int32_t lo = 0, hi = p.batch;  // the answer lies in [lo, hi]
  while (lo < hi) {
    const int32_t step = (hi - lo + 31) / 32;
    const int32_t probe = lo + (lane + 1) * step - 1;
    const bool at_or_after = probe >= hi || seq_offset(p, probe + 1) >= pos;
    const unsigned ballot = __ballot_sync(0xffffffffu, at_or_after);
    const int f = ballot != 0 ? __ffs(ballot) - 1 : 32;  // the first probe that holds
    const int32_t new_lo = min(hi, lo + f * step);
    const int32_t new_hi = f == 32 ? hi : min(hi, lo + (f + 1) * step - 1);
    lo = new_lo;
    hi = new_hi;
  }
  return lo;
}

__device__ __forceinline__ int32_t tile_of(const VarlenParams& p, int64_t pos) {
  const int64_t g = pos / p.tile_len;
  return static_cast<int32_t>(g < p.ntiles - 1 ? g : p.ntiles - 1);
}

// Whether the tiled kernels park the outputs of a tile's tail (and the finish pass writes them):
// in place only. There the next tile reads its halo, and a crossing sequence the originals of its
// new state, from x, which the tail's outputs would overwrite; into a separate out (the *_out ops:
// the core guarantees out shares no memory with x) x keeps every original, so a tile stores its
// whole output. Uniform over the call: no branch per token.
__host__ __device__ __forceinline__ bool parks_tail(const VarlenParams& p) { return p.out == p.x; }

// The new state of sequence b, one channel, written after the prior was read:
// new s[j] = e[L + j], e = concat(prior, x_b). Ascending j reads old entries L+j > j before
// they are overwritten. x holds originals at [max(q0, q1-S), q1) when this runs. With
// `park` set the values go to the finish pass's buffer instead of the state row.
template <typename T>
__device__ __forceinline__ void write_new_state(const VarlenParams& p, const T* x_chan, int64_t time_stride,
                                                int64_t q0, int64_t q1, int64_t line, int64_t chan, bool init,
                                                float* park) {
  const StateView& st = p.state;
  const int64_t len = q1 - q0;
  if (len == 0 && init) return;  // e == prior: the row keeps its values
  for (int32_t j = 0; j < st.len; ++j) {
    const int64_t i = len + j;
    float v;
    if (i < st.len)
      v = init ? load_float(st.data, state_offset(st, line, chan, i), st.dtype) : 0.f;
    else
      v = to_float(x_chan[(q0 + i - st.len) * time_stride]);
    if (park != nullptr)
      park[static_cast<int64_t>(j) * p.dim + chan] = v;
    else
      store_float(st.data, state_offset(st, line, chan, j), st.dtype, v);
  }
}

// The thread block cluster's barrier (sm_90). The arrive is relaxed: it orders none of this
// thread's accesses (a releasing one waits for every store and copy in flight), so it serves
// barriers that order reads before another block's writes once each read's value has been used.
// The wait acquires.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}

// Asynchronous global -> shared copies (sm_80+): bytes in flight without registers held.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(gmem), "n"(kBytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Bulk copies global -> shared (sm_90, the TMA unit) completing on a shared-memory barrier: one
// instruction moves a whole row. Addresses and sizes are multiples of 16 bytes.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the async proxy
#endif
}
// Arrives once, expecting `bytes` of bulk copies to complete on the barrier.
__device__ __forceinline__ void barrier_arrive_expect(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_copy_to_shared(void* smem, const void* gmem, unsigned bytes,
                                                    uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(smem)),
      "l"(gmem), "r"(bytes), "r"(shared_address(bar))
      : "memory");
#endif
}
// Waits for the barrier's phase `parity` to complete.
__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
#endif
}

// Launches with programmatic dependent launch when asked (sm_90): the launch overlaps the
// previous kernel's tail; the kernel itself waits for that kernel before touching memory.
// cluster_x > 1: in thread block clusters of that many blocks along x (sm_90).
template <typename... Params, typename... Args>
cudaError_t launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t stream, bool pdl, unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  cfg.attrs = attr;
  if (pdl) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[cfg.numAttrs++].val.clusterDim = {cluster_x, 1, 1};
  }
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool pdl, Args&&... args) {
  return launch_kernel_in_clusters(kernel, grid, block, smem, stream, pdl, 1u, std::forward<Args>(args)...);
}

}  // namespace deltakern::native
