// Private to the portable CUDA path: dtype conversions, 16-byte packs, the kernels' parameter structs
// and the host helpers the launchers share. Device code here uses no architecture-specific
// instruction: the plugin ships compute_75 PTX that any later GPU JIT-compiles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>
#include <deltakern/plugin_sdk.hpp>
#include <deltakern/plugin_sdk_cuda_convert.cuh>
#include <deltakern/plugin_sdk_cuda_pdl.cuh>

#include "launch.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace deltakern::portable::cuda {

using DType = ScalarType;  // the project's dtype vocabulary (deltakern/scalar_type.hpp)

using ::deltakern::plugin::cuda::allow_next_grid;
using ::deltakern::plugin::cuda::from_float;  // deltakern/plugin_sdk_cuda_convert.cuh
using ::deltakern::plugin::cuda::to_float;
using ::deltakern::plugin::cuda::wait_for_previous_grid;  // deltakern/plugin_sdk_cuda_pdl.cuh

// Weight, bias and states are each stored in x's dtype or in f32. They are touched a handful of
// times per thread, so a warp-uniform branch on the dtype costs nothing measurable and keeps the
// kernel templates to one per x dtype instead of four.
template <typename input_t>
__device__ __forceinline__ float load_param(const void* p, int64_t i, bool f32) {
  return f32 ? __ldg(static_cast<const float*>(p) + i) : to_float(__ldg(static_cast<const input_t*>(p) + i));
}
// States are written by the same kernel that reads them, so they must not go through the
// read-only (non-coherent) path that load_param uses.
template <typename input_t>
__device__ __forceinline__ float load_state(const void* p, int64_t i, bool f32) {
  return f32 ? static_cast<const float*>(p)[i] : to_float(static_cast<const input_t*>(p)[i]);
}
template <typename input_t>
__device__ __forceinline__ void store_state(void* p, int64_t i, float v, bool f32) {
  if (f32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<input_t*>(p)[i] = from_float<input_t>(v);
  }
}

// silu(v) = v / (1 + exp(-v)), in f32. With a 16-bit x the result is rounded to 8 or 11 bits, far
// coarser than the approximate functions below (a few f32 ulp; tanh.approx ~2^-11 relative, used
// for bf16 only), and their MUFU path keeps the kernels memory-bound: the accurate ones cost ~15
// instructions per element, about the whole budget at H200 bandwidth. tanh.approx and ex2.approx
// are PTX for every target of the compute_75 PTX the plugin ships. An f32 x moves twice the bytes
// per element and keeps the exact form.
template <typename input_t>
__device__ __forceinline__ float silu(float v) {
  if constexpr (std::is_same_v<input_t, float>) {
    return v / (1.f + expf(-v));
  } else if constexpr (std::is_same_v<input_t, __nv_bfloat16>) {
    // v * sigmoid(v) = h + h * tanh(h), h = v / 2: one MUFU op.
    const float h = 0.5f * v;
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
    return fmaf(h, t, h);
  } else {
    // exp(-v) = 2^(-v log2 e), flushed to zero below 2^-126 (1 + that is 1 in f32 anyway).
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-1.4426950408889634f * v));
    return __fdividef(v, 1.f + e);
  }
}

// One 16-byte access: the unit that keeps every global load and store of the streaming kernels
// a full sector per thread.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  Pack<T> r;
  memcpy(&r, &raw, sizeof(r));
  return r;
}
template <typename T>
__device__ __forceinline__ Pack<T> load_pack_shared(const T* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  Pack<T> r;
  memcpy(&r, &raw, sizeof(r));
  return r;
}
// One st.global.v4 through the intrinsic (global memory only): a plain uint4 store of a register
// aggregate was lowered to four 32-bit stores (four times the store instructions and L2 requests).
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  uint4 raw;
  memcpy(&raw, &v, sizeof(raw));
  __stcg(reinterpret_cast<uint4*>(p), raw);
}
template <typename T>
__device__ __forceinline__ void store_pack_shared(T* p, const Pack<T>& v) {
  uint4 raw;
  memcpy(&raw, &v, sizeof(raw));
  *reinterpret_cast<uint4*>(p) = raw;
}

// ---- parameters (plain structs passed by value; element strides, 64-bit offsets)

struct VarlenParams {
  const void* x;
  void* out;
  const void* weight;
  const void* bias;  // nullptr: no bias
  void* states;
  const int32_t* query_start_loc;
  const int32_t* cache_indices;      // nullptr: identity
  const uint8_t* has_initial_state;  // nullptr: all false
  uint32_t* error_word;
  int64_t dim, tokens, batch, width, state_len, lines, pad_slot_id;
  int64_t x_c_stride, x_t_stride, out_c_stride, out_t_stride;
  int64_t weight_c_stride, weight_k_stride, bias_stride;
  int64_t state_l_stride, state_c_stride, state_s_stride;
  int64_t qsl_stride, cache_indices_stride, has_initial_state_stride;
  bool weight_f32, bias_f32, state_f32, silu;
};

struct UpdateParams {
  const void* x;
  void* out;
  const void* weight;
  const void* bias;  // nullptr: no bias
  void* states;
  const int32_t* state_indices;  // nullptr: identity
  const int32_t* cache_seqlens;  // nullptr: shift mode
  uint32_t* error_word;
  int64_t batch, dim, tokens, width, state_len, lines, pad_slot_id;
  int64_t x_b_stride, x_c_stride, x_t_stride, out_b_stride, out_c_stride, out_t_stride;
  int64_t weight_c_stride, weight_k_stride, bias_stride;
  int64_t state_l_stride, state_c_stride, state_s_stride;
  int64_t state_indices_stride, cache_seqlens_stride;
  bool weight_f32, bias_f32, state_f32, silu;
};

// Where sequence b lives in x and in the state pool. Bounds from query_start_loc are clamped to
// [0, T] so that malformed offsets can cost correctness but never an out-of-bounds access.
struct SeqInfo {
  int64_t start, end, line;
  bool skip;  // padded or out-of-range: zeros in out, state row untouched
  bool out_of_range;
  bool has_init;
};

__device__ __forceinline__ SeqInfo load_seq(const VarlenParams& p, int64_t b) {
  SeqInfo s;
  const int64_t q0 = p.query_start_loc[b * p.qsl_stride];
  const int64_t q1 = p.query_start_loc[(b + 1) * p.qsl_stride];
  s.start = q0 < 0 ? 0 : (q0 > p.tokens ? p.tokens : q0);
  s.end = q1 < s.start ? s.start : (q1 > p.tokens ? p.tokens : q1);
  s.line = p.cache_indices != nullptr ? int64_t(p.cache_indices[b * p.cache_indices_stride]) : b;
  const bool pad = s.line == p.pad_slot_id;
  s.out_of_range = !pad && (s.line < 0 || s.line >= p.lines);
  s.skip = pad || s.out_of_range;
  s.has_init =
      !s.skip && p.has_initial_state != nullptr && p.has_initial_state[b * p.has_initial_state_stride] != 0;
  return s;
}

__device__ __forceinline__ void flag_error(uint32_t* word, uint32_t bits) { atomicOr(word, bits); }

// The state line of decode row b, or -1 when the row is skipped (padded, or out of range, which
// the thread with `flag` set reports in the error word).
__device__ __forceinline__ int64_t update_line(const UpdateParams& p, int64_t b, bool flag) {
  const int64_t line = p.state_indices != nullptr ? int64_t(p.state_indices[b * p.state_indices_stride]) : b;
  if (line == p.pad_slot_id) return -1;
  if (line < 0 || line >= p.lines) {
    if (flag) flag_error(p.error_word, DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
    return -1;
  }
  return line;
}

// ---- host side, shared by the launchers

// The device-side error word of `device_id` (defined in runtime.cu, the only translation unit that
// may name the __device__ symbol without relocatable device code).
uint32_t* error_word_ptr(int device_id);

template <typename T>
inline bool aligned16(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

inline dim3 make_grid(int64_t x, int64_t y, int64_t z) {
  if (x > INT32_MAX || y > 65535 || z > 65535) {
    throw plugin::Failure(DK_ERR_UNSUPPORTED, "launch grid (" + std::to_string(x) + ", " + std::to_string(y) +
                                                  ", " + std::to_string(z) + ") exceeds the CUDA limits");
  }
  return dim3(unsigned(x), unsigned(y), unsigned(z));
}

template <class F>
void bool_switch(bool v, F&& f) {
  if (v) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// The widths both devices declare: the plugin's caps are shared by its CPU and CUDA paths.
template <class F>
void width_switch(int64_t width, F&& f) {
  switch (width) {
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    case 6:
      return f(std::integral_constant<int, 6>{});
    case 7:
      return f(std::integral_constant<int, 7>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    default:
      throw plugin::Failure(DK_ERR_UNSUPPORTED, "width " + std::to_string(width) + " is outside 2..8");
  }
}

template <class F>
void dtype_switch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
    default:  // x_dtype() admits the float types only
      return;
  }
}

}  // namespace deltakern::portable::cuda
