#include "check_args.hpp"

#include <string_view>

namespace deltakern::portable {

namespace {

using plugin::Failure;

[[noreturn]] void fail(dk_status status, std::string_view op, const std::string& what) {
  throw Failure(status, std::string(op) + ": " + what);
}

bool is_float(const DLDataType& t) { return plugin::is_f32(t) || plugin::is_f16(t) || plugin::is_bf16(t); }

bool same_device(const DLTensor& a, const DLTensor& b) {
  return a.device.device_type == b.device.device_type && a.device.device_id == b.device.device_id;
}

std::string shape_of(const DLTensor& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + ")";
}

void require_rank(std::string_view op, const char* name, const DLTensor& t, int ndim) {
  if (t.ndim != ndim)
    fail(DK_ERR_INVALID_ARGUMENT, op,
         std::string(name) + " must have " + std::to_string(ndim) + " dimensions, got shape " + shape_of(t));
}

void require_extent(std::string_view op, const char* name, const DLTensor& t, int dim, int64_t extent,
                    const char* what) {
  if (t.shape[dim] != extent)
    fail(DK_ERR_INVALID_ARGUMENT, op,
         std::string(name) + " has shape " + shape_of(t) + "; dimension " + std::to_string(dim) +
             " must be " + what + " = " + std::to_string(extent));
}

// weight, bias, states: x's dtype or f32, on x's device.
void require_companion(std::string_view op, const char* name, const DLTensor& t, const DLTensor& x) {
  if (!same_device(t, x)) fail(DK_ERR_INVALID_ARGUMENT, op, std::string(name) + " is not on x's device");
  if (!plugin::same_dtype(t.dtype, x.dtype) && !plugin::is_f32(t.dtype))
    fail(DK_ERR_UNSUPPORTED, op,
         std::string(name) + " is " + dtype_name(t.dtype) + "; portable takes x's dtype (" +
             dtype_name(x.dtype) + ") or float32");
}

void require_index(std::string_view op, const char* name, const DLTensor& t, const DLTensor& x,
                   int64_t extent, bool mask) {
  require_rank(op, name, t, 1);
  require_extent(op, name, t, 0, extent, "batch");
  if (!same_device(t, x)) fail(DK_ERR_INVALID_ARGUMENT, op, std::string(name) + " is not on x's device");
  const bool ok = mask ? plugin::is_dtype(t.dtype, kDLUInt, 8) : plugin::is_i32(t.dtype);
  if (!ok)
    fail(DK_ERR_INVALID_ARGUMENT, op,
         std::string(name) + " must be " + (mask ? "uint8" : "int32") + ", got " + dtype_name(t.dtype));
}

void require_weight(std::string_view op, const DLTensor& weight, const DLTensor* bias, const DLTensor& x,
                    int64_t dim) {
  require_rank(op, "weight", weight, 2);
  require_extent(op, "weight", weight, 0, dim, "dim");
  require_companion(op, "weight", weight, x);
  const int64_t width = weight.shape[1];
  if (width < kMinWidth || width > kMaxWidth)
    fail(DK_ERR_UNSUPPORTED, op,
         "width " + std::to_string(width) + " is outside portable's range [" + std::to_string(kMinWidth) +
             ", " + std::to_string(kMaxWidth) + "]");
  if (bias != nullptr) {
    require_rank(op, "bias", *bias, 1);
    require_extent(op, "bias", *bias, 0, dim, "dim");
    require_companion(op, "bias", *bias, x);
  }
}

void require_states(std::string_view op, const char* name, const DLTensor& states, const DLTensor& x,
                    int64_t dim, int64_t width) {
  require_rank(op, name, states, 3);
  require_extent(op, name, states, 1, dim, "dim");
  require_companion(op, name, states, x);
  if (states.shape[2] < width - 1)
    fail(DK_ERR_INVALID_ARGUMENT, op,
         std::string(name) + " has state length " + std::to_string(states.shape[2]) +
             " < width - 1 = " + std::to_string(width - 1));
}

void require_x(std::string_view op, const DLTensor& x) {
  if (!is_float(x.dtype))
    fail(DK_ERR_UNSUPPORTED, op,
         "x is " + dtype_name(x.dtype) + "; portable takes float32, float16, bfloat16");
  if (x.device.device_type != kDLCPU && x.device.device_type != kDLCUDA)
    fail(DK_ERR_UNSUPPORTED, op, "x is on a device portable does not serve");
}

}  // namespace

std::string dtype_name(const DLDataType& t) {
  if (plugin::is_f32(t)) return "float32";
  if (plugin::is_f16(t)) return "float16";
  if (plugin::is_bf16(t)) return "bfloat16";
  if (plugin::is_i32(t)) return "int32";
  if (plugin::is_dtype(t, kDLUInt, 8)) return "uint8";
  return "dtype(code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + " lanes)";
}

XLayout check_varlen(const plugin::VarlenArgs& a) {
  constexpr std::string_view op = DK_OP_CAUSAL_CONV1D_VARLEN;
  if (a.x == nullptr || a.weight == nullptr || a.conv_states == nullptr || a.query_start_loc == nullptr)
    fail(DK_ERR_INVALID_ARGUMENT, op, "x, weight, conv_states and query_start_loc are required");
  const DLTensor& x = *a.x;
  require_rank(op, "x", x, 2);
  require_x(op, x);
  const int64_t dim = x.shape[0];
  require_weight(op, *a.weight, a.bias, x, dim);
  require_states(op, "conv_states", *a.conv_states, x, dim, a.weight->shape[1]);
  require_rank(op, "query_start_loc", *a.query_start_loc, 1);
  if (a.query_start_loc->shape[0] < 1)
    fail(DK_ERR_INVALID_ARGUMENT, op, "query_start_loc needs batch + 1 >= 1 entries");
  if (!plugin::is_i32(a.query_start_loc->dtype))
    fail(DK_ERR_INVALID_ARGUMENT, op,
         "query_start_loc must be int32, got " + dtype_name(a.query_start_loc->dtype));
  if (!same_device(*a.query_start_loc, x))
    fail(DK_ERR_INVALID_ARGUMENT, op, "query_start_loc is not on x's device");
  const int64_t batch = a.query_start_loc->shape[0] - 1;
  if (a.cache_indices != nullptr) require_index(op, "cache_indices", *a.cache_indices, x, batch, false);
  if (a.has_initial_state != nullptr)
    require_index(op, "has_initial_state", *a.has_initial_state, x, batch, true);
  if (a.max_seq_len && *a.max_seq_len < 0)
    fail(DK_ERR_INVALID_ARGUMENT, op, "max_seq_len must be >= 0, got " + std::to_string(*a.max_seq_len));
  // The layout, from strides; a dimension of extent 1 has no meaningful stride.
  const int64_t tokens = x.shape[1];
  if (tokens <= 1 || plugin::stride_of(x, 1) == 1) return XLayout::time_contiguous;
  if (dim <= 1 || plugin::stride_of(x, 0) == 1) return XLayout::channel_last;
  fail(DK_ERR_UNSUPPORTED, op,
       "x has strides (" + std::to_string(plugin::stride_of(x, 0)) + ", " +
           std::to_string(plugin::stride_of(x, 1)) +
           "): neither time-contiguous nor channel-last, and portable does not copy it");
}

void check_update(const plugin::UpdateArgs& a) {
  constexpr std::string_view op = DK_OP_CAUSAL_CONV1D_UPDATE;
  if (a.x == nullptr || a.weight == nullptr || a.conv_state == nullptr)
    fail(DK_ERR_INVALID_ARGUMENT, op, "x, conv_state and weight are required");
  const DLTensor& x = *a.x;
  if (x.ndim != 2 && x.ndim != 3)
    fail(DK_ERR_INVALID_ARGUMENT, op, "x must be (batch, dim) or (batch, dim, tokens), got " + shape_of(x));
  require_x(op, x);
  const int64_t dim = x.shape[1];
  require_weight(op, *a.weight, a.bias, x, dim);
  require_states(op, "conv_state", *a.conv_state, x, dim, a.weight->shape[1]);
  const int64_t batch = x.shape[0];
  if (a.conv_state_indices != nullptr)
    require_index(op, "conv_state_indices", *a.conv_state_indices, x, batch, false);
  if (a.cache_seqlens != nullptr) require_index(op, "cache_seqlens", *a.cache_seqlens, x, batch, false);
}

}  // namespace deltakern::portable
