// Public API argument validation: every class of bad argument is rejected with an error
// that names the argument, and a rejected call leaves every tensor bit-identical.
#define BOOST_TEST_MODULE api_validation
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <functional>
#include <ostream>

using namespace deltakern;
using namespace deltakern::test;
namespace bdata = boost::unit_test::data;

namespace {

constexpr DLDevice kCuda{kDLCUDA, 0};

// Served by the in-place test backend, so the call runs wherever validation lets it.
Runtime& runtime() {
  static Runtime rt([] {
    RuntimeOptions o = base_options();
    o.force_backend = "standin";
    return o;
  }());
  return rt;
}

struct VarlenBreak {
  const char* what;
  const char* argument;  // the message must name it
  std::function<void(VarlenCall&)> breaks;
};
std::ostream& operator<<(std::ostream& os, const VarlenBreak& b) { return os << b.what; }

using V = VarlenCall;
const VarlenBreak kVarlenBreaks[] = {
    {"x missing", "x", [](V& c) { c.x.reset(); }},
    {"x of rank 3", "x",
     [](V& c) {
       c.x.emplace(kF32, std::vector<int64_t>{V::D, V::T, 1});
     }},
    {"x of int32", "x",
     [](V& c) {
       c.x.emplace(kI32, std::vector<int64_t>{V::D, V::T});
     }},
    {"x of float64", "x",
     [](V& c) {
       c.x.emplace(kF64, std::vector<int64_t>{V::D, V::T});
     }},
    {"x strided in both dims", "x",
     [](V& c) {
       c.x.emplace(kF32, std::vector<int64_t>{V::D, V::T}, std::vector<int64_t>{2 * V::T, 2});
     }},
    {"weight on another device than x", "weight", [](V& c) { c.weight->set_device(kCuda); }},
    {"weight missing", "weight", [](V& c) { c.weight.reset(); }},
    {"weight of rank 1", "weight", [](V& c) { c.weight.emplace(kF32, std::vector<int64_t>{V::D}); }},
    {"weight with other channels", "weight",
     [](V& c) {
       c.weight.emplace(kF32, std::vector<int64_t>{V::D + 1, V::W});
     }},
    {"weight in f16 with f32 x", "weight",
     [](V& c) {
       c.weight.emplace(kF16, std::vector<int64_t>{V::D, V::W});
     }},
    {"bias with other channels", "bias", [](V& c) { c.bias.emplace(kF32, std::vector<int64_t>{V::D + 1}); }},
    {"bias in f16 with f32 x", "bias", [](V& c) { c.bias.emplace(kF16, std::vector<int64_t>{V::D}); }},
    {"conv_states missing", "conv_states", [](V& c) { c.states.reset(); }},
    {"conv_states of rank 2", "conv_states",
     [](V& c) {
       c.states.emplace(kF32, std::vector<int64_t>{V::lines, V::D});
     }},
    {"conv_states with other channels", "conv_states",
     [](V& c) {
       c.states.emplace(kF32, std::vector<int64_t>{V::lines, V::D + 1, V::S});
     }},
    {"conv_states shorter than W-1", "conv_states",
     [](V& c) {
       c.states.emplace(kF32, std::vector<int64_t>{V::lines, V::D, V::W - 2});
     }},
    {"conv_states in f16 with f32 x", "conv_states",
     [](V& c) {
       c.states.emplace(kF16, std::vector<int64_t>{V::lines, V::D, V::S});
     }},
    {"conv_states on another device", "conv_states", [](V& c) { c.states->set_device(kCuda); }},
    {"query_start_loc missing", "query_start_loc", [](V& c) { c.qsl.reset(); }},
    {"query_start_loc of int64", "query_start_loc",
     [](V& c) { c.qsl.emplace(kI64, std::vector<int64_t>{3}); }},
    {"query_start_loc of rank 2", "query_start_loc",
     [](V& c) {
       c.qsl.emplace(kI32, std::vector<int64_t>{3, 1});
     }},
    {"query_start_loc on another device", "query_start_loc", [](V& c) { c.qsl->set_device(kCuda); }},
    {"cache_indices of another batch", "cache_indices",
     [](V& c) { c.indices.emplace(kI32, std::vector<int64_t>{3}); }},
    {"cache_indices of int64", "cache_indices",
     [](V& c) { c.indices.emplace(kI64, std::vector<int64_t>{2}); }},
    {"has_initial_state of another batch", "has_initial_state",
     [](V& c) { c.initial.emplace(kU8, std::vector<int64_t>{1}); }},
    {"has_initial_state of float32", "has_initial_state",
     [](V& c) { c.initial.emplace(kF32, std::vector<int64_t>{2}); }},
    {"max_seq_len negative", "max_seq_len", [](V& c) { c.max_seq_len = -1; }},
    // Contents, checked only when asked (one counted sync).
    {"validate: cache index out of range", "cache_indices",
     [](V& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{3, V::lines});
     }},
    {"validate: query_start_loc decreasing", "query_start_loc",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{0, 7, 4});
     }},
    {"validate: query_start_loc past the tokens", "query_start_loc",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{0, 4, V::T + 2});
     }},
    {"validate: max_seq_len below the longest sequence", "max_seq_len",
     [](V& c) {
       c.validate = true;
       c.max_seq_len = 5;
     }},
};

struct UpdateBreak {
  const char* what;
  const char* argument;
  std::function<void(UpdateCall&)> breaks;
};
std::ostream& operator<<(std::ostream& os, const UpdateBreak& b) { return os << b.what; }

using U = UpdateCall;
const UpdateBreak kUpdateBreaks[] = {
    {"x missing", "x", [](U& c) { c.x.reset(); }},
    {"x of rank 4", "x",
     [](U& c) {
       c.x.emplace(kF32, std::vector<int64_t>{U::B, U::D, 1, 1});
     }},
    {"x of int32", "x",
     [](U& c) {
       c.x.emplace(kI32, std::vector<int64_t>{U::B, U::D});
     }},
    {"conv_state missing", "conv_state", [](U& c) { c.states.reset(); }},
    {"conv_state with other channels", "conv_state",
     [](U& c) {
       c.states.emplace(kF32, std::vector<int64_t>{U::lines, U::D + 1, U::S});
     }},
    {"conv_state shorter than W-1", "conv_state",
     [](U& c) {
       c.states.emplace(kF32, std::vector<int64_t>{U::lines, U::D, U::W - 2});
     }},
    {"conv_state in f16 with f32 x", "conv_state",
     [](U& c) {
       c.states.emplace(kF16, std::vector<int64_t>{U::lines, U::D, U::S});
     }},
    {"weight with other channels", "weight",
     [](U& c) {
       c.weight.emplace(kF32, std::vector<int64_t>{U::D + 1, U::W});
     }},
    {"weight missing", "weight", [](U& c) { c.weight.reset(); }},
    {"bias with other channels", "bias", [](U& c) { c.bias.emplace(kF32, std::vector<int64_t>{U::D - 1}); }},
    {"conv_state_indices of another batch", "conv_state_indices",
     [](U& c) { c.indices.emplace(kI32, std::vector<int64_t>{U::B + 1}); }},
    {"conv_state_indices of int64", "conv_state_indices",
     [](U& c) { c.indices.emplace(kI64, std::vector<int64_t>{U::B}); }},
    {"cache_seqlens of another batch", "cache_seqlens",
     [](U& c) { c.seqlens.emplace(kI32, std::vector<int64_t>{U::B - 1}); }},
    {"cache_seqlens of float32", "cache_seqlens",
     [](U& c) { c.seqlens.emplace(kF32, std::vector<int64_t>{U::B}); }},
    {"validate: state index out of range", "conv_state_indices",
     [](U& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{4, U::lines + 3, 2});
     }},
};

template <class Call>
void require_rejected(Call& call, const char* argument, const std::function<Tensor()>& run) {
  const auto before = call.snapshot();
  try {
    const Tensor t = run();
    BOOST_FAIL("the call was accepted");
  } catch (const Error& e) {
    BOOST_TEST_CONTEXT("message: " << e.what()) {
      BOOST_TEST((e.code() == ErrorCode::invalid_argument));
      BOOST_TEST(names_word(e.what(), argument), "the message should name '" << argument << "'");
    }
  }
  const auto after = call.snapshot();
  for (size_t i = 0; i < before.size(); ++i)
    BOOST_TEST((before[i] == after[i]), "tensor " << i << " was changed");
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_unbroken_calls_are_accepted) {
  VarlenCall v;
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_varlen(v.args()));
  UpdateCall u;
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_update(u.args()));
  UpdateCall c;
  c.seqlens.emplace(kI32, std::vector<int64_t>{U::B});
  c.validate = true;
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_update(c.args()));
}

BOOST_DATA_TEST_CASE(bad_varlen_arguments_are_rejected_untouched, bdata::make(kVarlenBreaks), b) {
  VarlenCall call;
  b.breaks(call);
  require_rejected(call, b.argument, [&] { return runtime().causal_conv1d_varlen(call.args()); });
}

BOOST_DATA_TEST_CASE(bad_update_arguments_are_rejected_untouched, bdata::make(kUpdateBreaks), b) {
  UpdateCall call;
  b.breaks(call);
  require_rejected(call, b.argument, [&] { return runtime().causal_conv1d_update(call.args()); });
}

BOOST_AUTO_TEST_CASE(activation_names) {
  BOOST_TEST((activation_from_string("none") == Activation::none));
  BOOST_TEST((activation_from_string("silu") == Activation::silu));
  BOOST_TEST((activation_from_string("swish") == Activation::silu));
  try {
    (void)activation_from_string("relu");
    BOOST_FAIL("relu was accepted");
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::invalid_argument));
    BOOST_TEST(contains(e.what(), "relu"), e.what());
  }
}
