// One plugin library, many Runtimes: a plugin is loaded and initialised once per process and
// shared by every Runtime that discovers it, shut down and unloaded with the last of them, and
// started afresh by a Runtime created after that. Each Runtime's allocator still serves the
// calls made through it. The plugin used, single_instance, refuses a second init while its
// first instance is alive, as a plugin holding a process-wide resource must.
#include <boost/test/unit_test.hpp>

#include "captured_log.hpp"
#include "host_tensors.hpp"
#include "test_support.hpp"

#include <memory>

using namespace deltakern;
using namespace deltakern::test;

BOOST_TEST_GLOBAL_FIXTURE(CapturedLog);

namespace {

fs::path single_instance() { return hostile_plugin("shared", "single_instance"); }

// Only `files`, probed in a child with a cache of the test's own, the plugin's warnings logged.
RuntimeOptions options(const TempDir& dir, std::vector<fs::path> files, std::string_view force) {
  RuntimeOptions o;
  o.read_environment = false;
  o.search_default_dirs = false;
  o.plugin_files = std::move(files);
  o.force_backend = std::string(force);
  o.config_file =
      dir.write("deltakern.toml", "[plugins]\nprobe_cache = \"" + (dir.path() / "verdicts.json").string() +
                                      "\"\n[logging]\nlevel = \"warn\"\n");
  return o;
}

size_t inits() { return CapturedLog::lines_containing("single_instance: init"); }
size_t shutdowns() { return CapturedLog::lines_containing("single_instance: shutdown"); }

const PluginInfo& loaded(const Runtime& rt, std::string_view name) {
  const PluginInfo* p = rt.plugin(name);
  if (p == nullptr) {
    for (const auto& info : rt.plugins()) BOOST_TEST_MESSAGE(info.path << ": " << info.reason);
    BOOST_FAIL(name << " is not loaded");
  }
  return *p;
}

// A call that gets a fresh output from the backend (single_instance keeps that contract).
Tensor call(Runtime& rt) {
  VarlenCall c;
  Tensor out = rt.causal_conv1d_varlen(c.args());
  BOOST_TEST(!out.aliases(*c.x->dl()));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_runtimes_alive_at_once_share_one_initialised_plugin) {
  const TempDir dir;
  const size_t inits_before = inits(), shutdowns_before = shutdowns();
  {
    auto first = std::make_unique<Runtime>(options(dir, {single_instance()}, "single_instance"));
    auto second = std::make_unique<Runtime>(options(dir, {single_instance()}, "single_instance"));
    BOOST_TEST((loaded(*first, "single_instance").state == PluginInfo::State::loaded));
    BOOST_TEST((loaded(*second, "single_instance").state == PluginInfo::State::loaded));
    BOOST_TEST(inits() - inits_before == 1u, "its init ran once for both runtimes");

    // Each runtime's allocator serves that runtime's calls, though the plugin's host table is one.
    const CountingAllocator counting;
    first->set_allocator(counting.allocator());
    { const Tensor out = call(*first); }
    BOOST_TEST(counting.allocated() == 1);
    BOOST_TEST(counting.released() == 1);
    { const Tensor out = call(*second); }
    BOOST_TEST(counting.allocated() == 1, "the second runtime's call used its own (default) allocator");

    // A tensor outliving its runtime goes back to the allocator that gave it.
    Tensor kept = call(*first);
    BOOST_TEST(counting.allocated() == 2);
    first.reset();
    BOOST_TEST(shutdowns() - shutdowns_before == 0u, "the second runtime still holds the plugin");
    kept = Tensor();
    BOOST_TEST(counting.released() == 2);

    // Destroying one leaves the other working.
    { const Tensor out = call(*second); }
    second.reset();
    BOOST_TEST(shutdowns() - shutdowns_before == 1u, "the last runtime holding it shut it down");
  }
  // A runtime created after both are gone starts it again.
  Runtime third(options(dir, {single_instance()}, "single_instance"));
  BOOST_TEST((loaded(third, "single_instance").state == PluginInfo::State::loaded));
  BOOST_TEST(inits() - inits_before == 2u);
  { const Tensor out = call(third); }
}

BOOST_AUTO_TEST_CASE(a_shared_plugin_is_listed_by_each_runtime_with_what_it_declares) {
  const TempDir dir;
  const Runtime first(options(dir, {single_instance()}, "single_instance"));
  const Runtime second(options(dir, {single_instance()}, "single_instance"));
  const PluginInfo& a = loaded(first, "single_instance");
  const PluginInfo& b = loaded(second, "single_instance");
  BOOST_TEST(a.ops.size() == 1u);
  BOOST_TEST(b.ops.size() == a.ops.size());
  BOOST_TEST(b.ops.at(0).schema == a.ops.at(0).schema);
  BOOST_TEST(b.devices.size() == a.devices.size());
  BOOST_TEST(b.version == "test");
}

BOOST_AUTO_TEST_CASE(a_file_rebuilt_while_its_old_build_is_loaded_is_refused_until_that_one_is_gone) {
  const TempDir dir, libraries;
  const fs::path file = libraries.path() / test_plugin_file("standin").filename();
  fs::copy_file(test_plugin_file("standin"), file);
  auto holder = std::make_unique<Runtime>(options(dir, {file}, "standin"));
  loaded(*holder, "standin");

  // A new build at the same path, written beside it and renamed over it, as an install does.
  const fs::path next = libraries.path() / "next.tmp";
  fs::copy_file(test_plugin_file("standin"), next);
  fs::rename(next, file);
  {
    const Runtime meanwhile(options(dir, {file}, "standin"));
    const PluginInfo* p = find_by_path(meanwhile, file);
    BOOST_TEST_REQUIRE(p != nullptr);
    BOOST_TEST((p->state == PluginInfo::State::rejected));
    BOOST_TEST(contains(p->reason, "another build of this library"), p->reason);
  }
  holder.reset();
  const Runtime after(options(dir, {file}, "standin"));
  loaded(after, "standin");
}
