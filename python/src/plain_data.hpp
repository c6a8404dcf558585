// The runtime's vocabulary types (runtime_types.hpp) as plain Python data (dicts, lists,
// strings, ints), for list_backends(), explain() and fallback_counts().
#pragma once

#include <nanobind/nanobind.h>
#include <deltakern/runtime.hpp>

#include <vector>

namespace deltakern::python {

nanobind::dict to_python(const PluginInfo& plugin);
nanobind::dict to_python(const Decision& decision);
nanobind::list to_python(const std::vector<FallbackCount>& counts);

// "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16", "i32"/"int32", "u8"/"uint8"; throws
// invalid_argument naming `what` otherwise.
DLDataType dtype_from_name(std::string_view name, std::string_view what);
std::string dtype_name(const DLDataType& dtype);

}  // namespace deltakern::python
