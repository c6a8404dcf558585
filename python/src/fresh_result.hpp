// A backend's fresh result handed to Python without a copy: a nanobind ndarray (which speaks
// DLPack) that owns the deltakern::Tensor and releases it, through the backend's deleter, when
// the last Python reference goes.
#pragma once

#include <deltakern/deltakern.hpp>
#include <nanobind/nanobind.h>

namespace deltakern::python {

nanobind::object to_python(Tensor tensor);

}  // namespace deltakern::python
