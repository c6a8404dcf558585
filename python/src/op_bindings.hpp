// The four ops as methods of the bound Runtime: the op (result returned, which may be x) and
// its out-variant (result into the caller's out, x untouched), for varlen and update.
#pragma once

#include <deltakern/runtime.hpp>
#include <nanobind/nanobind.h>

namespace deltakern::python {

void bind_ops(nanobind::class_<Runtime>& runtime);

}  // namespace deltakern::python
