// deltakern::Runtime for Python: built from options (the package keeps one per forced backend,
// see deltakern/_runtime.py), its introspection as plain data, and the ops (op_bindings.cpp).
#include "runtime_binding.hpp"

#include "op_bindings.hpp"
#include "plain_data.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace deltakern::python {
namespace {

Layout layout_from_name(const std::string& name) {
  if (name == "time_contiguous") return Layout::time_contiguous;
  if (name == "channel_last") return Layout::channel_last;
  throw Error(ErrorCode::invalid_argument,
              "explain: layout: expected \"time_contiguous\" or \"channel_last\", got \"" + name + "\"");
}

DLDeviceType device_type_from_name(const std::string& name) {
  if (name == "cpu") return kDLCPU;
  if (name == "cuda") return kDLCUDA;
  throw Error(ErrorCode::invalid_argument,
              "explain: device: expected \"cpu\" or \"cuda\", got \"" + name + "\"");
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<Runtime> runtime(m, "Runtime",
                              "A deltakern runtime: its plugins, configuration and dispatch. Built from the "
                              "environment and config as the C++ Runtime is.",
                              // The eager ops' contract cache (op_bindings.cpp) lives as long as
                              // its runtime, told of its end by a weak reference.
                              nb::is_weak_referenceable());
  runtime.def(
      "__init__",
      [](Runtime* self, std::optional<std::string> force_backend, std::vector<std::string> plugin_files,
         std::vector<std::string> plugin_path, std::optional<std::string> config_file,
         bool read_environment) {
        RuntimeOptions o;
        o.read_environment = read_environment;
        o.force_backend = std::move(force_backend);
        for (auto& f : plugin_files) o.plugin_files.emplace_back(std::move(f));
        for (auto& p : plugin_path) o.plugin_path.emplace_back(std::move(p));
        if (config_file) o.config_file = std::filesystem::path(*config_file);
        nb::gil_scoped_release release;  // discovery may wait on probe children
        new (self) Runtime(std::move(o));
      },
      "force_backend"_a.none() = nb::none(), "plugin_files"_a = std::vector<std::string>{},
      "plugin_path"_a = std::vector<std::string>{}, "config_file"_a.none() = nb::none(),
      "read_environment"_a = true);
  runtime.def("plugins", [](const Runtime& rt) {
    nb::list out;
    for (const auto& p : rt.plugins()) out.append(to_python(p));
    return out;
  });
  runtime.def("preference", &Runtime::preference, "op"_a);
  runtime.def("forced_backend", &Runtime::forced_backend);
  runtime.def("strict", &Runtime::strict);
  runtime.def("config_file", [](const Runtime& rt) { return rt.config_file().string(); });
  runtime.def("search_path", [](const Runtime& rt) {
    std::vector<std::string> out;
    for (const auto& p : rt.search_path()) out.push_back(p.string());
    return out;
  });
  runtime.def(
      "explain",
      [](const Runtime& rt, const std::string& op, const std::string& device, int device_id,
         const std::string& dtype, std::optional<std::string> weight_dtype,
         std::optional<std::string> state_dtype, std::optional<std::string> bias_dtype, int width,
         const std::string& layout, bool max_seq_len_given,
         std::vector<std::pair<std::string, int64_t>> dims) {
        CallSignature s;
        s.op = op;
        s.device = DLDevice{device_type_from_name(device), device_id};
        s.dtype = dtype_from_name(dtype, "explain: dtype");
        s.weight_dtype = weight_dtype ? dtype_from_name(*weight_dtype, "explain: weight_dtype") : s.dtype;
        s.state_dtype = state_dtype ? dtype_from_name(*state_dtype, "explain: state_dtype") : s.dtype;
        if (bias_dtype) s.bias_dtype = dtype_from_name(*bias_dtype, "explain: bias_dtype");
        s.width = width;
        s.layout = layout_from_name(layout);
        s.max_seq_len_given = max_seq_len_given;
        s.dims = std::move(dims);
        return to_python(rt.explain(s));
      },
      "op"_a, "device"_a, "device_id"_a, "dtype"_a, "weight_dtype"_a.none(), "state_dtype"_a.none(),
      "bias_dtype"_a.none(), "width"_a, "layout"_a, "max_seq_len_given"_a, "dims"_a);
  runtime.def("fallback_counts", [](const Runtime& rt) { return to_python(rt.fallback_counts()); });
  runtime.def("reset_fallback_counts", &Runtime::reset_fallback_counts);
  runtime.def(
      "check_errors",
      [](Runtime& rt, const std::string& device, int device_id, uintptr_t stream) {
        nb::gil_scoped_release release;
        rt.check_errors(DLDevice{device_type_from_name(device), device_id}, reinterpret_cast<void*>(stream));
      },
      "device"_a, "device_id"_a, "stream"_a);
  bind_ops(runtime);
}

}  // namespace deltakern::python
