// Readable names for DLPack devices and dtypes, and their parsing, for the command line.
#pragma once

#include <dlpack/dlpack.h>

#include <string>
#include <string_view>

namespace deltakern::cli {

std::string dtype_name(DLDataType dtype);       // "bfloat16"
DLDataType parse_dtype(std::string_view name);  // "bf16" or "bfloat16"; throws CLI::ValidationError
std::string device_name(DLDeviceType type);     // plugin::device_type_name: "cpu", "cuda"
DLDevice parse_device(std::string_view name);   // "cpu", "cuda", "cuda:1"

}  // namespace deltakern::cli
