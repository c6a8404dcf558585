// Why a library is turned away while it is being loaded: thrown by each step of loading and
// caught once per library by discovery, which lists the library as rejected with this reason.
#pragma once

#include <stdexcept>
#include <string>

namespace deltakern::detail {

class Rejection : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void reject(const std::string& reason) { throw Rejection(reason); }

}  // namespace deltakern::detail
