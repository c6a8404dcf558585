// deltakern plugin SDK, CUDA device code: circular conv states (causal_conv1d_update with
// cache_seqlens). A row that has seen n tokens keeps its last S inputs in a ring of S positions:
// the oldest at position n mod S, each next one a position on. A decode token reads the ring
// oldest first and is written over the oldest entry, at n mod S.
#pragma once

namespace deltakern::plugin::cuda {

// h = the ring s read oldest first, from position `oldest` (n mod S, in [0, S)): h[j] =
// s[(oldest + j) mod S]. Selected among compile-time indices, so that s and h stay in registers;
// with oldest = 0 (shift mode's row as it lies) it is a copy.
template <int kS>
__device__ __forceinline__ void ring_oldest_first(const float (&s)[kS], int oldest, float (&h)[kS]) {
#pragma unroll
  for (int j = 0; j < kS; ++j) {
    h[j] = s[j];
#pragma unroll
    for (int m = 1; m < kS; ++m)
      if (oldest == m) h[j] = s[(j + m) % kS];
  }
}

}  // namespace deltakern::plugin::cuda
