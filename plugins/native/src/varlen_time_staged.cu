// causal_conv1d_varlen, time-contiguous x (stride(time) == 1), short batches of many sequences: a
// block copies every token of its rows_per_block channel rows into shared memory, and computes
// every output from there. No other block reads these rows, so it writes in place with no scratch
// and no second pass, like the row walker; unlike the walker, whose warp meets a batch's sequence
// edges one after another (each a chain of dependent loads), the block handles every sequence
// edge of its rows at once, with every thread.
//   0. the sequences' bounds, lines and flags (issued first: the priors wait on the lines), the
//      rows' taps, and the rows themselves: four groups of rows, one bulk copy a row on sm_90;
//   1. per 16-byte run of tokens, which of its tokens lie in a live sequence (the same for every
//      row); the priors of every sequence and row;
//   2. every output from the raw window, a group of rows as soon as it lands: one vector store a
//      run (per token where the run holds tokens outside a live sequence);
//   3. the first three outputs of every sequence again, from its prior, one thread per (sequence,
//      row); then the new states, from the staged originals and priors.
// With many sequences (kHeadsFirst) the first three outputs of every sequence are computed in
// phase 2 instead, into shared memory as each group of rows lands, and join their runs before
// the runs are stored: phase 3's scattered 2-byte stores were 66% of the call's L2 sectors at 64
// mixed sequences (ncu, H200, bf16, D = 8192, 1k tokens). It costs each group of rows a barrier
// and a dependent step, which few sequences do not earn back (time_staged_heads_first).
// plan_varlen picks it by the batch's shape, which the host knows (tokens, sequences, rows).
#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

template <typename T_, int kWidth_, bool kSilu_, bool kHeadsFirst_>
struct TimeStagedTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr bool kHeadsFirst = kHeadsFirst_;  // the heads in phase 2, from shared memory
  static constexpr int kNWarps = 8;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // tokens per run
  static constexpr int kStages = 4;                              // groups of rows, each copied at once
  using Vec = uint4;
  union Pack {
    Vec v;
    T e[kVec];
  };
};

// Byte offsets into a block's dynamic shared memory; the host sizes the launch with the same
// function (time_staged_smem_bytes). A row's pitch is 16 bytes over its runs, so that threads of
// consecutive rows (the per-sequence phases) read different banks.
struct StagedLayout {
  int64_t x, run_mask, head_of, taps, prior, heads, off, line, init, total;
};
__host__ __device__ inline StagedLayout staged_layout(int32_t batch, int32_t rows, int64_t tokens, int esz,
                                                      bool heads_first) {
  const int64_t runs = (tokens * esz + 15) / 16;
  const int64_t heads_bytes =
      heads_first ? (static_cast<int64_t>(batch) * kHalo * rows * esz + 15) / 16 * 16 : 0;
  StagedLayout l{};
  l.x = 0;                                                              // rows x (runs + 1) x 16 bytes
  l.run_mask = l.x + rows * (runs + 1) * 16;                            // uint32 per run
  l.head_of = l.run_mask + runs * 4;                                    // heads first: int32 per token
  l.taps = l.head_of + (heads_first ? runs * (16 / esz) * 4 : 0);       // ChannelTaps per row
  l.prior = l.taps + rows * static_cast<int64_t>(sizeof(ChannelTaps));  // float [batch][rows][3]
  l.heads =
      l.prior + static_cast<int64_t>(batch) * rows * kHalo * 4;  // heads first: x's dtype [batch][3][rows]
  l.off = l.heads + heads_bytes;                                 // int32 [batch + 1]
  l.line = l.off + (static_cast<int64_t>(batch) + 1) * 4;        // int32 [batch]
  l.init = l.line + static_cast<int64_t>(batch) * 4;             // uint8 [batch]
  l.total = (l.init + batch + 15) / 16 * 16;
  return l;
}

int64_t time_staged_smem_bytes(int32_t batch, int32_t rows, int64_t tokens, int esz, bool heads_first) {
  return staged_layout(batch, rows, tokens, esz, heads_first).total;
}

// H100, bf16, graph replay, 1k tokens, heads after -> first, 1 / 8 equal / 16 / 24 / 32 / 48 / 64
// mixed sequences: D = 8192 19.5 / 20.6 / 24.0 / 26.0 / 29.5 / 34.9 / 41.5 -> 21.2 / 23.0 / 24.0 /
// 25.0 / 25.8 / 29.1 / 31.4 us, D = 4096 11.0 / 12.3 / 13.9 / 15.5 / 16.7 / 19.1 / 21.0 -> 11.0 /
// 14.5 / 14.9 / 15.4 / 16.0 / 17.1 / 18.2.
bool time_staged_heads_first(int32_t batch) { return batch >= 24; }

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads, 2) varlen_time_staged_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  using Pack = typename Kt::Pack;
  constexpr int kVec = Kt::kVec, kThreads = Kt::kNThreads, kStages = Kt::kStages;
  constexpr int first_tap = kMaxWidth - Kt::kWidth;
  constexpr unsigned kFull = 0xffffffffu;
  constexpr uint32_t kAllLive = (1u << kVec) - 1;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ uint64_t landed[kStages];                  // sm_90: one barrier per group of rows
  const int32_t R = p.rows_per_block, batch = p.batch;  // R: a power of two (plan_varlen)
  const StagedLayout L = staged_layout(batch, R, p.tokens, sizeof(T), Kt::kHeadsFirst);
  T* const xs = reinterpret_cast<T*>(smem + L.x);
  uint32_t* const run_mask = reinterpret_cast<uint32_t*>(smem + L.run_mask);
  int32_t* const head_of = reinterpret_cast<int32_t*>(smem + L.head_of);
  ChannelTaps* const taps_s = reinterpret_cast<ChannelTaps*>(smem + L.taps);
  float* const prior_s = reinterpret_cast<float*>(smem + L.prior);
  T* const heads_s = reinterpret_cast<T*>(smem + L.heads);
  int32_t* const off_s = reinterpret_cast<int32_t*>(smem + L.off);
  int32_t* const line_s = reinterpret_cast<int32_t*>(smem + L.line);
  uint8_t* const init_s = smem + L.init;

  const int32_t T_len = static_cast<int32_t>(p.tokens);
  const int32_t runs = (T_len + kVec - 1) / kVec, full_runs = T_len / kVec;
  const int32_t pitch = (runs + 1) * kVec;
  const int64_t d0 = static_cast<int64_t>(blockIdx.x) * R;
  const int32_t rows = static_cast<int32_t>(min(static_cast<int64_t>(R), p.dim - d0));
  const int32_t stage_rows = (R + kStages - 1) / kStages;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const bool flag = blockIdx.x == 0;  // one block reports out-of-range lines
  const T* const x = static_cast<const T*>(p.x);
  T* const out = static_cast<T*>(p.out);
  const auto x_row = [&](int32_t r) { return x + (d0 + r) * p.chan_stride; };
  const auto s_row = [&](int32_t r) { return xs + static_cast<int64_t>(r) * pitch; };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kBulk = true;
#else
  constexpr bool kBulk = false;
#endif
  if (kBulk && tid == 0)
    for (int stage = 0; stage < kStages; ++stage) barrier_init(&landed[stage], 1);
  wait_for_previous_grid();

  // 0. The first kThreads sequences' entries into registers before the copies are issued.
  const auto entry = [&](int32_t b, int32_t& off, int32_t& line, uint8_t& init) {
    off = static_cast<int32_t>(seq_offset(p, b));
    line = -1;
    init = 0;
    if (b < batch) {
      line = static_cast<int32_t>(state_line(p.cache_indices, b, p.state, p.conv, flag));
      init = has_initial_state(p, b) ? 1 : 0;
    }
  };
  int32_t off0 = 0, line0 = -1;
  uint8_t init0 = 0;
  if (tid <= batch) entry(tid, off0, line0, init0);
  // The whole 16-byte runs of every row, a group of rows per barrier (sm_90) or per cp.async group.
  if constexpr (kBulk) {
    if (tid == 0) {
      const unsigned row_bytes = static_cast<unsigned>(full_runs) * 16;
      for (int stage = 0; stage < kStages; ++stage) {
        const int32_t r_begin = stage * stage_rows, r_end = min(rows, r_begin + stage_rows);
        barrier_arrive_expect(&landed[stage], row_bytes * static_cast<unsigned>(max(0, r_end - r_begin)));
        if (row_bytes > 0)
          for (int32_t r = r_begin; r < r_end; ++r)
            bulk_copy_to_shared(s_row(r), x_row(r), row_bytes, &landed[stage]);
      }
    }
  } else {
    for (int32_t i = tid; i < rows * full_runs; i += kThreads) {
      const int32_t r = i / full_runs, k = i - r * full_runs;
      cp_async<16>(s_row(r) + k * kVec, x_row(r) + k * kVec);
    }
    cp_async_commit();
  }
  // A partial last run (T not a multiple of the vector) element by element, zeros past the end.
  if (full_runs < runs)
    for (int32_t r = tid; r < rows; r += kThreads)
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const int32_t t = full_runs * kVec + i;
        s_row(r)[t] = t < T_len ? x_row(r)[t] : from_float<T>(0.f);
      }
  if (tid <= batch) {
    off_s[tid] = off0;
    if (tid < batch) {
      line_s[tid] = line0;
      init_s[tid] = init0;
    }
  }
  for (int32_t b = tid + kThreads; b <= batch; b += kThreads) {
    int32_t off, line;
    uint8_t init;
    entry(b, off, line, init);
    off_s[b] = off;
    if (b < batch) {
      line_s[b] = line;
      init_s[b] = init;
    }
  }
  for (int32_t r = tid; r < rows; r += kThreads) taps_s[r] = load_taps(p.conv, d0 + r);
  __syncthreads();

  // 1. Per run (the same for every row): which of its tokens lie in a live sequence (bits 0-15 of
  // run_mask; heads first: bits 16-31 mark one of a sequence's first three, head_of[t] = b * 3 + j
  // for the token t = s0 + j of sequence b). Then the priors: (row,
  // sequence, position) with the row fastest, so that a warp's loads of one position cover consecutive
  // channels.
  for (int32_t k = tid; k < runs; k += kThreads) {
    const int32_t u = k * kVec;
    int32_t lo = 0, hi = batch;  // the first b with off[b + 1] > u, or batch
    while (lo < hi) {
      const int32_t mid = (lo + hi) / 2;
      if (off_s[mid + 1] > u)
        hi = mid;
      else
        lo = mid + 1;
    }
    uint32_t live = 0, head = 0;
    for (int i = 0; i < kVec; ++i) {
      const int32_t t = u + i;
      while (lo < batch && off_s[lo + 1] <= t) ++lo;
      if (t < T_len && lo < batch && t >= off_s[lo] && line_s[lo] >= 0) {
        live |= 1u << i;
        if (Kt::kHeadsFirst && t - off_s[lo] < kHalo) {
          head |= 1u << i;
          head_of[t] = lo * kHalo + (t - off_s[lo]);
        }
      }
    }
    run_mask[k] = live | head << 16;
  }
  const StateView& st = p.state;
  const int r_mine = tid % R;  // the per-(sequence, row) phases: kThreads is a multiple of R
  const int32_t b_first = tid / R, b_step = kThreads / R;
  const int64_t chan_mine = d0 + r_mine;
  {
    // Independent loads in flight per thread. 16 took 72 registers, so 3 blocks an SM where 4 fit
    // at 1k tokens: two waves (H100, D = 8192, 1 seq 19.6 -> 24.8 us, 64 mixed 31.7 -> 42.2).
    constexpr int kBatchLoads = 8;
    for (int32_t bj0 = b_first; bj0 < batch * kHalo; bj0 += b_step * kBatchLoads) {
      float v[kBatchLoads];
#pragma unroll
      for (int u = 0; u < kBatchLoads; ++u) {
        const int32_t bj = bj0 + u * b_step, b = bj / kHalo, j = bj - b * kHalo;
        const int32_t pos = st.len - kHalo + j;
        v[u] = 0.f;
        if (bj < batch * kHalo && r_mine < rows && pos >= 0 && init_s[b] && line_s[b] >= 0)
          v[u] = load_float(st.data, state_offset(st, line_s[b], chan_mine, pos), st.dtype);
      }
#pragma unroll
      for (int u = 0; u < kBatchLoads; ++u) {
        const int32_t bj = bj0 + u * b_step, b = bj / kHalo, j = bj - b * kHalo;
        if (bj < batch * kHalo) prior_s[(static_cast<int64_t>(b) * R + r_mine) * kHalo + j] = v[u];
      }
    }
  }
  if constexpr (!kBulk) cp_async_wait<0>();
  __syncthreads();

  // 2. Every output from the raw window, a group of rows as soon as it has landed. A warp takes 32
  // consecutive runs of one row at a time, so that every store instruction is one contiguous
  // 512-byte run and the three tokens before a run come from the previous lane by shuffle.
  const int32_t groups_per_row = (runs + 31) / 32;
  for (int stage = 0; stage < kStages; ++stage) {
    const int32_t r_begin = stage * stage_rows, r_end = min(rows, r_begin + stage_rows);
    if (r_begin >= r_end) break;
    if constexpr (kBulk) barrier_wait(&landed[stage], 0);
    if constexpr (Kt::kHeadsFirst) {
      // The group's heads into heads_s, one thread per (sequence, row).
      const int32_t group_rows = r_end - r_begin;
      for (int32_t i = tid; i < batch * group_rows; i += kThreads) {
        const int32_t b = i / group_rows, r = r_begin + (i - b * group_rows);
        const int32_t s0 = off_s[b], len = max(0, off_s[b + 1] - s0);
        if (line_s[b] < 0 || len == 0) continue;
        const float* prior = prior_s + (static_cast<int64_t>(b) * R + r) * kHalo;
        const T* const xr = s_row(r);
        const ChannelTaps taps = taps_s[r];
        const float p0 = prior[0], p1 = prior[1], p2 = prior[2];
        const float x0 = to_float(xr[s0]), x1 = len > 1 ? to_float(xr[s0 + 1]) : 0.f,
                    x2 = len > 2 ? to_float(xr[s0 + 2]) : 0.f;
        T* const h = heads_s + static_cast<int64_t>(b) * kHalo * R + r;
        h[0] = from_float<T>(conv_point<T>(taps, first_tap, p0, p1, p2, x0, Kt::kSilu));
        if (len > 1) h[R] = from_float<T>(conv_point<T>(taps, first_tap, p1, p2, x0, x1, Kt::kSilu));
        if (len > 2) h[2 * R] = from_float<T>(conv_point<T>(taps, first_tap, p2, x0, x1, x2, Kt::kSilu));
      }
      __syncthreads();
    }
    for (int32_t item = r_begin * groups_per_row + warp; item < r_end * groups_per_row; item += Kt::kNWarps) {
      const int32_t r = item / groups_per_row;
      const int32_t k = (item - r * groups_per_row) * 32 + lane;
      const bool in_row = k < runs;
      const T* const xr = s_row(r);
      const ChannelTaps taps = taps_s[r];
      Pack cur;
      cur.v = in_row ? reinterpret_cast<const Vec*>(xr)[k] : Vec{};
      float w[kHalo];
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const float prev = __shfl_sync(kFull, to_float(cur.e[kVec - kHalo + i]), (lane + 31) & 31);
        w[i] = lane != 0 ? prev : (k > 0 ? to_float(xr[k * kVec - kHalo + i]) : 0.f);
      }
      const uint32_t bits = in_row ? run_mask[k] : 0u, mask = bits & 0xffffu, head = bits >> 16;
      if (mask == 0) continue;
      float outs[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float xi = to_float(cur.e[i]);
        outs[i] = conv_point<T>(taps, first_tap, w[0], w[1], w[2], xi, Kt::kSilu);
        w[0] = w[1];
        w[1] = w[2];
        w[2] = xi;
      }
      Pack res;
      round_into(res.e, outs);
      if (Kt::kHeadsFirst && head != 0)
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          if ((head >> i) & 1u) res.e[i] = heads_s[head_of[k * kVec + i] * R + r];
      T* const dst = out + (d0 + r) * p.out_chan_stride + k * kVec;
      if (mask == kAllLive) {
        *reinterpret_cast<Vec*>(dst) = res.v;
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          if ((mask >> i) & 1u) dst[i] = res.e[i];
      }
    }
  }
  if constexpr (!Kt::kHeadsFirst)
    __syncthreads();  // the raw outputs are stored before the heads overwrite them

  // 3. Per (sequence, row), rows fastest: the first three outputs again (unless phase 2 stored
  // them), reading the prior for the positions before the start; then the new state, s[j] =
  // e[len + j] with e = concat(prior, the sequence's originals). Ascending j reads the old entry
  // len + j > j (from the pool where it lies before the staged priors) before it is overwritten.
  // Recomputing the heads in phase 2 in the lane that holds the run, from the prior, made every
  // shape 15-30% slower (H200, bf16, D = 8192, 1k; again 2026-12-06 on an H100: 1 / 8 equal / 64
  // mixed sequences 19.7 / 20.8 / 42.3 -> 26.7 / 28.9 / 39.8 us).
  if (r_mine < rows) {
    const T* const xr = s_row(r_mine);
    T* const out_row = out + chan_mine * p.out_chan_stride;
    const ChannelTaps taps = taps_s[r_mine];
    for (int32_t b = b_first; b < batch; b += b_step) {
      const int32_t line = line_s[b];
      const int32_t s0 = off_s[b], len = max(0, off_s[b + 1] - s0);
      const bool init = init_s[b] != 0;
      if (line < 0) continue;  // skipped
      const float* prior = prior_s + (static_cast<int64_t>(b) * R + r_mine) * kHalo;
      if constexpr (!Kt::kHeadsFirst) {
        // The three outputs from six shared loads, as the walker's repair does.
        const float p0 = prior[0], p1 = prior[1], p2 = prior[2];
        const float x0 = len > 0 ? to_float(xr[s0]) : 0.f, x1 = len > 1 ? to_float(xr[s0 + 1]) : 0.f,
                    x2 = len > 2 ? to_float(xr[s0 + 2]) : 0.f;
        if (len > 0) out_row[s0] = from_float<T>(conv_point<T>(taps, first_tap, p0, p1, p2, x0, Kt::kSilu));
        if (len > 1)
          out_row[s0 + 1] = from_float<T>(conv_point<T>(taps, first_tap, p1, p2, x0, x1, Kt::kSilu));
        if (len > 2)
          out_row[s0 + 2] = from_float<T>(conv_point<T>(taps, first_tap, p2, x0, x1, x2, Kt::kSilu));
      }
      if (len == 0 && init) continue;  // an empty sequence keeps its prior
      for (int32_t j = 0; j < st.len; ++j) {
        const int32_t i = len + j;  // e index: < S in the prior
        float v;
        if (i >= st.len)
          v = to_float(xr[s0 + i - st.len]);
        else if (!init)
          v = 0.f;
        else if (i >= st.len - kHalo)
          v = prior[i - (st.len - kHalo)];
        else
          v = load_float(st.data, state_offset(st, line, chan_mine, i), st.dtype);
        store_float(st.data, state_offset(st, line, chan_mine, j), st.dtype, v);
      }
    }
  }
  allow_next_grid();
}

// (x dtype, width, silu, heads first); vector rows only (plan_varlen).
struct TimeStaged {
  using Configs = native::Configs<Dtypes, Widths, Bools, Bools>;
  static auto traits(auto dtype, auto width, auto silu, auto heads_first) {
    return std::type_identity<TimeStagedTraits<element_t<dtype()>, width(), silu(), heads_first()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_time_staged_kernel<Kt>;
  }
};

int time_staged_threads() { return TimeStagedTraits<float, 4, false, false>::kNThreads; }

// Every instantiation may take up to kTimeStagedSmemBytes of dynamic shared memory, with the most
// shared memory the SM can give.
int preload_time_staged() {
  return for_each_config(TimeStaged::Configs{}, [](auto... cs) {
    using Kt = typename decltype(TimeStaged::traits(cs...))::type;
    const auto kernel = TimeStaged::kernel<Kt>();
    int err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kTimeStagedSmemBytes));
    // Without it the driver may size the carveout for one block per SM (two waves at 1k tokens).
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    return err;
  });
}

int launch_varlen_time_staged(const VarlenParams& p, ScalarType dtype, bool heads_first,
                              const LaunchOptions& o, void* stream) {
  return with_instantiation<TimeStaged>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        const int64_t smem =
            time_staged_smem_bytes(p.batch, p.rows_per_block, p.tokens, sizeof(typename Kt::T), heads_first);
        if (smem > kTimeStagedSmemBytes || Kt::kNThreads % p.rows_per_block != 0)
          return cudaErrorInvalidValue;
        const int64_t blocks = (p.dim + p.rows_per_block - 1) / p.rows_per_block;
        return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(Kt::kNThreads),
                             static_cast<size_t>(smem), static_cast<cudaStream_t>(stream), o.pdl, p);
      },
      dtype, p.conv.width, p.conv.silu, heads_first);
}

}  // namespace deltakern::native
