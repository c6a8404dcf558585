// AVX-512 versions of the hot loops (x86-64-v4 build only): convolve, activate and round
// to the output dtype in one pass, sixteen outputs per step. The compiler's vectorisation of
// the portable loops is correct but leaves the f32 result in memory between passes; here it
// stays in registers, and silu is arranged around the FMA pipe, which bounds this loop.
#pragma once

#ifndef DK_CPU_ISA
#error "avx512.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define DK_CPU_HAVE_AVX512 1

#include <immintrin.h>

#include <cstdint>

#include "numeric.hpp"
#include "width.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA::avx512 {

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

// Sixteen results as output bits: bf16 rounded to nearest even with NaNs kept NaNs (the bits
// of bf16_from_f32), f16 by F16C.
inline __m256i to_bits16(Bf16*, __m512 v) {
#if defined(__AVX512BF16__)
  // One instruction instead of eight; it rounds to nearest even and quiets NaNs like
  // bf16_from_f32, but reads a denormal f32 (below 2^-126) as zero.
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
#else
  const __m512i u = _mm512_castps_si512(v);
  const __m512i top = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x40)));
#endif
}
inline __m256i to_bits16(F16*, __m512 v) {
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

inline void store16(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
// A masked truncating store (vpmovdw to memory) is microcoded on some CPUs (AMD Zen 4): a full
// row takes a plain store; a tail narrows in a register (the empty asm keeps the compiler from
// fusing the two back) and then stores under the mask.
template <class OutT>
inline void store16(OutT* p, __m512 v, __mmask16 m) {
  __m256i bits = to_bits16(static_cast<OutT*>(nullptr), v);
  if (m == __mmask16(0xffff)) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
  } else {
    asm("" : "+v"(bits));
    _mm256_mask_storeu_epi16(p, m, bits);
  }
}

// Writes out[0, n), sixteen values of result(t, mask) at a time. With `stream`, the aligned
// middle goes out through non-temporal stores: an output far larger than the caches is not
// read for ownership first (a third of the memory traffic) and does not evict x. Always inline:
// out of line, its result() reloads the taps from the stack on every step (a call site more,
// rows_time_contiguous's, made GCC outline it: tile_along_time 10-20% slower).
template <class OutT, class Result>
[[gnu::always_inline]] inline void store_results(OutT* out, int64_t n, bool stream, Result&& result) {
  int64_t t = 0;
  if (stream) {
    const int64_t head = min_i64(n, static_cast<int64_t>((0 - reinterpret_cast<uintptr_t>(out)) & 63) /
                                        static_cast<int64_t>(sizeof(OutT)));
    for (; t < head; t += 16) {
      const __mmask16 m = tail_mask(head - t);
      store16(out + t, result(t, m), m);
    }
    t = head;
    if constexpr (sizeof(OutT) == 4) {
      for (; t + 16 <= n; t += 16)
        _mm512_stream_ps(reinterpret_cast<float*>(out + t), result(t, __mmask16(0xffff)));
    } else {
      for (; t + 32 <= n; t += 32) {
        const __m256i lo = to_bits16(static_cast<OutT*>(nullptr), result(t, __mmask16(0xffff)));
        const __m256i hi = to_bits16(static_cast<OutT*>(nullptr), result(t + 16, __mmask16(0xffff)));
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + t),
                            _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
      }
    }
  }
  // Two independent rows of sixteen per step: each is a long dependency chain (taps, exp,
  // division), and the pair gives the out-of-order core work to overlap.
  constexpr __mmask16 all = 0xffff;
  for (; t + 32 <= n; t += 32) {
    const __m512 a = result(t, all);
    const __m512 b = result(t + 16, all);
    store16(out + t, a, all);
    store16(out + t + 16, b, all);
  }
  for (; t < n; t += 16) {
    const __mmask16 m = tail_mask(n - t);
    store16(out + t, result(t, m), m);
  }
}

// silu as numeric.hpp's silu, arranged for the FMA pipe, which bounds this loop: vscalefps
// applies 2^n and saturates by itself, so only x > 86 needs a clamp (e^-x is then below f32's
// normal range and 1 + e^-x is 1); with a fused multiply-add, n * ln2 needs no hi/lo split.
// Twelve operations and one division per sixteen values.
inline __m512 silu16(__m512 x) {
  // min returns its second operand for a NaN x: the exponent stays finite, and x / (1 + z)
  // is NaN all the same.
  const __m512 xc = _mm512_min_ps(x, _mm512_set1_ps(-kExpMin));
  const __m512 magic = _mm512_set1_ps(kRoundMagic);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(-kLog2e), magic), magic);
  const __m512 r = _mm512_fnmsub_ps(n, _mm512_set1_ps(kLn2), xc);  // -x - n ln2
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  const __m512 z = _mm512_scalef_ps(p, n);
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), z));
}

template <Act ACT>
inline __m512 activate16(__m512 v) {
  if constexpr (ACT == Act::silu) {
    return silu16(v);
  } else {
    return v;
  }
}

// A runtime width (W = kRuntimeWidth) unrolls all kMaxWidth taps; those past the width are
// skipped by a branch that goes the same way for the whole call.
template <int W, Act ACT, class OutT>
inline void convolve_time_store(const float* __restrict window, const float (&w)[kTapSlots<W>], int width,
                                float bias, OutT* out, int64_t n, bool stream) {
  __m512 taps[kTapSlots<W>];
  for (int k = 0; k < kTapSlots<W>; ++k) taps[k] = _mm512_set1_ps(w[k]);
  const __m512 b = _mm512_set1_ps(bias);
  store_results(out, n, stream, [&](int64_t t, __mmask16 m) {
    __m512 acc = b;
    for (int k = 0; k < kTapSlots<W>; ++k)
      if (tap_in_use<W>(k, width))
        acc = _mm512_fmadd_ps(taps[k], _mm512_maskz_loadu_ps(m, window + t + k), acc);
    return activate16<ACT>(acc);
  });
}

template <int W, Act ACT, class OutT>
inline void convolve_channels_store(float* const (&taps)[kTapSlots<W>], int width,
                                    const float* __restrict weights, int64_t row,
                                    const float* __restrict bias, OutT* out, int64_t n, bool stream) {
  store_results(out, n, stream, [&](int64_t c, __mmask16 m) {
    __m512 acc = _mm512_maskz_loadu_ps(m, bias + c);
    for (int k = 0; k < kTapSlots<W>; ++k)
      if (tap_in_use<W>(k, width))
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, weights + k * row + c),
                              _mm512_maskz_loadu_ps(m, taps[k] + c), acc);
    return activate16<ACT>(acc);
  });
}

inline void fence_streaming_stores() { _mm_sfence(); }

}  // namespace deltakern::portable::cpu::DK_CPU_ISA::avx512

#endif
