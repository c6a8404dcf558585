#include "tensor_view.hpp"

#include <deltakern/deltakern.hpp>

#include <string>

namespace nb = nanobind;

namespace deltakern::python {

TensorView::TensorView(nb::handle object, const char* op, const char* name) {
  // convert=false: nanobind would otherwise be allowed to copy into a layout it prefers.
  // This ndarray has no constraints, so nothing would need converting; the flag makes that a
  // promise rather than a consequence.
  if (!nb::try_cast(object, array_, /*convert=*/false)) {
    throw Error(ErrorCode::invalid_argument,
                std::string(op) + ": " + name + ": expected a tensor or array that supports DLPack (__dlpack__), got " +
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

std::optional<TensorView> optional_view(nb::handle object, const char* op, const char* name) {
  if (object.is_none()) return std::nullopt;
  return TensorView(object, op, name);
}

}  // namespace deltakern::python
