#include "loader/plugin_exception.hpp"

#include <exception>

namespace deltakern::detail {

std::string current_exception_text() noexcept {
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      return std::string("std::exception: ") + e.what();
    } catch (...) {
      return "an exception that is not a std::exception";
    }
  } catch (...) {
    return "an exception";  // building the text itself failed (out of memory)
  }
}

}  // namespace deltakern::detail
