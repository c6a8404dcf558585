// Selection: config order, per-op overrides, forcing by option and by DELTAKERN_BACKEND,
// a forced backend that cannot serve a call is an error, and explain() gives reasons.
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>

#include <algorithm>

using namespace deltakern;
using namespace deltakern::test;

namespace {

RuntimeOptions with_toml(const TempDir& dir, std::string_view toml) {
  RuntimeOptions o = base_options();
  o.config_file = dir.write("deltakern.toml", toml);
  return o;
}

CallSignature varlen_signature(DLDataType dtype = kF32, int width = 4,
                               Layout layout = Layout::time_contiguous, DLDevice device = {kDLCPU, 0}) {
  CallSignature s;
  s.op = DK_OP_CAUSAL_CONV1D_VARLEN;
  s.device = device;
  s.dtype = dtype;
  s.weight_dtype = dtype;
  s.state_dtype = dtype;
  s.bias_dtype = dtype;
  s.width = width;
  s.layout = layout;
  return s;
}

const Decision::PassedOver* passed_over(const Decision& d, std::string_view backend) {
  const auto it = std::find_if(d.passed_over.begin(), d.passed_over.end(),
                               [&](const auto& p) { return p.backend == backend; });
  return it == d.passed_over.end() ? nullptr : &*it;
}

// Which backend served a varlen call: the in-place standin returns x itself.
bool served_in_place(Runtime& rt) {
  VarlenCall call;
  const Tensor out = rt.causal_conv1d_varlen(call.args());
  return out.aliases(*call.x->dl());
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_first_fitting_backend_in_config_order_serves) {
  const TempDir dir;
  {
    Runtime rt(with_toml(dir, "[dispatch]\norder = [\"standin\", \"portable\"]\n"));
    const Decision d = rt.explain(varlen_signature());
    BOOST_TEST(d.backend.value_or("") == "standin", d.describe());
    BOOST_TEST(!d.why.empty());
    BOOST_TEST(served_in_place(rt));
  }
  {
    Runtime rt(with_toml(dir, "[dispatch]\norder = [\"portable\", \"standin\"]\n"));
    BOOST_TEST(rt.explain(varlen_signature()).backend.value_or("") == "portable");
    BOOST_TEST(!served_in_place(rt));
  }
}

// Decision::contract says before the call whether its result will be x, and it is what the call
// then does; the out-variants' contract is out on every backend.
BOOST_AUTO_TEST_CASE(the_decision_names_the_contract_the_call_then_keeps) {
  const TempDir dir;
  for (const std::string first : {"standin", "portable"}) {
    Runtime rt(with_toml(dir, "[dispatch]\norder = [\"" + first + "\"]\n"));
    const Decision d = rt.explain(varlen_signature());
    BOOST_REQUIRE(d.contract.has_value());
    BOOST_TEST((*d.contract == (served_in_place(rt) ? Contract::in_place : Contract::fresh)), d.describe());
    BOOST_TEST((*d.contract == (first == "standin" ? Contract::in_place : Contract::fresh)), d.describe());
    BOOST_TEST(d.describe().find(std::string("contract: ") + to_string(*d.contract)) != std::string::npos);
    CallSignature out = varlen_signature();
    out.op = DK_OP_CAUSAL_CONV1D_VARLEN_OUT;
    BOOST_TEST((rt.explain(out).contract == Contract::out));
  }
  CallSignature unserved = varlen_signature(kF32, 9);  // no backend declares width 9
  BOOST_TEST(!Runtime(with_toml(dir, "")).explain(unserved).contract.has_value());
}

BOOST_AUTO_TEST_CASE(a_per_op_override_wins_over_the_order) {
  const TempDir dir;
  const Runtime rt(with_toml(dir,
                             "[dispatch]\norder = [\"portable\"]\n"
                             "[dispatch.ops.causal_conv1d_update]\nbackend = \"standin\"\n"));
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_UPDATE) == std::vector<std::string>{"standin"},
             boost::test_tools::per_element());
  CallSignature update = varlen_signature();
  update.op = DK_OP_CAUSAL_CONV1D_UPDATE;
  update.max_seq_len_given = false;
  BOOST_TEST(rt.explain(update).backend.value_or("") == "standin");
  BOOST_TEST(rt.explain(varlen_signature()).backend.value_or("") == "portable");
}

BOOST_AUTO_TEST_CASE(backends_that_do_not_fit_are_passed_over_with_a_reason) {
  const TempDir dir;
  const Runtime rt(with_toml(dir, "[dispatch]\norder = [\"native\", \"liar_mutates_x\", \"standin\"]\n"));
  // liar_mutates_x declares f32, time-contiguous, widths 2..4, CPU only.
  BOOST_TEST(rt.explain(varlen_signature()).backend.value_or("") == "liar_mutates_x");
  for (const auto& [what, signature] : std::vector<std::pair<std::string, CallSignature>>{
           {"dtype", varlen_signature(kBF16)}, {"layout", varlen_signature(kF32, 4, Layout::channel_last)}}) {
    BOOST_TEST_CONTEXT(what) {
      const Decision d = rt.explain(signature);
      BOOST_TEST(d.backend.value_or("") == "standin", d.describe());
      const auto* liar = passed_over(d, "liar_mutates_x");
      BOOST_TEST_REQUIRE(liar != nullptr, d.describe());
      BOOST_TEST(!liar->reason.empty());
      const auto* native = passed_over(d, "native");
      BOOST_TEST_REQUIRE(native != nullptr, "a backend that is not installed is passed over too");
      BOOST_TEST(!native->reason.empty());
      BOOST_TEST(contains(d.describe(), "liar_mutates_x"));
    }
  }
  // Nobody serves width 5 (all declare 2..4), nor a device that exists on no test machine
  // (cuda:63: on a GPU machine native serves cuda:0, and must).
  for (const auto& signature :
       {varlen_signature(kF32, 5), varlen_signature(kF32, 4, Layout::time_contiguous, {kDLCUDA, 63})}) {
    const Decision d = rt.explain(signature);
    BOOST_TEST(!d.backend.has_value(), d.describe());
    BOOST_TEST(passed_over(d, "standin") != nullptr);
    BOOST_TEST(passed_over(d, "liar_mutates_x") != nullptr);
  }
}

BOOST_AUTO_TEST_CASE(force_backend_option_overrides_the_order) {
  const TempDir dir;
  RuntimeOptions o = with_toml(dir, "[dispatch]\norder = [\"portable\"]\n");
  o.force_backend = "standin";
  Runtime rt(o);
  BOOST_TEST(rt.forced_backend().value_or("") == "standin");
  const Decision d = rt.explain(varlen_signature());
  BOOST_TEST(d.backend.value_or("") == "standin");
  BOOST_TEST(icontains(d.why, "force"), d.why);
  BOOST_TEST(served_in_place(rt));
}

BOOST_AUTO_TEST_CASE(deltakern_backend_overrides_the_option) {
  const ScopedEnv backend("DELTAKERN_BACKEND", "standin");
  const ScopedEnv config("DELTAKERN_CONFIG", std::nullopt);
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
  RuntimeOptions o = base_options();
  o.read_environment = true;
  o.force_backend = "portable";
  Runtime rt(o);
  BOOST_TEST(rt.forced_backend().value_or("") == "standin");
  BOOST_TEST(served_in_place(rt));

  RuntimeOptions ignoring = o;
  ignoring.read_environment = false;
  const Runtime plain(ignoring);
  BOOST_TEST(plain.forced_backend().value_or("") == "portable");
}

BOOST_AUTO_TEST_CASE(a_forced_backend_that_cannot_serve_is_an_error_not_a_fallback) {
  RuntimeOptions o = base_options();
  o.force_backend = "liar_mutates_x";  // f32 only
  Runtime rt(o);
  const Decision d = rt.explain(varlen_signature(kBF16));
  BOOST_TEST(!d.backend.has_value(), d.describe());

  VarlenCall call(kBF16);
  const auto before = call.snapshot();
  try {
    const Tensor t = rt.causal_conv1d_varlen(call.args());
    BOOST_FAIL("the forced backend's call was served");
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::unsupported), e.what());
    BOOST_TEST(contains(e.what(), "liar_mutates_x"), e.what());
  }
  BOOST_TEST((call.snapshot() == before));
}

BOOST_AUTO_TEST_CASE(forcing_a_backend_that_is_not_loaded_is_an_error) {
  RuntimeOptions o = base_options();
  o.force_backend = "nonesuch";
  try {
    Runtime rt(o);
    VarlenCall call;
    const Tensor t = rt.causal_conv1d_varlen(call.args());
    BOOST_FAIL("a call was served with a forced backend that does not exist");
  } catch (const Error& e) {
    BOOST_TEST(contains(e.what(), "nonesuch"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_forced_backend_that_was_rejected_is_reported_with_its_rejection) {
  const auto refusal = [](Runtime& rt) {
    VarlenCall call;
    try {
      const Tensor t = rt.causal_conv1d_varlen(call.args());
    } catch (const Error& e) {
      BOOST_TEST((e.code() == ErrorCode::unsupported), e.what());
      return std::string(e.what());
    }
    BOOST_FAIL("a call was served with a forced backend that was rejected");
    return std::string();
  };
  {
    RuntimeOptions o = base_options();
    o.force_backend = "init_fails";
    Runtime rt(o);
    const std::string expected =
        "forced backend 'init_fails' (RuntimeOptions::force_backend) was rejected at load: init failed: "
        "init_fails "
        "refuses to start (test plugin) (" +
        fs::weakly_canonical(test_plugin_file("init_fails")).string() +
        ")";  // the path as discovery resolved it
    BOOST_TEST(refusal(rt) == "causal_conv1d_varlen: " + expected);
    const Decision d = rt.explain(varlen_signature());
    BOOST_TEST(d.why == expected);
    BOOST_TEST(contains(d.describe(), expected), d.describe());
  }
  {
    // Named by DELTAKERN_BACKEND, the source says so.
    const ScopedEnv backend("DELTAKERN_BACKEND", "init_fails");
    const ScopedEnv config("DELTAKERN_CONFIG", std::nullopt);
    const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
    RuntimeOptions o = base_options();
    o.read_environment = true;
    Runtime rt(o);
    BOOST_TEST(contains(refusal(rt),
                        "forced backend 'init_fails' (DELTAKERN_BACKEND) was rejected at load: init failed"));
  }
  {
    // A library that died before declaring its name is known by its file name.
    RuntimeOptions o = base_options();
    o.plugin_files = {hostile_plugin("", "crash_in_static_init")};
    o.force_backend = "crash_in_static_init";
    Runtime rt(o);
    const std::string got = refusal(rt);
    BOOST_TEST(
        contains(
            got,
            "forced backend 'crash_in_static_init' (RuntimeOptions::force_backend) was rejected at load: "
            "probe child killed by signal 11 (SIGSEGV) while loading (" +
                hostile_plugin("", "crash_in_static_init").string()),
        got);
    BOOST_TEST(!contains(got, "not installed"), got);
  }
}

BOOST_AUTO_TEST_CASE(decisions_are_stable) {
  const TempDir dir;
  Runtime rt(with_toml(dir, "[dispatch]\norder = [\"standin\", \"portable\"]\n"));
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(served_in_place(rt));
    BOOST_TEST(rt.explain(varlen_signature()).backend.value_or("") == "standin");
  }
}
