// causal_conv1d_update, staged through shared memory: the kernel for any S (up to
// kMaxStateLen) and Tq (up to kMaxUpdateTokens), any state dtype and any strides. One block per
// (rows_per_block batch rows, chans_per_block channels) stages its slabs of x (channels x Tq) and
// of the state rows (channels x S) in shared memory with 16-byte copies along whichever dimension
// is contiguous, computes one (channel, row) per thread there, and copies them back, so that S,
// Tq, the state dtype and every stride are run-time values without register arrays of run-time
// size.
#pragma once

#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

template <typename T_>
struct UpdateStagedTraits {
  using T = T_;
  static constexpr int kNThreads = 256;
  static constexpr int kMaxRows = 8;  // batch rows of one block
  // The 48 KiB a block may take without opting in holds the dynamic slabs and the kernel's static
  // lines[] (an x of f16 with f32 states at S = Tq = 64 filled exactly 48 KiB and failed to launch).
  static constexpr int64_t kSmemLimit = 48 * 1024 - kMaxRows * static_cast<int64_t>(sizeof(int64_t));
};

// Where element (channel c, position j) of a staged slab sits in shared memory.
struct SlabLayout {
  int32_t sc, sj;  // strides in elements
  int8_t kind;     // 0: one contiguous span [c][j]; 1: rows [j][c] (channel stride 1); 2: gathered
};

__device__ __forceinline__ SlabLayout slab_layout(int64_t gsc, int64_t gsj, int32_t nc, int32_t nj) {
  if (nj == 1) gsj = 1;  // a single position has no stride to speak of
  if (gsj == 1 && (gsc == nj || nc == 1)) return {nj, 1, 0};
  if (gsc == 1) return {1, nc, 1};
  return {nj, 1, 2};
}

// Copies the slabs of `nrows` batch rows between global memory (element size esz, strides
// gsc/gsj, row r at gmem(r)) and shared memory (row r at smem + r * smem_row_bytes), skipping
// rows whose line is negative when `lines` is given. Work is spread over all threads across
// rows, 16 bytes at a time where the contiguous run and its address allow.
template <int kNThreads, bool kToShared, typename GmemOf>
__device__ void copy_slabs(unsigned char* smem, int64_t smem_row_bytes, int32_t nrows, const int64_t* lines,
                           GmemOf gmem, int esz, int32_t nc, int32_t nj, int64_t gsc, int64_t gsj,
                           const SlabLayout& l) {
  const int tid = threadIdx.x;
  auto move = [&](unsigned char* s, unsigned char* g, int bytes) {
    unsigned char* dst = kToShared ? s : g;
    const unsigned char* src = kToShared ? g : s;
    if (bytes == 16)
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    else if (bytes == 4)
      *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
    else
      *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src);
  };
  // 32-bit index arithmetic: a slab is at most 48 KB.
  if (l.kind == 2) {  // gathered, element by element
    const int32_t per_row = nc * nj;
    for (int32_t i = tid; i < per_row * nrows; i += kNThreads) {
      const int32_t r = i / per_row;
      if (lines != nullptr && lines[r] < 0) continue;
      const int32_t e = i - r * per_row, c = e / nj, j = e - c * nj;
      move(smem + r * smem_row_bytes + (c * l.sc + j * l.sj) * esz, gmem(r) + (c * gsc + j * gsj) * esz, esz);
    }
    return;
  }
  // kind 0: one run of nc*nj elements per row; kind 1: nj runs of nc elements, gsj apart.
  const int32_t runs = l.kind == 0 ? 1 : nj;
  const int32_t run_bytes = (l.kind == 0 ? nc * nj : nc) * esz;
  bool wide = (run_bytes & 15) == 0 && (l.kind == 0 || ((gsj * esz) & 15) == 0);
  for (int32_t r = 0; r < nrows && wide; ++r)
    if ((lines == nullptr || lines[r] >= 0) && (reinterpret_cast<uintptr_t>(gmem(r)) & 15) != 0) wide = false;
  const int unit = wide ? 16 : esz;
  const int32_t per_run = run_bytes / unit, per_row = per_run * runs;
  for (int32_t i = tid; i < per_row * nrows; i += kNThreads) {
    const int32_t r = i / per_row;
    if (lines != nullptr && lines[r] < 0) continue;
    const int32_t e = i - r * per_row, run = e / per_run, u = e - run * per_run;
    move(smem + r * smem_row_bytes + run * run_bytes + u * unit, gmem(r) + run * gsj * esz + u * unit, unit);
  }
}

__host__ __device__ constexpr int64_t align16(int64_t v) { return (v + 15) / 16 * 16; }

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads) update_staged_kernel(const UpdateParams p) {
  using T = typename Kt::T;
  constexpr int kNThreads = Kt::kNThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int64_t lines[Kt::kMaxRows];
  wait_for_previous_grid();
  allow_next_grid();  // a short kernel: let the next call's launch overlap it

  const StateView& st = p.state;
  const int ssz = st.dtype == ScalarType::f32 ? 4 : 2;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * p.chans_per_block;
  const int32_t nc = static_cast<int32_t>(p.dim - c0 < p.chans_per_block ? p.dim - c0 : p.chans_per_block);
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * p.rows_per_block;
  const int32_t nrows =
      static_cast<int32_t>(p.batch - b0 < p.rows_per_block ? p.batch - b0 : p.rows_per_block);
  const int32_t tq = p.tokens, S = st.len;
  const int64_t x_bytes = align16(static_cast<int64_t>(p.chans_per_block) * tq * sizeof(T));
  const int64_t s_bytes = align16(static_cast<int64_t>(p.chans_per_block) * S * ssz);
  auto x_slab = [&](int r) { return smem + r * (x_bytes + s_bytes); };
  auto s_slab = [&](int r) { return smem + r * (x_bytes + s_bytes) + x_bytes; };
  const SlabLayout xl = slab_layout(p.x_chan_stride, p.x_time_stride, nc, tq);
  const SlabLayout sl = slab_layout(st.chan_stride, st.pos_stride, nc, S);
  auto x_gmem = [&](int r) {
    return reinterpret_cast<unsigned char*>(static_cast<T*>(p.x) + (b0 + r) * p.x_batch_stride +
                                            c0 * p.x_chan_stride);
  };
  auto out_gmem = [&](int r) {
    return reinterpret_cast<unsigned char*>(static_cast<T*>(p.out) + (b0 + r) * p.out_batch_stride +
                                            c0 * p.out_chan_stride);
  };
  // The outputs leave the x slab (laid out as xl says) for out's strides: out's own copy pattern
  // where it places the slab's elements alike (always in place), else element by element.
  const SlabLayout ol_own = slab_layout(p.out_chan_stride, p.out_time_stride, nc, tq);
  const SlabLayout ol = ol_own.sc == xl.sc && ol_own.sj == xl.sj ? ol_own : SlabLayout{xl.sc, xl.sj, 2};
  auto s_gmem = [&](int r) {
    return static_cast<unsigned char*>(st.data) + (lines[r] * st.line_stride + c0 * st.chan_stride) * ssz;
  };

  // Round trip 1: the lines, the x slabs and this thread's taps, all independent.
  if (threadIdx.x < nrows)
    lines[threadIdx.x] = state_line(p.state_indices, b0 + threadIdx.x, st, p.conv, blockIdx.y == 0);
  copy_slabs<kNThreads, true>(
      x_slab(0), x_bytes + s_bytes, nrows, nullptr, [&](int r) { return x_gmem(r); }, sizeof(T), nc, tq,
      p.x_chan_stride, p.x_time_stride, xl);
  const int32_t c = threadIdx.x;  // one channel per thread in the compute phase
  ChannelTaps taps{};
  if (c < nc) taps = load_taps(p.conv, c0 + c);
  __syncthreads();
  // Round trip 2: the state slabs of the rows that are not skipped.
  copy_slabs<kNThreads, true>(
      s_slab(0), x_bytes + s_bytes, nrows, lines, [&](int r) { return s_gmem(r); }, ssz, nc, S,
      st.chan_stride, st.pos_stride, sl);
  __syncthreads();

  const int first = kMaxWidth - p.conv.width;
  const bool silu = p.conv.silu;
  if (c < nc) {
    for (int32_t r = 0; r < nrows; ++r) {
      if (lines[r] < 0) continue;
      T* xs = reinterpret_cast<T*>(x_slab(r));
      void* ss = s_slab(r);
      auto xi = [&](int32_t t) { return c * xl.sc + t * xl.sj; };
      auto si = [&](int64_t j) { return c * sl.sc + j * sl.sj; };
      if (p.cache_seqlens.data == nullptr) {
        // Shift: e = concat(state, x); the window of token 0 is the state's last three entries.
        float h[kHalo];
#pragma unroll
        for (int k = 0; k < kHalo; ++k) {
          const int32_t j = S - kHalo + k;
          h[k] = j >= 0 && k >= first ? load_float(ss, si(j), st.dtype) : 0.f;
        }
        // New state s'[j] = e[tq + j]: ascending j reads entries before overwriting them.
        for (int32_t j = 0; j < S; ++j) {
          const int32_t src = tq + j;
          const float v = src < S ? load_float(ss, si(src), st.dtype) : to_float(xs[xi(src - S)]);
          store_float(ss, si(j), st.dtype, v);
        }
        for (int32_t t = 0; t < tq; ++t) {
          const float xt = to_float(xs[xi(t)]);
          xs[xi(t)] = from_float<T>(conv_point<T>(taps, first, h[0], h[1], h[2], xt, silu));
          h[0] = h[1];
          h[1] = h[2];
          h[2] = xt;
        }
      } else {
        // Circular: token t reads history at (n + t - 3 + k) mod S, then is written at (n + t) mod S.
        const int64_t n = load_index(p.cache_seqlens, b0 + r);
        auto wrap = [&](int64_t v) { return ((v % S) + S) % S; };
        for (int32_t t = 0; t < tq; ++t) {
          float e[kHalo];
#pragma unroll
          for (int k = 0; k < kHalo; ++k)
            e[k] = k >= first ? load_float(ss, si(wrap(n + t - kHalo + k)), st.dtype) : 0.f;
          const float xt = to_float(xs[xi(t)]);
          xs[xi(t)] = from_float<T>(conv_point<T>(taps, first, e[0], e[1], e[2], xt, silu));
          store_float(ss, si(wrap(n + t)), st.dtype, xt);
        }
      }
    }
  }
  __syncthreads();

  copy_slabs<kNThreads, false>(
      x_slab(0), x_bytes + s_bytes, nrows, lines, [&](int r) { return out_gmem(r); }, sizeof(T), nc, tq,
      p.out_chan_stride, p.out_time_stride, ol);
  copy_slabs<kNThreads, false>(
      s_slab(0), x_bytes + s_bytes, nrows, lines, [&](int r) { return s_gmem(r); }, ssz, nc, S,
      st.chan_stride, st.pos_stride, sl);
}

// Sizes the slabs to the shared memory a block may take (cudaErrorInvalidValue when even the
// smallest does not fit) and launches the instantiation `kernel` of traits Kt.
template <typename Kt, typename Kernel>
cudaError_t launch_update_staged(Kernel kernel, UpdateParams p, const LaunchOptions& o, cudaStream_t stream) {
  using T = typename Kt::T;
  const int ssz = p.state.dtype == ScalarType::f32 ? 4 : 2;
  // Several rows a block once the batch fills the machine on its own: more bytes in flight per
  // block, each weight read once per block.
  int64_t rows = 1;
  while (rows < Kt::kMaxRows && p.batch >= rows * 2 * 128) rows *= 2;
  p.rows_per_block = static_cast<int32_t>(rows);
  p.chans_per_block = Kt::kNThreads;
  auto smem_for = [&](int64_t c) {
    return p.rows_per_block *
           (align16(c * p.tokens * static_cast<int64_t>(sizeof(T))) + align16(c * p.state.len * ssz));
  };
  while (p.rows_per_block > 1 && smem_for(p.chans_per_block) > Kt::kSmemLimit) p.rows_per_block /= 2;
  while (p.chans_per_block > 32 && smem_for(p.chans_per_block) > Kt::kSmemLimit) p.chans_per_block /= 2;
  if (smem_for(p.chans_per_block) > Kt::kSmemLimit) return cudaErrorInvalidValue;
  const int64_t blocks_y = (p.dim + p.chans_per_block - 1) / p.chans_per_block;
  if (blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((p.batch + p.rows_per_block - 1) / p.rows_per_block),
                  static_cast<unsigned>(blocks_y));
  return launch_kernel(kernel, grid, dim3(Kt::kNThreads), smem_for(p.chans_per_block), stream, o.pdl, p);
}

}  // namespace deltakern::native
