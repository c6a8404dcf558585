// The out-variants through the public API (causal_conv1d_varlen_out, causal_conv1d_update_out): on
// each CPU backend the result lands in the caller's out, bit-identical to what the op itself gives,
// with x, out's slack and everything unannotated untouched and nothing allocated; every bad out is
// refused naming `out` with nothing written; and a plugin whose out-variant schema writes x, or
// does not write out, is refused at load.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>

#include <cstring>
#include <functional>
#include <ostream>
#include <string>

using namespace deltakern;
using namespace deltakern::test;
namespace bdata = boost::unit_test::data;

namespace {

Runtime& forced(const std::string& backend) {
  static Runtime portable([] {
    RuntimeOptions o = base_options();
    o.force_backend = "portable";
    return o;
  }());
  return backend == "portable" ? portable : standin_runtime();
}

// The call's result read as compact f32 (the calls here are f32).
std::vector<float> values_of(const DLTensor& t) {
  std::vector<float> v;
  const int64_t rows = t.ndim == 3 ? t.shape[0] * t.shape[1] : t.shape[0], cols = t.shape[t.ndim - 1];
  const int64_t row_stride = t.strides ? t.strides[t.ndim - 2] : cols,
                col_stride = t.strides ? t.strides[t.ndim - 1] : 1;
  const auto* base = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  for (int64_t r = 0; r < rows; ++r) {
    // A 3-D tensor's first two dimensions are walked as rows (batch-major, then channel).
    const int64_t offset = t.ndim == 3 ? (r / t.shape[1]) * (t.strides ? t.strides[0] : t.shape[1] * cols) +
                                             (r % t.shape[1]) * row_stride
                                       : r * row_stride;
    for (int64_t c = 0; c < cols; ++c) v.push_back(base[offset + c * col_stride]);
  }
  return v;
}

std::vector<std::byte> poisoned(HostTensor& t) {
  std::memset(const_cast<std::byte*>(t.bytes().data()), 0x5A, t.bytes().size());
  return t.bytes();
}

const auto kBackends = bdata::make({std::string("portable"), std::string("standin")});

}  // namespace

BOOST_DATA_TEST_CASE(varlen_out_matches_the_op_and_writes_nothing_else, kBackends, backend) {
  Runtime& rt = forced(backend);
  VarlenCall op_call, out_call;
  // out: x's layout with a longer row (slack between rows, which must stay as it was).
  HostTensor out(kF32, {VarlenCall::D, VarlenCall::T}, {VarlenCall::T + 3, 1});
  const std::vector<std::byte> out_before = poisoned(out);
  const auto x_before = out_call.x->bytes();

  const CountingAllocator counting;
  rt.set_allocator(counting.allocator());
  Tensor expected = rt.causal_conv1d_varlen(op_call.args());
  const int64_t allocated = counting.allocated();
  rt.causal_conv1d_varlen_out(out_call.args(), *out.dl());
  BOOST_TEST(counting.allocated() == allocated);  // nothing, with max_seq_len given

  BOOST_TEST(values_of(*out.dl()) == values_of(expected.dl()), boost::test_tools::per_element());
  BOOST_TEST((out_call.states->bytes() == op_call.states->bytes()));  // the states updated alike
  BOOST_TEST((out_call.x->bytes() == x_before));                      // x untouched, in-place backend or not
  for (size_t i = 0; i < out_before.size(); ++i) {                    // out's slack untouched
    const size_t element = i / sizeof(float);
    const int64_t col = static_cast<int64_t>(element) % (VarlenCall::T + 3);
    if (col >= VarlenCall::T || element >= static_cast<size_t>(VarlenCall::D * (VarlenCall::T + 3)))
      BOOST_TEST_REQUIRE((out.bytes()[i] == out_before[i]), "byte " << i << " of out's slack changed");
  }
}

BOOST_DATA_TEST_CASE(update_out_matches_the_op_and_leaves_x, kBackends, backend) {
  Runtime& rt = forced(backend);
  UpdateCall op_call, out_call;
  HostTensor out(kF32, {UpdateCall::B, UpdateCall::D}, {UpdateCall::D + 2, 1});
  poisoned(out);
  const auto x_before = out_call.x->bytes();
  Tensor expected = rt.causal_conv1d_update(op_call.args());
  rt.causal_conv1d_update_out(out_call.args(), *out.dl());
  BOOST_TEST(values_of(*out.dl()) == values_of(expected.dl()), boost::test_tools::per_element());
  BOOST_TEST((out_call.states->bytes() == op_call.states->bytes()));
  BOOST_TEST((out_call.x->bytes() == x_before));
}

namespace {

struct BadOut {
  const char* what;
  std::string message;  // after "causal_conv1d_varlen_out: out: "
  std::function<void(VarlenCall&, HostTensor&)> breaks;
};
std::ostream& operator<<(std::ostream& os, const BadOut& b) { return os << b.what; }

using Shape = std::vector<int64_t>;
constexpr int64_t D = VarlenCall::D, T = VarlenCall::T;

const BadOut kBadOuts[] = {
    {"shape", "expected x's shape (8, 10), got (8, 9)",
     [](VarlenCall&, HostTensor& o) { o.dl()->shape[1] = 9; }},
    {"rank", "expected 2 dimensions (x's shape (8, 10)), got 3",
     [](VarlenCall&, HostTensor& o) { o.dl()->ndim = 3; }},
    {"dtype", "expected dtype float32 (x's), got bfloat16",
     [](VarlenCall&, HostTensor& o) { o.dl()->dtype = kBF16; }},
    {"layout", "expected x's layout (time_contiguous), got channel_last (strides (1, 8))",
     [](VarlenCall&, HostTensor& o) {
       o.dl()->strides[0] = 1;
       o.dl()->strides[1] = D;
     }},
    {"neither layout", "expected time-contiguous (stride(1) == 1) or channel-last",
     [](VarlenCall&, HostTensor& o) { o.dl()->strides[1] = 2; }},
    {"self-overlap", "expected elements that do not overlap, got shape (8, 10) with strides (1, 1)",
     [](VarlenCall&, HostTensor& o) { o.dl()->strides[0] = 1; }},
    {"device", "expected a tensor on cpu:0 (x's device), got cuda:0",
     [](VarlenCall&, HostTensor& o) {
       o.set_device({kDLCUDA, 0});
     }},
    {"null data", "expected data, got a null pointer",
     [](VarlenCall&, HostTensor& o) { o.dl()->data = nullptr; }},
    {"is x", "expected memory apart from x, got overlapping byte ranges",
     [](VarlenCall& c, HostTensor& o) { o.dl()->data = c.x->dl()->data; }},
    {"overlaps conv_states", "expected memory apart from conv_states, got overlapping byte ranges",
     [](VarlenCall& c, HostTensor& o) { o.dl()->data = c.states->dl()->data; }},
    {"overlaps weight", "expected memory apart from weight, got overlapping byte ranges",
     [](VarlenCall& c, HostTensor& o) { o.dl()->data = static_cast<char*>(c.weight->dl()->data) - 64; }},
};

}  // namespace

// Forced onto the in-place stand-in, which writes x and the states: a bad out let through shows as
// a changed tensor.
BOOST_DATA_TEST_CASE(a_bad_out_is_refused_naming_it_and_nothing_is_written, bdata::make(kBadOuts), bad) {
  VarlenCall c;
  HostTensor out(kF32, {D, T});
  poisoned(out);
  bad.breaks(c, out);
  const auto before = c.snapshot();
  const auto out_bytes = out.bytes();
  try {
    standin_runtime().causal_conv1d_varlen_out(c.args(), *out.dl());
    BOOST_FAIL("accepted an out with " << bad.what);
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::invalid_argument));
    const std::string prefix = std::string(DK_OP_CAUSAL_CONV1D_VARLEN_OUT) + ": out: ";
    BOOST_TEST(std::string(e.what()).rfind(prefix + bad.message, 0) == 0, e.what());
  }
  BOOST_TEST((c.snapshot() == before));
  BOOST_TEST((out.bytes() == out_bytes));
}

BOOST_AUTO_TEST_CASE(update_out_is_checked_against_its_own_x) {
  UpdateCall c;
  HostTensor out(kF32, {UpdateCall::B, UpdateCall::D + 1});
  try {
    standin_runtime().causal_conv1d_update_out(c.args(), *out.dl());
    BOOST_FAIL("accepted an out of another shape");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()) ==
               std::string(DK_OP_CAUSAL_CONV1D_UPDATE_OUT) + ": out: expected x's shape (3, 8), got (3, 9)");
  }
}

BOOST_DATA_TEST_CASE(an_out_variant_that_writes_x_or_not_out_is_refused_at_load,
                     bdata::make({std::string("writes_x"), std::string("out_unwritten")}) ^
                         bdata::make({std::string("an out-variant must not write x"),
                                      std::string("an out-variant must annotate out as written")}),
                     name, reason) {
  RuntimeOptions o = base_options();
  const fs::path file = fs::path(DK_TEST_REFUSED_PLUGIN_DIR) / ("libdeltakern_bad_out_" + name + ".so");
  o.plugin_files = {file};
  const Runtime rt(o);
  const PluginInfo* refused = find_by_path(rt, file);
  BOOST_TEST_REQUIRE(refused != nullptr);
  BOOST_TEST((refused->state == PluginInfo::State::rejected));
  BOOST_TEST(refused->reason.find("op 'causal_conv1d_varlen_out': " + reason) != std::string::npos,
             refused->reason);
}
