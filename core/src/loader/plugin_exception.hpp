// No C++ exception may cross the plugin ABI, yet a defective plugin may throw one. Where the
// core calls plugin code it catches everything; this keeps what the exception said.
#pragma once

#include <string>

namespace deltakern::detail {

// Inside a catch block: "std::exception: <what>", or, only for something that is not a
// std::exception, "an exception that is not a std::exception".
std::string current_exception_text() noexcept;

}  // namespace deltakern::detail
