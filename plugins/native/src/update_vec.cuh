// causal_conv1d_update in the common decode layout at full width, the bandwidth case: Tq == 1,
// x rows contiguous, the state in x's dtype with its positions contiguous per channel ((lines, D,
// S) compact, kStateChanMajor) or its channels contiguous per position ((lines, S, D)
// transposed). A thread owns 16 bytes of channels and moves x and its state slab with 16-byte
// accesses: the instruction count per byte of the per-channel kernel halves or better.
#pragma once

#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

template <typename T_, int kS_, bool kStateChanMajor_>
struct UpdateVecTraits {
  using T = T_;
  static constexpr int kS = kS_;
  static constexpr bool kStateChanMajor = kStateChanMajor_;  // (lines, D, S) compact, else (lines, S, D)
  static constexpr int kNThreads = 128;
  static constexpr int kC = 16 / static_cast<int>(sizeof(T));  // channels per thread
  static constexpr int kRowsInFlight = 2;                      // rows whose loads a thread overlaps
};

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads) update_vec_kernel(const UpdateParams p) {
  using T = typename Kt::T;
  constexpr int kS = Kt::kS, kC = Kt::kC, kVecThreads = Kt::kNThreads, kInFlight = Kt::kRowsInFlight;
  constexpr bool kStateChanMajor = Kt::kStateChanMajor;
  union Pack {
    uint4 v;
    T e[kC];
  };
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kVecThreads + threadIdx.x) * kC;
  if (c0 >= p.dim) return;
  const StateView& st = p.state;
  ChannelTaps taps[kC];
  load_taps_vec<T, kC>(p.conv, c0, taps);
  const int first = kMaxWidth - p.conv.width;
  const bool silu = p.conv.silu;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * p.rows_per_block;
  const int64_t b1 = min(b0 + p.rows_per_block, static_cast<int64_t>(p.batch));
  const bool circular = p.cache_seqlens.data != nullptr;
  // Rows in flight: every load of kInFlight rows is issued before any of their stores (a store
  // may alias a later row's x for the compiler, so an unrolled loop waited row by row). H100,
  // batch 1024, dim-contiguous shift / circular: 49.3 / 41.1 -> 48.3 / 39.3 us; 126 registers.
  for (int64_t b = b0; b < b1; b += kInFlight) {
    Pack xv[kInFlight];
    int64_t n[kInFlight], line[kInFlight];
    // x and the ring position do not depend on the row's line: requested before the index, as
    // portable's decode does, so the row waits on two round trips, not three.
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      line[r] = -1;
      if (b + r >= b1) continue;
      xv[r].v = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + (b + r) * p.x_batch_stride + c0);
      n[r] = circular ? load_index(p.cache_seqlens, b + r) : 0;
      line[r] = state_line(p.state_indices, b + r, st, p.conv, c0 == 0);
    }
    // Chan-major: kS accesses cover channels c0.. c0+kC-1 at all positions, element (i, j) at
    // flat i*kS + j. Position-major: access j holds position j of the kC channels.
    Pack sp[kInFlight][kS];
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      if (line[r] < 0) continue;
      const T* const sr = static_cast<const T*>(st.data) + line[r] * st.line_stride + c0 * st.chan_stride;
#pragma unroll
      for (int j = 0; j < kS; ++j)
        sp[r][j].v = kStateChanMajor ? reinterpret_cast<const uint4*>(sr)[j]
                                     : *reinterpret_cast<const uint4*>(sr + j * st.pos_stride);
    }
#pragma unroll
    for (int r = 0; r < kInFlight; ++r) {
      if (line[r] < 0) continue;
      auto sget = [&](int i, int j) -> float {
        return kStateChanMajor ? to_float(sp[r][(i * kS + j) / kC].e[(i * kS + j) % kC])
                               : to_float(sp[r][j].e[i]);
      };
      auto sset = [&](int i, int j, float v) {
        if constexpr (kStateChanMajor)
          sp[r][(i * kS + j) / kC].e[(i * kS + j) % kC] = from_float<T>(v);
        else
          sp[r][j].e[i] = from_float<T>(v);
      };
      // Circular mode writes one position, n0; position-major, that is one of the kS vectors.
      int32_t n0 = -1;
      if (!circular) {
#pragma unroll
        for (int i = 0; i < kC; ++i) {
          const float cur = to_float(xv[r].e[i]);
          const float h0 = kS >= 3 ? sget(i, kS >= 3 ? kS - 3 : 0) : 0.f;
          const float h1 = kS >= 2 ? sget(i, kS >= 2 ? kS - 2 : 0) : 0.f;
          const float h2 = sget(i, kS - 1);
          xv[r].e[i] = from_float<T>(conv_point<T>(taps[i], first, h0, h1, h2, cur, silu));
#pragma unroll
          for (int j = 0; j + 1 < kS; ++j) sset(i, j, sget(i, j + 1));
          sset(i, kS - 1, cur);
        }
      } else {
        n0 = static_cast<int32_t>(((n[r] % kS) + kS) % kS);
#pragma unroll
        for (int i = 0; i < kC; ++i) {
          const float cur = to_float(xv[r].e[i]);
          float h[kHalo];
#pragma unroll
          for (int k = 0; k < kHalo; ++k) {
            const int32_t pos = ((n0 - kHalo + k) % kS + kS) % kS;
            h[k] = 0.f;
#pragma unroll
            for (int j = 0; j < kS; ++j)
              if (j == pos) h[k] = sget(i, j);
          }
          xv[r].e[i] = from_float<T>(conv_point<T>(taps[i], first, h[0], h[1], h[2], cur, silu));
#pragma unroll
          for (int j = 0; j < kS; ++j)
            if (j == n0) sset(i, j, cur);
        }
      }
      *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + (b + r) * p.out_batch_stride + c0) = xv[r].v;
      T* const sr = static_cast<T*>(st.data) + line[r] * st.line_stride + c0 * st.chan_stride;
#pragma unroll
      for (int j = 0; j < kS; ++j) {
        if (kStateChanMajor)
          reinterpret_cast<uint4*>(sr)[j] = sp[r][j].v;  // n0's elements lie in every vector
        else if (n0 < 0 || j == n0)
          *reinterpret_cast<uint4*>(sr + j * st.pos_stride) = sp[r][j].v;
      }
    }
  }
}

template <typename Kt, typename Kernel>
cudaError_t launch_update_vec(Kernel kernel, UpdateParams p, const LaunchOptions& o, cudaStream_t stream) {
  const int64_t chan_blocks = (p.dim / Kt::kC + Kt::kNThreads - 1) / Kt::kNThreads;
  // Rows per block: a thread loads its kC channels' taps once for all its rows, and walks its
  // rows kRowsInFlight at a time. H200, D=8192 bf16, graph replay, 1 / 2 / 3 / 16 rows a block: batch
  // 64 4.34 / 4.59 / 5.27 / 15.2 us, batch 256 11.1 / 10.9 / 12.1 / 18.4, batch 1024 38.8 / 36.5 /
  // 36.8 / 39.1 (one row in flight). Two rows once that still leaves about four blocks per SM
  // (more for a batch that would overflow the grid's y extent). Position-major circular mode
  // stores one of a row's kS vectors, so a row moves fewer bytes and the taps weigh more: four
  // rows. H100, batch 1024 / 256, 2 -> 4 rows: 39.4 -> 38.0 / 12.2 -> 11.9 us (compact circular,
  // which stores every vector, 49.0 -> 49.2: it keeps two).
  const int64_t sms = std::max(o.sm_count, 1);
  const bool stores_one_vector = p.cache_seqlens.data != nullptr && !Kt::kStateChanMajor;
  const int64_t planned = p.batch * chan_blocks >= 8 * sms ? (stores_one_vector ? 4 : 2) : 1;
  const int64_t rows =
      std::max<int64_t>(o.update_rows > 0 ? o.update_rows : planned, (p.batch + 65534) / 65535);
  p.rows_per_block = static_cast<int32_t>(rows);
  const int64_t blocks_y = (p.batch + rows - 1) / rows;
  if (blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(chan_blocks), static_cast<unsigned>(blocks_y));
  return launch_kernel(kernel, grid, dim3(Kt::kNThreads), 0, stream, o.pdl, p);
}

}  // namespace deltakern::native
