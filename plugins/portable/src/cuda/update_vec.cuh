// causal_conv1d_update (decode), 16 bytes of channels a thread: x, out and the state row move as
// whole 16-byte packs, on both layouts engines keep their states in (compact per line, and
// dim-contiguous as vLLM and SGLang store them), in shift and circular mode alike. The element-wise
// update_kernel serves every other shape. At large batch a one-channel thread left the GPU
// waiting on 2-byte accesses (H200, bf16, D=8192, batch 1024: 23.6% of the copy rate compact,
// 18.7% dim-contiguous).
#pragma once

#include "common.cuh"

namespace deltakern::portable::cuda {

// How a thread's state block lies: one pack per position (dim-contiguous: channel stride 1), or
// kChannels * S consecutive elements, S packs (compact: (lines, D, S) contiguous per line).
enum class StateBlock : int { dim_contiguous = 0, compact = 1 };

template <int kNThreads_, int kWidth_, typename input_t_>
struct UpdateVecTraits {
  using input_t = input_t_;
  static constexpr int kNThreads = kNThreads_;  // at most; the launch picks 64 or 128
  static constexpr int kWidth = kWidth_;
  static constexpr int kS = kWidth - 1;  // the state length this kernel serves: S = W-1
  static constexpr int kChannels = Pack<input_t>::kN;
};

// The layout the vector kernel takes, or false: x, out and the state in whole aligned packs, the
// state in x's dtype with S = W-1.
template <typename input_t>
bool update_vec_layout(const UpdateParams& p, StateBlock& block) {
  constexpr int64_t es = sizeof(input_t), kC = Pack<input_t>::kN;
  const auto packs = [&](const void* base, int64_t stride) {
    return aligned16(base) && stride * es % 16 == 0;
  };
  if (p.x_c_stride != 1 || p.out_c_stride != 1 || p.dim % kC != 0 || p.state_len != p.width - 1) return false;
  if (!packs(p.x, p.x_b_stride) || !packs(p.out, p.out_b_stride)) return false;
  if (p.tokens > 1 && (p.x_t_stride * es % 16 != 0 || p.out_t_stride * es % 16 != 0)) return false;
  if ((p.state_f32 && !std::is_same_v<input_t, float>) || !packs(p.states, p.state_l_stride)) return false;
  if (p.state_c_stride == 1 && p.state_s_stride * es % 16 == 0) {
    block = StateBlock::dim_contiguous;
    return true;
  }
  if (p.state_s_stride == 1 && p.state_c_stride == p.state_len) {
    block = StateBlock::compact;
    return true;
  }
  return false;
}

// n consecutive values of type E at base + offset (16-byte aligned, n a multiple of a pack), as floats.
template <typename E, int kN>
__device__ __forceinline__ void load_run(const void* base, int64_t offset, float (&out)[kN]) {
  constexpr int kPer = Pack<E>::kN;
  static_assert(kN % kPer == 0, "whole packs");
  const E* const p = static_cast<const E*>(base) + offset;
#pragma unroll
  for (int i = 0; i < kN / kPer; ++i) {
    const Pack<E> pk = load_pack(p + i * kPer);
#pragma unroll
    for (int j = 0; j < kPer; ++j) out[i * kPer + j] = to_float(pk.v[j]);
  }
}

// A thread's taps (w[v * W + k]) and biases: whole packs where the weight is (D, W) contiguous
// and the bias contiguous, both aligned, else element by element. Element by element, a warp's
// kC * W loads spanned 32 * kC * W elements each and held the kernel to 30% of the copy rate
// (H200, bf16, D=8192, batch 1024, 2026-12-03).
template <typename Ktraits>
__device__ __forceinline__ void load_taps(const UpdateParams& p, int64_t c0,
                                          float (&w)[Ktraits::kChannels * Ktraits::kWidth],
                                          float (&bias)[Ktraits::kChannels]) {
  constexpr int kWidth = Ktraits::kWidth, kC = Ktraits::kChannels;
  using input_t = typename Ktraits::input_t;
  const auto a16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  if (p.weight_k_stride == 1 && p.weight_c_stride == kWidth && a16(p.weight)) {
    if (p.weight_f32)
      load_run<float>(p.weight, c0 * kWidth, w);
    else
      load_run<input_t>(p.weight, c0 * kWidth, w);
  } else {
#pragma unroll
    for (int v = 0; v < kC; ++v)
#pragma unroll
      for (int k = 0; k < kWidth; ++k)
        w[v * kWidth + k] =
            load_param<input_t>(p.weight, (c0 + v) * p.weight_c_stride + k * p.weight_k_stride, p.weight_f32);
  }
  if (p.bias == nullptr) {
#pragma unroll
    for (int v = 0; v < kC; ++v) bias[v] = 0.f;
  } else if (p.bias_stride == 1 && a16(p.bias)) {
    if (p.bias_f32)
      load_run<float>(p.bias, c0, bias);
    else
      load_run<input_t>(p.bias, c0, bias);
  } else {
#pragma unroll
    for (int v = 0; v < kC; ++v) bias[v] = load_param<input_t>(p.bias, (c0 + v) * p.bias_stride, p.bias_f32);
  }
}

// Grid: (channel blocks, row groups); a thread loads its taps once and walks rows_per_block rows.
template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads) void update_vec_kernel(UpdateParams params, StateBlock block,
                                                                        int64_t rows_per_block) {
  constexpr int kWidth = Ktraits::kWidth, kS = Ktraits::kS, kC = Ktraits::kChannels;
  using input_t = typename Ktraits::input_t;

  wait_for_previous_grid();  // launched with PDL on sm_90 (launch_with_pdl)
  allow_next_grid();

  const int64_t c0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kC;
  if (c0 >= params.dim) return;
  float w[kC * kWidth], bias[kC];
  load_taps<Ktraits>(params, c0, w, bias);
  const int64_t b0 = int64_t(blockIdx.y) * rows_per_block;
  const int64_t b1 = min(b0 + rows_per_block, params.batch);
  for (int64_t b = b0; b < b1; ++b) {
    const input_t* x = static_cast<const input_t*>(params.x) + b * params.x_b_stride + c0;
    input_t* out = static_cast<input_t*>(params.out) + b * params.out_b_stride + c0;

    // x's first token and the ring position do not depend on the row's line: requested before
    // the index, a small batch waits on two round trips to memory (the index, then the state
    // row), not three.
    const Pack<input_t> x_first = params.tokens > 0 ? load_pack(x) : Pack<input_t>{};
    const bool circular = params.cache_seqlens != nullptr;
    const int32_t seen = circular ? params.cache_seqlens[b * params.cache_seqlens_stride] : 0;
    const int64_t line = update_line(params, b, c0 == 0);
    if (line < 0) {
      Pack<input_t> zeros;
#pragma unroll
      for (int v = 0; v < kC; ++v) zeros.v[v] = from_float<input_t>(0.f);
      for (int64_t t = 0; t < params.tokens; ++t) store_pack(out + t * params.out_t_stride, zeros);
      continue;
    }

    // Circular mode with S = W-1: the ring is the window, and entry j of the history is ring slot
    // (n + j) mod S, where n counts the row's tokens so far; token t goes to slot (n + t) mod S.
    int r = seen % kS;
    if (r < 0) r += kS;
    input_t* const row = static_cast<input_t*>(params.states) + line * params.state_l_stride;
    // dim-contiguous: slot j's pack; compact: the whole block, element (v, slot) at v * S + slot.
    input_t* const slot_pack = row + c0;
    input_t* const block_base = row + c0 * kS;
    Pack<input_t> blk[kS];
    float hist[kC][kS];
    if (block == StateBlock::compact) {
#pragma unroll
      for (int k = 0; k < kS; ++k) blk[k] = load_pack_shared(block_base + k * kC);  // coherent: written below
#pragma unroll
      for (int v = 0; v < kC; ++v)
#pragma unroll
        for (int j = 0; j < kS; ++j) {
          // The slot is run-time in circular mode: select among the S candidates (constant indices
          // keep the block in registers).
          float h = 0.f;
#pragma unroll
          for (int s = 0; s < kS; ++s) {
            const int e = v * kS + s;
            if ((r + j) % kS == s) h = to_float(blk[e / kC].v[e % kC]);
          }
          hist[v][j] = h;
        }
    } else {
#pragma unroll
      for (int j = 0; j < kS; ++j) {
        const Pack<input_t> pk = load_pack_shared(slot_pack + ((r + j) % kS) * params.state_s_stride);
#pragma unroll
        for (int v = 0; v < kC; ++v) hist[v][j] = to_float(pk.v[v]);
      }
    }

    for (int64_t t = 0; t < params.tokens; ++t) {
      const Pack<input_t> xp = t == 0 ? x_first : load_pack(x + t * params.x_t_stride);
      Pack<input_t> op;
#pragma unroll
      for (int v = 0; v < kC; ++v) {
        const float xt = to_float(xp.v[v]);
        // Same order of summation as update_kernel and the prefill kernels.
        float acc = bias[v];
#pragma unroll
        for (int k = 0; k < kWidth - 1; ++k) acc += w[v * kWidth + k] * hist[v][k];
        acc += w[v * kWidth + kWidth - 1] * xt;
        op.v[v] = from_float<input_t>(params.silu ? silu<input_t>(acc) : acc);
#pragma unroll
        for (int j = 0; j + 1 < kS; ++j) hist[v][j] = hist[v][j + 1];
        hist[v][kS - 1] = xt;
      }
      store_pack(out + t * params.out_t_stride, op);
      if (circular) {
        const int slot = static_cast<int>((r + t) % kS);
        if (block == StateBlock::compact) {
#pragma unroll
          for (int v = 0; v < kC; ++v)
#pragma unroll
            for (int s = 0; s < kS; ++s) {
              const int e = v * kS + s;
              if (slot == s) blk[e / kC].v[e % kC] = xp.v[v];
            }
        } else {
          store_pack(slot_pack + slot * params.state_s_stride, xp);
        }
      }
    }
    if (!circular) {
      // Shift mode, S = W-1: the history now holds the last S entries of concat(old row, x_b), the new row.
      if (block == StateBlock::dim_contiguous) {
#pragma unroll
        for (int j = 0; j < kS; ++j) {
          Pack<input_t> pk;
#pragma unroll
          for (int v = 0; v < kC; ++v) pk.v[v] = from_float<input_t>(hist[v][j]);
          store_pack(slot_pack + j * params.state_s_stride, pk);
        }
        continue;
      }
#pragma unroll
      for (int v = 0; v < kC; ++v)
#pragma unroll
        for (int j = 0; j < kS; ++j) {
          const int e = v * kS + j;
          blk[e / kC].v[e % kC] = from_float<input_t>(hist[v][j]);
        }
    }
    if (block == StateBlock::compact) {
#pragma unroll
      for (int k = 0; k < kS; ++k) store_pack(block_base + k * kC, blk[k]);
    }
  }  // rows
}

}  // namespace deltakern::portable::cuda
