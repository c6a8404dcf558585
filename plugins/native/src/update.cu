// causal_conv1d_update (decode), four kernels chosen by the call's shape:
// - update_lean_kernel: batch < 16, Tq == 1, width 4, S == 3 in shift mode, everything in x's
//   dtype: one thread per (channel, row) with all but the index compile-time, the latency case
//   (batch 1) in its commonest shape;
// - update_vec_kernel: Tq == 1, contiguous x rows, the state in x's dtype laid out (lines, D, S)
//   compact or (lines, S, D), batch >= 16: 16-byte accesses over channels, the bandwidth case;
// - update_direct_kernel: S <= 4 and Tq <= 4 in any strides: one thread per (channel, row), two
//   dependent round trips and no barrier, the other small shapes;
// - update_kernel (staged): anything else (long states, many draft tokens). One block per
//   (rows_per_block batch rows, chans_per_block channels) stages its slabs of x (channels x Tq)
//   and of the state rows (channels x S) in shared memory with 16-byte copies along whichever
//   dimension is contiguous, computes one (channel, row) per thread there, and copies them back,
//   so that S, Tq, the state dtype and every stride are run-time values without register
//   arrays of run-time size.
// Every kernel reads x and writes its outputs to out (x itself in place, causal_conv1d_update;
// a separate tensor with its own strides for causal_conv1d_update_out), skipped rows of out left
// as they were; each output is stored once, after every input it depends on was loaded.
#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

template <typename T_, int kNThreads_, int kMaxRows_>
struct UpdateTraits {
  using T = T_;
  static constexpr int kNThreads = kNThreads_;
  static constexpr int kMaxRows = kMaxRows_;
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
__global__ void __launch_bounds__(Kt::kNThreads) update_kernel(const UpdateParams p) {
  using T = typename Kt::T;
  constexpr int kNThreads = Kt::kNThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int64_t lines[Kt::kMaxRows];
  wait_for_previous_grid();
  allow_next_grid();  // a short kernel: let the next call's launch overlap it

  const StateView& st = p.state;
  const int ssz = st.dtype == kF32 ? 4 : 2;
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

// The common decode shape (S <= 4, Tq <= 4): one thread per (channel, row), state and x read
// straight into registers (consecutive threads are consecutive channels, so every access is
// coalesced in both state layouts), weights loaded once per thread for all its rows. Two
// dependent round trips (the index, then the state row) and no barrier: what batch 1 needs.
constexpr int kDirectThreads = 256;
constexpr int kDirectMaxTokens = 4;

template <typename T, int kS>
__global__ void __launch_bounds__(kDirectThreads) update_direct_kernel(const UpdateParams p) {
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kDirectThreads + threadIdx.x;
  if (c >= p.dim) return;
  const StateView& st = p.state;
  const ChannelTaps taps = load_taps(p.conv, c);
  const int first = kMaxWidth - p.conv.width;
  const bool silu = p.conv.silu;
  const int32_t tq = p.tokens;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * p.rows_per_block;
  const int64_t b1 = min(b0 + p.rows_per_block, static_cast<int64_t>(p.batch));
#pragma unroll 2
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t line = state_line(p.state_indices, b, st, p.conv, c == 0);
    if (line < 0) continue;
    const T* const xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_chan_stride;
    T* const outr = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_chan_stride;
    float xv[kDirectMaxTokens], sv[kS];
#pragma unroll
    for (int t = 0; t < kDirectMaxTokens; ++t) xv[t] = t < tq ? to_float(xr[t * p.x_time_stride]) : 0.f;
#pragma unroll
    for (int j = 0; j < kS; ++j) sv[j] = load_float(st.data, state_offset(st, line, c, j), st.dtype);
    float out[kDirectMaxTokens];
    if (p.cache_seqlens.data == nullptr) {
      // Shift: e = concat(state, x); e[i] for a compile-time i.
      auto e = [&](int i) {
        return i < 0 ? 0.f : (i < kS ? sv[i < kS ? i : 0] : xv[i - kS < kDirectMaxTokens ? i - kS : 0]);
      };
#pragma unroll
      for (int t = 0; t < kDirectMaxTokens; ++t)
        out[t] = conv_point<T>(taps, first, e(kS + t - 3), e(kS + t - 2), e(kS + t - 1), e(kS + t), silu);
      // New state s'[j] = e[tq + j], tq known at run time only: select it.
      float ns[kS];
#pragma unroll
      for (int j = 0; j < kS; ++j) {
        ns[j] = e(j);
#pragma unroll
        for (int q = 1; q <= kDirectMaxTokens; ++q)
          if (q == tq) ns[j] = e(q + j);
      }
#pragma unroll
      for (int j = 0; j < kS; ++j) sv[j] = ns[j];
    } else {
      // Circular: token t reads history at (n + t - 3 + k) mod S, then is written at (n + t) mod S.
      const int64_t n = load_index(p.cache_seqlens, b);
      const int32_t n0 = static_cast<int32_t>(((n % kS) + kS) % kS);
#pragma unroll
      for (int t = 0; t < kDirectMaxTokens; ++t) {
        if (t >= tq) break;
        float h[kHalo];
#pragma unroll
        for (int k = 0; k < kHalo; ++k) {
          const int32_t pos = ((n0 + t - kHalo + k) % kS + kS) % kS;
          h[k] = 0.f;
#pragma unroll
          for (int j = 0; j < kS; ++j)
            if (j == pos) h[k] = sv[j];
        }
        out[t] = conv_point<T>(taps, first, h[0], h[1], h[2], xv[t], silu);
        const int32_t w = (n0 + t) % kS;
#pragma unroll
        for (int j = 0; j < kS; ++j)
          if (j == w) sv[j] = xv[t];
      }
    }
#pragma unroll
    for (int t = 0; t < kDirectMaxTokens; ++t)
      if (t < tq) outr[t * p.out_time_stride] = from_float<T>(out[t]);
#pragma unroll
    for (int j = 0; j < kS; ++j) store_float(st.data, state_offset(st, line, c, j), st.dtype, sv[j]);
  }
}

template <typename T>
static cudaError_t launch_update_direct(UpdateParams p, const LaunchOptions& o, cudaStream_t stream) {
  // Rows per thread: enough blocks to fill the machine, then longer per-thread loops.
  const int64_t chan_blocks = (p.dim + kDirectThreads - 1) / kDirectThreads;
  const int64_t target_blocks = static_cast<int64_t>(std::max(o.sm_count, 1)) * 8;
  int64_t rows = std::max<int64_t>(1, (p.batch * chan_blocks) / target_blocks);
  rows = std::min<int64_t>(rows, 16);
  p.rows_per_block = static_cast<int32_t>(rows);
  const int64_t blocks_y = (p.batch + rows - 1) / rows;
  if (chan_blocks > INT32_MAX || blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(chan_blocks), static_cast<unsigned>(blocks_y));
  switch (p.state.len) {
    case 1:
      return launch_kernel(update_direct_kernel<T, 1>, grid, dim3(kDirectThreads), 0, stream, o.pdl, p);
    case 2:
      return launch_kernel(update_direct_kernel<T, 2>, grid, dim3(kDirectThreads), 0, stream, o.pdl, p);
    case 3:
      return launch_kernel(update_direct_kernel<T, 3>, grid, dim3(kDirectThreads), 0, stream, o.pdl, p);
    default:
      return launch_kernel(update_direct_kernel<T, 4>, grid, dim3(kDirectThreads), 0, stream, o.pdl, p);
  }
}

// Decode at small batch in its commonest shape: one token, width 4, a shift-mode state of S = 3,
// weights, bias and state in x's dtype (the conv layers of Qwen3-Next and Kimi Linear). With the
// rest compile-time, a thread's path is the row's index, then the state row (x and the taps are
// loaded before the index is known), then the stores; 64 threads a block, so that batch 1 spreads
// over D / 64 SMs. Same arithmetic as the per-channel kernel.
constexpr int kLeanThreads = 64;
// From batch 16 on the 16-byte kernel wins (H200, D=8192, bf16, graph replay: this kernel 1.19 /
// 1.57 / 10.2 / 39.8 / 158 us at batch 1 / 8 / 64 / 256 / 1024, the 16-byte kernel 4.4 / 12.6 / 39.4
// us from batch 64; the per-channel kernel it replaces took 2.45 / 2.77 us at batch 1 / 8).
constexpr int kLeanMaxBatch = 16;

template <typename T>
__global__ void __launch_bounds__(kLeanThreads) update_lean_kernel(const UpdateParams p) {
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kLeanThreads + threadIdx.x;
  const int64_t b = blockIdx.y;
  if (c >= p.dim) return;
  const ConvCommon& conv = p.conv;
  const StateView& st = p.state;
  const T* const w = static_cast<const T*>(conv.weight) + c * conv.w_chan_stride;
  ChannelTaps taps;
#pragma unroll
  for (int k = 0; k < kMaxWidth; ++k) taps.w[k] = to_float(__ldg(w + k * conv.w_tap_stride));
  taps.bias =
      conv.bias != nullptr ? to_float(__ldg(static_cast<const T*>(conv.bias) + c * conv.bias_stride)) : 0.f;
  const T* const xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_chan_stride;
  T* const outr = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_chan_stride;
  const float xv = to_float(*xr);
  const int64_t line = state_line(p.state_indices, b, st, conv, c == 0);
  if (line < 0) return;  // padded: out and the row stay as they are
  T* const row = static_cast<T*>(st.data) + line * st.line_stride + c * st.chan_stride;
  const float s0 = to_float(row[0]), s1 = to_float(row[st.pos_stride]), s2 = to_float(row[2 * st.pos_stride]);
  *outr = from_float<T>(conv_point<T>(taps, 0, s0, s1, s2, xv, conv.silu));
  row[0] = from_float<T>(s1);
  row[st.pos_stride] = from_float<T>(s2);
  row[2 * st.pos_stride] = from_float<T>(xv);
}

template <typename T>
static cudaError_t launch_update_lean(const UpdateParams& p, const LaunchOptions& o, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.dim + kLeanThreads - 1) / kLeanThreads),
                  static_cast<unsigned>(p.batch));
  return launch_kernel(update_lean_kernel<T>, grid, dim3(kLeanThreads), 0, stream, o.pdl, p);
}

// The shape update_lean_kernel takes.
static bool lean_shape(const UpdateParams& p, int32_t x_dtype) {
  const ConvCommon& c = p.conv;
  return p.batch < kLeanMaxBatch && p.tokens == 1 && p.cache_seqlens.data == nullptr && p.state.len == 3 &&
         c.width == kMaxWidth && c.w_dtype == x_dtype && p.state.dtype == x_dtype &&
         (c.bias == nullptr || c.bias_dtype == x_dtype) && p.dim / kLeanThreads < INT32_MAX;
}

// The common decode layout at full width: Tq == 1, x rows contiguous, the state in x's dtype
// with its positions contiguous per channel ((lines, D, S) compact, kStateChanMajor) or its
// channels contiguous per position ((lines, S, D) transposed). A thread owns 16 bytes of
// channels and moves x and its state slab with 16-byte accesses: the instruction count per
// byte of the per-channel kernel halves or better.
constexpr int kVecThreads = 128;

template <typename T, int kS, bool kStateChanMajor>
__global__ void __launch_bounds__(kVecThreads) update_vec_kernel(const UpdateParams p) {
  constexpr int kC = 16 / static_cast<int>(sizeof(T));  // channels per thread
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
#pragma unroll 2
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t line = state_line(p.state_indices, b, st, p.conv, c0 == 0);
    if (line < 0) continue;
    const T* const xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + c0;
    T* const outr = static_cast<T*>(p.out) + b * p.out_batch_stride + c0;
    T* const sr = static_cast<T*>(st.data) + line * st.line_stride + c0 * st.chan_stride;
    Pack xv;
    xv.v = *reinterpret_cast<const uint4*>(xr);
    // Chan-major: kS accesses cover channels c0.. c0+kC-1 at all positions, element (i, j) at
    // flat i*kS + j. Position-major: access j holds position j of the kC channels.
    Pack sp[kS];
#pragma unroll
    for (int j = 0; j < kS; ++j)
      sp[j].v = kStateChanMajor ? reinterpret_cast<const uint4*>(sr)[j]
                                : *reinterpret_cast<const uint4*>(sr + j * st.pos_stride);
    auto sget = [&](int i, int j) -> float {
      return kStateChanMajor ? to_float(sp[(i * kS + j) / kC].e[(i * kS + j) % kC]) : to_float(sp[j].e[i]);
    };
    auto sset = [&](int i, int j, float v) {
      if constexpr (kStateChanMajor)
        sp[(i * kS + j) / kC].e[(i * kS + j) % kC] = from_float<T>(v);
      else
        sp[j].e[i] = from_float<T>(v);
    };
    if (p.cache_seqlens.data == nullptr) {
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        const float cur = to_float(xv.e[i]);
        const float h0 = kS >= 3 ? sget(i, kS >= 3 ? kS - 3 : 0) : 0.f;
        const float h1 = kS >= 2 ? sget(i, kS >= 2 ? kS - 2 : 0) : 0.f;
        const float h2 = sget(i, kS - 1);
        xv.e[i] = from_float<T>(conv_point<T>(taps[i], first, h0, h1, h2, cur, silu));
#pragma unroll
        for (int j = 0; j + 1 < kS; ++j) sset(i, j, sget(i, j + 1));
        sset(i, kS - 1, cur);
      }
    } else {
      const int64_t n = load_index(p.cache_seqlens, b);
      const int32_t n0 = static_cast<int32_t>(((n % kS) + kS) % kS);
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        const float cur = to_float(xv.e[i]);
        float h[kHalo];
#pragma unroll
        for (int k = 0; k < kHalo; ++k) {
          const int32_t pos = ((n0 - kHalo + k) % kS + kS) % kS;
          h[k] = 0.f;
#pragma unroll
          for (int j = 0; j < kS; ++j)
            if (j == pos) h[k] = sget(i, j);
        }
        xv.e[i] = from_float<T>(conv_point<T>(taps[i], first, h[0], h[1], h[2], cur, silu));
#pragma unroll
        for (int j = 0; j < kS; ++j)
          if (j == n0) sset(i, j, cur);
      }
    }
    *reinterpret_cast<uint4*>(outr) = xv.v;
#pragma unroll
    for (int j = 0; j < kS; ++j) {
      if (kStateChanMajor)
        reinterpret_cast<uint4*>(sr)[j] = sp[j].v;
      else
        *reinterpret_cast<uint4*>(sr + j * st.pos_stride) = sp[j].v;
    }
  }
}

// Whether the call has the layout update_vec_kernel serves, and which state layout.
template <typename T>
static bool vec_layout(const UpdateParams& p, bool& chan_major) {
  constexpr int64_t kC = 16 / sizeof(T);
  const int64_t es = sizeof(T);
  auto a16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  const StateView& st = p.state;
  if (p.tokens != 1 || p.x_chan_stride != 1 || p.dim % kC != 0 || !a16(p.x) ||
      (p.x_batch_stride * es) % 16 != 0)
    return false;
  // out takes the same 16-byte stores (its own strides and alignment: the *_out op's out may differ).
  if (p.out_chan_stride != 1 || !a16(p.out) || (p.out_batch_stride * es) % 16 != 0) return false;
  if (st.len < 1 || st.len > 4 || !a16(st.data) || (st.line_stride * es) % 16 != 0) return false;
  if (st.pos_stride == 1 && st.chan_stride == st.len) {
    chan_major = true;
    return true;
  }
  if (st.chan_stride == 1 && (st.pos_stride * es) % 16 == 0) {
    chan_major = false;
    return true;
  }
  return false;
}

template <typename T>
static cudaError_t launch_update_vec(UpdateParams p, const LaunchOptions& o, cudaStream_t stream,
                                     bool chan_major) {
  constexpr int64_t kC = 16 / sizeof(T);
  const int64_t chan_blocks = (p.dim / kC + kVecThreads - 1) / kVecThreads;
  // Rows per block: a thread loads its kC channels' taps once for all its rows, and walks its
  // rows one after the other. H200, D=8192 bf16, graph replay, 1 / 2 / 3 / 16 rows a block: batch
  // 64 4.34 / 4.59 / 5.27 / 15.2 us, batch 256 11.1 / 10.9 / 12.1 / 18.4, batch 1024 38.8 / 36.5 /
  // 36.8 / 39.1. Two rows once that still leaves about four blocks per SM (more for a batch
  // that would overflow the grid's y extent).
  const int64_t sms = std::max(o.sm_count, 1);
  const int64_t rows = std::max<int64_t>(p.batch * chan_blocks >= 8 * sms ? 2 : 1, (p.batch + 65534) / 65535);
  p.rows_per_block = static_cast<int32_t>(rows);
  const int64_t blocks_y = (p.batch + rows - 1) / rows;
  if (blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(chan_blocks), static_cast<unsigned>(blocks_y));
  auto go = [&](auto kernel) { return launch_kernel(kernel, grid, dim3(kVecThreads), 0, stream, o.pdl, p); };
  switch (p.state.len * 2 + (chan_major ? 1 : 0)) {
    case 2:
      return go(update_vec_kernel<T, 1, false>);
    case 3:
      return go(update_vec_kernel<T, 1, true>);
    case 4:
      return go(update_vec_kernel<T, 2, false>);
    case 5:
      return go(update_vec_kernel<T, 2, true>);
    case 6:
      return go(update_vec_kernel<T, 3, false>);
    case 7:
      return go(update_vec_kernel<T, 3, true>);
    case 8:
      return go(update_vec_kernel<T, 4, false>);
    default:
      return go(update_vec_kernel<T, 4, true>);
  }
}

constexpr int kUpdateThreads = 256;
constexpr int kUpdateMaxRows = 8;
// The 48 KiB a block may take without opting in holds the dynamic slabs and the kernel's static
// lines[] (an x of f16 with f32 states at S = Tq = 64 filled exactly 48 KiB and failed to launch).
constexpr int64_t kUpdateSmemLimit = 48 * 1024 - kUpdateMaxRows * static_cast<int64_t>(sizeof(int64_t));

template <typename T>
static cudaError_t launch_update_impl(UpdateParams p, const LaunchOptions& o, cudaStream_t stream) {
  using Kt = UpdateTraits<T, kUpdateThreads, kUpdateMaxRows>;
  const int ssz = p.state.dtype == kF32 ? 4 : 2;
  // Several rows a block once the batch fills the machine on its own: more bytes in flight per
  // block, each weight read once per block.
  int64_t rows = 1;
  while (rows < kUpdateMaxRows && p.batch >= rows * 2 * 128) rows *= 2;
  p.rows_per_block = static_cast<int32_t>(rows);
  p.chans_per_block = kUpdateThreads;
  auto smem_for = [&](int64_t c) {
    return p.rows_per_block *
           (align16(c * p.tokens * static_cast<int64_t>(sizeof(T))) + align16(c * p.state.len * ssz));
  };
  while (p.rows_per_block > 1 && smem_for(p.chans_per_block) > kUpdateSmemLimit) p.rows_per_block /= 2;
  while (p.chans_per_block > 32 && smem_for(p.chans_per_block) > kUpdateSmemLimit) p.chans_per_block /= 2;
  if (smem_for(p.chans_per_block) > kUpdateSmemLimit) return cudaErrorInvalidValue;
  const int64_t blocks_y = (p.dim + p.chans_per_block - 1) / p.chans_per_block;
  if (blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((p.batch + p.rows_per_block - 1) / p.rows_per_block),
                  static_cast<unsigned>(blocks_y));
  return launch_kernel(update_kernel<Kt>, grid, dim3(Kt::kNThreads), smem_for(p.chans_per_block), stream,
                       o.pdl, p);
}

template <typename T>
static int preload_update_for() {
  cudaFuncAttributes a;
  int err = cudaSuccess;
  auto load = [&](auto kernel) {
    if (err == cudaSuccess) err = cudaFuncGetAttributes(&a, kernel);
  };
  load(update_vec_kernel<T, 1, false>);
  load(update_vec_kernel<T, 1, true>);
  load(update_vec_kernel<T, 2, false>);
  load(update_vec_kernel<T, 2, true>);
  load(update_vec_kernel<T, 3, false>);
  load(update_vec_kernel<T, 3, true>);
  load(update_vec_kernel<T, 4, false>);
  load(update_vec_kernel<T, 4, true>);
  load(update_direct_kernel<T, 1>);
  load(update_direct_kernel<T, 2>);
  load(update_direct_kernel<T, 3>);
  load(update_direct_kernel<T, 4>);
  load(update_lean_kernel<T>);
  load(update_kernel<UpdateTraits<T, kUpdateThreads, kUpdateMaxRows>>);
  return err;
}

int preload_update() {
  int err = preload_update_for<float>();
  if (err == cudaSuccess) err = preload_update_for<__half>();
  if (err == cudaSuccess) err = preload_update_for<__nv_bfloat16>();
  return err;
}

int launch_update(UpdateParams p, int32_t x_dtype, const LaunchOptions& o, void* stream) {
  if (p.batch == 0 || p.dim == 0 || p.tokens == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  return dtype_switch(x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Small batches are latency-bound: the fewest dependent round trips win (the lean kernel in
    // its shape, else many thin threads, the per-channel kernel). From batch 16 on bytes dominate:
    // the 16-byte kernel where the layout allows.
    if (lean_shape(p, x_dtype)) return launch_update_lean<T>(p, o, s);
    bool chan_major = false;
    if (p.state.dtype == x_dtype && p.batch >= 16 && vec_layout<T>(p, chan_major))
      return launch_update_vec<T>(p, o, s, chan_major);
    if (p.state.len <= 4 && p.tokens <= kDirectMaxTokens) return launch_update_direct<T>(p, o, s);
    return launch_update_impl<T>(p, o, s);
  });
}

}  // namespace deltakern::native
