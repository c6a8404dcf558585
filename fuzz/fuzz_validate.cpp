// Fuzz target: the host argument validator of both ops. The input decodes into tensor
// descriptors (tensor_decoder.hpp): any shape, strides, dtype, device, byte offset, data
// pointer, omitted optional arguments, aliasing between arguments. The validator must only
// accept or reject (Error(invalid_argument)); it must never crash or read out of bounds.
// What it accepts is then held to the promises kernels rely on, computed independently here:
// every element addressable without 64-bit overflow, and no written tensor sharing memory
// with another argument. Accepted calls whose index tensors are readable host memory go on
// to the contents checks (validate = true), which read them; and when those accept too and
// every tensor lies in host memory the fuzzer owns, the call runs on the portable backend
// (CPU): a call the core lets through must not make a kernel read or write out of bounds.
#include "tensor_decoder.hpp"
#include "validation/validate.hpp"

#include <deltakern/deltakern.hpp>
#include <deltakern/runtime.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>

namespace {

using deltakern::Error;
using deltakern::ErrorCode;
using deltakern::fuzz::DecodedCall;
using deltakern::fuzz::DecodedTensor;

[[noreturn]] void broken_promise(const char* what, size_t argument) {
  std::fprintf(stderr, "fuzz_validate: accepted a call that breaks a promise: %s (argument %zu)\n", what,
               argument);
  std::abort();
}

// Kernels index with int64 element offsets and compare byte ranges as addresses.
void check_addressable(const DecodedTensor& t, size_t i) {
  const auto& g = t.geometry;
  if (!g.known) broken_promise("a shape that cannot be read or has a negative size", i);
  if (g.empty) return;
  constexpr __int128 int64_max = std::numeric_limits<int64_t>::max();
  if (g.elements > int64_max || g.highest > int64_max || g.lowest < 0)
    broken_promise("element offsets beyond int64", i);
  if (g.first_byte < 0 || g.end_byte > static_cast<__int128>(std::numeric_limits<uintptr_t>::max()))
    broken_promise("a byte range that wraps the address space", i);
}

bool overlap(const DecodedTensor& a, const DecodedTensor& b) {
  if (!a.present || !b.present || a.geometry.empty || b.geometry.empty) return false;
  return a.geometry.first_byte < b.geometry.end_byte && b.geometry.first_byte < a.geometry.end_byte;
}

// written: the arguments the op writes (x, in place, and the state pool).
void check_apart(const DecodedCall& call, std::span<const size_t> written) {
  for (const size_t w : written)
    for (size_t i = 0; i < call.count(); ++i)
      if (i != w && overlap(call.tensors[w], call.tensors[i]))
        broken_promise("a written tensor shares memory", i);
}

bool readable_on_host(const DecodedCall& call, std::span<const size_t> indices) {
  for (const size_t i : indices) {
    const DecodedTensor& t = call.tensors[i];
    if (!t.present) continue;
    const auto type = t.dl.device.device_type;
    if (!t.backed || (type != kDLCPU && type != kDLCUDAHost)) return false;
  }
  return true;
}

template <class Check>
void expect_accept_or_reject(Check&& check) {
  try {
    check();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) {
      std::fprintf(stderr, "fuzz_validate: rejected with the wrong error code %d: %s\n",
                   static_cast<int>(e.code()), e.what());
      std::abort();
    }
    throw;
  }
}

bool all_backed_on_cpu(const DecodedCall& call) {
  for (size_t i = 0; i < call.count(); ++i) {
    const DecodedTensor& t = call.tensors[i];
    if (t.present && (!t.backed || t.dl.device.device_type != kDLCPU)) return false;
  }
  return true;
}

// The portable backend, found in the build tree beside the core as an installed one would be.
deltakern::Runtime& portable() {
  static deltakern::Runtime rt([] {
    deltakern::RuntimeOptions o;
    o.read_environment = false;
    o.force_backend = "portable";
    return o;
  }());
  return rt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deltakern::detail;
  const DecodedCall call(std::span(data, size));
  try {
    if (call.varlen) {
      const auto args = call.varlen_args();
      VarlenGeometry g{};
      expect_accept_or_reject([&] { g = check_varlen_arguments(args); });
      for (size_t i = 0; i < call.count(); ++i)
        if (call.tensors[i].present) check_addressable(call.tensors[i], i);
      constexpr size_t written[] = {0, 3};  // x (in-place backends), conv_states
      check_apart(call, written);
      constexpr size_t indices[] = {4, 5, 6};
      if (call.check_contents && readable_on_host(call, indices)) {
        expect_accept_or_reject([&] { check_varlen_contents(args, g); });
        if (all_backed_on_cpu(call)) (void)portable().causal_conv1d_varlen(args);
      }
    } else {
      const auto args = call.update_args();
      UpdateGeometry g{};
      expect_accept_or_reject([&] { g = check_update_arguments(args); });
      for (size_t i = 0; i < call.count(); ++i)
        if (call.tensors[i].present) check_addressable(call.tensors[i], i);
      constexpr size_t written[] = {0, 1};  // x, conv_state
      check_apart(call, written);
      constexpr size_t indices[] = {4, 5};
      if (call.check_contents && readable_on_host(call, indices)) {
        expect_accept_or_reject([&] { check_update_contents(args, g); });
        if (all_backed_on_cpu(call)) (void)portable().causal_conv1d_update(args);
      }
    }
  } catch (const Error&) {
    // A clean rejection.
  }
  return 0;
}
