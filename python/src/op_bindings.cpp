#include "op_bindings.hpp"

#include "fresh_result.hpp"
#include "signature.hpp"
#include "tensor_view.hpp"

#include <deltakern/op_schemas.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace deltakern::python {
namespace {

constexpr const char* kVarlen = DK_OP_CAUSAL_CONV1D_VARLEN;
constexpr const char* kVarlenOut = DK_OP_CAUSAL_CONV1D_VARLEN_OUT;
constexpr const char* kUpdate = DK_OP_CAUSAL_CONV1D_UPDATE;
constexpr const char* kUpdateOut = DK_OP_CAUSAL_CONV1D_UPDATE_OUT;

void* as_stream(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

// The borrowed views of one varlen call; they live (and keep the producers' memory alive)
// for the whole call.
struct VarlenViews {
  TensorView x, weight;
  std::optional<TensorView> bias;
  TensorView conv_states, query_start_loc;
  std::optional<TensorView> cache_indices, has_initial_state;

  VarlenViews(const char* op, nb::handle x_, nb::handle weight_, nb::handle bias_, nb::handle states_,
              nb::handle qsl_, nb::handle indices_, nb::handle initial_)
      : x(x_, op, "x"),
        weight(weight_, op, "weight"),
        bias(optional_view(bias_, op, "bias")),
        conv_states(states_, op, "conv_states"),
        query_start_loc(qsl_, op, "query_start_loc"),
        cache_indices(optional_view(indices_, op, "cache_indices")),
        has_initial_state(optional_view(initial_, op, "has_initial_state")) {}

  CausalConv1dVarlenArgs args(const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
                              std::optional<bool> validate, uintptr_t stream) const {
    return {.x = &x.dl(),
            .weight = &weight.dl(),
            .bias = pointer(bias),
            .conv_states = &conv_states.dl(),
            .query_start_loc = &query_start_loc.dl(),
            .cache_indices = pointer(cache_indices),
            .has_initial_state = pointer(has_initial_state),
            .activation = activation_from_string(activation),
            .pad_slot_id = pad_slot_id,
            .max_seq_len = max_seq_len,
            .validate = validate,
            .stream = as_stream(stream)};
  }
};

struct UpdateViews {
  TensorView x, conv_state, weight;
  std::optional<TensorView> bias, conv_state_indices, cache_seqlens;

  UpdateViews(const char* op, nb::handle x_, nb::handle state_, nb::handle weight_, nb::handle bias_,
              nb::handle indices_, nb::handle seqlens_)
      : x(x_, op, "x"),
        conv_state(state_, op, "conv_state"),
        weight(weight_, op, "weight"),
        bias(optional_view(bias_, op, "bias")),
        conv_state_indices(optional_view(indices_, op, "conv_state_indices")),
        cache_seqlens(optional_view(seqlens_, op, "cache_seqlens")) {}

  CausalConv1dUpdateArgs args(const std::string& activation, int64_t pad_slot_id, std::optional<bool> validate,
                              uintptr_t stream) const {
    return {.x = &x.dl(),
            .conv_state = &conv_state.dl(),
            .weight = &weight.dl(),
            .bias = pointer(bias),
            .conv_state_indices = pointer(conv_state_indices),
            .cache_seqlens = pointer(cache_seqlens),
            .activation = activation_from_string(activation),
            .pad_slot_id = pad_slot_id,
            .validate = validate,
            .stream = as_stream(stream)};
  }
};

// The op's result for Python: None when it is x itself (an in-place backend), else the fresh
// tensor. With a `required` contract, a backend that keeps the other one is refused before the
// call, so that nothing is written.
template <typename Args, typename Signature>
nb::object run_op(Runtime& rt, const Args& args, const DLTensor& x, std::optional<Contract> required,
                  const char* api_name, Signature signature_of, Tensor (Runtime::*op)(const Args&)) {
  if (required) {
    // A malformed call has no signature; the core refuses it below with its own message.
    if (auto signature = signature_of(args)) require_contract(rt, *signature, *required, api_name);
  }
  Tensor result;
  {
    nb::gil_scoped_release release;
    result = (rt.*op)(args);
  }
  const bool in_place = result.aliases(x);
  if (required && (*required == Contract::in_place) != in_place)
    throw Error(ErrorCode::internal, std::string(api_name) + ": the backend broke the contract its schema declares");
  if (in_place) return nb::none();
  return to_python(std::move(result));
}

// "any" (None), "in_place" or "fresh": what the caller demands (Python's inplace=None|True|False).
std::optional<Contract> contract_from_name(const std::string& name) {
  if (name == "any") return std::nullopt;
  if (name == "in_place") return Contract::in_place;
  if (name == "fresh") return Contract::fresh;
  throw Error(ErrorCode::invalid_argument, "contract: expected \"any\", \"in_place\" or \"fresh\", got \"" + name + "\"");
}

}  // namespace

void bind_ops(nb::class_<Runtime>& runtime) {
  runtime.def(
      "varlen",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
         std::optional<bool> validate, uintptr_t stream, const std::string& contract) {
        const auto required = contract_from_name(contract);
        const char* name = required == Contract::in_place ? "causal_conv1d_varlen_" : kVarlen;
        VarlenViews v(name, x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state);
        return run_op(rt, v.args(activation, pad_slot_id, max_seq_len, validate, stream), v.x.dl(), required,
                      name, [](const CausalConv1dVarlenArgs& a) { return varlen_signature(a, kVarlen); },
                      &Runtime::causal_conv1d_varlen);
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(), "validate"_a.none(),
      "stream"_a, "contract"_a,
      "causal_conv1d_varlen: None when the result is x itself (an in-place backend), else the fresh result.");
  runtime.def(
      "varlen_out",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state, nb::handle out,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
         std::optional<bool> validate, uintptr_t stream) {
        VarlenViews v(kVarlenOut, x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state);
        TensorView out_view(out, kVarlenOut, "out");
        const CausalConv1dVarlenArgs args = v.args(activation, pad_slot_id, max_seq_len, validate, stream);
        nb::gil_scoped_release release;
        rt.causal_conv1d_varlen_out(args, out_view.dl());
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "out"_a, "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(),
      "validate"_a.none(), "stream"_a, "causal_conv1d_varlen_out: the result into out; x untouched.");
  runtime.def(
      "update",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, const std::string& activation, int64_t pad_slot_id,
         std::optional<bool> validate, uintptr_t stream, const std::string& contract) {
        const auto required = contract_from_name(contract);
        const char* name = required == Contract::in_place ? "causal_conv1d_update_" : kUpdate;
        UpdateViews v(name, x, conv_state, weight, bias, conv_state_indices, cache_seqlens);
        return run_op(rt, v.args(activation, pad_slot_id, validate, stream), v.x.dl(), required, name,
                      [](const CausalConv1dUpdateArgs& a) { return update_signature(a, kUpdate); },
                      &Runtime::causal_conv1d_update);
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(), "cache_seqlens"_a.none(),
      "activation"_a, "pad_slot_id"_a, "validate"_a.none(), "stream"_a, "contract"_a,
      "causal_conv1d_update: None when the result is x itself (an in-place backend), else the fresh result.");
  runtime.def(
      "update_out",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, nb::handle out, const std::string& activation,
         int64_t pad_slot_id, std::optional<bool> validate, uintptr_t stream) {
        UpdateViews v(kUpdateOut, x, conv_state, weight, bias, conv_state_indices, cache_seqlens);
        TensorView out_view(out, kUpdateOut, "out");
        const CausalConv1dUpdateArgs args = v.args(activation, pad_slot_id, validate, stream);
        nb::gil_scoped_release release;
        rt.causal_conv1d_update_out(args, out_view.dl());
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(), "cache_seqlens"_a.none(),
      "out"_a, "activation"_a, "pad_slot_id"_a, "validate"_a.none(), "stream"_a,
      "causal_conv1d_update_out: the result into out; x untouched.");
}

}  // namespace deltakern::python
