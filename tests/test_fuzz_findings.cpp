// What fuzz_validate found in the argument validator, kept as exact checks: each input is
// rejected before anything runs, naming x and the reason, and leaves every tensor as it was.
// (The fuzzer's own reproducers under fuzz/corpus/validate replay in the sanitizer builds.)
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <cstring>
#include <functional>
#include <limits>
#include <string>

using namespace deltakern;
using namespace deltakern::test;

namespace {

Runtime& runtime() { return standin_runtime(); }

void require_x_rejected(const std::function<void(VarlenCall&)>& breaks, const std::string& reason) {
  VarlenCall call;
  breaks(call);
  const auto before = call.snapshot();
  try {
    (void)runtime().causal_conv1d_varlen(call.args());
    BOOST_FAIL("the call was accepted");
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::invalid_argument));
    const std::string expected = "causal_conv1d_varlen: x: " + reason;
    BOOST_TEST(std::string(e.what()).starts_with(expected),
               "message: " << e.what() << "\nexpected: " << expected);
  }
  BOOST_TEST((call.snapshot() == before), "a rejected call changed a tensor");
}

constexpr const char* kTooLarge = "expected a shape and strides whose extent fits the address space";

}  // namespace

BOOST_AUTO_TEST_CASE(sizes_whose_element_count_wraps_to_zero_are_not_an_empty_tensor) {
  require_x_rejected(
      [](VarlenCall& c) {
        c.x->dl()->shape[0] = int64_t{1} << 32;
        c.x->dl()->shape[1] = int64_t{1} << 32;
      },
      kTooLarge);
}

BOOST_AUTO_TEST_CASE(strides_whose_offsets_overflow_are_rejected) {
  require_x_rejected([](VarlenCall& c) { c.x->dl()->strides[0] = int64_t{1} << 62; }, kTooLarge);
}

BOOST_AUTO_TEST_CASE(a_byte_range_that_wraps_the_address_space_is_rejected) {
  require_x_rejected(
      [](VarlenCall& c) {
        c.x->dl()->byte_offset =
            std::numeric_limits<uint64_t>::max() - reinterpret_cast<uintptr_t>(c.x->dl()->data);
      },
      kTooLarge);
}

BOOST_AUTO_TEST_CASE(an_empty_tensor_whose_base_address_wraps_is_rejected) {
  require_x_rejected(
      [](VarlenCall& c) {
        c.x->dl()->shape[1] = 0;  // no tokens: no element, but backends still form data + byte_offset
        c.x->dl()->byte_offset =
            std::numeric_limits<uint64_t>::max() - reinterpret_cast<uintptr_t>(c.x->dl()->data) + 2;
      },
      kTooLarge);
}

BOOST_AUTO_TEST_CASE(the_lowest_int64_size_is_a_negative_size) {
  require_x_rejected([](VarlenCall& c) { c.x->dl()->shape[1] = std::numeric_limits<int64_t>::min(); },
                     "expected non-negative sizes");
}

BOOST_AUTO_TEST_CASE(a_device_type_that_names_no_device_is_rejected_as_x_s) {
  require_x_rejected(
      [](VarlenCall& c) {
        const int32_t no_device = 1000;  // what a C caller can store in the enum field
        std::memcpy(&c.x->dl()->device.device_type, &no_device, sizeof no_device);
      },
      "expected a DLPack device type (DLDeviceType), got device_type 1000");
}

// fuzz_validate, CI run of 2026-11-29 19:00 UTC: a dtype of zero lanes has zero-byte elements, and
// the alignment check divided by that size.
BOOST_AUTO_TEST_CASE(a_dtype_of_zero_lanes_is_rejected_as_a_dtype) {
  require_x_rejected([](VarlenCall& c) { c.x->dl()->dtype.lanes = 0; },
                     "expected dtype float32, float16 or bfloat16");
}
