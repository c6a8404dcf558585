// deltakern plugin SDK: the small C++ layer a plugin includes to unpack a dk_call into
// typed arguments, build results and turn exceptions into status codes. Header-only, so
// a plugin links nothing of the core.
#pragma once

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>
#include <deltakern/scalar_type.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deltakern::plugin {

// Thrown inside a plugin, turned into a status code by guarded().
class Failure : public std::runtime_error {
 public:
  Failure(dk_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  dk_status status() const noexcept { return status_; }

 private:
  dk_status status_;
};

inline void write_message(char* buf, size_t size, std::string_view text) noexcept {
  if (buf == nullptr || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

// Runs f, mapping exceptions to a status and a message: nothing may unwind across the ABI.
template <class F>
int32_t guarded(char* error, size_t error_size, F&& f) noexcept {
  try {
    f();
    return DK_OK;
  } catch (const Failure& e) {
    write_message(error, error_size, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    write_message(error, error_size, "out of host memory");
    return DK_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_message(error, error_size, e.what());
    return DK_ERR_INTERNAL;
  } catch (...) {
    write_message(error, error_size, "unknown exception");
    return DK_ERR_INTERNAL;
  }
}

// ---- dtypes

inline bool is_dtype(const DLDataType& t, uint8_t code, uint8_t bits) {
  return t.code == code && t.bits == bits && t.lanes == 1;
}
inline bool is_f32(const DLDataType& t) { return is_dtype(t, kDLFloat, 32); }
inline bool is_f16(const DLDataType& t) { return is_dtype(t, kDLFloat, 16); }
inline bool is_bf16(const DLDataType& t) { return is_dtype(t, kDLBfloat, 16); }
inline bool is_i32(const DLDataType& t) { return is_dtype(t, kDLInt, 32); }
inline bool same_dtype(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// The one spelling of a dtype in every message, the core's and the plugins': "bfloat16", "int32".
inline std::string dtype_name(const DLDataType& t) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        return "float" + std::to_string(t.bits);
      case kDLBfloat:
        return "bfloat" + std::to_string(t.bits);
      case kDLInt:
        return "int" + std::to_string(t.bits);
      case kDLUInt:
        return "uint" + std::to_string(t.bits);
      default:
        break;
    }
  }
  return "dtype(code=" + std::to_string(t.code) + ", bits=" + std::to_string(t.bits) +
         ", lanes=" + std::to_string(t.lanes) + ")";
}

// The one spelling of a device type in every message and listing, the core's, the command
// line's and the Python package's: "cpu", "cuda" (as torch spells them), "cuda_host".
inline std::string device_type_name(int32_t type) {
  switch (type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda";
    case kDLCUDAHost:
      return "cuda_host";
    case kDLCUDAManaged:
      return "cuda_managed";
    default:
      return "device_type_" + std::to_string(type);
  }
}

// ---- tensor geometry (strides in elements; NULL strides mean compact row-major)

// The core validated that a non-empty tensor's sizes multiply within int64; an empty one's need not,
// so the products stop at the first overflow (0: no element is addressed through such a stride).
inline int64_t stride_of(const DLTensor& t, int dim) {
  if (t.strides != nullptr) return t.strides[dim];
  int64_t s = 1;
  for (int d = t.ndim - 1; d > dim; --d)
    if (__builtin_mul_overflow(s, t.shape[d], &s)) return 0;
  return s;
}
inline int64_t numel(const DLTensor& t) {
  if (std::any_of(t.shape, t.shape + t.ndim, [](int64_t size) { return size == 0; })) return 0;
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}
// Base address of element 0, byte_offset applied. An empty tensor may have no data (DLPack
// allows it, the core accepts it) whatever its byte_offset: null + offset would be undefined.
template <class T>
inline T* data_of(const DLTensor& t) {
  if (t.data == nullptr) return nullptr;
  return reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset);
}

// ---- the layout rule: one definition, the core's validation and every plugin use it

// The layout of a (channel, time) pair of dimensions of x with extents D and T and those
// strides: DK_LAYOUT_TIME_CONTIGUOUS or DK_LAYOUT_CHANNEL_LAST, 0 for neither (the core rejects
// that). A dimension of extent 0 or 1 has no meaningful stride, which decides the degenerate
// cases: T <= 1 (one token, or none) is time-contiguous whatever the strides; D <= 1 with a
// time stride other than 1 is channel-last (one channel at any time stride).
constexpr uint32_t layout_of(int64_t dim, int64_t tokens, int64_t channel_stride, int64_t time_stride) {
  if (tokens <= 1 || time_stride == 1) return DK_LAYOUT_TIME_CONTIGUOUS;
  if ((dim <= 1 || channel_stride == 1) && time_stride >= dim) return DK_LAYOUT_CHANNEL_LAST;
  return 0;
}
// x's layout, its channel dimension at `channel_dim` and time right after it (varlen's (D, T):
// 0; update's (batch, D, Tq): 1; a 2-D update x has one token: time-contiguous).
inline uint32_t layout_of(const DLTensor& x, int channel_dim) {
  if (x.ndim < channel_dim + 2) return DK_LAYOUT_TIME_CONTIGUOUS;
  return layout_of(x.shape[channel_dim], x.shape[channel_dim + 1], stride_of(x, channel_dim),
                   stride_of(x, channel_dim + 1));
}

// ---- typed arguments (the core has validated shapes, dtypes, devices and layout already)

enum class Activation { none, silu };

inline Activation parse_activation(const dk_scalar& s) {
  if (s.kind != DK_SCALAR_STRING || s.s == nullptr)
    throw Failure(DK_ERR_INVALID_ARGUMENT, "activation: expected a string");
  const std::string_view v = s.s;
  if (v == "none") return Activation::none;
  if (v == "silu") return Activation::silu;
  throw Failure(DK_ERR_INVALID_ARGUMENT,
                "activation: expected \"none\" or \"silu\", got \"" + std::string(v) + "\"");
}

struct VarlenArgs {
  const DLTensor* x;                  // (D, T)
  const DLTensor* weight;             // (D, W)
  const DLTensor* bias;               // (D) or nullptr
  const DLTensor* conv_states;        // (lines, D, S)
  const DLTensor* query_start_loc;    // (batch+1) int32
  const DLTensor* cache_indices;      // (batch) int32 or nullptr
  const DLTensor* has_initial_state;  // (batch) uint8 or nullptr
  Activation activation;
  int64_t pad_slot_id;
  std::optional<int64_t> max_seq_len;
  void* stream;
  // causal_conv1d_varlen_out: where the result goes ((D, T), x's layout, apart from every other
  // argument); nullptr for causal_conv1d_varlen.
  const DLTensor* out = nullptr;

  int64_t dim() const { return x->shape[0]; }
  int64_t tokens() const { return x->shape[1]; }
  int64_t width() const { return weight->shape[1]; }
  int64_t batch() const { return query_start_loc->shape[0] - 1; }
  int64_t state_len() const { return conv_states->shape[2]; }
  bool channel_last() const { return layout_of(*x, 0) == DK_LAYOUT_CHANNEL_LAST; }
};

struct UpdateArgs {
  const DLTensor* x;                   // (batch, D) or (batch, D, Tq)
  const DLTensor* conv_state;          // (lines, D, S)
  const DLTensor* weight;              // (D, W)
  const DLTensor* bias;                // (D) or nullptr
  const DLTensor* conv_state_indices;  // (batch) int32 or nullptr
  const DLTensor* cache_seqlens;       // (batch) int32 or nullptr: shift mode
  Activation activation;
  int64_t pad_slot_id;
  void* stream;
  // causal_conv1d_update_out: where the result goes (x's shape and layout); nullptr for
  // causal_conv1d_update.
  const DLTensor* out = nullptr;

  int64_t batch() const { return x->shape[0]; }
  int64_t dim() const { return x->shape[1]; }
  int64_t tokens() const { return x->ndim == 3 ? x->shape[2] : 1; }  // Tq
  int64_t width() const { return weight->shape[1]; }
  int64_t state_len() const { return conv_state->shape[2]; }
  bool channel_last() const { return layout_of(*x, 1) == DK_LAYOUT_CHANNEL_LAST; }
};

// ---- the core's structs, read as far as both sides know them (plugin_abi.h: versioning)

// Whether the core's struct (of struct_size bytes) holds `field`, added in some minor.
#define DK_HOLDS(object, type, field) ((object).struct_size >= DK_SIZE_THROUGH(type, field))

// dk_host from any 1.x core: the services every 1.0 core gives.
inline bool usable_host(const dk_host* host) {
  return host != nullptr && host->struct_size >= DK_HOST_SIZE_1_0 && host->alloc != nullptr &&
         host->release != nullptr && host->read_to_host != nullptr;
}

// Scalar j of a call, strided by dk_call.scalar_size (a 1.0 core's: DK_SCALAR_SIZE_1_0) and read as
// far as both know it, so that a newer or older core's dk_scalar reads right.
inline dk_scalar scalar_at(const dk_call& call, size_t j) {
  const size_t stride = DK_HOLDS(call, dk_call, scalar_size) && call.scalar_size >= DK_SCALAR_SIZE_1_0
                            ? call.scalar_size
                            : DK_SCALAR_SIZE_1_0;
  dk_scalar s{};
  std::memcpy(&s, reinterpret_cast<const char*>(call.scalars) + j * stride, std::min(stride, sizeof s));
  return s;
}

inline void require_arity(const dk_call& call, size_t tensors, size_t scalars, const char* op) {
  if (call.struct_size < DK_CALL_SIZE_1_0 || call.n_tensors != tensors || call.n_scalars != scalars)
    throw Failure(DK_ERR_INVALID_ARGUMENT, std::string(op) + ": malformed call (argument count)");
}

// out_variant: the call is causal_conv1d_varlen_out's (one more tensor, `out`).
inline VarlenArgs unpack_varlen(const dk_call& call, bool out_variant = false) {
  if (out_variant)
    require_arity(call, DK_VARLEN_OUT_N_TENSORS, DK_VARLEN_N_SCALARS, DK_OP_CAUSAL_CONV1D_VARLEN_OUT);
  else
    require_arity(call, DK_VARLEN_N_TENSORS, DK_VARLEN_N_SCALARS, DK_OP_CAUSAL_CONV1D_VARLEN);
  const auto* t = call.tensors;
  const dk_scalar activation = scalar_at(call, DK_VARLEN_ACTIVATION);
  const dk_scalar max_seq_len = scalar_at(call, DK_VARLEN_MAX_SEQ_LEN);
  VarlenArgs a{t[DK_VARLEN_X],
               t[DK_VARLEN_WEIGHT],
               t[DK_VARLEN_BIAS],
               t[DK_VARLEN_CONV_STATES],
               t[DK_VARLEN_QUERY_START_LOC],
               t[DK_VARLEN_CACHE_INDICES],
               t[DK_VARLEN_HAS_INITIAL_STATE],
               parse_activation(activation),
               scalar_at(call, DK_VARLEN_PAD_SLOT_ID).i,
               std::nullopt,
               call.stream};
  if (max_seq_len.kind == DK_SCALAR_INT) a.max_seq_len = max_seq_len.i;
  if (out_variant) a.out = t[DK_VARLEN_OUT];
  return a;
}

// out_variant: the call is causal_conv1d_update_out's (one more tensor, `out`).
inline UpdateArgs unpack_update(const dk_call& call, bool out_variant = false) {
  if (out_variant)
    require_arity(call, DK_UPDATE_OUT_N_TENSORS, DK_UPDATE_N_SCALARS, DK_OP_CAUSAL_CONV1D_UPDATE_OUT);
  else
    require_arity(call, DK_UPDATE_N_TENSORS, DK_UPDATE_N_SCALARS, DK_OP_CAUSAL_CONV1D_UPDATE);
  const auto* t = call.tensors;
  return UpdateArgs{t[DK_UPDATE_X],
                    t[DK_UPDATE_CONV_STATE],
                    t[DK_UPDATE_WEIGHT],
                    t[DK_UPDATE_BIAS],
                    t[DK_UPDATE_CONV_STATE_INDICES],
                    t[DK_UPDATE_CACHE_SEQLENS],
                    parse_activation(scalar_at(call, DK_UPDATE_ACTIVATION)),
                    scalar_at(call, DK_UPDATE_PAD_SLOT_ID).i,
                    call.stream,
                    out_variant ? t[DK_UPDATE_OUT] : nullptr};
}

// ---- results

namespace detail {
struct ManagedResult {
  DLManagedTensor managed{};
  int64_t shape[4]{};
  int64_t strides[4]{};
  const dk_host* host = nullptr;  // non-null: data was allocated through host->alloc
  void* stream = nullptr;
};
inline void delete_managed_result(DLManagedTensor* self) {
  auto* r = static_cast<ManagedResult*>(self->manager_ctx);
  if (r->host != nullptr && r->managed.dl_tensor.data != nullptr)
    r->host->release(r->host->ctx, r->managed.dl_tensor.device, r->managed.dl_tensor.data, r->stream);
  delete r;
}
}  // namespace detail

// A result that aliases an input (the in-place contract): a view of t, owning nothing
// but its own shape and strides.
inline DLManagedTensor* make_view_result(const DLTensor& t) {
  if (t.ndim > 4) throw Failure(DK_ERR_INTERNAL, "make_view_result: rank > 4");
  auto* r = new detail::ManagedResult;
  r->managed.dl_tensor = t;
  for (int d = 0; d < t.ndim; ++d) {
    r->shape[d] = t.shape[d];
    r->strides[d] = stride_of(t, d);
  }
  r->managed.dl_tensor.shape = r->shape;
  r->managed.dl_tensor.strides = r->strides;
  r->managed.manager_ctx = r;
  r->managed.deleter = detail::delete_managed_result;
  return &r->managed;
}

// A fresh tensor (the fresh-output contract) with the given shape and strides (elements),
// allocated through the core's allocator on `stream`. Contents are uninitialised.
inline DLManagedTensor* make_fresh_result(const dk_host& host, DLDevice device, DLDataType dtype, int ndim,
                                          const int64_t* shape, const int64_t* strides, void* stream) {
  if (ndim > 4) throw Failure(DK_ERR_INTERNAL, "make_fresh_result: rank > 4");
  // Elements spanned, from the largest offset. An empty tensor spans nothing, and its other sizes
  // (validated only as a product that is zero) may not be multiplied at all.
  const bool empty = std::any_of(shape, shape + ndim, [](int64_t size) { return size == 0; });
  int64_t extent = 1;
  for (int d = 0; d < ndim && !empty; ++d) extent += (shape[d] - 1) * strides[d];
  const size_t bytes = empty ? 0 : static_cast<size_t>(extent) * ((dtype.bits * dtype.lanes + 7) / 8);
  auto* r = new detail::ManagedResult;
  r->host = &host;
  r->stream = stream;
  void* data = nullptr;
  if (bytes > 0) {
    const int32_t st = host.alloc(host.ctx, device, bytes, stream, &data);
    if (st != DK_OK || data == nullptr) {
      delete r;
      throw Failure(DK_ERR_OUT_OF_MEMORY,
                    "allocating " + std::to_string(bytes) + " bytes for the output failed");
    }
  }
  DLTensor& t = r->managed.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = ndim;
  t.dtype = dtype;
  t.byte_offset = 0;
  for (int d = 0; d < ndim; ++d) {
    r->shape[d] = shape[d];
    r->strides[d] = strides[d];
  }
  t.shape = r->shape;
  t.strides = r->strides;
  r->managed.manager_ctx = r;
  r->managed.deleter = detail::delete_managed_result;
  return &r->managed;
}

// A fresh, compact (row-major) tensor of `shape`: strides as stride_of gives them for null strides.
inline DLManagedTensor* make_compact_result(const dk_host& host, DLDevice device, DLDataType dtype, int ndim,
                                            const int64_t* shape, void* stream) {
  if (ndim > 4) throw Failure(DK_ERR_INTERNAL, "make_compact_result: rank > 4");
  int64_t strides[4] = {};
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = step;
    if (__builtin_mul_overflow(step, shape[d], &step)) step = 0;
  }
  return make_fresh_result(host, device, dtype, ndim, shape, strides, stream);
}

// Logging through the core's sinks.
inline void log(const dk_host* host, dk_log_level level, const std::string& msg) {
  if (host != nullptr && host->log != nullptr) host->log(host->ctx, level, msg.c_str());
}

}  // namespace deltakern::plugin
