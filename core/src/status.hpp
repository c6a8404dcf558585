// The two directions across the ABI: plugin status codes to the C++ API's error codes,
// and the core's errors back to status codes for the host services.
#pragma once

#include <deltakern/plugin_abi.h>
#include <deltakern/deltakern.hpp>

#include <string_view>

namespace deltakern::detail {

constexpr ErrorCode error_code_of(int32_t status) noexcept {
  switch (status) {
    case DK_ERR_INVALID_ARGUMENT:
      return ErrorCode::invalid_argument;
    case DK_ERR_UNSUPPORTED:
      return ErrorCode::unsupported;
    case DK_ERR_UNAVAILABLE:
      return ErrorCode::unavailable;
    case DK_ERR_OUT_OF_MEMORY:
      return ErrorCode::out_of_memory;
    case DK_ERR_INTERNAL:
      return ErrorCode::internal;
    default:
      return ErrorCode::runtime;
  }
}

constexpr int32_t status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument:
      return DK_ERR_INVALID_ARGUMENT;
    case ErrorCode::unsupported:
      return DK_ERR_UNSUPPORTED;
    case ErrorCode::unavailable:
      return DK_ERR_UNAVAILABLE;
    case ErrorCode::out_of_memory:
      return DK_ERR_OUT_OF_MEMORY;
    case ErrorCode::runtime:
      return DK_ERR_RUNTIME;
    default:
      return DK_ERR_INTERNAL;
  }
}

constexpr std::string_view status_name(int32_t status) noexcept {
  switch (status) {
    case DK_OK:
      return "ok";
    case DK_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case DK_ERR_UNSUPPORTED:
      return "unsupported";
    case DK_ERR_UNAVAILABLE:
      return "unavailable";
    case DK_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case DK_ERR_RUNTIME:
      return "runtime error";
    case DK_ERR_INTERNAL:
      return "internal error";
    default:
      return "unknown status";
  }
}

}  // namespace deltakern::detail
