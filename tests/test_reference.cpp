// The conformance suite's own float64 reference and dtype conversions, against values
// worked out by hand from docs/design.md section 5: the suite is only as good as these.
#include <boost/test/unit_test.hpp>

#include "dtype.hpp"
#include "reference.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

using namespace deltakern::conformance;
namespace ref = deltakern::conformance::reference;

BOOST_AUTO_TEST_CASE(f16_conversion_rounds_to_nearest_even) {
  BOOST_TEST(f32_to_f16(1.0f) == 0x3C00);
  BOOST_TEST(f32_to_f16(-2.0f) == 0xC000);
  BOOST_TEST(f32_to_f16(65504.0f) == 0x7BFF);
  BOOST_TEST(f32_to_f16(65520.0f) == 0x7C00);               // halfway to the next binade: infinity
  BOOST_TEST(f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);     // a tie: to even
  BOOST_TEST(f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);     // a tie: to even, upwards
  BOOST_TEST(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  BOOST_TEST(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie with zero: even
  BOOST_TEST(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  BOOST_TEST(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  BOOST_TEST((f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7C00) == 0x7C00);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    BOOST_TEST_REQUIRE(f32_to_f16(f) == bits, "f16 round trip of 0x" << std::hex << bits);
  }
}

BOOST_AUTO_TEST_CASE(bf16_conversion_rounds_to_nearest_even) {
  BOOST_TEST(f32_to_bf16(1.0f) == 0x3F80);
  BOOST_TEST(f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80);  // tie: even
  BOOST_TEST(f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82);  // tie: even, upwards
  BOOST_TEST(bf16_to_f32(0xC040) == -3.0f);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = bf16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    BOOST_TEST_REQUIRE(f32_to_bf16(f) == bits);
  }
}

namespace {

// Accessors over row-major vectors, as the suite's host images provide them.
std::function<double(int64_t, int64_t)> matrix(const std::vector<double>& v, int64_t cols) {
  return [&v, cols](int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; };
}
std::function<double(int64_t, int64_t, int64_t)> cube(const std::vector<double>& v, int64_t n1, int64_t n2) {
  return
      [&v, n1, n2](int64_t i, int64_t j, int64_t k) { return v[static_cast<size_t>((i * n1 + j) * n2 + k)]; };
}

}  // namespace

BOOST_AUTO_TEST_CASE(varlen_by_hand) {
  // D = 1, W = 3, S = 2; sequences of lengths 1 (initial state) and 3 (none), bias 0.5.
  const std::vector<double> x{10, 1, 2, 3};
  const std::vector<double> w{0.25, 0.5, 1.0};
  const std::vector<double> bias{0.5};
  const std::vector<double> states{7, 8, 100, 100, 4, 5};  // lines 0, 1, 2
  const std::vector<int32_t> qsl{0, 1, 4};
  const std::vector<int32_t> idx{2, 0};
  const std::vector<uint8_t> init{1, 0};
  ref::VarlenProblem p;
  p.dim = 1;
  p.tokens = 4;
  p.width = 3;
  p.state_len = 2;
  p.lines = 3;
  p.x = matrix(x, 4);
  p.weight = matrix(w, 3);
  p.bias = [&](int64_t d) { return bias[static_cast<size_t>(d)]; };
  p.states = cube(states, 1, 2);
  p.query_start_loc = qsl;
  p.cache_indices = idx;
  p.has_initial_state = init;
  const ref::Varlen r(p);
  // Sequence 0 on line 2 = [4, 5]: e = [4, 5, 10]; out = 0.5 + 0.25*4 + 0.5*5 + 10 = 14.
  BOOST_TEST(r.out(0, 0).value == 14.0);
  BOOST_TEST(r.out(0, 0).magnitude == 14.0);
  BOOST_TEST(r.out(0, 0).terms == 4);
  // Sequence 1 on line 0, no initial state: e = [0, 0, 1, 2, 3].
  BOOST_TEST(r.out(0, 1).value == 0.5 + 1.0);
  BOOST_TEST(r.out(0, 2).value == 0.5 + 0.5 * 1 + 2);
  BOOST_TEST(r.out(0, 3).value == 0.5 + 0.25 * 1 + 0.5 * 2 + 3);
  BOOST_TEST(r.states() == (std::vector<double>{2, 3, 100, 100, 5, 10}), boost::test_tools::per_element());
  BOOST_TEST(r.line_live() == (std::vector<uint8_t>{1, 0, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(varlen_skips_padded_and_out_of_range_and_zeroes_an_empty_sequence_without_state) {
  const std::vector<double> x{1, 2, 3};
  const std::vector<double> w{1, 1};
  const std::vector<double> states{9, 9, 9};
  const std::vector<int32_t> qsl{0, 0, 2, 3};
  const std::vector<int32_t> idx{1, -1, 3};  // the last one is out of range
  ref::VarlenProblem p;
  p.dim = 1;
  p.tokens = 3;
  p.width = 2;
  p.state_len = 1;
  p.lines = 3;
  p.x = matrix(x, 3);
  p.weight = matrix(w, 2);
  p.states = cube(states, 1, 1);
  p.query_start_loc = qsl;
  p.cache_indices = idx;
  p.act = ref::Act::silu;
  const ref::Varlen r(p);
  BOOST_TEST(r.live_tokens() == (std::vector<uint8_t>{0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(r.states() == (std::vector<double>{9, 0, 9}), boost::test_tools::per_element());
  BOOST_TEST(r.sequence_of(0) == 1);
  BOOST_TEST(r.sequence_of(2) == 2);
}

BOOST_AUTO_TEST_CASE(update_shift_and_circular_by_hand) {
  // D = 1, W = 3, S = 3, Tq = 2; state line 0 = [1, 2, 3].
  const std::vector<double> x{4, 5};
  const std::vector<double> w{1, 10, 100};
  const std::vector<double> states{1, 2, 3};
  ref::UpdateProblem p;
  p.batch = 1;
  p.dim = 1;
  p.tokens = 2;
  p.width = 3;
  p.state_len = 3;
  p.lines = 1;
  p.x = cube(x, 1, 2);
  p.states = cube(states, 1, 3);
  p.weight = matrix(w, 3);
  {
    const ref::Update r(p);
    // e = [1, 2, 3, 4, 5]: out[0] = 2 + 30 + 400, out[1] = 3 + 40 + 500; state [3, 4, 5].
    BOOST_TEST(r.out(0, 0, 0).value == 432.0);
    BOOST_TEST(r.out(0, 0, 1).value == 543.0);
    BOOST_TEST(r.states() == (std::vector<double>{3, 4, 5}), boost::test_tools::per_element());
  }
  // Circular, n = 4: token 0 reads positions (4-2)%3=2, 0 -> 3, 1; writes 4 at 1.
  // Token 1 reads positions 0, 1 -> 1, 4; writes 5 at 2.
  const std::vector<int32_t> n{4};
  p.cache_seqlens = n;
  const ref::Update r(p);
  BOOST_TEST(r.out(0, 0, 0).value == 3 + 10 + 400.0);
  BOOST_TEST(r.out(0, 0, 1).value == 1 + 40 + 500.0);
  BOOST_TEST(r.states() == (std::vector<double>{1, 4, 5}), boost::test_tools::per_element());
}
