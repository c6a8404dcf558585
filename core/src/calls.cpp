// The ops, end to end: check the arguments, find the cached decision, pack a dk_call in
// schema order, run the chosen backend. On a cached decision this path allocates nothing,
// formats nothing and logs nothing; everything that does lives behind [[unlikely]] branches.
#include "loader/plugin_exception.hpp"
#include "runtime_impl.hpp"
#include "status.hpp"
#include "validation/validate.hpp"

#include <deltakern/op_schemas.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace deltakern {
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void run_failed(const dk_op& op, const char* backend, int32_t status,
                                                       const char* message) {
  std::string what = message[0] != '\0' ? std::string(message) : std::string(detail::status_name(status));
  // The core chose this backend because its declaration and supports() admitted the call: a
  // refusal now is the backend's defect, reported as such (it may have written; nothing is retried).
  if (status == DK_ERR_UNSUPPORTED && backend != nullptr)
    what = fmt::format(
        "run() refused a call its capabilities, limits and supports() admitted ({}); a "
        "backend defect: declare the limit instead",
        what);
  throw Error(detail::error_code_of(status), backend != nullptr
                                                 ? fmt::format("{}: {}: {}", backend, op.name, what)
                                                 : fmt::format("{}: {}", op.name, what));
}

// What the plugin threw, kept in the message: called in the catch block, off the hot path.
[[gnu::cold, gnu::noinline]] void thrown(char* message, size_t size) {
  std::snprintf(message, size, "run threw %s", detail::current_exception_text().c_str());
}

const char* activation_name(Activation activation) {
  return activation == Activation::silu ? "silu" : "none";
}

dk_scalar int_scalar(int64_t value) { return {DK_SCALAR_INT, value, 0.0, nullptr}; }
dk_scalar string_scalar(const char* value) { return {DK_SCALAR_STRING, 0, 0.0, value}; }
dk_scalar none_scalar() { return {DK_SCALAR_NONE, 0, 0.0, nullptr}; }

int32_t width_of(int64_t width) {
  return static_cast<int32_t>(std::min<int64_t>(width, std::numeric_limits<int32_t>::max()));
}

std::optional<DLDataType> dtype_of(const DLTensor* t) {
  return t == nullptr ? std::nullopt : std::optional<DLDataType>(t->dtype);
}

}  // namespace

DLManagedTensor* detail::run_op(const dk_op& op, void* instance, const dk_call& call, const char* backend,
                                RuntimeAllocator* allocator, bool returns_tensor) {
  char message[1024];
  message[0] = '\0';
  DLManagedTensor* result = nullptr;
  int32_t status = DK_ERR_INTERNAL;
  try {
    const CallAllocatorScope scope(allocator);
    status = op.run(instance, &call, &result, message, sizeof message);
  } catch (...) {
    thrown(message, sizeof message);
  }
  message[sizeof message - 1] = '\0';
  if (status != DK_OK) [[unlikely]] {
    delete_result(result);
    run_failed(op, backend, status, message);
  }
  if ((result == nullptr) == returns_tensor) [[unlikely]] {
    delete_result(result);
    run_failed(op, backend, DK_ERR_INTERNAL,
               returns_tensor ? "returned no result" : "returned a tensor from an op that returns nothing");
  }
  return result;
}

DLManagedTensor* BoundOp::run(const dk_call& call) const {
  if (op == nullptr) throw Error(ErrorCode::invalid_argument, "BoundOp::run: no op bound");
  return detail::run_op(*op, plugin, call, nullptr, allocator, returns_tensor);
}

// Both forms of each op: the op (out null) returns the backend's result; the out-variant
// (out set: one more tensor, -> ()) writes into out and returns nothing.
DLManagedTensor* Runtime::Impl::varlen(const CausalConv1dVarlenArgs& args, const DLTensor* out) {
  const detail::VarlenGeometry geometry = detail::check_varlen_arguments(args, out);
  const detail::OpId op =
      out != nullptr ? detail::OpId::causal_conv1d_varlen_out : detail::OpId::causal_conv1d_varlen;

  const DLTensor* tensors[DK_VARLEN_OUT_N_TENSORS];
  tensors[DK_VARLEN_X] = args.x;
  tensors[DK_VARLEN_WEIGHT] = args.weight;
  tensors[DK_VARLEN_BIAS] = args.bias;
  tensors[DK_VARLEN_CONV_STATES] = args.conv_states;
  tensors[DK_VARLEN_QUERY_START_LOC] = args.query_start_loc;
  tensors[DK_VARLEN_CACHE_INDICES] = args.cache_indices;
  tensors[DK_VARLEN_HAS_INITIAL_STATE] = args.has_initial_state;
  tensors[DK_VARLEN_OUT] = out;
  dk_scalar scalars[DK_VARLEN_N_SCALARS];
  scalars[DK_VARLEN_ACTIVATION] = string_scalar(activation_name(args.activation));
  scalars[DK_VARLEN_PAD_SLOT_ID] = int_scalar(args.pad_slot_id);
  scalars[DK_VARLEN_MAX_SEQ_LEN] = args.max_seq_len ? int_scalar(*args.max_seq_len) : none_scalar();
  const dk_call call{sizeof(dk_call),
                     args.stream,
                     out != nullptr ? size_t{DK_VARLEN_OUT_N_TENSORS} : size_t{DK_VARLEN_N_TENSORS},
                     tensors,
                     DK_VARLEN_N_SCALARS,
                     scalars,
                     sizeof(dk_scalar)};

  const detail::SignatureFields signature{op,
                                          args.x->device,
                                          args.x->dtype,
                                          args.weight->dtype,
                                          args.conv_states->dtype,
                                          dtype_of(args.bias),
                                          width_of(geometry.width),
                                          geometry.layout,
                                          args.max_seq_len.has_value()};
  const detail::CallDims dims{geometry.dim,   geometry.tokens,    geometry.batch,
                              geometry.width, geometry.state_len, geometry.lines};
  const detail::Served served = serve(signature, call, dims);
  if (args.validate.value_or(config.validate_for(op))) [[unlikely]]
    detail::check_varlen_contents(args, geometry);
  return detail::run_op(*served.op, served.instance, call, served.backend, &allocator, out == nullptr);
}

DLManagedTensor* Runtime::Impl::update(const CausalConv1dUpdateArgs& args, const DLTensor* out) {
  const detail::UpdateGeometry geometry = detail::check_update_arguments(args, out);
  const detail::OpId op =
      out != nullptr ? detail::OpId::causal_conv1d_update_out : detail::OpId::causal_conv1d_update;

  const DLTensor* tensors[DK_UPDATE_OUT_N_TENSORS];
  tensors[DK_UPDATE_X] = args.x;
  tensors[DK_UPDATE_CONV_STATE] = args.conv_state;
  tensors[DK_UPDATE_WEIGHT] = args.weight;
  tensors[DK_UPDATE_BIAS] = args.bias;
  tensors[DK_UPDATE_CONV_STATE_INDICES] = args.conv_state_indices;
  tensors[DK_UPDATE_CACHE_SEQLENS] = args.cache_seqlens;
  tensors[DK_UPDATE_OUT] = out;
  dk_scalar scalars[DK_UPDATE_N_SCALARS];
  scalars[DK_UPDATE_ACTIVATION] = string_scalar(activation_name(args.activation));
  scalars[DK_UPDATE_PAD_SLOT_ID] = int_scalar(args.pad_slot_id);
  const dk_call call{sizeof(dk_call),
                     args.stream,
                     out != nullptr ? size_t{DK_UPDATE_OUT_N_TENSORS} : size_t{DK_UPDATE_N_TENSORS},
                     tensors,
                     DK_UPDATE_N_SCALARS,
                     scalars,
                     sizeof(dk_scalar)};

  const detail::SignatureFields signature{op,
                                          args.x->device,
                                          args.x->dtype,
                                          args.weight->dtype,
                                          args.conv_state->dtype,
                                          dtype_of(args.bias),
                                          width_of(geometry.width),
                                          geometry.layout,
                                          true};
  const detail::CallDims dims{geometry.batch, geometry.dim,       geometry.tokens,
                              geometry.width, geometry.state_len, geometry.lines};
  const detail::Served served = serve(signature, call, dims);
  if (args.validate.value_or(config.validate_for(op))) [[unlikely]]
    detail::check_update_contents(args, geometry);
  return detail::run_op(*served.op, served.instance, call, served.backend, &allocator, out == nullptr);
}

Tensor Runtime::causal_conv1d_varlen(const CausalConv1dVarlenArgs& args) {
  return Tensor(impl_->varlen(args, nullptr));
}

Tensor Runtime::causal_conv1d_update(const CausalConv1dUpdateArgs& args) {
  return Tensor(impl_->update(args, nullptr));
}

void Runtime::causal_conv1d_varlen_out(const CausalConv1dVarlenArgs& args, const DLTensor& out) {
  impl_->varlen(args, &out);
}

void Runtime::causal_conv1d_update_out(const CausalConv1dUpdateArgs& args, const DLTensor& out) {
  impl_->update(args, &out);
}

}  // namespace deltakern
