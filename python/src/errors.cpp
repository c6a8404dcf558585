#include "errors.hpp"

#include <deltakern/deltakern.hpp>
#include <nanobind/nanobind.h>

#include <exception>

namespace nb = nanobind;

namespace deltakern::python {
namespace {

// The class names are deltakern/_errors.py's; one per ErrorCode.
const char* class_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "InvalidArgumentError";
    case ErrorCode::unsupported:
      return "UnsupportedError";
    case ErrorCode::unavailable:
      return "UnavailableError";
    case ErrorCode::out_of_memory:
      return "OutOfMemoryError";
    case ErrorCode::runtime:
      return "BackendError";
    case ErrorCode::config:
      return "ConfigError";
    case ErrorCode::internal:
      return "InternalError";
  }
  return "Error";
}

void translate(const std::exception_ptr& thrown, void*) {
  try {
    std::rethrow_exception(thrown);
  } catch (const Error& e) {
    // Looked up per error, not cached: errors are rare, and a cached class would outlive
    // the interpreter's module at shutdown.
    nb::object errors = nb::module_::import_("deltakern._errors");
    nb::object cls = errors.attr(class_name(e.code()));
    PyErr_SetString(cls.ptr(), e.what());
  }
}

}  // namespace

void register_error_translator() { nb::register_exception_translator(translate); }

}  // namespace deltakern::python
