// Loading that a bad library cannot take down: every candidate is first loaded in a child
// process, so a library that segfaults in a static initialiser, hangs, aborts or exits in
// init is rejected with the signal or the time-out as its reason, this process goes on, and
// the verdicts are cached until the file changes.
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

using namespace deltakern;
using namespace deltakern::test;

namespace {

fs::path hostile_plugin_dir() { return DK_TEST_HOSTILE_PLUGIN_DIR; }
fs::path hostile_plugin_file(std::string_view name) {
  return hostile_plugin_dir() / ("libdeltakern_hostile_" + std::string(name) + ".so");
}

// Long enough for a good plugin's child on a loaded machine, short enough for CI.
constexpr int kTimeoutMs = 1500;

// A config with its own verdict cache in a fresh directory, and the runtime options that
// search `dirs` and load `files`, nothing else.
struct Setup {
  explicit Setup(std::string probe_keys = {}) {
    if (probe_keys.empty())
      probe_keys = fmt("probe_timeout_ms = {}\nprobe_cache = \"{}\"\n", kTimeoutMs, cache_file().string());
    config = dir.write("deltakern.toml", "[plugins]\n" + probe_keys + "[logging]\nlevel = \"off\"\n");
  }
  static std::string fmt(std::string_view pattern, int ms, const std::string& cache) {
    std::string out(pattern);
    out.replace(out.find("{}"), 2, std::to_string(ms));
    out.replace(out.find("{}"), 2, cache);
    return out;
  }
  fs::path cache_file() const { return dir.path() / "cache" / "verdicts.json"; }
  RuntimeOptions options(std::vector<fs::path> dirs, std::vector<fs::path> files = {}) const {
    RuntimeOptions o;
    o.read_environment = false;
    o.config_file = config;
    o.search_default_dirs = false;
    o.plugin_path = std::move(dirs);
    o.plugin_files = std::move(files);
    return o;
  }
  TempDir dir;
  fs::path config;
};

const PluginInfo& listed(const Runtime& rt, const fs::path& file) {
  const PluginInfo* p = find_by_path(rt, file);
  BOOST_TEST_REQUIRE(p != nullptr, "discovery did not list " << file);
  return *p;
}

void require_rejected_for(const Runtime& rt, const fs::path& file, std::string_view reason) {
  const PluginInfo& p = listed(rt, file);
  BOOST_TEST_CONTEXT(file.filename() << ": '" << p.reason << "'") {
    BOOST_TEST((p.state == PluginInfo::State::rejected));
    BOOST_TEST(contains(p.reason, reason), "the reason should contain '" << reason << "'");
  }
}

std::vector<fs::path> hostile_files() {
  return {hostile_plugin_file("crash_in_static_init"), hostile_plugin_file("hang_in_init"),
          hostile_plugin_file("abort_in_init"), hostile_plugin_file("exit_in_init"),
          hostile_plugin_file("crash_in_shutdown")};
}

void check_hostile_verdicts(const Runtime& rt) {
  require_rejected_for(rt, hostile_plugin_file("crash_in_static_init"),
                       "probe child killed by signal 11 (SIGSEGV) while loading");
  require_rejected_for(rt, hostile_plugin_file("hang_in_init"),
                       "probe timed out after " + std::to_string(kTimeoutMs) + " ms while running init");
  require_rejected_for(rt, hostile_plugin_file("abort_in_init"),
                       "probe child killed by signal 6 (SIGABRT) while running init");
  require_rejected_for(rt, hostile_plugin_file("exit_in_init"),
                       "probe child exited with status 3 while running init");
  // They died after naming themselves (all but the one that crashed before its entry ran)...
  BOOST_TEST(listed(rt, hostile_plugin_file("crash_in_static_init")).name.empty());
  // ...and none of them is loaded here.
  for (const char* name :
       {"crash_in_static_init", "hang_in_init", "abort_in_init", "exit_in_init", "crash_in_shutdown"})
    BOOST_TEST(rt.plugin(name) == nullptr, name << " must not be loaded");
  const PluginInfo* standin = rt.plugin("standin");
  BOOST_TEST_REQUIRE(standin != nullptr, "a good plugin beside the bad ones still loads");
  BOOST_TEST((standin->state == PluginInfo::State::loaded));
  BOOST_TEST_REQUIRE(standin->devices.size() == 1u);
  BOOST_TEST(standin->devices[0].available);
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

void touch(const fs::path& file) {
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(2));
}

}  // namespace

BOOST_AUTO_TEST_CASE(hostile_plugins_are_rejected_in_a_child_and_the_process_survives) {
  const Setup setup;
  const Runtime rt(setup.options({hostile_plugin_dir()}, {test_plugin_file("standin")}));
  check_hostile_verdicts(rt);
  for (const auto& file : hostile_files()) BOOST_TEST((listed(rt, file).probe == PluginInfo::Probe::child));
  BOOST_TEST((rt.plugin("standin")->probe == PluginInfo::Probe::child));
  BOOST_TEST(listed(rt, hostile_plugin_file("abort_in_init")).name == "abort_in_init");
  BOOST_TEST(rt.probe_summary().children == 7u);
  BOOST_TEST(rt.probe_summary().mode == "child");
  BOOST_TEST(rt.probe_summary().cache == setup.cache_file());
}

BOOST_AUTO_TEST_CASE(a_process_the_plugin_leaves_behind_does_not_make_the_probe_wait) {
  const Setup setup;
  const Runtime rt(setup.options({}, {hostile_plugin_file("forks_in_init")}));
  const PluginInfo* p = rt.plugin("forks_in_init");
  BOOST_TEST_REQUIRE(p != nullptr, "it passes: starting a process is allowed");
  BOOST_TEST((p->probe == PluginInfo::Probe::child));
  BOOST_TEST_INFO("the probe took " << p->probe_note);
  BOOST_TEST(std::stoi(p->probe_note) < kTimeoutMs);
}

BOOST_AUTO_TEST_CASE(the_next_start_takes_every_verdict_from_the_cache) {
  const Setup setup;
  { const Runtime first(setup.options({hostile_plugin_dir()}, {test_plugin_file("standin")})); }

  const auto cache = read_json(setup.cache_file());
  BOOST_TEST(cache.at("entries").size() == 7u);
  size_t failing = 0;
  for (const auto& e : cache.at("entries")) failing += e.at("verdict").at("passed").get<bool>() ? 0 : 1;
  BOOST_TEST(failing == 5u, "failing verdicts are cached too");

  const Runtime second(setup.options({hostile_plugin_dir()}, {test_plugin_file("standin")}));
  BOOST_TEST(second.probe_summary().children == 0u, "an unchanged library spawns no child");
  check_hostile_verdicts(second);
  for (const auto& file : hostile_files())
    BOOST_TEST((listed(second, file).probe == PluginInfo::Probe::cache));
  BOOST_TEST((second.plugin("standin")->probe == PluginInfo::Probe::cache));
}

BOOST_AUTO_TEST_CASE(a_changed_file_is_probed_again) {
  const Setup setup;
  const TempDir libraries;
  for (const auto& file : {hostile_plugin_file("crash_in_static_init"), test_plugin_file("standin")})
    fs::copy_file(file, libraries.path() / file.filename());
  const auto options = setup.options({libraries.path()});
  BOOST_TEST(Runtime(options).probe_summary().children == 2u);
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);

  touch(libraries.path() / test_plugin_file("standin").filename());
  const Runtime after_touch(options);
  BOOST_TEST(after_touch.probe_summary().children == 1u);
  BOOST_TEST((listed(after_touch, libraries.path() / test_plugin_file("standin").filename()).probe ==
              PluginInfo::Probe::child));
  BOOST_TEST(
      (listed(after_touch, libraries.path() / hostile_plugin_file("crash_in_static_init").filename()).probe ==
       PluginInfo::Probe::cache));

  // Rewritten with another library's bytes: the crashing one's verdict must not stick. The
  // file now holds a second standin, which, first in name order, is the one loaded.
  const fs::path rewritten = libraries.path() / hostile_plugin_file("crash_in_static_init").filename();
  fs::copy_file(test_plugin_file("standin"), rewritten, fs::copy_options::overwrite_existing);
  const Runtime after_rewrite(options);
  BOOST_TEST(after_rewrite.probe_summary().children == 1u);
  BOOST_TEST((listed(after_rewrite, rewritten).probe == PluginInfo::Probe::child));
  BOOST_TEST_REQUIRE(after_rewrite.plugin("standin") != nullptr);
  BOOST_TEST(fs::equivalent(after_rewrite.plugin("standin")->path, rewritten));
}

BOOST_AUTO_TEST_CASE(a_timed_out_verdict_holds_for_shorter_limits_and_is_retried_under_a_longer_one) {
  const TempDir cache;
  const auto run = [&](int ms) {
    const Setup setup(Setup::fmt("probe_timeout_ms = {}\nprobe_cache = \"{}\"\n", ms,
                                 (cache.path() / "verdicts.json").string()));
    const Runtime rt(setup.options({}, {hostile_plugin_file("hang_in_init")}));
    require_rejected_for(rt, hostile_plugin_file("hang_in_init"), "probe timed out after");
    return rt.probe_summary().children;
  };
  BOOST_TEST(run(200) == 1u);
  BOOST_TEST(run(100) == 0u);
  BOOST_TEST(run(400) == 1u);
  BOOST_TEST(run(400) == 0u);
}

BOOST_AUTO_TEST_CASE(a_corrupt_cache_is_ignored_and_replaced) {
  const Setup setup;
  fs::create_directories(setup.cache_file().parent_path());
  std::ofstream(setup.cache_file()) << "{ \"format\": 1, \"entries\": [ {\"library\": 3} ";
  const auto options = setup.options({}, {test_plugin_file("standin"), hostile_plugin_file("exit_in_init")});
  {
    const Runtime rt(options);
    BOOST_TEST(rt.probe_summary().children == 2u);
    BOOST_TEST(rt.plugin("standin") != nullptr);
  }
  BOOST_TEST(read_json(setup.cache_file()).at("entries").size() == 2u);
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);

  // Valid JSON, wrong shape; then a well-formed file with one malformed entry.
  std::ofstream(setup.cache_file()) << "[1, 2, 3]";
  BOOST_TEST(Runtime(options).probe_summary().children == 2u);
  auto cache = read_json(setup.cache_file());
  cache["entries"][0]["verdict"] = "passed";
  std::ofstream(setup.cache_file()) << cache.dump();
  BOOST_TEST(Runtime(options).probe_summary().children == 1u);
}

BOOST_AUTO_TEST_CASE(an_unusable_cache_location_costs_only_the_cache) {
  const TempDir blocked;
  const fs::path cache = blocked.path() / "a-directory";
  fs::create_directories(cache);  // where the file should be: neither readable nor replaceable
  const Setup setup(Setup::fmt("probe_timeout_ms = {}\nprobe_cache = \"{}\"\n", kTimeoutMs, cache.string()));
  const auto options = setup.options({}, {test_plugin_file("standin"), hostile_plugin_file("abort_in_init")});
  BOOST_TEST(Runtime(options).probe_summary().children == 2u);
  const Runtime again(options);
  BOOST_TEST(again.probe_summary().children == 2u);
  BOOST_TEST(again.plugin("standin") != nullptr);
  require_rejected_for(again, hostile_plugin_file("abort_in_init"), "SIGABRT");
}

BOOST_AUTO_TEST_CASE(runtimes_started_together_share_one_cache) {
  const Setup setup;
  const auto options =
      setup.options({}, {test_plugin_file("standin"), hostile_plugin_file("crash_in_static_init")});
  std::vector<std::thread> threads;
  std::atomic<int> loaded{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      const Runtime rt(options);
      if (rt.plugin("standin") != nullptr && rt.plugin("crash_in_static_init") == nullptr) ++loaded;
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(loaded.load() == 4);
  // Whoever renamed last, the file is whole and holds both verdicts.
  BOOST_TEST(read_json(setup.cache_file()).at("entries").size() == 2u);
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);
}

BOOST_AUTO_TEST_CASE(an_empty_probe_cache_disables_the_cache) {
  const Setup setup("probe_cache = \"\"\n");
  const auto options = setup.options({}, {test_plugin_file("standin")});
  BOOST_TEST(Runtime(options).probe_summary().children == 1u);
  const Runtime again(options);
  BOOST_TEST(again.probe_summary().children == 1u);
  BOOST_TEST(again.probe_summary().cache.empty());
  BOOST_TEST((again.plugin("standin")->probe == PluginInfo::Probe::child));
}

BOOST_AUTO_TEST_CASE(a_relative_probe_cache_is_relative_to_the_config_file) {
  const Setup setup("probe_cache = \"verdicts/probe.json\"\n");
  const Runtime rt(setup.options({}, {test_plugin_file("standin")}));
  BOOST_TEST(rt.probe_summary().cache == setup.dir.path() / "verdicts" / "probe.json");
  BOOST_TEST(fs::is_regular_file(setup.dir.path() / "verdicts" / "probe.json"));
}

BOOST_AUTO_TEST_CASE(in_process_probing_spawns_nothing) {
  const Setup setup("probe = \"in-process\"\n");
  const Runtime rt(setup.options({test_plugin_dir()}));
  BOOST_TEST(rt.probe_summary().children == 0u);
  BOOST_TEST(rt.probe_summary().mode == "in-process");
  BOOST_TEST_REQUIRE(rt.plugin("standin") != nullptr);
  BOOST_TEST((rt.plugin("standin")->probe == PluginInfo::Probe::in_process));
  BOOST_TEST(!fs::exists(setup.cache_file()));
}

BOOST_AUTO_TEST_CASE(the_environment_overrides_the_probe_keys) {
  const Setup setup;
  const ScopedEnv config("DELTAKERN_CONFIG", setup.config.string());
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
  const ScopedEnv backend("DELTAKERN_BACKEND", std::nullopt);
  RuntimeOptions o = setup.options({}, {test_plugin_file("standin")});
  o.read_environment = true;
  {
    const ScopedEnv mode("DELTAKERN_PROBE", "in-process");
    BOOST_TEST(Runtime(o).probe_summary().children == 0u);
  }
  {
    const ScopedEnv cache("DELTAKERN_PROBE_CACHE", "");
    const ScopedEnv timeout("DELTAKERN_PROBE_TIMEOUT_MS", "2500");
    const Runtime rt(o);
    BOOST_TEST(rt.probe_summary().cache.empty());
    BOOST_TEST(rt.probe_summary().timeout.count() == 2500);
  }
  const auto refused = [&](const char* name, const char* value, std::string_view message) {
    const ScopedEnv bad(name, value);
    BOOST_CHECK_EXCEPTION(Runtime{o}, Error, [&](const Error& e) {
      BOOST_TEST_INFO(e.what());
      return e.code() == ErrorCode::config && contains(e.what(), message);
    });
  };
  refused("DELTAKERN_PROBE", "sometimes",
          "DELTAKERN_PROBE: expected \"child\" or \"in-process\", got 'sometimes'");
  refused("DELTAKERN_PROBE_TIMEOUT_MS", "2s",
          "DELTAKERN_PROBE_TIMEOUT_MS: expected an integer 1..3600000 (milliseconds), got '2s'");
  refused("DELTAKERN_PROBE_TIMEOUT_MS", "0", "got '0'");
}

BOOST_AUTO_TEST_CASE(bad_probe_keys_name_the_file_line_and_key) {
  struct Case {
    std::string keys;
    std::string message;
  };
  const std::vector<Case> cases{
      {"probe = \"sometimes\"", "3: plugins.probe: expected \"child\" or \"in-process\", got 'sometimes'"},
      {"probe = true", "3: plugins.probe: expected a string, got boolean"},
      {"probe_timeout_ms = 0", "3: plugins.probe_timeout_ms: expected 1..3600000 milliseconds, got 0"},
      {"probe_timeout_ms = 3600001",
       "3: plugins.probe_timeout_ms: expected 1..3600000 milliseconds, got 3600001"},
      {"probe_timeout_ms = \"fast\"", "3: plugins.probe_timeout_ms: expected an integer, got string"},
      {"probe_timeout_ms = 1.5", "3: plugins.probe_timeout_ms: expected an integer, got float"},
      {"probe_cache = 7", "3: plugins.probe_cache: expected a string, got integer"},
      {"probe_timeout = 100", "3: unknown key 'plugins.probe_timeout'"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.keys) {
      const TempDir dir;
      const fs::path file = dir.write("bad.toml", "# a probe key\n[plugins]\n" + c.keys + "\n");
      RuntimeOptions o;
      o.read_environment = false;
      o.config_file = file;
      o.search_default_dirs = false;
      BOOST_CHECK_EXCEPTION(Runtime{o}, Error, [&](const Error& e) {
        BOOST_TEST_INFO(e.what());
        return e.code() == ErrorCode::config && contains(e.what(), file.string() + ":" + c.message);
      });
    }
  }
}

BOOST_AUTO_TEST_CASE(a_thread_that_crashes_after_init_is_caught_while_the_child_waits) {
  const Setup setup;
  const fs::path file = hostile_plugin("later", "crash_in_thread_after_init");
  const Runtime rt(setup.options({}, {file, test_plugin_file("standin")}));
  require_rejected_for(
      rt, file,
      "probe child killed by signal 11 (SIGSEGV) while waiting after init (a thread the plugin "
      "started?)");
  BOOST_TEST(rt.plugin("crash_in_thread_after_init") == nullptr);
  BOOST_TEST(rt.plugin("standin") != nullptr);
}

BOOST_AUTO_TEST_CASE(a_plugin_that_cannot_be_started_twice_is_caught_on_its_second_init) {
  const Setup setup;
  const fs::path file = hostile_plugin("later", "crash_on_second_init");
  const Runtime rt(setup.options({}, {file}));
  require_rejected_for(rt, file,
                       "probe child killed by signal 11 (SIGSEGV) while running init again after shutdown");
  BOOST_TEST(listed(rt, file).name == "crash_on_second_init");
}

BOOST_AUTO_TEST_CASE(a_verdict_is_made_stale_by_a_change_to_the_libraries_own_dependency) {
  const Setup setup;
  const TempDir libraries;
  const fs::path plugin = libraries.path() / hostile_plugin("dependency", "with_dependency").filename();
  const fs::path dependency = libraries.path() / "libdeltakern_test_answer.so";
  fs::copy_file(hostile_plugin("dependency", "with_dependency"), plugin);
  fs::copy_file(hostile_plugin_dir() / "dependency" / "libdeltakern_test_answer.so", dependency);
  const auto options = setup.options({}, {plugin});
  {
    const Runtime first(options);
    BOOST_TEST(first.probe_summary().children == 1u);
    BOOST_TEST(first.plugin("with_dependency") != nullptr, listed(first, plugin).reason);
  }
  // The verdict names the dependency as the child's loader found it, with its identity.
  const auto entries = read_json(setup.cache_file()).at("entries");
  BOOST_TEST_REQUIRE(entries.size() == 1u);
  const auto& dependencies = entries[0].at("verdict").at("dependencies");
  BOOST_TEST_REQUIRE(dependencies.size() == 1u, dependencies.dump());
  BOOST_TEST(dependencies[0].at("path").get<std::string>() == fs::canonical(dependency).string());
  BOOST_TEST(Runtime(options).probe_summary().children == 0u, "nothing changed: the verdict holds");

  // Another build of the dependency, written beside it and renamed over it, as an upgrade does.
  const fs::path next = libraries.path() / "next.tmp";
  fs::copy_file(hostile_plugin_dir() / "dependency" / "answer-2" / "libdeltakern_test_answer.so", next);
  fs::rename(next, dependency);
  const Runtime after(options);
  BOOST_TEST(after.probe_summary().children == 1u, "a changed dependency is probed again");
  require_rejected_for(after, plugin, "init failed: with_dependency: its dependency answered 2, not 1");
  BOOST_TEST((listed(after, plugin).probe == PluginInfo::Probe::child));
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);

  fs::remove(dependency);
  BOOST_TEST(Runtime(options).probe_summary().children == 1u, "a vanished dependency is probed again");
}

BOOST_AUTO_TEST_CASE(a_verdict_is_made_stale_by_a_changed_ld_library_path) {
  const Setup setup;
  const auto options = setup.options({}, {test_plugin_file("standin")});
  BOOST_TEST(Runtime(options).probe_summary().children == 1u);
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);
  const char* old = std::getenv("LD_LIBRARY_PATH");
  const ScopedEnv path("LD_LIBRARY_PATH",
                       (old != nullptr ? std::string(old) + ":" : "") + "/nonexistent/lib");
  BOOST_TEST(Runtime(options).probe_summary().children == 1u);
  BOOST_TEST(Runtime(options).probe_summary().children == 0u);
}

BOOST_AUTO_TEST_CASE(children_of_uncached_libraries_run_at_once) {
  // Four hanging libraries cost about one time-out, not four.
  const TempDir cache, libraries;
  constexpr int kCopies = 4, kShortTimeoutMs = 500;
  for (int i = 0; i < kCopies; ++i)
    fs::copy_file(hostile_plugin_file("hang_in_init"),
                  libraries.path() / ("libhang_" + std::to_string(i) + ".so"));
  const Setup setup(Setup::fmt("probe_timeout_ms = {}\nprobe_cache = \"{}\"\n", kShortTimeoutMs,
                               (cache.path() / "v.json").string()));
  const auto start = std::chrono::steady_clock::now();
  const Runtime rt(setup.options({libraries.path()}));
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  BOOST_TEST(rt.probe_summary().children == size_t{kCopies});
  for (const auto& p : rt.plugins()) BOOST_TEST(contains(p.reason, "probe timed out after 500 ms"), p.reason);
  BOOST_TEST(took.count() < 3 * kShortTimeoutMs, "took " << took.count() << " ms");
}
