#include "dl_names.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <charconv>

namespace deltakern::cli {

std::string dtype_name(DLDataType dtype) { return plugin::dtype_name(dtype); }

DLDataType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "float") return {kDLFloat, 32, 1};
  if (name == "f16" || name == "float16" || name == "half") return {kDLFloat, 16, 1};
  if (name == "bf16" || name == "bfloat16") return {kDLBfloat, 16, 1};
  throw CLI::ValidationError("--dtype", fmt::format("unknown dtype '{}' (f32, f16, bf16)", name));
}

std::string device_name(DLDeviceType type) { return plugin::device_type_name(type); }

DLDevice parse_device(std::string_view name) {
  const auto colon = name.find(':');
  const std::string_view kind = name.substr(0, colon);
  int id = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = name.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (ec != std::errc{} || end != digits.data() + digits.size() || id < 0)
      throw CLI::ValidationError("--device", fmt::format("bad device index in '{}'", name));
  }
  if (kind == "cpu") return {kDLCPU, id};
  if (kind == "cuda") return {kDLCUDA, id};
  throw CLI::ValidationError("--device", fmt::format("unknown device '{}' (cpu, cuda[:N])", name));
}

}  // namespace deltakern::cli
