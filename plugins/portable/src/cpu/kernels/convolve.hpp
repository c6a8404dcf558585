// The arithmetic every kernel shares: out = act(bias + sum_k w[k] * e[k]), accumulated in f32
// in the order k = 0 .. W-1, rounded once to the output dtype. Prefill and decode go through
// these same functions, so a prefill followed by single-token updates gives the bits of one
// long prefill.
#pragma once

#ifndef DK_CPU_ISA
#error "convolve.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>

#include "avx512.hpp"
#include "numeric.hpp"
#include "width.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA {

// f32 results staged in L1 between the convolution and the conversion to the output dtype.
inline constexpr int64_t kStoreChunk = 256;

// Along time (one channel): window holds W-1 history values, then the n new ones; the loop
// runs over t, so the compiler vectorises it with the taps held in registers. A runtime width
// (W = kRuntimeWidth) takes its first kMinRuntimeWidth taps that way and each further one in a
// pass of its own over result[]: a loop over a runtime number of taps inside the loop over t
// would not vectorise, since the sum's order is fixed.
template <int W, Act ACT>
inline void convolve_time(const float* __restrict window, const float (&w)[kTapSlots<W>], int width,
                          float bias, float* __restrict result, int64_t n) {
  if constexpr (W == kRuntimeWidth) {
    for (int64_t t = 0; t < n; ++t) {
      float acc = bias;
      for (int k = 0; k < kMinRuntimeWidth; ++k) acc += w[k] * window[t + k];
      result[t] = acc;
    }
    for (int k = kMinRuntimeWidth; k < width; ++k) {
      const float wk = w[k];
      for (int64_t t = 0; t < n; ++t) result[t] += wk * window[t + k];
    }
    if constexpr (ACT != Act::none)
      for (int64_t t = 0; t < n; ++t) result[t] = activate<ACT>(result[t]);
  } else {
    (void)width;
    for (int64_t t = 0; t < n; ++t) {
      float acc = bias;
      for (int k = 0; k < W; ++k) acc += w[k] * window[t + k];
      result[t] = activate<ACT>(acc);
    }
  }
}

// Across channels (one token): taps[k] + offset is the row of e at lag W-1-k; weights[k * row]
// the weights of tap k. The loop runs over channels; a runtime width as in convolve_time.
template <int W, Act ACT>
inline void convolve_channels(float* const (&taps)[kTapSlots<W>], int width, int64_t offset,
                              const float* __restrict weights, int64_t row, const float* __restrict bias,
                              float* __restrict result, int64_t n) {
  if constexpr (W == kRuntimeWidth) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = bias[c];
      for (int k = 0; k < kMinRuntimeWidth; ++k) acc += weights[k * row + c] * taps[k][offset + c];
      result[c] = acc;
    }
    for (int k = kMinRuntimeWidth; k < width; ++k) {
      const float* __restrict wk = weights + k * row;
      const float* __restrict xk = taps[k] + offset;
      for (int64_t c = 0; c < n; ++c) result[c] += wk[c] * xk[c];
    }
    if constexpr (ACT != Act::none)
      for (int64_t c = 0; c < n; ++c) result[c] = activate<ACT>(result[c]);
  } else {
    (void)width;
    for (int64_t c = 0; c < n; ++c) {
      float acc = bias[c];
      for (int k = 0; k < W; ++k) acc += weights[k * row + c] * taps[k][offset + c];
      result[c] = activate<ACT>(acc);
    }
  }
}

// The same, activated and stored to a contiguous output row. Where the build has AVX-512 this
// is one fused pass (avx512.hpp); elsewhere the f32 results go through L1 in chunks.
template <int W, Act ACT, class OutT>
inline void convolve_time_store(const float* __restrict window, const float (&w)[kTapSlots<W>], int width,
                                float bias, OutT* out, int64_t n, bool stream = false) {
#if defined(DK_CPU_HAVE_AVX512)
  avx512::convolve_time_store<W, ACT>(window, w, width, bias, out, n, stream);
#else
  (void)stream;
  alignas(64) float result[kStoreChunk];
  for (int64_t t = 0; t < n; t += kStoreChunk) {
    const int64_t m = min_i64(kStoreChunk, n - t);
    convolve_time<W, ACT>(window + t, w, width, bias, result, m);
    store_row(result, out + t, m);
  }
#endif
}

template <int W, Act ACT, class OutT>
inline void convolve_channels_store(float* const (&taps)[kTapSlots<W>], int width,
                                    const float* __restrict weights, int64_t row,
                                    const float* __restrict bias, OutT* out, int64_t n, bool stream = false) {
#if defined(DK_CPU_HAVE_AVX512)
  avx512::convolve_channels_store<W, ACT>(taps, width, weights, row, bias, out, n, stream);
#else
  (void)stream;
  alignas(64) float result[kStoreChunk];
  for (int64_t c = 0; c < n; c += kStoreChunk) {
    const int64_t m = min_i64(kStoreChunk, n - c);
    convolve_channels<W, ACT>(taps, width, c, weights + c, row, bias + c, result, m);
    store_row(result, out + c, m);
  }
#endif
}

// Non-temporal stores are weakly ordered: a kernel that streamed fences before it returns, so
// its results are visible once the pool reports it done.
inline void fence_streaming_stores() {
#if defined(DK_CPU_HAVE_AVX512)
  avx512::fence_streaming_stores();
#endif
}

// A strided output (decode with several tokens): staged in the output dtype through the same
// path as a contiguous row, then scattered, so the bits match those of a contiguous row.
template <int W, Act ACT, class OutT>
inline void convolve_channels_store_strided(float* const (&taps)[kTapSlots<W>], int width,
                                            const float* __restrict weights, int64_t row,
                                            const float* __restrict bias, OutT* out, int64_t stride,
                                            int64_t n) {
  if (stride == 1) {
    convolve_channels_store<W, ACT>(taps, width, weights, row, bias, out, n);
    return;
  }
  alignas(64) OutT staged[kStoreChunk];
  for (int64_t c = 0; c < n; c += kStoreChunk) {
    const int64_t m = min_i64(kStoreChunk, n - c);
    float* shifted[kTapSlots<W>];
    for (int k = 0; k < width_of<W>(width); ++k) shifted[k] = taps[k] + c;
    convolve_channels_store<W, ACT>(shifted, width, weights + c, row, bias + c, staged, m);
    for (int64_t i = 0; i < m; ++i) out[(c + i) * stride] = staged[i];
  }
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
