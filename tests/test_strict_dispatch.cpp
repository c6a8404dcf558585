// Strict dispatch and fallback accounting. A call the op's configured first choice cannot
// serve is, with dispatch.strict or DELTAKERN_STRICT=1, an error naming the op, the first
// choice and why; without it, a later backend serves, each such call is counted per
// (op, backend, first choice, reason), and each distinct reason is warned about once.
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include "captured_log.hpp"

#include <deltakern/op_schemas.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

using namespace deltakern;
using namespace deltakern::test;

namespace {

BOOST_TEST_GLOBAL_FIXTURE(CapturedLog);

std::vector<std::string> warnings() { return CapturedLog::warnings(); }
size_t warnings_naming(std::string_view text) { return CapturedLog::warnings_containing(text); }

RuntimeOptions with_toml(const TempDir& dir, std::string_view toml) {
  RuntimeOptions o = base_options();
  o.config_file = dir.write("deltakern.toml", toml);
  return o;
}

using V = VarlenCall;

// standin (in place) declares widths 2..4, portable 2..8: a width-5 call is one the first
// choice standin cannot serve and portable can.
VarlenCall varlen_of_width(int64_t width) {
  VarlenCall call;
  call.weight.emplace(kF32, std::vector<int64_t>{V::D, width});
  call.weight->fill(ramp(V::D * width, 0.02f));
  call.states.emplace(kF32, std::vector<int64_t>{V::lines, V::D, width - 1});
  call.states->fill(ramp(V::lines * V::D * (width - 1), 0.05f));
  return call;
}

UpdateCall update_of_width(int64_t width) {
  UpdateCall call;
  call.weight.emplace(kF32, std::vector<int64_t>{UpdateCall::D, width});
  call.weight->fill(ramp(UpdateCall::D * width, 0.02f));
  call.states.emplace(kF32, std::vector<int64_t>{UpdateCall::lines, UpdateCall::D, width - 1});
  return call;
}

constexpr std::string_view kStandinFirst =
    "[dispatch]\norder = [\"standin\", \"portable\"]\n[logging]\nlevel = \"warn\"\n";
constexpr std::string_view kStandinFirstStrict =
    "[dispatch]\norder = [\"standin\", \"portable\"]\nstrict = true\n[logging]\nlevel = \"warn\"\n";

const std::string kStrictWidth5Message =
    "causal_conv1d_varlen: strict dispatch (dispatch.strict): first choice 'standin' in dispatch.order "
    "cannot serve this call (cpu:0, x float32, width 5, time_contiguous): width 5 outside 2..4; 'portable' "
    "would serve it as a fallback";

// The call is refused with exactly `message`, and every tensor is as it was.
template <class Call, class Run>
void require_refused(Call& call, const std::string& message, Run run) {
  const auto before = call.snapshot();
  try {
    const Tensor t = run(call);
    BOOST_FAIL("the call was served");
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::unsupported));
    BOOST_TEST(std::string(e.what()) == message);
  }
  BOOST_TEST((call.snapshot() == before), "a refused call changed a tensor");
}

const auto run_varlen = [](Runtime& rt) {
  return [&rt](VarlenCall& c) { return rt.causal_conv1d_varlen(c.args()); };
};
const auto run_update = [](Runtime& rt) {
  return [&rt](UpdateCall& c) { return rt.causal_conv1d_update(c.args()); };
};

}  // namespace

BOOST_AUTO_TEST_CASE(strict_dispatch_refuses_a_fallback_with_the_op_first_choice_and_reason) {
  const TempDir dir;
  Runtime rt(with_toml(dir, kStandinFirstStrict));
  BOOST_TEST(rt.strict());
  VarlenCall call = varlen_of_width(5);
  require_refused(call, kStrictWidth5Message, run_varlen(rt));
  // Refused again from the cached decision, with the same message; nothing counted.
  require_refused(call, kStrictWidth5Message, run_varlen(rt));
  BOOST_TEST(rt.fallback_counts().empty());

  // What the first choice can serve is served as always.
  VarlenCall fits;
  const Tensor out = rt.causal_conv1d_varlen(fits.args());
  BOOST_TEST(out.aliases(*fits.x->dl()), "standin (in place) should have served");
}

BOOST_AUTO_TEST_CASE(strict_dispatch_uses_the_per_op_first_choice) {
  const TempDir dir;
  Runtime rt(with_toml(dir,
                       "[dispatch]\norder = [\"portable\"]\nstrict = true\n"
                       "[dispatch.ops.causal_conv1d_update]\norder = [\"standin\", \"portable\"]\n"));
  UpdateCall update = update_of_width(5);
  require_refused(
      update,
      "causal_conv1d_update: strict dispatch (dispatch.strict): first choice 'standin' in "
      "dispatch.ops.causal_conv1d_update.order cannot serve this call (cpu:0, x float32, width 5, "
      "time_contiguous): width 5 outside 2..4; 'portable' would serve it as a fallback",
      run_update(rt));
  // varlen's first choice is portable, which serves width 5 itself: no fallback.
  VarlenCall varlen = varlen_of_width(5);
  BOOST_CHECK_NO_THROW((void)rt.causal_conv1d_varlen(varlen.args()));
  BOOST_TEST(rt.fallback_counts().empty());
}

BOOST_AUTO_TEST_CASE(a_first_choice_that_is_not_installed_is_a_fallback_too) {
  const TempDir dir;
  Runtime rt(with_toml(dir, "[dispatch]\norder = [\"native\", \"portable\"]\nstrict = true\n"));
  VarlenCall call;
  if (rt.plugin("native") != nullptr) {
    // Installed, native does not declare the CPU: never a candidate for this call, so portable
    // serves it as the first choice, strict or not.
    BOOST_CHECK_NO_THROW((void)rt.causal_conv1d_varlen(call.args()));
    BOOST_TEST(rt.fallback_counts().empty());
    return;
  }
  try {
    const Tensor t = rt.causal_conv1d_varlen(call.args());
    BOOST_FAIL("the call was served");
  } catch (const Error& e) {
    BOOST_TEST(contains(e.what(),
                        "causal_conv1d_varlen: strict dispatch (dispatch.strict): first choice "
                        "'native' in dispatch.order cannot serve this call (cpu:0, x float32, "
                        "width 4, time_contiguous): not installed"),
               e.what());
    BOOST_TEST(contains(e.what(), "; 'portable' would serve it as a fallback"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(deltakern_strict_wins_over_the_config_both_ways) {
  const TempDir dir;
  const ScopedEnv config("DELTAKERN_CONFIG", std::nullopt);
  const ScopedEnv backend("DELTAKERN_BACKEND", std::nullopt);
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
  {
    const ScopedEnv strict("DELTAKERN_STRICT", "1");
    RuntimeOptions o = with_toml(dir, kStandinFirst);
    o.read_environment = true;
    Runtime rt(o);
    BOOST_TEST(rt.strict());
    VarlenCall call = varlen_of_width(5);
    std::string message = kStrictWidth5Message;
    message.replace(message.find("dispatch.strict"), std::string_view("dispatch.strict").size(),
                    "DELTAKERN_STRICT=1");
    require_refused(call, message, run_varlen(rt));

    o.read_environment = false;  // the variable is read only when asked to
    BOOST_TEST(!Runtime(o).strict());
  }
  {
    const ScopedEnv strict("DELTAKERN_STRICT", "0");
    RuntimeOptions o = with_toml(dir, kStandinFirstStrict);
    o.read_environment = true;
    Runtime rt(o);
    BOOST_TEST(!rt.strict());
    VarlenCall call = varlen_of_width(5);
    BOOST_CHECK_NO_THROW((void)rt.causal_conv1d_varlen(call.args()));
    BOOST_TEST(rt.fallback_counts().size() == 1u);
  }
  {
    const ScopedEnv strict("DELTAKERN_STRICT", "yes");
    RuntimeOptions o = with_toml(dir, kStandinFirst);
    o.read_environment = true;
    try {
      const Runtime rt(o);
      BOOST_FAIL("DELTAKERN_STRICT=yes was accepted");
    } catch (const Error& e) {
      BOOST_TEST((e.code() == ErrorCode::config));
      BOOST_TEST(std::string(e.what()) == "DELTAKERN_STRICT: expected 0 or 1, got 'yes'");
    }
  }
}

BOOST_AUTO_TEST_CASE(each_fallback_call_is_counted_and_each_reason_warned_once) {
  const TempDir dir;
  Runtime rt(with_toml(dir, kStandinFirst));
  BOOST_TEST(!rt.strict());
  const size_t warned_before = warnings_naming("outside 2..4");
  const size_t width5_before = warnings_naming("width 5 outside 2..4");

  for (int i = 0; i < 3; ++i) {
    VarlenCall call = varlen_of_width(5);
    const Tensor out = rt.causal_conv1d_varlen(call.args());
    BOOST_TEST(!out.aliases(*call.x->dl()), "portable (fresh output) should have served");
  }
  VarlenCall fits;  // served by the first choice: not counted
  (void)rt.causal_conv1d_varlen(fits.args());

  auto counts = rt.fallback_counts();
  BOOST_TEST_REQUIRE(counts.size() == 1u);
  BOOST_TEST(counts[0].op == "causal_conv1d_varlen");
  BOOST_TEST(counts[0].backend == "portable");
  BOOST_TEST(counts[0].first_choice == "standin");
  BOOST_TEST(counts[0].reason == "width 5 outside 2..4");
  BOOST_TEST(counts[0].count == 3u);
  BOOST_TEST(warnings_naming("width 5 outside 2..4") == width5_before + 1);
  const auto all = warnings();
  BOOST_TEST_REQUIRE(!all.empty());
  BOOST_TEST(all.back() ==
                 "causal_conv1d_varlen: 'portable' serves calls (cpu:0, x float32, width 5, "
                 "time_contiguous) in place of first choice 'standin' in dispatch.order: width 5 outside "
                 "2..4; each such call is counted (Runtime::fallback_counts()), dispatch.strict = true makes "
                 "it an error",
             all.back());

  // Another reason is another entry, warned about once; another op is another entry.
  for (int i = 0; i < 2; ++i) {
    VarlenCall call = varlen_of_width(6);
    (void)rt.causal_conv1d_varlen(call.args());
    UpdateCall update = update_of_width(5);
    (void)rt.causal_conv1d_update(update.args());
  }
  counts = rt.fallback_counts();
  BOOST_TEST_REQUIRE(counts.size() == 3u);
  std::vector<std::pair<std::string, uint64_t>> seen;
  for (const auto& c : counts) seen.emplace_back(c.op + ": " + c.reason, c.count);
  std::sort(seen.begin(), seen.end());
  const std::vector<std::pair<std::string, uint64_t>> expected{
      {"causal_conv1d_update: width 5 outside 2..4", 2},
      {"causal_conv1d_varlen: width 5 outside 2..4", 3},
      {"causal_conv1d_varlen: width 6 outside 2..4", 2}};
  BOOST_TEST((seen == expected));
  BOOST_TEST(warnings_naming("width 6 outside 2..4") == 1u);
  BOOST_TEST(warnings_naming("causal_conv1d_update: 'portable' serves") == 1u);
  BOOST_TEST(warnings_naming("outside 2..4") == warned_before + 3);

  // A reset zeroes the counts; counting goes on, and no reason is warned about again.
  rt.reset_fallback_counts();
  BOOST_TEST(rt.fallback_counts().empty());
  VarlenCall again = varlen_of_width(5);
  (void)rt.causal_conv1d_varlen(again.args());
  counts = rt.fallback_counts();
  BOOST_TEST_REQUIRE(counts.size() == 1u);
  BOOST_TEST(counts[0].count == 1u);
  BOOST_TEST(warnings_naming("outside 2..4") == warned_before + 3);
}

BOOST_AUTO_TEST_CASE(counts_are_exact_under_concurrent_calls) {
  const TempDir dir;
  Runtime rt(with_toml(dir, kStandinFirst));
  constexpr int kThreads = 8, kCalls = 200;
  std::vector<std::jthread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&rt] {
      VarlenCall call = varlen_of_width(5);
      for (int i = 0; i < kCalls; ++i) (void)rt.causal_conv1d_varlen(call.args());
    });
  threads.clear();
  const auto counts = rt.fallback_counts();
  BOOST_TEST_REQUIRE(counts.size() == 1u);
  BOOST_TEST(counts[0].count == uint64_t{kThreads * kCalls});
}

BOOST_AUTO_TEST_CASE(a_forced_backend_is_never_a_fallback) {
  const TempDir dir;
  RuntimeOptions o = with_toml(dir, kStandinFirstStrict);
  o.force_backend = "portable";
  Runtime rt(o);
  VarlenCall call = varlen_of_width(5);
  BOOST_CHECK_NO_THROW((void)rt.causal_conv1d_varlen(call.args()));
  BOOST_TEST(rt.fallback_counts().empty());
  BOOST_TEST(!rt.explain(CallSignature{.op = DK_OP_CAUSAL_CONV1D_VARLEN, .width = 5}).fallback_from);
}

BOOST_AUTO_TEST_CASE(explain_shows_the_fallback_and_the_strict_refusal) {
  const TempDir dir;
  const CallSignature width5{.op = DK_OP_CAUSAL_CONV1D_VARLEN, .width = 5};
  {
    const Runtime rt(with_toml(dir, kStandinFirst));
    const Decision d = rt.explain(width5);
    BOOST_TEST(d.backend.value_or("") == "portable");
    BOOST_TEST_REQUIRE(d.fallback_from.has_value());
    BOOST_TEST(d.fallback_from->backend == "standin");
    BOOST_TEST(d.fallback_from->reason == "width 5 outside 2..4");
    BOOST_TEST(!d.strict);
    BOOST_TEST(contains(d.describe(),
                        "fallback: from first choice 'standin' (width 5 outside 2..4); counted per call, an "
                        "error under strict dispatch"),
               d.describe());
    BOOST_TEST(!rt.explain(CallSignature{.op = DK_OP_CAUSAL_CONV1D_VARLEN, .width = 4}).fallback_from);
  }
  {
    const Runtime rt(with_toml(dir, kStandinFirstStrict));
    const Decision d = rt.explain(width5);
    BOOST_TEST(!d.backend.has_value(), d.describe());
    BOOST_TEST(d.strict);
    BOOST_TEST_REQUIRE(d.fallback_from.has_value());
    BOOST_TEST(d.fallback_from->backend == "standin");
    BOOST_TEST(
        d.why ==
        "strict dispatch (dispatch.strict): only the first choice in dispatch.order [standin, portable] "
        "may serve the call");
    const auto portable = std::find_if(d.passed_over.begin(), d.passed_over.end(),
                                       [](const auto& p) { return p.backend == "portable"; });
    BOOST_TEST_REQUIRE((portable != d.passed_over.end()));
    BOOST_TEST(portable->reason == "would serve as a fallback, refused by strict dispatch (dispatch.strict)");
    BOOST_TEST((portable - d.passed_over.begin()) == 1, "passed_over stays in preference order");
  }
}

BOOST_AUTO_TEST_CASE(the_global_runtime_counts_through_the_free_functions) {
  // The global runtime reads the environment, set here before its first use (ctest clears
  // DELTAKERN_*): the standin first, which serves widths 2..4, so a width-5 call falls back to
  // portable whatever else is installed.
  const TempDir dir;
  const auto config = dir.write("deltakern.toml", "[dispatch]\norder = [\"standin\", \"portable\"]\n");
  ::setenv("DELTAKERN_CONFIG", config.c_str(), 1);
  ::setenv("DELTAKERN_PLUGIN_PATH", (real_plugin_dir().string() + ":" + test_plugin_dir().string()).c_str(),
           1);
  reset_fallback_counts();
  VarlenCall call = varlen_of_width(5);
  (void)causal_conv1d_varlen(call.args());
  (void)causal_conv1d_varlen(call.args());
  const auto counts = fallback_counts();
  BOOST_TEST_REQUIRE(counts.size() == 1u);
  BOOST_TEST(counts[0].first_choice == "standin");
  BOOST_TEST(counts[0].backend == "portable");
  BOOST_TEST(counts[0].reason == "width 5 outside 2..4");
  BOOST_TEST(counts[0].count == 2u);
  reset_fallback_counts();
  BOOST_TEST(fallback_counts().empty());
}
