// The dispatcher's decision for a call depends on that call alone, never on the calls before it:
// a backend's limits (ABI 1.1) are checked on every call, an ABI 1.0 plugin's supports() is asked
// on every call, and a backend that does not declare the call's device is never a candidate (so
// never a fallback). Checked with the versioned test plugins (plugins/versioned.cpp): the same
// in-place CPU backend, refusing state lengths above 64, built against the ABI 1.0, 1.1 and 1.2
// headers, in front of portable (fresh outputs), in both call orders, strict and not, from 8 threads.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>
#include <fmt/core.h>

#include <thread>

using namespace deltakern;
using namespace deltakern::test;
namespace data = boost::unit_test::data;

namespace {

const std::vector<std::string> kVersioned = {"abi_1_0", "abi_1_1", "abi_1_2"};

RuntimeOptions with_order(const TempDir& dir, std::string_view first, bool strict = false) {
  RuntimeOptions o = base_options();
  o.plugin_path = {real_plugin_dir(), fs::path(DK_TEST_ABI_PLUGIN_DIR)};
  o.config_file =
      dir.write("deltakern.toml", fmt::format("[dispatch]\norder = [\"{}\", \"portable\"]\nstrict = {}\n",
                                              first, strict ? "true" : "false"));
  return o;
}

// A varlen call whose conv_states hold `state_len` positions per line; whether the in-place
// backend (which returns x itself) or portable (a fresh output) served it.
enum class Served { in_place, fresh };
Served varlen_with_state(Runtime& rt, int64_t state_len) {
  VarlenCall call;
  call.states.emplace(kF32, std::vector<int64_t>{VarlenCall::lines, VarlenCall::D, state_len});
  call.states->fill(ramp(VarlenCall::lines * VarlenCall::D * state_len, 0.05f));
  const Tensor out = rt.causal_conv1d_varlen(call.args());
  return out.aliases(*call.x->dl()) ? Served::in_place : Served::fresh;
}
Served update_with_tokens(Runtime& rt, int64_t tokens) {
  UpdateCall call;
  call.x.emplace(kF32, std::vector<int64_t>{UpdateCall::B, UpdateCall::D, tokens});
  call.x->fill(ramp(UpdateCall::B * UpdateCall::D * tokens));
  const Tensor out = rt.causal_conv1d_update(call.args());
  return out.aliases(*call.x->dl()) ? Served::in_place : Served::fresh;
}

std::string limit_reason(const std::string& plugin, int64_t state_len) {
  if (plugin == "abi_1_0") return fmt::format("supports(): state length {} exceeds 64", state_len);
  return state_len < 0 ? "state_len outside 1..64" : fmt::format("state_len {} outside 1..64", state_len);
}

uint64_t fallbacks(const Runtime& rt, std::string_view reason = "") {
  uint64_t n = 0;
  for (const auto& c : rt.fallback_counts())
    if (reason.empty() || c.reason == reason) n += c.count;
  return n;
}

}  // namespace

BOOST_DATA_TEST_CASE(every_abi_minor_loads_with_its_version_and_limits, data::make(kVersioned), name) {
  const TempDir dir;
  Runtime rt(with_order(dir, name));
  const PluginInfo* p = rt.plugin(name);
  BOOST_REQUIRE_MESSAGE(p != nullptr, name << " did not load");
  BOOST_TEST(p->abi_major == 1);
  BOOST_TEST(p->abi_minor == (name == "abi_1_0" ? 0 : name == "abi_1_1" ? 1 : 2));
  for (const auto& op : p->ops) {
    if (name == "abi_1_0") {
      BOOST_TEST(op.limits.empty());
      continue;
    }
    BOOST_REQUIRE(!op.limits.empty());
    BOOST_TEST(op.limits[0].dim == "state_len");
    BOOST_TEST(op.limits[0].min == 1);
    BOOST_TEST(op.limits[0].max == 64);
    BOOST_TEST(op.limits.size() == (op.name == DK_OP_CAUSAL_CONV1D_UPDATE ? 2u : 1u));
  }
}

BOOST_DATA_TEST_CASE(a_long_state_after_a_short_one_falls_back_instead_of_failing, data::make(kVersioned),
                     name) {
  const TempDir dir;
  Runtime rt(with_order(dir, name));
  BOOST_TEST((varlen_with_state(rt, 3) == Served::in_place));
  BOOST_TEST((varlen_with_state(rt, 100) == Served::fresh));
  BOOST_TEST((varlen_with_state(rt, 64) == Served::in_place));
  const auto counts = rt.fallback_counts();
  BOOST_REQUIRE(counts.size() == 1u);
  BOOST_TEST(counts[0].backend == "portable");
  BOOST_TEST(counts[0].first_choice == name);
  BOOST_TEST(counts[0].reason == limit_reason(name, name == "abi_1_0" ? 100 : -1));
  BOOST_TEST(counts[0].count == 1u);
}

BOOST_DATA_TEST_CASE(a_short_state_after_a_long_one_is_served_by_the_first_choice, data::make(kVersioned),
                     name) {
  const TempDir dir;
  Runtime rt(with_order(dir, name));
  BOOST_TEST((varlen_with_state(rt, 100) == Served::fresh));
  BOOST_TEST((varlen_with_state(rt, 3) == Served::in_place));
  BOOST_TEST((varlen_with_state(rt, 3) == Served::in_place));
  BOOST_TEST((varlen_with_state(rt, 65) == Served::fresh));
  BOOST_TEST(fallbacks(rt) == 2u);
}

BOOST_DATA_TEST_CASE(strict_dispatch_refuses_only_the_calls_outside_the_limits, data::make(kVersioned),
                     name) {
  const TempDir dir;
  Runtime rt(with_order(dir, name, true));
  try {
    (void)varlen_with_state(rt, 100);
    BOOST_FAIL("a call outside the first choice's limits was not refused under strict dispatch");
  } catch (const Error& e) {
    const std::string what = e.what();
    BOOST_TEST((e.code() == ErrorCode::unsupported));
    BOOST_TEST(what.find(fmt::format("first choice '{}'", name)) != std::string::npos, what);
    BOOST_TEST(what.find(limit_reason(name, 100)) != std::string::npos, what);
    BOOST_TEST(what.find("state_len 100") != std::string::npos, what);
    BOOST_TEST(what.find("'portable' would serve it as a fallback") != std::string::npos, what);
  }
  BOOST_TEST((varlen_with_state(rt, 3) == Served::in_place));
  BOOST_CHECK_THROW(varlen_with_state(rt, 100), Error);
  BOOST_TEST((varlen_with_state(rt, 3) == Served::in_place));
  BOOST_TEST(fallbacks(rt) == 0u);
}

BOOST_AUTO_TEST_CASE(a_speculative_verify_call_after_decode_calls_falls_back_and_back) {
  const TempDir dir;
  Runtime rt(with_order(dir, "abi_1_1"));
  BOOST_TEST((update_with_tokens(rt, 1) == Served::in_place));
  BOOST_TEST((update_with_tokens(rt, 65) == Served::fresh));
  BOOST_TEST((update_with_tokens(rt, 64) == Served::in_place));
  BOOST_TEST(fallbacks(rt, "tokens_per_update outside 1..64") == 1u);
}

BOOST_AUTO_TEST_CASE(explain_names_the_backend_for_the_given_sizes_and_shows_the_limits) {
  const TempDir dir;
  Runtime rt(with_order(dir, "abi_1_1"));
  CallSignature s;
  s.op = DK_OP_CAUSAL_CONV1D_VARLEN;
  s.state_dtype = s.weight_dtype = s.dtype = kF32;
  Decision d = rt.explain(s);
  BOOST_TEST(d.backend.value_or("") == "abi_1_1", d.describe());
  BOOST_REQUIRE(d.limits.size() == 1u);
  BOOST_TEST(d.describe().find("limits: state_len 1..64") != std::string::npos, d.describe());

  s.dims = {{"state_len", 100}};
  d = rt.explain(s);
  BOOST_TEST(d.backend.value_or("") == "portable", d.describe());
  BOOST_REQUIRE(d.fallback_from.has_value());
  BOOST_TEST(d.fallback_from->backend == "abi_1_1");
  BOOST_TEST(d.fallback_from->reason == "state_len 100 outside 1..64");

  s.dims = {{"state_len", 3}};
  BOOST_TEST(rt.explain(s).backend.value_or("") == "abi_1_1");
  s.dims = {{"tokens_per_update", 3}};  // an update dimension, not varlen's
  BOOST_CHECK_THROW(rt.explain(s), Error);
}

BOOST_AUTO_TEST_CASE(every_call_from_eight_threads_goes_where_its_own_sizes_send_it) {
  const TempDir dir;
  Runtime rt(with_order(dir, "abi_1_1"));
  constexpr int kThreads = 8, kCalls = 60;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const bool long_state = (i + t) % 3 == 0;
        const bool update = (i + t) % 2 == 0;
        const Served served = update ? update_with_tokens(rt, long_state ? 65 : 2)
                                     : varlen_with_state(rt, long_state ? 100 : 3);
        if (served != (long_state ? Served::fresh : Served::in_place)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
  uint64_t expected = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kCalls; ++i) expected += (i + t) % 3 == 0;
  BOOST_TEST(fallbacks(rt) == expected);
}

// A core built without CUDA can neither allocate for a CUDA backend nor read its metadata: the
// backend's CUDA device is unavailable with the core's reason, whatever its own probe would say.
BOOST_AUTO_TEST_CASE(a_cuda_device_is_unavailable_with_the_cores_reason_in_a_core_without_cuda) {
  const TempDir dir;
  Runtime rt(with_order(dir, "cuda_only"));
  const PluginInfo* p = rt.plugin("cuda_only");
  BOOST_REQUIRE(p != nullptr);
  BOOST_REQUIRE(p->devices.size() == 1u);
  BOOST_TEST(p->devices[0].type == kDLCUDA);
  BOOST_TEST(!p->devices[0].available);
  const std::string expected = DK_TEST_CORE_HAS_CUDA ? "a test plugin that never runs" : "built without CUDA";
  BOOST_TEST(p->devices[0].reason.find(expected) != std::string::npos, p->devices[0].reason);
}

// Refused because the device cannot be used here (no driver, no GPU, a core without CUDA) is
// ErrorCode::unavailable (Python: UnavailableError, a RuntimeError); refused because no backend
// declares the call is unsupported (NotImplementedError), unavailable device or not.
BOOST_AUTO_TEST_CASE(a_call_only_the_device_stops_is_unavailable_and_one_nobody_declares_unsupported) {
  RuntimeOptions o = base_options();
  o.plugin_path = {real_plugin_dir(), fs::path(DK_TEST_ABI_PLUGIN_DIR)};
  o.force_backend = "cuda_only";  // declares f32 widths 2..4 on CUDA and can never use its device
  Runtime rt(o);
  for (const int64_t width : {4, 5}) {
    VarlenCall call;
    call.weight.emplace(kF32, std::vector<int64_t>{VarlenCall::D, width});
    call.weight->fill(ramp(VarlenCall::D * width, 0.02f));
    call.states.emplace(kF32, std::vector<int64_t>{VarlenCall::lines, VarlenCall::D, 4});  // S >= W-1
    call.states->fill(ramp(VarlenCall::lines * VarlenCall::D * 4, 0.05f));
    for (auto* t : {&call.x, &call.weight, &call.bias, &call.states, &call.qsl, &call.indices, &call.initial})
      (*t)->set_device({kDLCUDA, 0});
    const auto before = call.snapshot();
    try {
      (void)rt.causal_conv1d_varlen(call.args());
      BOOST_FAIL("a call cuda_only cannot serve was served");
    } catch (const Error& e) {
      const std::string what = e.what();
      if (width == 4) {
        BOOST_TEST((e.code() == ErrorCode::unavailable), what);
        BOOST_TEST(what.find("unavailable on cuda") != std::string::npos, what);
      } else {
        BOOST_TEST((e.code() == ErrorCode::unsupported), what);
        BOOST_TEST(what.find("unavailable on cuda") != std::string::npos, what);  // still the first reason
      }
    }
    BOOST_TEST((call.snapshot() == before));
  }
}

BOOST_AUTO_TEST_CASE(a_backend_that_does_not_declare_the_device_is_never_a_fallback) {
  const TempDir dir;
  for (const bool strict : {false, true}) {
    Runtime rt(with_order(dir, "cuda_only", strict));
    BOOST_TEST((varlen_with_state(rt, 3) == Served::fresh));
    BOOST_TEST((update_with_tokens(rt, 1) == Served::fresh));
    BOOST_TEST(rt.fallback_counts().empty());
    CallSignature s;
    s.op = DK_OP_CAUSAL_CONV1D_VARLEN;
    const Decision d = rt.explain(s);
    BOOST_TEST(d.backend.value_or("") == "portable", d.describe());
    BOOST_TEST(!d.fallback_from.has_value(), d.describe());
  }
}
