#pragma once

#include <nanobind/nanobind.h>

namespace deltakern::python {

void bind_runtime(nanobind::module_& m);

}  // namespace deltakern::python
