#include "tensor_view.hpp"

#include <deltakern/deltakern.hpp>

#include <string>
#include <utility>

namespace nb = nanobind;

namespace deltakern::python {

namespace dlpack_exchange {

const Api* exchange_api_of(nb::handle object) {
  // Few types ever reach a call (torch.Tensor, nn.Parameter, numpy.ndarray, nanobind's ndarray),
  // so a short list searched linearly beats hashing; each entry holds a reference to its type, so
  // the pointer can never name another type later. Past the list, types are looked up each call.
  struct Entry {
    PyTypeObject* type;
    const Api* api;
  };
  static Entry cache[8];
  static int cached = 0;
  PyTypeObject* type = Py_TYPE(object.ptr());
  for (int i = 0; i < cached; ++i)
    if (cache[i].type == type) return cache[i].api;

  const Api* api = nullptr;
  PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
  } else {
    if (PyCapsule_IsValid(capsule, kCapsuleName)) {
      const auto* table = static_cast<const Api*>(PyCapsule_GetPointer(capsule, kCapsuleName));
      const Version v = table->header.version;
      if (v.major == kMajor && v.minor >= kMinMinor && table->managed_tensor_allocator != nullptr &&
          table->managed_tensor_to_py_object_no_sync != nullptr && table->current_work_stream != nullptr)
        api = table;
    }
    Py_DECREF(capsule);
  }
  if (cached < static_cast<int>(std::size(cache))) {
    Py_INCREF(type);
    cache[cached++] = {type, api};
  }
  return api;
}

}  // namespace dlpack_exchange

TensorView::TensorView(nb::handle object, const char* op, const char* name) {
  if (const dlpack_exchange::Api* api = dlpack_exchange::exchange_api_of(object)) {
    if (auto view = from_exchange(object, *api)) {
      *this = std::move(*view);
      return;
    }
  }
  // convert=false: nanobind would otherwise be allowed to copy into a layout it prefers.
  // This ndarray has no constraints, so nothing would need converting; the flag makes that a
  // promise rather than a consequence.
  if (!nb::try_cast(object, array_, /*convert=*/false)) {
    throw Error(ErrorCode::invalid_argument,
                std::string(op) + ": " + name +
                    ": expected a tensor or array that supports DLPack (__dlpack__), got " +
                    nb::type_name(object.type()).c_str());
  }
  dl_.data = array_.data_handle();
  dl_.device = DLDevice{static_cast<DLDeviceType>(array_.device_type()), array_.device_id()};
  dl_.ndim = static_cast<int32_t>(array_.ndim());
  const nb::dlpack::dtype dtype = array_.dtype();
  dl_.dtype = DLDataType{dtype.code, dtype.bits, dtype.lanes};
  // The core only reads shape and strides; DLTensor's fields are not const-qualified.
  dl_.shape = const_cast<int64_t*>(array_.shape_ptr());
  dl_.strides = const_cast<int64_t*>(array_.stride_ptr());
  dl_.byte_offset = array_.byte_offset();
}

std::optional<TensorView> TensorView::from_exchange(nb::handle object, const dlpack_exchange::Api& api) {
  if (api.dltensor_from_py_object_no_sync == nullptr) return std::nullopt;
  TensorView view;
  // The producer fills shape and strides with pointers into the tensor object itself, which the
  // caller's arguments keep alive for the whole call.
  if (api.dltensor_from_py_object_no_sync(object.ptr(), &view.dl_) != 0) {
    PyErr_Clear();  // the general path reports its own error for this argument
    return std::nullopt;
  }
  view.api_ = &api;
  return view;
}

TensorView TensorView::allocate_like(const dlpack_exchange::Api& api, const DLTensor& x, int channel_dim,
                                     bool channel_last, const char* op) {
  const int ndim = x.ndim;
  constexpr int kMaxRank = 8;  // x of a call that has a signature has rank 2 or 3
  if (ndim < 1 || ndim > kMaxRank || channel_dim + (channel_last ? 1 : 0) >= ndim)
    throw Error(ErrorCode::internal, std::string(op) + ": out: no layout to allocate it in");
  TensorView view;
  view.api_ = &api;
  view.layout_ = std::make_unique<int64_t[]>(2 * static_cast<size_t>(ndim));
  int64_t* shape = view.layout_.get();
  int64_t* strides = shape + ndim;
  // The allocator takes a shape only (row-major); a channel-last x gets its time and channel
  // dimensions swapped there, and this view swaps them back.
  int64_t physical[kMaxRank];
  for (int i = 0; i < ndim; ++i) physical[i] = x.shape[i];
  if (channel_last) std::swap(physical[channel_dim], physical[channel_dim + 1]);
  int64_t step = 1;
  int64_t physical_strides[kMaxRank];
  for (int i = ndim - 1; i >= 0; --i) {
    physical_strides[i] = step;
    step *= physical[i];
  }
  for (int i = 0; i < ndim; ++i) {
    shape[i] = x.shape[i];
    strides[i] = physical_strides[i];
  }
  if (channel_last) std::swap(strides[channel_dim], strides[channel_dim + 1]);

  DLTensor prototype{};
  prototype.device = x.device;
  prototype.ndim = ndim;
  prototype.dtype = x.dtype;
  prototype.shape = physical;
  std::string failure;
  dlpack_exchange::ManagedTensorVersioned* managed = nullptr;
  const int rc = api.managed_tensor_allocator(
      &prototype, &managed, &failure, [](void* ctx, const char* kind, const char* message) {
        *static_cast<std::string*>(ctx) = std::string(kind) + ": " + message;
      });
  if (rc != 0 || managed == nullptr)
    throw Error(ErrorCode::out_of_memory,
                std::string(op) + ": out: the tensor library could not allocate it (" + failure + ")");
  view.managed_.reset(managed);
  view.dl_ = managed->dl_tensor;
  view.dl_.shape = shape;
  view.dl_.strides = strides;
  return view;
}

nb::object TensorView::release_to_python() && {
  // The producer builds its tensor from the managed tensor's shape and strides, copying them, and
  // its deleter frees only its own context: pointing them at this view's layout makes the Python
  // tensor channel-last where x is.
  managed_->dl_tensor.shape = dl_.shape;
  managed_->dl_tensor.strides = dl_.strides;
  void* object = nullptr;
  // The producer owns the managed tensor from here on, whether or not it succeeds.
  if (api_->managed_tensor_to_py_object_no_sync(managed_.release(), &object) != 0) throw nb::python_error();
  return nb::steal(static_cast<PyObject*>(object));
}

std::optional<TensorView> optional_view(nb::handle object, const char* op, const char* name) {
  if (object.is_none()) return std::nullopt;
  return TensorView(object, op, name);
}

}  // namespace deltakern::python
