// Host side of the portable CUDA path: kernel parameters from the call's tensors, device selection,
// launch checks, and the per-layout launchers the entry points call.
#pragma once

#include <cuda_runtime_api.h>
#include <deltakern/plugin_sdk_cuda.hpp>

#include <string>
#include <utility>

#include "common.cuh"
#include "launch.hpp"
#include "varlen_time_cut.hpp"

namespace deltakern::portable::cuda {

inline void require(bool ok, dk_status status, const std::string& what) {
  if (!ok) throw plugin::Failure(status, what);
}

inline void check_cuda(cudaError_t err, const std::string& what) { plugin::cuda::check(err, what); }

// A launch reports configuration errors only through cudaGetLastError; nothing here waits.
inline void check_launch(const char* op) {
  check_cuda(cudaGetLastError(), std::string(op) + ": kernel launch");
}

using plugin::cuda::DeviceGuard;

// Multiprocessors of `device` (defined in runtime.cu; cached, so a call asks the runtime once per
// device): the launchers size their grids by it.
int sm_count(int device_id);

// Whether the kernels run on `device` from code compiled for sm_90 or later, which waits for the
// previous grid (wait_for_previous_grid), so they may be launched with PDL (cached like sm_count).
bool has_pdl(int device_id);

// kernel<<<grid, block, 0, stream>>>(args...), as a programmatic dependent launch where `pdl` (the
// kernel must then call wait_for_previous_grid before its first memory access): placed on the GPU
// while the kernel before it finishes (decode into a caller's buffer, H100, batch 1 / 8: 2.40 /
// 2.73 -> 2.19 / 2.32 us, dim-contiguous).
template <typename... Params, typename... Args>
void launch_with_pdl(const char* op, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                     bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...),
             std::string(op) + ": kernel launch");
}

// The forced cut (launch.hpp), applied by the launchers over their own choice.
const TilingOverride& tiling_override();

// ---- parameters from the call (the core validated already; these checks keep a malformed call from
// reaching a kernel)

inline DType x_dtype(const DLTensor& x, const std::string& op) {
  DType t{};
  if (scalar_type_of(x.dtype, &t) && is_floating(t)) return t;
  throw plugin::Failure(DK_ERR_UNSUPPORTED, op + ": x must be float32, float16 or bfloat16");
}

// Weight, bias and states: x's dtype or f32. True when f32.
inline bool stored_as_f32(const DLTensor& t, const DLTensor& x, const std::string& op, const char* what) {
  if (plugin::is_f32(t.dtype)) return true;
  if (plugin::same_dtype(t.dtype, x.dtype)) return false;
  throw plugin::Failure(DK_ERR_UNSUPPORTED, op + ": " + what + " must have x's dtype or float32");
}

inline void require_index_vector(const DLTensor* t, int64_t n, const std::string& op, const char* what) {
  if (t == nullptr) return;
  require(t->ndim == 1 && t->shape[0] == n && plugin::is_i32(t->dtype), DK_ERR_INVALID_ARGUMENT,
          op + ": " + what + " must be int32 of shape (" + std::to_string(n) + ")");
}

inline void require_weight_bias(const DLTensor& w, const DLTensor* bias, int64_t dim, const std::string& op) {
  require(w.ndim == 2 && w.shape[0] == dim, DK_ERR_INVALID_ARGUMENT, op + ": weight must be (D, W)");
  require(w.shape[1] >= 2 && w.shape[1] <= 8, DK_ERR_UNSUPPORTED,
          op + ": width " + std::to_string(w.shape[1]) + " is outside 2..8");
  require(bias == nullptr || (bias->ndim == 1 && bias->shape[0] == dim), DK_ERR_INVALID_ARGUMENT,
          op + ": bias must be (D)");
}

inline VarlenParams make_varlen_params(const plugin::VarlenArgs& a, const DLTensor& out) {
  const std::string op = "portable causal_conv1d_varlen (CUDA)";
  const DLTensor& x = *a.x;
  const DLTensor& w = *a.weight;
  const DLTensor& st = *a.conv_states;
  const DLTensor& q = *a.query_start_loc;
  require(x.ndim == 2, DK_ERR_INVALID_ARGUMENT, op + ": x must be (D, T)");
  const int64_t dim = x.shape[0];
  require_weight_bias(w, a.bias, dim, op);
  require(st.ndim == 3 && st.shape[1] == dim && st.shape[2] >= w.shape[1] - 1, DK_ERR_INVALID_ARGUMENT,
          op + ": conv_states must be (lines, D, S) with S >= W-1");
  require(q.ndim == 1 && q.shape[0] >= 1 && plugin::is_i32(q.dtype), DK_ERR_INVALID_ARGUMENT,
          op + ": query_start_loc must be int32 of shape (batch+1)");
  const int64_t batch = q.shape[0] - 1;
  require_index_vector(a.cache_indices, batch, op, "cache_indices");
  const DLTensor* h = a.has_initial_state;
  require(h == nullptr || (h->ndim == 1 && h->shape[0] == batch && h->dtype.bits == 8 && h->dtype.lanes == 1),
          DK_ERR_INVALID_ARGUMENT, op + ": has_initial_state must be 8-bit of shape (batch)");
  require(out.ndim == 2 && out.shape[0] == dim && out.shape[1] == x.shape[1] &&
              plugin::same_dtype(out.dtype, x.dtype),
          DK_ERR_INTERNAL, op + ": the output must have x's shape and dtype");
  x_dtype(x, op);

  VarlenParams p{};
  p.x = plugin::data_of<char>(x);
  p.out = plugin::data_of<char>(out);
  p.weight = plugin::data_of<char>(w);
  p.bias = a.bias != nullptr ? plugin::data_of<char>(*a.bias) : nullptr;
  p.states = plugin::data_of<char>(st);
  p.query_start_loc = plugin::data_of<const int32_t>(q);
  p.cache_indices = a.cache_indices != nullptr ? plugin::data_of<const int32_t>(*a.cache_indices) : nullptr;
  p.has_initial_state = h != nullptr ? plugin::data_of<const uint8_t>(*h) : nullptr;
  p.error_word = nullptr;
  p.dim = dim;
  p.tokens = x.shape[1];
  p.batch = batch;
  p.width = w.shape[1];
  p.state_len = st.shape[2];
  p.lines = st.shape[0];
  p.pad_slot_id = a.pad_slot_id;
  p.x_c_stride = plugin::stride_of(x, 0);
  p.x_t_stride = plugin::stride_of(x, 1);
  p.out_c_stride = plugin::stride_of(out, 0);
  p.out_t_stride = plugin::stride_of(out, 1);
  p.weight_c_stride = plugin::stride_of(w, 0);
  p.weight_k_stride = plugin::stride_of(w, 1);
  p.bias_stride = a.bias != nullptr ? plugin::stride_of(*a.bias, 0) : 0;
  p.state_l_stride = plugin::stride_of(st, 0);
  p.state_c_stride = plugin::stride_of(st, 1);
  p.state_s_stride = plugin::stride_of(st, 2);
  p.qsl_stride = plugin::stride_of(q, 0);
  p.cache_indices_stride = a.cache_indices != nullptr ? plugin::stride_of(*a.cache_indices, 0) : 0;
  p.has_initial_state_stride = h != nullptr ? plugin::stride_of(*h, 0) : 0;
  p.weight_f32 = stored_as_f32(w, x, op, "weight");
  p.bias_f32 = a.bias != nullptr && stored_as_f32(*a.bias, x, op, "bias");
  p.state_f32 = stored_as_f32(st, x, op, "conv_states");
  p.silu = a.activation == plugin::Activation::silu;
  return p;
}

inline UpdateParams make_update_params(const plugin::UpdateArgs& a, const DLTensor& out) {
  const std::string op = "portable causal_conv1d_update (CUDA)";
  const DLTensor& x = *a.x;
  const DLTensor& w = *a.weight;
  const DLTensor& st = *a.conv_state;
  require(x.ndim == 2 || x.ndim == 3, DK_ERR_INVALID_ARGUMENT,
          op + ": x must be (batch, D) or (batch, D, Tq)");
  const int64_t batch = x.shape[0];
  const int64_t dim = x.shape[1];
  require_weight_bias(w, a.bias, dim, op);
  require(st.ndim == 3 && st.shape[1] == dim && st.shape[2] >= w.shape[1] - 1, DK_ERR_INVALID_ARGUMENT,
          op + ": conv_state must be (lines, D, S) with S >= W-1");
  require_index_vector(a.conv_state_indices, batch, op, "conv_state_indices");
  require_index_vector(a.cache_seqlens, batch, op, "cache_seqlens");
  bool same_shape = out.ndim == x.ndim && plugin::same_dtype(out.dtype, x.dtype);
  for (int d = 0; same_shape && d < x.ndim; ++d) same_shape = out.shape[d] == x.shape[d];
  require(same_shape, DK_ERR_INTERNAL, op + ": the output must have x's shape and dtype");
  x_dtype(x, op);

  UpdateParams p{};
  p.x = plugin::data_of<char>(x);
  p.out = plugin::data_of<char>(out);
  p.weight = plugin::data_of<char>(w);
  p.bias = a.bias != nullptr ? plugin::data_of<char>(*a.bias) : nullptr;
  p.states = plugin::data_of<char>(st);
  p.state_indices =
      a.conv_state_indices != nullptr ? plugin::data_of<const int32_t>(*a.conv_state_indices) : nullptr;
  p.cache_seqlens = a.cache_seqlens != nullptr ? plugin::data_of<const int32_t>(*a.cache_seqlens) : nullptr;
  p.error_word = nullptr;
  p.batch = batch;
  p.dim = dim;
  p.tokens = x.ndim == 3 ? x.shape[2] : 1;
  p.width = w.shape[1];
  p.state_len = st.shape[2];
  p.lines = st.shape[0];
  p.pad_slot_id = a.pad_slot_id;
  p.x_b_stride = plugin::stride_of(x, 0);
  p.x_c_stride = plugin::stride_of(x, 1);
  p.x_t_stride = x.ndim == 3 ? plugin::stride_of(x, 2) : 0;
  p.out_b_stride = plugin::stride_of(out, 0);
  p.out_c_stride = plugin::stride_of(out, 1);
  p.out_t_stride = out.ndim == 3 ? plugin::stride_of(out, 2) : 0;
  p.weight_c_stride = plugin::stride_of(w, 0);
  p.weight_k_stride = plugin::stride_of(w, 1);
  p.bias_stride = a.bias != nullptr ? plugin::stride_of(*a.bias, 0) : 0;
  p.state_l_stride = plugin::stride_of(st, 0);
  p.state_c_stride = plugin::stride_of(st, 1);
  p.state_s_stride = plugin::stride_of(st, 2);
  p.state_indices_stride = a.conv_state_indices != nullptr ? plugin::stride_of(*a.conv_state_indices, 0) : 0;
  p.cache_seqlens_stride = a.cache_seqlens != nullptr ? plugin::stride_of(*a.cache_seqlens, 0) : 0;
  p.weight_f32 = stored_as_f32(w, x, op, "weight");
  p.bias_f32 = a.bias != nullptr && stored_as_f32(*a.bias, x, op, "bias");
  p.state_f32 = stored_as_f32(st, x, op, "conv_state");
  p.silu = a.activation == plugin::Activation::silu;
  return p;
}

// ---- per-layout launchers (varlen_time.cu, varlen_channel_last.cu): enqueue on `stream`, throw
// plugin::Failure on a launch error.
void launch_varlen_time(const VarlenParams& p, DType dtype, int64_t max_seq_len, int sm_count,
                        cudaStream_t stream);
void launch_varlen_channel_last(const VarlenParams& p, DType dtype, int64_t max_seq_len, cudaStream_t stream);

}  // namespace deltakern::portable::cuda
