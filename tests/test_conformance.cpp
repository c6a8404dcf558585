// The conformance suite under Boost.Test: registered at run time, one test suite per
// discovered target (backend x device), one test case per conformance case, every
// backend forced in turn through the dispatcher. The lying test plugins are left out of
// that and get tests of their own that require the suite to catch them.
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/conformance.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

using namespace deltakern;
using namespace deltakern::test;
namespace utf = boost::unit_test;

namespace {

// Runtimes outlive registration: the cases run after init_unit_test returns.
std::vector<std::unique_ptr<Runtime>>& runtimes() {
  static std::vector<std::unique_ptr<Runtime>> r;
  return r;
}

// Boost.Test reserves '/' (and a few others) for test paths.
std::string test_name(std::string s) {
  for (char& c : s)
    if (c == '/' || c == ':' || c == ',' || c == '*' || c == '!' || c == '@' || c == '+' || c == ' ') c = '.';
  return s;
}

bool is_liar(const std::string& backend) { return backend.rfind("liar_", 0) == 0; }

// Runs the whole suite against `backend` and requires every call case of `ops` to fail,
// each naming its op, its case and `expected` in its detail. The declaration cases must
// pass: each liar lies about one thing only.
void require_caught(const std::string& backend, std::vector<std::string_view> expected,
                    std::vector<std::string> ops = {DK_OP_CAUSAL_CONV1D_VARLEN}) {
  const Runtime discovery(base_options());
  std::vector<conformance::Target> targets;
  for (auto& t : conformance::targets(discovery))
    if (t.backend == backend) targets.push_back(t);
  BOOST_TEST_REQUIRE(!targets.empty(), backend << " has no target: is the test plugin built?");
  const auto summary = conformance::run(base_options(), targets);
  BOOST_TEST(summary.failed > 0);
  std::map<std::string, int> call_cases;
  for (const auto& r : summary.results) {
    BOOST_TEST_CONTEXT(r.op << " " << r.name) {
      if (r.op == "contract" && contains(r.name, "/declaration")) BOOST_TEST(r.passed, r.detail);
      // A batch of empty sequences has no x to change, no element to leave or overrun.
      if (std::find(ops.begin(), ops.end(), r.op) == ops.end() || r.name.rfind("edge/all_empty", 0) == 0)
        continue;
      ++call_cases[r.op];
      BOOST_TEST(!r.passed, "the suite let " << backend << " pass");
      BOOST_TEST(contains(r.detail, "[" + r.op + " " + r.name + "] "), "detail: " << r.detail);
      for (const auto text : expected) BOOST_TEST(contains(r.detail, text), "detail: " << r.detail);
    }
  }
  for (const auto& op : ops) BOOST_TEST(call_cases[op] > 0, op);
  const auto first_failure =
      std::find_if(summary.results.begin(), summary.results.end(), [](const auto& r) { return !r.passed; });
  if (first_failure != summary.results.end()) BOOST_TEST_MESSAGE("e.g. " << first_failure->detail);
}

const std::vector<std::string> both_ops{DK_OP_CAUSAL_CONV1D_VARLEN, DK_OP_CAUSAL_CONV1D_UPDATE};

void liar_mutates_x_is_caught() { require_caught("liar_mutates_x", {"x changed"}); }
void liar_undeclared_sync_is_caught() { require_caught("liar_undeclared_sync", {"unexpected sync"}); }
// One f32 element past the end of the fresh output: the first four bytes of its guard.
void liar_writes_outside_is_caught() {
  require_caught("liar_writes_outside", {"wrote outside the output: byte offset 0 after the end"}, both_ops);
}
// Passes the NaN-poisoned first call; the second, finitely poisoned, shows the holes: the
// first differing element, its value and the poison it still holds.
void liar_leaves_unwritten_is_caught() {
  require_caught("liar_leaves_unwritten",
                 {"output of the second call", "differs at [", "expected ", "got 1.5",
                  "(0x5A5A5A5A: the poison, finite bytes 0x5A, never written)"},
                 both_ops);
}

void every_expected_target_is_discovered() {
  const Runtime discovery(base_options());
  const auto targets = conformance::targets(discovery);
  const auto has = [&](std::string_view label) {
    return std::any_of(targets.begin(), targets.end(), [&](const auto& t) { return t.label() == label; });
  };
  BOOST_TEST(has("standin/cpu"));
  BOOST_TEST(has("portable/cpu"), "the real portable plugin is not among the targets");
  for (const auto& t : targets) BOOST_TEST(discovery.plugin(t.backend) != nullptr, t.label());
}

void add_target(utf::test_suite& master, const conformance::Target& target) {
  auto* suite = BOOST_TEST_SUITE(test_name(target.label()));
  try {
    runtimes().push_back(conformance::make_runtime(base_options(), target));
    Runtime* rt = runtimes().back().get();
    for (const auto& c : conformance::cases(*rt, target)) {
      suite->add(utf::make_test_case(
          [rt, target, c] {
            const auto r = conformance::run_case(*rt, target, c);
            BOOST_TEST(r.passed, r.detail);
          },
          test_name(c.op + "/" + c.name), __FILE__, __LINE__));
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    suite->add(utf::make_test_case([what] { BOOST_FAIL("could not set up the target: " << what); }, "setup",
                                   __FILE__, __LINE__));
  }
  master.add(suite);
}

}  // namespace

bool init_unit_test() {
  auto& master = utf::framework::master_test_suite();
  master.p_name.value = "conformance";
  master.add(BOOST_TEST_CASE(every_expected_target_is_discovered));
  auto* liars = BOOST_TEST_SUITE("liars");
  liars->add(BOOST_TEST_CASE(liar_mutates_x_is_caught));
  liars->add(BOOST_TEST_CASE(liar_undeclared_sync_is_caught));
  liars->add(BOOST_TEST_CASE(liar_writes_outside_is_caught));
  liars->add(BOOST_TEST_CASE(liar_leaves_unwritten_is_caught));
  master.add(liars);
  try {
    const Runtime discovery(base_options());
    for (const auto& target : conformance::targets(discovery))
      if (!is_liar(target.backend)) add_target(master, target);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    master.add(utf::make_test_case([what] { BOOST_FAIL("discovery failed: " << what); }, "discovery",
                                   __FILE__, __LINE__));
  }
  return true;
}

int main(int argc, char* argv[]) { return utf::unit_test_main(&init_unit_test, argc, argv); }
