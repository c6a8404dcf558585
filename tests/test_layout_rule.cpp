// The one layout rule (plugin::layout_of in plugin_sdk.hpp), degenerate extents included, and
// the core validating x with exactly that rule: what the rule calls neither is rejected naming
// x and its strides, what it names is accepted (by the in-place standin, which declares both).
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/plugin_sdk.hpp>

using namespace deltakern;
using namespace deltakern::test;
using plugin::layout_of;

namespace {
constexpr uint32_t kTime = DK_LAYOUT_TIME_CONTIGUOUS, kChannel = DK_LAYOUT_CHANNEL_LAST, kNeither = 0;
}

BOOST_AUTO_TEST_CASE(the_rule_for_every_degenerate_extent) {
  // (D, T, channel stride, time stride)
  BOOST_TEST(layout_of(8, 10, 10, 1) == kTime);     // compact (D, T)
  BOOST_TEST(layout_of(8, 10, 1, 8) == kChannel);   // compact (T, D) seen as (D, T)
  BOOST_TEST(layout_of(8, 10, 1, 24) == kChannel);  // a slice of a fused projection
  BOOST_TEST(layout_of(8, 10, 1, 4) == kNeither);   // channel-last with rows overlapping
  BOOST_TEST(layout_of(8, 10, 2, 16) == kNeither);  // neither axis unit-strided
  BOOST_TEST(layout_of(1, 10, 1, 1) == kTime);      // D = 1, contiguous time
  BOOST_TEST(layout_of(1, 10, 7, 5) == kChannel);   // D = 1, strided time: one channel at any stride
  BOOST_TEST(layout_of(8, 1, 1, 8) == kTime);       // T = 1: no time stride to speak of
  BOOST_TEST(layout_of(8, 1, 3, 999) == kTime);     // T = 1, any strides
  BOOST_TEST(layout_of(8, 0, 1, 8) == kTime);       // T = 0
  BOOST_TEST(layout_of(0, 10, 1, 1) == kTime);      // D = 0, contiguous time
  BOOST_TEST(layout_of(0, 10, 5, 3) == kChannel);   // D = 0, strided time
}

BOOST_AUTO_TEST_CASE(the_core_accepts_exactly_what_the_rule_names) {
  Runtime& rt = standin_runtime();
  struct Case {
    std::vector<int64_t> shape, strides;
    uint32_t expected;
  };
  const std::vector<Case> cases = {
      {{8, 10}, {10, 1}, kTime},    {{8, 10}, {1, 8}, kChannel}, {{8, 10}, {1, 12}, kChannel},
      {{8, 10}, {2, 20}, kNeither}, {{1, 10}, {1, 3}, kChannel}, {{8, 1}, {1, 8}, kTime},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("x shape (" << c.shape[0] << ", " << c.shape[1] << ") strides (" << c.strides[0]
                                   << ", " << c.strides[1] << ")") {
      BOOST_TEST(layout_of(c.shape[0], c.shape[1], c.strides[0], c.strides[1]) == c.expected);
      VarlenCall call;
      const int64_t d = c.shape[0], t = c.shape[1];
      call.x.emplace(kF32, c.shape, c.strides);
      call.weight.emplace(kF32, std::vector<int64_t>{d, VarlenCall::W});
      call.weight->fill(ramp(d * VarlenCall::W, 0.02f));
      call.bias.reset();
      call.states.emplace(kF32, std::vector<int64_t>{VarlenCall::lines, d, VarlenCall::S});
      call.qsl->fill(std::vector<int32_t>{0, static_cast<int32_t>(t / 2), static_cast<int32_t>(t)});
      call.max_seq_len.reset();
      if (c.expected == kNeither) {
        try {
          (void)rt.causal_conv1d_varlen(call.args());
          BOOST_FAIL("accepted a layout the rule calls neither");
        } catch (const Error& e) {
          BOOST_TEST(std::string(e.what()).find("x: expected time-contiguous") != std::string::npos,
                     e.what());
        }
      } else {
        BOOST_CHECK_NO_THROW((void)rt.causal_conv1d_varlen(call.args()));
      }
    }
  }
}
