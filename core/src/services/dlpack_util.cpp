#include "services/dlpack_util.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <fmt/core.h>

namespace deltakern::detail {

std::string dtype_name(DLDataType dtype) { return plugin::dtype_name(dtype); }
std::string device_type_name(int32_t device_type) { return plugin::device_type_name(device_type); }

std::string device_name(DLDevice device) {
  return fmt::format("{}:{}", device_type_name(device.device_type), device.device_id);
}

}  // namespace deltakern::detail
