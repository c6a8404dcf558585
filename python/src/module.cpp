// deltakern._core: the nanobind extension over deltakern's public C++ API. It links libdeltakern
// and nothing of torch; the torch integration is pure Python (deltakern/torch_ops.py) on top.
#include "errors.hpp"
#include "runtime_binding.hpp"
#include "tensor_view.hpp"

#include <deltakern/plugin_abi.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <deltakern/deltakern.hpp>

#include <string>

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "deltakern's C++ API (deltakern.hpp, runtime.hpp) for the Python package";
  deltakern::python::register_error_translator();
  deltakern::python::bind_runtime(m);
  m.def("host_syncs", &deltakern::host_syncs,
        "Device-to-host reads made by backends on the calling thread since the process started.");
  // Throws the core's Error of `code` (its ErrorCode's ordinal): lets the tests prove the mapping
  // of codes no call on a CPU-only machine produces (unavailable, out_of_memory, internal, ...).
  m.def("_throw_error", [](int code, const std::string& message) {
    throw deltakern::Error(static_cast<deltakern::ErrorCode>(code), message);
  });
  // What the extension sees of a tensor argument: (data + byte_offset, shape, strides, (code,
  // bits, lanes), (device type, id), imported through the DLPack exchange API): lets the tests
  // prove the exchange import agrees with __dlpack__'s.
  m.def("_import_view", [](nb::handle object) {
    const deltakern::python::TensorView view(object, "_import_view", "tensor");
    const DLTensor& d = view.dl();
    nb::list shape, strides;
    for (int i = 0; i < d.ndim; ++i) {
      shape.append(d.shape[i]);
      strides.append(d.strides[i]);
    }
    return nb::make_tuple(reinterpret_cast<uintptr_t>(d.data) + d.byte_offset, nb::tuple(shape),
                          nb::tuple(strides), nb::make_tuple(d.dtype.code, d.dtype.bits, d.dtype.lanes),
                          nb::make_tuple(static_cast<int>(d.device.device_type), d.device.device_id),
                          view.exchange_api() != nullptr);
  });
  m.attr("abi_version") = nb::make_tuple(DK_ABI_MAJOR, DK_ABI_MINOR);
}
