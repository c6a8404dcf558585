// Why a library is turned away while it is being loaded: thrown by each step of loading and
// caught once per library by discovery, which lists the library as rejected with this reason.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace deltakern::detail {

class Rejection : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void reject(const std::string& reason) { throw Rejection(reason); }

// Inside a catch block around loading a library: why it is rejected (a Rejection's reason as it
// is, anything else as an unexpected failure).
inline std::string rejection_reason() {
  try {
    throw;
  } catch (const Rejection& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected failure while loading: ") + e.what();
  } catch (...) {
    return "unexpected failure while loading";
  }
}

}  // namespace deltakern::detail
