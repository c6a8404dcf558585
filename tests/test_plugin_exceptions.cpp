// A C++ exception thrown across the plugin ABI is a defect, but it happens. Where the core
// calls plugin code it catches it and keeps what it said: run, supports, the device probe,
// check_errors and shutdown (throws_std_exception), and a result's deleter, called from
// Tensor's noexcept destructor, which is contained and logged once (the throwing_deleter defect
// plugin, which the conformance suite must fail as well).
#include <boost/test/unit_test.hpp>

#include "captured_log.hpp"
#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>

#include <algorithm>
#include <functional>

using namespace deltakern;
using namespace deltakern::test;

BOOST_TEST_GLOBAL_FIXTURE(CapturedLog);

namespace {

RuntimeOptions forcing(const TempDir& dir, std::string_view name, fs::path file = {}) {
  RuntimeOptions o;
  o.read_environment = false;
  o.search_default_dirs = false;
  o.plugin_files = {file.empty() ? hostile_plugin("exceptions", name) : file};
  o.force_backend = std::string(name);
  o.config_file =
      dir.write("deltakern.toml", "[plugins]\nprobe_cache = \"" + (dir.path() / "verdicts.json").string() +
                                      "\"\n[logging]\nlevel = \"error\"\n");
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_exception_out_of_run_keeps_its_message) {
  const TempDir dir;
  Runtime rt(forcing(dir, "throws_std_exception"));
  BOOST_TEST_REQUIRE(rt.plugin("throws_std_exception") != nullptr);
  VarlenCall call;
  BOOST_TEST(error_of([&] { const Tensor t = rt.causal_conv1d_varlen(call.args()); }) ==
             "throws_std_exception: causal_conv1d_varlen: run threw std::exception: boom at token 17");
}

BOOST_AUTO_TEST_CASE(an_exception_out_of_supports_keeps_its_message) {
  const TempDir dir;
  Runtime rt(forcing(dir, "throws_std_exception"));
  CallSignature s;
  s.op = DK_OP_CAUSAL_CONV1D_VARLEN;
  s.width = 3;
  const Decision d = rt.explain(s);
  BOOST_TEST(!d.backend.has_value());
  BOOST_TEST_REQUIRE(d.passed_over.size() == 1u);
  BOOST_TEST(d.passed_over[0].reason == "supports(): threw std::exception: supports boom at width 3");
}

BOOST_AUTO_TEST_CASE(an_exception_out_of_the_device_probe_keeps_its_message) {
  const TempDir dir;
  const Runtime rt(forcing(dir, "throws_std_exception"));
  const PluginInfo* p = rt.plugin("throws_std_exception");
  BOOST_TEST_REQUIRE(p != nullptr);
  const auto cuda =
      std::find_if(p->devices.begin(), p->devices.end(), [](const auto& d) { return d.type == kDLCUDA; });
  BOOST_TEST_REQUIRE((cuda != p->devices.end()));
  BOOST_TEST(!cuda->available);
  if (DK_TEST_CORE_HAS_CUDA)
    BOOST_TEST(cuda->reason == "probe threw std::exception: no CUDA here, and said so by throwing");
  else  // a core without CUDA answers for the device itself and asks no probe (plugin_library.cpp)
    BOOST_TEST(cuda->reason.find("this deltakern core was built without CUDA") == 0u);
}

BOOST_AUTO_TEST_CASE(an_exception_out_of_check_errors_keeps_its_message) {
  const TempDir dir;
  Runtime rt(forcing(dir, "throws_std_exception"));
  BOOST_TEST(contains(
      error_of([&] {
        rt.check_errors({kDLCPU, 0}, nullptr);
      }),
      "throws_std_exception: check_errors failed: internal error (threw std::exception: check boom)"));
}

BOOST_AUTO_TEST_CASE(an_exception_out_of_shutdown_is_logged_with_its_message) {
  const TempDir dir;
  const size_t before = CapturedLog::lines_containing("shutdown threw std::exception: shutdown boom");
  { const Runtime rt(forcing(dir, "throws_std_exception")); }
  BOOST_TEST(CapturedLog::lines_containing(
                 "error: plugin 'throws_std_exception': shutdown threw std::exception: shutdown boom") -
                 before ==
             1u);
}

BOOST_AUTO_TEST_CASE(a_result_deleter_that_throws_is_contained_and_logged_once) {
  const TempDir dir;
  Runtime rt(forcing(dir, "throwing_deleter", defect_plugin("throwing_deleter")));
  BOOST_TEST_REQUIRE(rt.plugin("throwing_deleter") != nullptr);
  const CountingAllocator counting;
  rt.set_allocator(counting.allocator());
  for (int i = 0; i < 3; ++i) {
    VarlenCall call;
    const Tensor out = rt.causal_conv1d_varlen(call.args());
  }  // each deleter throws here, inside Tensor's noexcept destructor
  BOOST_TEST(counting.allocated() == 3);
  BOOST_TEST(counting.released() == 3, "the deleter released the memory before it threw");
  BOOST_TEST(CapturedLog::lines_containing("error: a backend's result deleter threw std::exception: "
                                           "throwing_deleter: the deleter throws after "
                                           "releasing the result") == 1u);
}
