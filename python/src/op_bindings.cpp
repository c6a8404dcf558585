#include "op_bindings.hpp"

#include "dlpack_exchange.hpp"
#include "fresh_result.hpp"
#include "signature.hpp"
#include "tensor_view.hpp"

#include <deltakern/op_schemas.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace nb = nanobind;
using namespace nb::literals;

namespace deltakern::python {
namespace {

constexpr const char* kVarlen = DK_OP_CAUSAL_CONV1D_VARLEN;
constexpr const char* kVarlenOut = DK_OP_CAUSAL_CONV1D_VARLEN_OUT;
constexpr const char* kUpdate = DK_OP_CAUSAL_CONV1D_UPDATE;
constexpr const char* kUpdateOut = DK_OP_CAUSAL_CONV1D_UPDATE_OUT;

void* as_stream(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

// How a call's tensor arguments are imported. GeneralImport takes any DLPack producer (through
// the exchange API where its type has one) and names the argument in its error; EagerImport
// takes only x's kind of tensor through x's exchange table, and anything else ends the eager
// attempt (NotEager) so that Python takes the torch.library path, with its errors.
struct NotEager {};

struct GeneralImport {
  const char* op;
  TensorView operator()(nb::handle object, const char* name) const { return TensorView(object, op, name); }
};

struct EagerImport {
  const dlpack_exchange::Api* api;
  PyTypeObject* type;
  TensorView operator()(nb::handle object, const char* /*name*/) const {
    if (!PyObject_TypeCheck(object.ptr(), type)) throw NotEager{};
    auto view = TensorView::from_exchange(object, *api);
    if (!view) throw NotEager{};
    return std::move(*view);
  }
};

template <typename Import>
std::optional<TensorView> optional_import(const Import& import, nb::handle object, const char* name) {
  if (object.is_none()) return std::nullopt;
  return import(object, name);
}

// The stream a call runs on: the caller's, else (None) the current work stream of x's producer
// on x's device where it has one (torch's current CUDA stream), else 0.
uintptr_t stream_for(std::optional<uintptr_t> stream, const TensorView& x) {
  if (stream) return *stream;
  const dlpack_exchange::Api* api = x.exchange_api();
  const DLDevice device = x.dl().device;
  if (api == nullptr || device.device_type == kDLCPU) return 0;
  void* current = nullptr;
  if (api->current_work_stream(static_cast<DLDeviceType>(device.device_type), device.device_id, &current) !=
      0)
    throw nb::python_error();
  return reinterpret_cast<uintptr_t>(current);
}

// The borrowed views of one varlen call; they live (and keep the producers' memory alive)
// for the whole call.
struct VarlenViews {
  TensorView x, weight;
  std::optional<TensorView> bias;
  TensorView conv_states, query_start_loc;
  std::optional<TensorView> cache_indices, has_initial_state;

  template <typename Import>
  VarlenViews(const Import& import, nb::handle x_, nb::handle weight_, nb::handle bias_, nb::handle states_,
              nb::handle qsl_, nb::handle indices_, nb::handle initial_)
      : x(import(x_, "x")),
        weight(import(weight_, "weight")),
        bias(optional_import(import, bias_, "bias")),
        conv_states(import(states_, "conv_states")),
        query_start_loc(import(qsl_, "query_start_loc")),
        cache_indices(optional_import(import, indices_, "cache_indices")),
        has_initial_state(optional_import(import, initial_, "has_initial_state")) {}

  CausalConv1dVarlenArgs args(const std::string& activation, int64_t pad_slot_id,
                              std::optional<int64_t> max_seq_len, std::optional<bool> validate,
                              std::optional<uintptr_t> stream) const {
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
            .stream = as_stream(stream_for(stream, x))};
  }
};

struct UpdateViews {
  TensorView x, conv_state, weight;
  std::optional<TensorView> bias, conv_state_indices, cache_seqlens;

  template <typename Import>
  UpdateViews(const Import& import, nb::handle x_, nb::handle state_, nb::handle weight_, nb::handle bias_,
              nb::handle indices_, nb::handle seqlens_)
      : x(import(x_, "x")),
        conv_state(import(state_, "conv_state")),
        weight(import(weight_, "weight")),
        bias(optional_import(import, bias_, "bias")),
        conv_state_indices(optional_import(import, indices_, "conv_state_indices")),
        cache_seqlens(optional_import(import, seqlens_, "cache_seqlens")) {}

  CausalConv1dUpdateArgs args(const std::string& activation, int64_t pad_slot_id,
                              std::optional<bool> validate, std::optional<uintptr_t> stream) const {
    return {.x = &x.dl(),
            .conv_state = &conv_state.dl(),
            .weight = &weight.dl(),
            .bias = pointer(bias),
            .conv_state_indices = pointer(conv_state_indices),
            .cache_seqlens = pointer(cache_seqlens),
            .activation = activation_from_string(activation),
            .pad_slot_id = pad_slot_id,
            .validate = validate,
            .stream = as_stream(stream_for(stream, x))};
  }
};

// The views of an eager call, or nullopt when an argument is not x's kind of tensor or x's
// type has no usable exchange table (Python then takes the torch.library path).
template <typename Views, typename... Handles>
std::optional<Views> eager_views(nb::handle x, Handles... rest) {
  const dlpack_exchange::Api* api = dlpack_exchange::exchange_api_of(x);
  if (api == nullptr) return std::nullopt;
  try {
    return std::optional<Views>(std::in_place, EagerImport{api, Py_TYPE(x.ptr())}, x, rest...);
  } catch (const NotEager&) {
    return std::nullopt;
  }
}

// Whether the backend serving `signature` keeps the in-place contract, remembered per runtime:
// dispatch depends on the signature alone (docs/design.md: decisions per signature, limits per
// call), and explain() costs as much as the rest of an eager call. A runtime's answers go when
// its Python object does (a weak reference's callback), so another runtime later built at the
// same address never sees them.
bool keeps_in_place(const Runtime& rt, const CallSignature& signature) {
  struct Answers {
    nb::object weakref;
    std::unordered_map<std::string, bool> by_signature;
  };
  static std::unordered_map<const Runtime*, Answers> cache;

  std::string key = signature.op;
  const auto append = [&key](const auto& value) {
    key.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  append(signature.device.device_type);
  append(signature.device.device_id);
  append(signature.dtype);
  append(signature.weight_dtype);
  append(signature.state_dtype);
  append(signature.bias_dtype.has_value());
  if (signature.bias_dtype) append(*signature.bias_dtype);
  append(signature.width);
  append(signature.layout);
  append(signature.max_seq_len_given);
  for (const auto& dim : signature.dims) append(dim.second);  // the names are the op's, in order

  auto runtime = cache.find(&rt);
  if (runtime == cache.end()) {
    nb::handle self = nb::find(&rt);
    if (!self.is_valid()) return kept_contract(rt, signature) == Contract::in_place;
    const Runtime* address = &rt;
    nb::object forget = nb::cpp_function([address](nb::handle) { cache.erase(address); });
    PyObject* weakref = PyWeakref_NewRef(self.ptr(), forget.ptr());
    if (weakref == nullptr) throw nb::python_error();
    runtime = cache.emplace(&rt, Answers{nb::steal(weakref), {}}).first;
  }
  auto& answers = runtime->second.by_signature;
  if (auto known = answers.find(key); known != answers.end()) return known->second;
  const bool answer = kept_contract(rt, signature) == Contract::in_place;
  if (answers.size() > 4096) answers.clear();  // shapes vary per call: keep it bounded
  answers.emplace(std::move(key), answer);
  return answer;
}

// out of an eager out-variant call, imported as the other arguments were (through x's table).
std::optional<TensorView> eager_out_view(const TensorView& x_view, nb::handle x, nb::handle out) {
  try {
    return EagerImport{x_view.exchange_api(), Py_TYPE(x.ptr())}(out, "out");
  } catch (const NotEager&) {
    return std::nullopt;
  }
}

// An eager call of the op that returns its result, as the torch.library path makes it
// (deltakern.torch_ops): the in-place op when the caller demands it (refused before anything
// is written when the backend keeps the other contract) or, with no demand, when the backend
// keeps it; else the out-variant into a fresh tensor from x's producer in x's layout. Returns x
// itself or the fresh tensor.
template <typename Args>
nb::object run_eager(Runtime& rt, const Args& args, const TensorView& x, nb::handle x_object,
                     const CallSignature& signature, std::optional<Contract> required,
                     const char* in_place_name, const char* out_name, int channel_dim,
                     Tensor (Runtime::*op)(const Args&),
                     void (Runtime::*op_out)(const Args&, const DLTensor&)) {
  const bool in_place = required ? *required == Contract::in_place : keeps_in_place(rt, signature);
  if (in_place) {
    if (required) require_contract(rt, signature, Contract::in_place, in_place_name);
    Tensor result;
    {
      nb::gil_scoped_release release;
      result = (rt.*op)(args);
    }
    if (!result.aliases(x.dl()))
      throw Error(ErrorCode::internal,
                  std::string(in_place_name) + ": the backend broke the contract its schema declares");
    return nb::borrow(x_object);
  }
  TensorView out = TensorView::allocate_like(*x.exchange_api(), x.dl(), channel_dim,
                                             signature.layout == Layout::channel_last, out_name);
  {
    nb::gil_scoped_release release;
    (rt.*op_out)(args, out.dl());
  }
  return std::move(out).release_to_python();
}

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
    throw Error(ErrorCode::internal,
                std::string(api_name) + ": the backend broke the contract its schema declares");
  if (in_place) return nb::none();
  return to_python(std::move(result));
}

// "any" (None), "in_place" or "fresh": what the caller demands (Python's inplace=None|True|False).
std::optional<Contract> contract_from_name(const std::string& name) {
  if (name == "any") return std::nullopt;
  if (name == "in_place") return Contract::in_place;
  if (name == "fresh") return Contract::fresh;
  throw Error(ErrorCode::invalid_argument,
              "contract: expected \"any\", \"in_place\" or \"fresh\", got \"" + name + "\"");
}

}  // namespace

void bind_ops(nb::class_<Runtime>& runtime) {
  runtime.def(
      "varlen",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
         std::optional<bool> validate, std::optional<uintptr_t> stream, const std::string& contract) {
        const auto required = contract_from_name(contract);
        const char* name = required == Contract::in_place ? "causal_conv1d_varlen_" : kVarlen;
        VarlenViews v(GeneralImport{name}, x, weight, bias, conv_states, query_start_loc, cache_indices,
                      has_initial_state);
        return run_op(
            rt, v.args(activation, pad_slot_id, max_seq_len, validate, stream), v.x.dl(), required, name,
            [](const CausalConv1dVarlenArgs& a) { return varlen_signature(a, kVarlen); },
            &Runtime::causal_conv1d_varlen);
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(),
      "validate"_a.none(), "stream"_a.none(), "contract"_a,
      "causal_conv1d_varlen: None when the result is x itself (an in-place backend), else the fresh result.");
  runtime.def(
      "varlen_out",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state, nb::handle out,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
         std::optional<bool> validate, std::optional<uintptr_t> stream) {
        VarlenViews v(GeneralImport{kVarlenOut}, x, weight, bias, conv_states, query_start_loc, cache_indices,
                      has_initial_state);
        TensorView out_view(out, kVarlenOut, "out");
        const CausalConv1dVarlenArgs args = v.args(activation, pad_slot_id, max_seq_len, validate, stream);
        nb::gil_scoped_release release;
        rt.causal_conv1d_varlen_out(args, out_view.dl());
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "out"_a, "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(),
      "validate"_a.none(), "stream"_a.none(), "causal_conv1d_varlen_out: the result into out; x untouched.");
  runtime.def(
      "update",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, const std::string& activation,
         int64_t pad_slot_id, std::optional<bool> validate, std::optional<uintptr_t> stream,
         const std::string& contract) {
        const auto required = contract_from_name(contract);
        const char* name = required == Contract::in_place ? "causal_conv1d_update_" : kUpdate;
        UpdateViews v(GeneralImport{name}, x, conv_state, weight, bias, conv_state_indices, cache_seqlens);
        return run_op(
            rt, v.args(activation, pad_slot_id, validate, stream), v.x.dl(), required, name,
            [](const CausalConv1dUpdateArgs& a) { return update_signature(a, kUpdate); },
            &Runtime::causal_conv1d_update);
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(),
      "cache_seqlens"_a.none(), "activation"_a, "pad_slot_id"_a, "validate"_a.none(), "stream"_a.none(),
      "contract"_a,
      "causal_conv1d_update: None when the result is x itself (an in-place backend), else the fresh result.");
  runtime.def(
      "update_out",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, nb::handle out,
         const std::string& activation, int64_t pad_slot_id, std::optional<bool> validate,
         std::optional<uintptr_t> stream) {
        UpdateViews v(GeneralImport{kUpdateOut}, x, conv_state, weight, bias, conv_state_indices,
                      cache_seqlens);
        TensorView out_view(out, kUpdateOut, "out");
        const CausalConv1dUpdateArgs args = v.args(activation, pad_slot_id, validate, stream);
        nb::gil_scoped_release release;
        rt.causal_conv1d_update_out(args, out_view.dl());
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(),
      "cache_seqlens"_a.none(), "out"_a, "activation"_a, "pad_slot_id"_a, "validate"_a.none(),
      "stream"_a.none(), "causal_conv1d_update_out: the result into out; x untouched.");

  // The eager fast path of deltakern.ops for torch tensors outside torch.compile: one call that
  // imports every tensor through x's DLPack exchange table, runs on the producer's current stream,
  // picks the contract and allocates out as deltakern.torch_ops would. None: not served (an
  // argument of another kind, no usable table, a malformed call), so that Python takes the
  // torch.library path and its errors.
  runtime.def(
      "varlen_eager",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len,
         const std::string& contract) -> nb::object {
        const auto required = contract_from_name(contract);
        auto v = eager_views<VarlenViews>(x, weight, bias, conv_states, query_start_loc, cache_indices,
                                          has_initial_state);
        if (!v) return nb::none();
        const CausalConv1dVarlenArgs args =
            v->args(activation, pad_slot_id, max_seq_len, std::nullopt, std::nullopt);
        const auto signature = varlen_signature(args, kVarlen);
        if (!signature) return nb::none();
        return run_eager(rt, args, v->x, x, *signature, required, "causal_conv1d_varlen_", kVarlenOut, 0,
                         &Runtime::causal_conv1d_varlen, &Runtime::causal_conv1d_varlen_out);
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(), "contract"_a,
      "causal_conv1d_varlen for torch tensors in one call: x itself or a fresh tensor; None when not "
      "served.");
  runtime.def(
      "update_eager",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, const std::string& activation,
         int64_t pad_slot_id, const std::string& contract) -> nb::object {
        const auto required = contract_from_name(contract);
        auto v = eager_views<UpdateViews>(x, conv_state, weight, bias, conv_state_indices, cache_seqlens);
        if (!v) return nb::none();
        const CausalConv1dUpdateArgs args = v->args(activation, pad_slot_id, std::nullopt, std::nullopt);
        const auto signature = update_signature(args, kUpdate);
        if (!signature) return nb::none();
        return run_eager(rt, args, v->x, x, *signature, required, "causal_conv1d_update_", kUpdateOut, 1,
                         &Runtime::causal_conv1d_update, &Runtime::causal_conv1d_update_out);
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(),
      "cache_seqlens"_a.none(), "activation"_a, "pad_slot_id"_a, "contract"_a,
      "causal_conv1d_update for torch tensors in one call: x itself or a fresh tensor; None when not "
      "served.");
  runtime.def(
      "varlen_out_eager",
      [](Runtime& rt, nb::handle x, nb::handle weight, nb::handle bias, nb::handle conv_states,
         nb::handle query_start_loc, nb::handle cache_indices, nb::handle has_initial_state, nb::handle out,
         const std::string& activation, int64_t pad_slot_id, std::optional<int64_t> max_seq_len) {
        auto v = eager_views<VarlenViews>(x, weight, bias, conv_states, query_start_loc, cache_indices,
                                          has_initial_state);
        std::optional<TensorView> out_view;
        if (v) out_view = eager_out_view(v->x, x, out);
        if (!out_view) return false;
        const CausalConv1dVarlenArgs args =
            v->args(activation, pad_slot_id, max_seq_len, std::nullopt, std::nullopt);
        nb::gil_scoped_release release;
        rt.causal_conv1d_varlen_out(args, out_view->dl());
        return true;
      },
      "x"_a, "weight"_a, "bias"_a.none(), "conv_states"_a, "query_start_loc"_a, "cache_indices"_a.none(),
      "has_initial_state"_a.none(), "out"_a, "activation"_a, "pad_slot_id"_a, "max_seq_len"_a.none(),
      "causal_conv1d_varlen_out for torch tensors in one call; False when not served.");
  runtime.def(
      "update_out_eager",
      [](Runtime& rt, nb::handle x, nb::handle conv_state, nb::handle weight, nb::handle bias,
         nb::handle conv_state_indices, nb::handle cache_seqlens, nb::handle out,
         const std::string& activation, int64_t pad_slot_id) {
        auto v = eager_views<UpdateViews>(x, conv_state, weight, bias, conv_state_indices, cache_seqlens);
        std::optional<TensorView> out_view;
        if (v) out_view = eager_out_view(v->x, x, out);
        if (!out_view) return false;
        const CausalConv1dUpdateArgs args = v->args(activation, pad_slot_id, std::nullopt, std::nullopt);
        nb::gil_scoped_release release;
        rt.causal_conv1d_update_out(args, out_view->dl());
        return true;
      },
      "x"_a, "conv_state"_a, "weight"_a, "bias"_a.none(), "conv_state_indices"_a.none(),
      "cache_seqlens"_a.none(), "out"_a, "activation"_a, "pad_slot_id"_a,
      "causal_conv1d_update_out for torch tensors in one call; False when not served.");
}

}  // namespace deltakern::python
