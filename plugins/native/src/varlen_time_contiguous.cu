// causal_conv1d_varlen, time-contiguous x (stride(time) == 1). A block covers rows_per_block
// channel rows of one token tile, each row split into warp segments. Within a segment, access j
// of lane l holds tokens [(j*32 + l) * kVec, +kVec): every load and store instruction of the
// warp is one contiguous 512-byte run, and all kNVecs accesses are in flight at once. The three
// tokens before an access come from the previous lane (or lane 31's previous access) by shuffle.
// Then, in three phases separated by block barriers:
//   A. every lane computes its outputs into registers, reading priors where sequences start;
//   B. new states of sequences whose last token lies in the warp's segment (their originals are
//      still in x, and every prior read of the block is done);
//   C. every lane stores its outputs (into out: x itself in place).
// Other tiles read only this tile's last tail_len tokens of x: in place, those outputs are
// parked, and the finish pass writes them (varlen_launch.cu); into a separate out they are
// stored with the rest (parks_tail). Every load reads x, so the halo and the new states' inputs
// are originals either way.
#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

// kWidth == 0: the call's width and activation, read at run time (the scalar kernel's
// instantiations, see TimeContiguous).
template <typename T_, bool kVectorized_, int kWidth_, bool kSilu_>
struct TimeContiguousTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr int kNWarps = 4;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kVec = kVectorized_ ? 16 / static_cast<int>(sizeof(T)) : 1;  // tokens per access
  static constexpr int kNVecs = kVectorized_ ? 8 : 16;                              // accesses per lane
  static constexpr int kRun = kVec * kNVecs;  // tokens per lane: 64 (16-bit), 32 (f32), 16 (scalar)
  static constexpr int kSegment = 32 * kRun;  // tokens per warp
  static_assert(kRun <= 64, "the written-token mask is 64 bits");
  using Vec = typename BytesToType<sizeof(T) * kVec>::Type;
};

// The stretch of tokens a walk is in: inside sequence b (written unless its slot is skipped), or
// a gap before it; `next` is where that changes (a sequence end or start, or the tile end).
struct Segment {
  int32_t b;
  int64_t q0, q1, line, next;
  bool init, write;
};

__device__ __forceinline__ void seek(const VarlenParams& p, Segment& s, int64_t t, int64_t t_end) {
  while (s.b < p.batch && seq_offset(p, s.b + 1) <= t) ++s.b;  // also steps over empty sequences
  s.write = false;
  if (t >= t_end || s.b >= p.batch) {
    s.next = INT64_MAX;
    return;
  }
  s.q0 = seq_offset(p, s.b);
  s.q1 = seq_offset(p, s.b + 1);
  if (t < s.q0) {
    s.next = min(s.q0, t_end);
    return;
  }
  s.line = state_line(p.cache_indices, s.b, p.state, p.conv, false);
  s.init = has_initial_state(p, s.b);
  s.write = s.line >= 0;
  s.next = min(s.q1, t_end);
}

// e-value of position pos < q0 of the segment's sequence: its prior, or zero.
__device__ __forceinline__ float prior_at(const VarlenParams& p, const Segment& s, int64_t d, int64_t pos) {
  const int64_t j = p.state.len + (pos - s.q0);
  return s.init && j >= 0 ? load_float(p.state.data, state_offset(p.state, s.line, d, j), p.state.dtype)
                          : 0.f;
}

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads) varlen_time_contiguous_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  constexpr int kVec = Kt::kVec, kNVecs = Kt::kNVecs, kSegment = Kt::kSegment;
  constexpr uint64_t kVecBits = (uint64_t{1} << kVec) - 1;
  constexpr unsigned kFull = 0xffffffffu;
  union Pack {
    Vec v;
    T e[kVec];
  };
  wait_for_previous_grid();

  const int lane = threadIdx.x % 32;
  const int rows = p.rows_per_block;
  const int warps_per_row = Kt::kNWarps / rows;
  const int warp = threadIdx.x / 32;
  const int32_t g = blockIdx.x;
  const int64_t t_begin = static_cast<int64_t>(g) * p.tile_len;
  const int64_t t_end = min(t_begin + p.tile_len, p.tokens);
  const bool last_tile = g == p.ntiles - 1;
  const bool parks = !last_tile && parks_tail(p);
  const int64_t park_from = parks ? t_end - p.tail_len : t_end;
  const int64_t wbase = t_begin + static_cast<int64_t>(warp % warps_per_row) * kSegment;
  auto start = [&](int j) { return wbase + static_cast<int64_t>(j * 32 + lane) * kVec; };
  // New states are written by the warp whose segment holds the sequence's last token (or, when
  // empty, its position; position T itself goes to the last warp of the last tile).
  const int64_t wend = last_tile && warp % warps_per_row == warps_per_row - 1
                           ? max(wbase + kSegment, p.tokens + 1)
                           : wbase + kSegment;
  const int first = kMaxWidth - (Kt::kWidth > 0 ? Kt::kWidth : p.conv.width);
  const bool silu = Kt::kWidth > 0 ? Kt::kSilu : p.conv.silu;
  const StateView& st = p.state;

  for (int64_t d0 = static_cast<int64_t>(blockIdx.y) * rows; d0 < p.dim;
       d0 += static_cast<int64_t>(gridDim.y) * rows) {
    const int64_t d = d0 + warp / warps_per_row;
    const bool active = d < p.dim;  // warp-uniform
    T* const row = static_cast<T*>(p.x) + (active ? d : 0) * p.chan_stride;
    // out's row: time stride 1 like x's (same layout); 16-byte aligned where the kernel is (plugin.cpp).
    T* const out_row = static_cast<T*>(p.out) + (active ? d : 0) * p.out_chan_stride;
    Pack io[kNVecs];  // inputs, overwritten by outputs
    uint64_t mask = 0;
    int32_t warp_b = 0;

    // ---- A: load the segment, compute its outputs
    if (active) {
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) {
        const int64_t t0 = start(j);
        if (t0 + kVec <= t_end) {
          io[j].v = *reinterpret_cast<const Vec*>(row + t0);
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i) io[j].e[i] = t0 + i < t_end ? row[t0 + i] : from_float<T>(0.f);
        }
      }
      const ChannelTaps taps = load_taps(p.conv, d);
      // The warp's sequence table (issued after the x loads): sequence warp_b + k ends at lane k's
      // `end`; a lookup is a few shuffles instead of a chain of dependent loads.
      warp_b = warp_first_sequence_ending_at_or_after(p, wbase);
      const int32_t q_first = static_cast<int32_t>(seq_offset(p, min(warp_b, p.batch)));
      const int32_t mine = warp_b + lane;
      const int32_t end = mine < p.batch ? static_cast<int32_t>(seq_offset(p, mine + 1)) : INT32_MAX;
      const int64_t line_k = mine < p.batch ? state_line(p.cache_indices, mine, st, p.conv, false) : -1;
      const bool init_k = mine < p.batch && has_initial_state(p, mine);
      const int32_t end_31 = __shfl_sync(kFull, end, 31);
      // Originals of the three tokens before access j of lanes below lanes_back: held by lanes
      // 29..31 of access j-1, fetched before access j-1 is overwritten by its outputs.
      float carry[kHalo];
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const int64_t pos = start(0) - (kHalo - i);
        carry[i] = pos >= 0 && pos < p.tokens ? to_float(row[pos]) : 0.f;  // used by lanes below lanes_back
      }
      Segment s;
      s.b = warp_b;
      s.next = -1;
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) {
        const int64_t t0 = start(j);
        float w[kHalo];  // e-values of the three tokens before the current one
#pragma unroll
        for (int i = 0; i < kHalo; ++i) {
          const int back = kHalo - i;  // token t0 - back
          const int lanes_back = (back + kVec - 1) / kVec;
          const int elem = lanes_back * kVec - back;
          const float v = to_float(io[j].e[elem]);
          const float same = __shfl_up_sync(kFull, v, lanes_back);
          const float next = __shfl_sync(kFull, v, (lane - lanes_back) & 31);
          w[i] = lane >= lanes_back ? same : carry[i];
          carry[i] = next;
        }
        {
          // Table lookup: c = number of table sequences ending at or before t0.
          int c = 0;
#pragma unroll
          for (int step = 16; step >= 1; step /= 2)
            if (__shfl_sync(kFull, end, c + step - 1) <= t0) c += step;
          if (c == 31 && end_31 <= t0) c = 32;
          const int ci = c < 32 ? c : 31;
          const int32_t q1 = __shfl_sync(kFull, end, ci);
          const int32_t q0 = __shfl_sync(kFull, end, ci > 0 ? ci - 1 : 0);
          const int64_t line = __shfl_sync(kFull, line_k, ci);
          const bool init = __shfl_sync(kFull, static_cast<int>(init_k), ci) != 0;
          if (c == 32) {  // past the table: many short sequences, walk the offsets
            s.b = warp_b + 31;
            seek(p, s, t0, t_end);
          } else {
            s.b = warp_b + c;
            s.q0 = c == 0 ? q_first : q0;
            s.q1 = q1;
            s.line = line;
            s.init = init;
            s.write = false;
            if (t0 >= t_end || s.b >= p.batch) {
              s.next = INT64_MAX;
            } else if (t0 < s.q0) {
              s.next = min(s.q0, t_end);
            } else {
              s.write = line >= 0;
              s.next = min(s.q1, t_end);
            }
          }
        }
        if (s.write && t0 - kHalo < s.q0) {
#pragma unroll
          for (int i = 0; i < kHalo; ++i)
            if (t0 - kHalo + i < s.q0) w[i] = i >= first ? prior_at(p, s, d, t0 - kHalo + i) : 0.f;
        }
        if (t0 + kVec <= s.next) {
          // No sequence edge inside this access: the common case.
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            const float cur = to_float(io[j].e[i]);
            io[j].e[i] = from_float<T>(conv_point<T>(taps, first, w[0], w[1], w[2], cur, silu));
            w[0] = w[1];
            w[1] = w[2];
            w[2] = cur;
          }
          if (s.write) mask |= kVecBits << (j * kVec);
        } else {
          // A sequence starts or ends inside: token by token, restarting the window from the
          // prior where a sequence starts (rolled: rare, and small code keeps the fast path tight).
          Pack buf_j = io[j];
#pragma unroll 1
          for (int i = 0; i < kVec; ++i) {
            const int64_t t = t0 + i;
            if (t >= s.next) {
              seek(p, s, t, t_end);
              if (s.write && t == s.q0) {
#pragma unroll
                for (int k = 0; k < kHalo; ++k) w[k] = k >= first ? prior_at(p, s, d, t - kHalo + k) : 0.f;
              }
            }
            const float cur = to_float(buf_j.e[i]);
            buf_j.e[i] = from_float<T>(conv_point<T>(taps, first, w[0], w[1], w[2], cur, silu));
            w[0] = w[1];
            w[1] = w[2];
            w[2] = cur;
            if (s.write) mask |= uint64_t{1} << (j * kVec + i);
          }
          io[j] = buf_j;
        }
      }
    }
    __syncthreads();

    // ---- B: new states of the sequences ending in this warp's segment, one lane each
    if (active) {
      float* const state_park =
          g == 0 ? nullptr : p.state_park + static_cast<int64_t>(g - 1) * st.len * p.dim;
      for (int32_t b = warp_b + lane; b < p.batch; b += 32) {
        const int64_t q0 = seq_offset(p, b);
        if (q0 >= wend) break;
        const int64_t q1 = max(q0, seq_offset(p, b + 1));
        const int64_t trigger = q1 > q0 ? q1 - 1 : q0;
        if (trigger < wbase || trigger >= wend) continue;
        const int64_t line = state_line(p.cache_indices, b, st, p.conv, d == 0);
        if (line < 0) continue;
        write_new_state<T>(p, row, 1, q0, q1, line, d, has_initial_state(p, b),
                           q0 >= t_begin ? nullptr : state_park);
      }
    }
    __syncthreads();

    // ---- C: store
    allow_next_grid();
    if (active && mask != 0) {
      T* const park =
          parks ? static_cast<T*>(p.park) + (static_cast<int64_t>(g) * p.dim + d) * p.tail_len : nullptr;
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) {
        const int64_t t0 = start(j);
        const uint64_t bits = (mask >> (j * kVec)) & kVecBits;
        if (bits == kVecBits && t0 + kVec <= park_from) {
          *reinterpret_cast<Vec*>(out_row + t0) = io[j].v;
        } else if (bits != 0) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            if (!((bits >> i) & 1u)) continue;
            const int64_t t = t0 + i;
            if (t < park_from)
              out_row[t] = io[j].e[i];
            else
              park[t - park_from] = io[j].e[i];
          }
        }
      }
    }
  }
}

// (x dtype, vectorized, width, silu). The scalar kernel serves misaligned x only, so one
// instantiation per dtype takes width and activation at run time: 21 kernels, not 36.
struct TimeContiguous {
  using Configs = native::Configs<Dtypes, Bools, Widths, Bools>;
  static auto traits(auto dtype, auto vectorized, auto width, auto silu) {
    if constexpr (!vectorized())
      return std::type_identity<TimeContiguousTraits<element_t<dtype()>, false, 0, false>>{};
    else
      return std::type_identity<TimeContiguousTraits<element_t<dtype()>, true, width(), silu()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_time_contiguous_kernel<Kt>;
  }
};

int time_contiguous_segment(ScalarType dtype, bool vectorized) {
  if (!vectorized) return TimeContiguousTraits<float, false, 4, false>::kSegment;
  return dtype == ScalarType::f32 ? TimeContiguousTraits<float, true, 4, false>::kSegment
                                  : TimeContiguousTraits<__half, true, 4, false>::kSegment;
}
int time_contiguous_warps() { return TimeContiguousTraits<float, true, 4, false>::kNWarps; }

int preload_time_contiguous() { return preload<TimeContiguous>(); }

int launch_varlen_time_contiguous(const VarlenParams& p, ScalarType dtype, bool vectorized,
                                  const LaunchOptions& o, void* stream) {
  const int64_t blocks_y = std::min<int64_t>((p.dim + p.rows_per_block - 1) / p.rows_per_block, 65535);
  return with_instantiation<TimeContiguous>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        return launch_kernel(kernel, dim3(p.ntiles, static_cast<unsigned>(blocks_y)), dim3(Kt::kNThreads), 0,
                             static_cast<cudaStream_t>(stream), o.pdl, p);
      },
      dtype, vectorized, p.conv.width, p.conv.silu);
}

}  // namespace deltakern::native
