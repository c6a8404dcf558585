#include "fresh_result.hpp"

#include <nanobind/ndarray.h>

#include <vector>

namespace nb = nanobind;

namespace deltakern::python {

nb::object to_python(Tensor tensor) {
  auto* owned = new Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const DLTensor& d = owned->dl();
  const std::vector<size_t> shape(d.shape, d.shape + d.ndim);
  // array_api: nanobind's own array object, which speaks __dlpack__ (a bare capsule would not).
  nb::ndarray<nb::array_api> array(d.data, static_cast<size_t>(d.ndim), shape.data(), owner, d.strides,
                      nb::dlpack::dtype{d.dtype.code, d.dtype.bits, d.dtype.lanes}, d.device.device_type,
                      d.device.device_id, /*order=*/0, d.byte_offset);
  return nb::cast(array);
}

}  // namespace deltakern::python
