// causal_conv1d_varlen, channel-last x (stride(channel) == 1, time stride >= D): each thread
// owns kVec consecutive channels of one token tile and walks the tile's tokens in order,
// carrying the last three inputs in registers; consecutive threads cover consecutive channels,
// so a warp reads and writes whole token rows. Token rows reach the thread through a private
// ring in shared memory filled by cp.async, kStages batches ahead: many bytes in flight per
// thread without registers held for them. The ring is private to the thread (it reads only
// what it copied), so no block barrier is needed.
//
// In place without races: a thread reads and writes only its own channels, and the only tokens
// of this tile that another tile reads are its last tail_len (the next tile's halo, and the
// originals a crossing sequence's new state is made of). Their outputs are parked, and the
// finish pass writes them (varlen_launch.cu). Into a separate out (causal_conv1d_varlen_out)
// every load still reads x, which nothing writes, so nothing is parked (parks_tail).
//
// A call of up to 16 tiles (sm_90, width 4, S <= 3; plan_varlen) runs its tiles as one thread
// block cluster instead, with nothing parked and no finish pass: a tile reads the three rows
// before it and arrives at the cluster's barrier, walks, holds its tail's outputs and the new
// state of a sequence that started in an earlier tile in registers, writes the tail once every
// tile has arrived, arrives again (every prior it reads is read), and writes the state once every
// tile has arrived a second time.
#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

// kVecBytes: bytes of channels a thread, 16 or 8 (plan_varlen picks); 0 is the scalar path
// (misaligned x): one channel and plain loads. kWidth == 0: the call's width and activation, read
// at run time (the scalar path's instantiations, see ChannelLast).
// kClustered: the call's tiles form one thread block cluster (p.clustered; plan_varlen). A
// template parameter: as a run-time flag its registers slowed every unclustered call (H200, 8k
// tokens: 3%).
template <typename T_, int kVecBytes_, int kWidth_, bool kSilu_, bool kClustered_ = false>
struct ChannelLastTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr bool kClustered = kClustered_;
  static constexpr int kNThreads = 128;
  // plan_varlen sizes the tiles for about two blocks per SM, so a thread may use the registers
  // of two: at four, the 16-byte path spilled in its inner loop (H200: 3-5% slower at 8k-32k).
  static constexpr int kMinBlocks = 2;
  static constexpr int kVec = kVecBytes_ > 0 ? kVecBytes_ / static_cast<int>(sizeof(T)) : 1;
  static constexpr int kBatch = 4;   // token rows per cp.async group
  static constexpr int kStages = 4;  // groups in flight
  static constexpr int kDepth = kBatch * kStages;
  static constexpr int kSmemBytes = kDepth * kNThreads * kVecBytes_;
  using Vec = typename BytesToType<sizeof(T) * kVec>::Type;
};

template <typename T, int kVec, typename Vec>
__device__ __forceinline__ void unpack(const Vec& raw, float (&out)[kVec]) {
  union {
    Vec v;
    T e[kVec];
  } u;
  u.v = raw;
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = to_float(u.e[i]);
}

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks)
    varlen_channel_last_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  constexpr int kVec = Kt::kVec;
  constexpr int kBatch = Kt::kBatch, kStages = Kt::kStages;
  constexpr bool kVectorized = Kt::kSmemBytes > 0;
  constexpr bool kClustered = Kt::kClustered;
  extern __shared__ __align__(16) unsigned char smem[];
  wait_for_previous_grid();

  const int32_t g = blockIdx.x;
  const int64_t t_begin = static_cast<int64_t>(g) * p.tile_len;
  const int32_t b_first = warp_first_sequence_ending_at_or_after(p, t_begin);  // whole warps
  const int64_t c0 = (static_cast<int64_t>(blockIdx.y) * Kt::kNThreads + threadIdx.x) * kVec;
  if (c0 >= p.dim) {  // no block-wide barrier below; the cluster's (see the end) these threads too
    if constexpr (kClustered) {
      cluster_arrive();
      cluster_wait();
      cluster_arrive();
    }
    return;
  }
  const int64_t t_end = min(t_begin + p.tile_len, p.tokens);
  const bool last_tile = g == p.ntiles - 1;
  // The tail's outputs are parked for the finish pass, or held in registers in a cluster.
  const bool parks = !last_tile && parks_tail(p);
  const int64_t park_from = parks ? t_end - p.tail_len : t_end;
  const int64_t ts = p.time_stride, out_ts = p.out_time_stride;
  T* const x = static_cast<T*>(p.x) + c0;
  T* const out_base = static_cast<T*>(p.out) + c0;  // x in place; vector-aligned where x is (plugin.cpp)
  // Park layout (ntiles-1, tail_len, D): a parked row is as coalesced as an x row.
  T* const park = parks && !kClustered
                      ? static_cast<T*>(p.park) + static_cast<int64_t>(g) * p.tail_len * p.dim + c0
                      : nullptr;
  auto load = [&](int64_t t) { return *reinterpret_cast<const Vec*>(x + t * ts); };
  // In a cluster the previous tile writes its tail once every tile has arrived at the cluster's
  // barrier: the rows before this tile are read first, and used (the arrive orders no load still
  // in flight).
  Vec tile_halo[kHalo];
  if constexpr (kClustered) {
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      tile_halo[i] = t_begin - kHalo + i >= 0 ? load(t_begin - kHalo + i) : Vec{};
      float used[kVec];
      unpack<T, kVec>(tile_halo[i], used);
      asm volatile("" ::"f"(used[0]));
    }
    cluster_arrive();
  }
  Vec held[kHalo];  // in a cluster, the tail's outputs (bit k of held_rows: tail row k)
  unsigned held_rows = 0;
  int64_t held_line = -1;  // and the new state of a sequence that started in an earlier tile
  float held_state[kHalo][kVec];

  ChannelTaps taps[kVec];
  if constexpr (kVectorized)
    load_taps_vec<T, kVec>(p.conv, c0, taps);
  else
    taps[0] = load_taps(p.conv, c0);
  const int first = kMaxWidth - (Kt::kWidth > 0 ? Kt::kWidth : p.conv.width);
  const bool silu = Kt::kWidth > 0 ? Kt::kSilu : p.conv.silu;
  const StateView& st = p.state;
  // Where the state pool is in x's dtype with S == 3 and holds this thread's channels as whole
  // vectors, compact per channel ((lines, D, 3): three vectors cover the kVec rows) or per
  // position ((lines, 3, D): a vector a position), a prior or a new state is three vector loads
  // or stores instead of 3 * kVec scalar ones, each behind a dtype switch: a visible share of a
  // piece's start where a tile holds several sequences.
  enum class StateForm { scalar, chan_major, pos_major };
  StateForm form = StateForm::scalar;
  if constexpr (kVectorized) {
    const bool whole = st.dtype == kScalarTypeOf<T> && st.len == kHalo && st.line_stride % kVec == 0 &&
                       reinterpret_cast<uintptr_t>(st.data) % sizeof(Vec) == 0;
    if (whole && st.pos_stride == 1 && st.chan_stride == kHalo) form = StateForm::chan_major;
    if (whole && st.chan_stride == 1 && st.pos_stride % kVec == 0) form = StateForm::pos_major;
  }
  union StateVecs {
    Vec v[kHalo];
    T e[kHalo * kVec];
  };
  // Vector k of this thread's state block on `line`.
  auto state_vec = [&](int64_t line, int k) {
    T* const row = static_cast<T*>(st.data) + line * st.line_stride;
    return form == StateForm::chan_major ? reinterpret_cast<Vec*>(row + c0 * kHalo) + k
                                         : reinterpret_cast<Vec*>(row + k * st.pos_stride + c0);
  };
  // Entry (channel v, position j) of a block is e[v * 3 + j] or e[j * kVec + v]: two loops with
  // constant indices, not one with a computed index (which would put the block in local memory).
  auto state_to_window = [&](const StateVecs& sv, float(&w)[kHalo][kVec], bool use) {
    if (form == StateForm::chan_major) {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) w[j][v] = use && j >= first ? to_float(sv.e[v * kHalo + j]) : 0.f;
    } else {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) w[j][v] = use && j >= first ? to_float(sv.e[j * kVec + v]) : 0.f;
    }
  };
  auto window_to_state = [&](const float(&w)[kHalo][kVec], StateVecs& sv) {
    if (form == StateForm::chan_major) {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) sv.e[v * kHalo + j] = from_float<T>(w[j][v]);
    } else {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) sv.e[j * kVec + v] = from_float<T>(w[j][v]);
    }
  };

  // A new state of S <= 3 from the window that holds its sequence's last three e-values: into the
  // state row, or the finish pass's park.
  auto write_window_state = [&](int64_t line, const float(&w)[kHalo][kVec], float* spark) {
    if (spark == nullptr && form != StateForm::scalar) {
      StateVecs next;  // S == 3: the window is the new state
      window_to_state(w, next);
#pragma unroll
      for (int k = 0; k < kHalo; ++k) *state_vec(line, k) = next.v[k];
      return;
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v)
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const int32_t j = i - (kHalo - st.len);  // window entry i is new state entry j
        if (j < 0) continue;
        if (spark != nullptr)
          spark[static_cast<int64_t>(j) * p.dim + c0 + v] = w[i][v];
        else
          store_float(st.data, state_offset(st, line, c0 + v, j), st.dtype, w[i][v]);
      }
  };

  for (int32_t b = b_first; b < p.batch; ++b) {
    const int64_t q0 = seq_offset(p, b);
    const int64_t q1 = max(q0, seq_offset(p, b + 1));
    if (q0 >= t_end && !last_tile) break;
    if (q0 == q1 ? tile_of(p, q0) != g : q1 <= t_begin) continue;
    const bool ends_here = q1 <= t_end;  // exactly one tile sees the end (or the empty sequence)
    const int64_t a = max(q0, t_begin), e = min(q1, t_end);

    // The token ring first (it depends on a and e only), so that its loads overlap the lookups,
    // prior and state work below. Stage sg of the ring is rows sg * kBatch + [0, kBatch) at
    // [row][thread]. Rows are counted from a in 32 bits (a piece lies inside one tile), and the
    // walk keeps running pointers (the next row to copy, the stage to fill): per batch, a few
    // adds instead of 64-bit products and a modulo per row.
    Vec* const ring = reinterpret_cast<Vec*>(smem) + threadIdx.x;
    const int32_t rows = static_cast<int32_t>(e - a);
    const T* next_src = x + a * ts;  // row next_row of the piece
    int32_t next_row = 0;
    auto issue = [&](Vec* stage) {
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        if (next_row + k < rows) cp_async<sizeof(Vec)>(stage + k * Kt::kNThreads, next_src + k * ts);
      cp_async_commit();  // one group per batch, empty or not, keeps the wait counts uniform
      next_row += kBatch;
      next_src += kBatch * ts;
    };
    if constexpr (kVectorized) {
#pragma unroll
      for (int sg = 0; sg < kStages; ++sg) issue(ring + sg * kBatch * Kt::kNThreads);
    }

    // e-values of the three tokens before a: x (originals: this tile has not written them, they
    // are the previous tile's parked tail, or out is not x), or the prior before the sequence
    // starts. The x
    // rows and the flag are loaded with the line, not after it: one round trip less.
    Vec halo[kHalo];
#pragma unroll
    for (int i = 0; i < kHalo; ++i)
      if (a - kHalo + i >= q0) halo[i] = kClustered && a == t_begin ? tile_halo[i] : load(a - kHalo + i);
    const bool init = has_initial_state(p, b);
    const int64_t line = state_line(p.cache_indices, b, st, p.conv, ends_here && c0 == 0);
    if (line < 0) {
      if constexpr (kVectorized) cp_async_wait<0>();  // the ring is reused by the next piece
      continue;
    }
    float win[kHalo][kVec];
    if (form != StateForm::scalar && a == q0) {  // the whole window is the prior
      StateVecs prior;
#pragma unroll
      for (int k = 0; k < kHalo; ++k) prior.v[k] = init ? *state_vec(line, k) : Vec{};
      state_to_window(prior, win, init);
    } else {
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const int64_t pos = a - kHalo + i;
        if (pos >= q0) {
          unpack<T, kVec>(halo[i], win[i]);
        } else {
          const int64_t j = st.len + (pos - q0);
#pragma unroll
          for (int v = 0; v < kVec; ++v)
            win[i][v] = init && j >= 0 && i >= first
                            ? load_float(st.data, state_offset(st, line, c0 + v, j), st.dtype)
                            : 0.f;
        }
      }
    }
    // The new state is the last S entries of e = concat(prior, x). For S <= 3 the window holds
    // them when the walk ends (its entries are e, except the taps a narrow width skips, which
    // start as zeros): written then from registers. Otherwise from the originals, before the walk
    // overwrites them: this thread has not written them yet, and those before the tile are the
    // previous tile's parked tail (or out is not x). A sequence that started in an earlier tile, whose first
    // tile reads the old prior, parks its new state for the finish pass.
    const bool crossing = a != q0;
    float* const spark =
        crossing && !kClustered ? p.state_park + static_cast<int64_t>(g - 1) * st.len * p.dim : nullptr;
    const bool state_from_window = st.len <= kHalo && (first == 0 || q1 - q0 >= kHalo);
    if (ends_here && !state_from_window) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) write_new_state<T>(p, x + v, ts, q0, q1, line, c0 + v, init, spark);
    }

    // Row r of the piece is written at out_x (then out_x += out_ts) until the parked tail, whose
    // rows go to the park buffer.
    T* out_x = out_base + a * out_ts;
    const int32_t park_row =
        static_cast<int32_t>(min(max(park_from - a, int64_t{0}), static_cast<int64_t>(rows)));
    T* const park_at = park != nullptr ? park + (a + park_row - park_from) * p.dim : nullptr;
    auto step = [&](const Vec& raw, int32_t r) {
      float cur[kVec], out[kVec];
      unpack<T, kVec>(raw, cur);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        out[v] = conv_point<T>(taps[v], first, win[0][v], win[1][v], win[2][v], cur[v], silu);
        win[0][v] = win[1][v];
        win[1][v] = win[2][v];
        win[2][v] = cur[v];
      }
      if (kClustered && r >= park_row) {
        union {
          Vec v;
          T e[kVec];
        } u;
        round_into(u.e, out);
        const int64_t k_row = a + r - park_from;  // tail row k_row (park_row is clamped to the piece)
#pragma unroll
        for (int k = 0; k < kHalo; ++k)
          if (k_row == k) held[k] = u.v;
        held_rows |= 1u << k_row;
      } else {
        T* o = out_x;
        if (r >= park_row) o = park_at + static_cast<int64_t>(r - park_row) * p.dim;
        store_elems<T, kVec>(o, out);
      }
      out_x += out_ts;
    };

    if constexpr (kVectorized) {
      Vec* stage = ring;  // the stage of the batch at r
      for (int32_t r = 0; r < rows; r += kBatch) {
        cp_async_wait<kStages - 1>();  // the batch at r has landed
        Vec cur[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) cur[k] = stage[k * Kt::kNThreads];
        issue(stage);  // into the slots just read
        stage =
            stage == ring + (kStages - 1) * kBatch * Kt::kNThreads ? ring : stage + kBatch * Kt::kNThreads;
        if (r + kBatch <= rows) {
#pragma unroll
          for (int k = 0; k < kBatch; ++k) step(cur[k], r + k);
        } else {
#pragma unroll
          for (int k = 0; k < kBatch; ++k)
            if (r + k < rows) step(cur[k], r + k);
        }
      }
      cp_async_wait<0>();  // the ring is reused by the next piece
    } else {
      for (int32_t r = 0; r < rows; ++r) step(load(a + r), r);
    }
    if (ends_here && state_from_window && !(q1 == q0 && init)) {  // an empty one keeps its prior
      if (kClustered && crossing) {  // written after the cluster's second barrier
        held_line = line;
#pragma unroll
        for (int i = 0; i < kHalo; ++i)
#pragma unroll
          for (int v = 0; v < kVec; ++v) held_state[i][v] = win[i][v];
      } else {
        write_window_state(line, win, spark);
      }
    }
  }
  if constexpr (kClustered) {
    cluster_wait();  // every tile has read the rows before it: the tail is written
#pragma unroll
    for (int k = 0; k < kHalo; ++k)
      if (held_rows & (1u << k)) *reinterpret_cast<Vec*>(out_base + (park_from + k) * out_ts) = held[k];
    cluster_arrive();  // this thread has read every prior it reads
    if (held_line >= 0) {
      cluster_wait();
      write_window_state(held_line, held_state, nullptr);
    }
  }
  allow_next_grid();
}

// (x dtype, bytes of channels a thread, width, silu, clustered). The scalar path serves misaligned
// x only, so one instantiation per dtype takes width and activation at run time; clusters take
// vectors and width 4 (plan_varlen): 51 kernels, not 108.
struct ChannelLast {
  using Configs = native::Configs<Dtypes, Values<16, 8, 0>, Widths, Bools, Bools>;
  static auto traits(auto dtype, auto vec_bytes, auto width, auto silu, auto clustered) {
    if constexpr (vec_bytes() == 0)
      return std::type_identity<ChannelLastTraits<element_t<dtype()>, 0, 0, false>>{};
    else
      return std::type_identity<ChannelLastTraits<element_t<dtype()>, vec_bytes(), width(), silu(),
                                                  clustered() && width() == kMaxWidth>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_channel_last_kernel<Kt>;
  }
};

int channel_last_threads() { return ChannelLastTraits<float, 16, 4, false>::kNThreads; }

// Every instantiation may run in clusters of up to 16 blocks (more than the portable 8); returns
// the first error.
int preload_channel_last() {
  return for_each_config(ChannelLast::Configs{}, [](auto... cs) {
    using Kt = typename decltype(ChannelLast::traits(cs...))::type;
    return cudaFuncSetAttribute(ChannelLast::kernel<Kt>(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  });
}

// The most tiles one cluster of the vectorized kernel can hold on this device (a cluster must fit
// in one GPC at once), or 0 where clusters are not available.
int channel_last_cluster_limit() {
  using Kt = ChannelLastTraits<float, 16, 4, true, true>;  // the most shared memory a block
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(16, 1);
  cfg.blockDim = dim3(Kt::kNThreads);
  cfg.dynamicSmemBytes = Kt::kSmemBytes;
  int size = 0;
  if (cudaOccupancyMaxPotentialClusterSize(&size, varlen_channel_last_kernel<Kt>, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return size > 1 ? std::min(size, 16) : 0;
}

int launch_varlen_channel_last(const VarlenParams& p, ScalarType dtype, int vec_bytes, const LaunchOptions& o,
                               void* stream) {
  return with_instantiation<ChannelLast>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        if (Kt::kClustered != p.clustered) return cudaErrorInvalidValue;  // plan_varlen keeps them equal
        const int64_t threads = (p.dim + Kt::kVec - 1) / Kt::kVec;
        const dim3 grid(p.ntiles, static_cast<unsigned>((threads + Kt::kNThreads - 1) / Kt::kNThreads));
        return launch_kernel_in_clusters(kernel, grid, dim3(Kt::kNThreads), Kt::kSmemBytes,
                                         static_cast<cudaStream_t>(stream), o.pdl,
                                         p.clustered ? static_cast<unsigned>(p.ntiles) : 1u, p);
      },
      dtype, vec_bytes, p.conv.width, p.conv.silu, p.clustered);
}

}  // namespace deltakern::native
