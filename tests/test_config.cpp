// Configuration (issue 5, item 5): malformed TOML, unknown keys, wrong types, unknown
// backend names and bad search paths are errors with an exact message naming the file, the
// line and the key; a search path that does not exist is a warning. DELTAKERN_CONFIG
// chooses the file.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "captured_log.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <ostream>
#include <set>

using namespace deltakern;
using namespace deltakern::test;
namespace bdata = boost::unit_test::data;

namespace {

BOOST_TEST_GLOBAL_FIXTURE(CapturedLog);

// A bad config and the exact message it must produce, after "<file>:": the line, the key,
// what was expected and what came. Syntax errors carry toml++'s own description (the text
// of Debian 12's toml++ 3.3).
struct Malformed {
  const char* what;
  const char* toml;
  const char* message;
};
std::ostream& operator<<(std::ostream& os, const Malformed& m) { return os << m.what; }

const Malformed kMalformed[] = {
    // malformed TOML
    {"syntax error", "[dispatch]\nvalidate = yes\n",
     "2: Error while parsing value: could not determine value type"},
    {"unterminated table header", "[plugins]\nsearch_paths = []\n[dispatch\n",
     "3: Error while parsing table header: expected ']', saw '\\n'"},
    {"unterminated string", "[dispatch]\norder = [\"portable]\n",
     "2: Error while parsing string: unescaped control characters other than TAB (U+0009) are explicitly "
     "prohibited"},
    {"key defined twice", "[dispatch]\nvalidate = true\nvalidate = false\n",
     "3: Error while parsing key-value pair: cannot redefine existing boolean 'validate'"},
    {"table defined twice", "[dispatch]\n[logging]\n[dispatch]\n",
     "3: Error while parsing table header: cannot redefine existing table 'dispatch'"},
    // unknown keys, top level and nested
    {"unknown table", "[plugins]\nsearch_paths = []\n\n[dispatchh]\norder = [\"portable\"]\n",
     "4: unknown key 'dispatchh'"},
    {"unknown top-level key", "verbose = true\n", "1: unknown key 'verbose'"},
    {"unknown key in [dispatch]", "[dispatch]\norder = [\"portable\"]\nordr = [\"native\"]\n",
     "3: unknown key 'dispatch.ordr'"},
    {"unknown key in [plugins]", "[plugins]\npaths = []\n", "2: unknown key 'plugins.paths'"},
    {"unknown key in [logging]", "[logging]\nlevel = \"warn\"\nfile = \"log.txt\"\n",
     "3: unknown key 'logging.file'"},
    {"unknown per-op key", "[dispatch.ops.causal_conv1d_update]\nbackends = \"portable\"\n",
     "2: unknown key 'dispatch.ops.causal_conv1d_update.backends'"},
    {"strict is not per op", "[dispatch.ops.causal_conv1d_varlen]\nstrict = true\n",
     "2: unknown key 'dispatch.ops.causal_conv1d_varlen.strict'"},
    {"unknown op", "[dispatch.ops.no_such_op]\nbackend = \"portable\"\n",
     "1: dispatch.ops.no_such_op: unknown op 'no_such_op' (known: causal_conv1d_varlen, "
     "causal_conv1d_update, causal_conv1d_varlen_out, causal_conv1d_update_out)"},
    // wrong types
    {"dispatch is not a table", "dispatch = 3\n", "1: dispatch: expected a table, got integer"},
    {"plugins is not a table", "plugins = [\"dir\"]\n", "1: plugins: expected a table, got array"},
    {"dispatch.ops is not a table", "[dispatch]\nops = \"portable\"\n",
     "2: dispatch.ops: expected a table, got string"},
    {"an op is not a table", "[dispatch.ops]\ncausal_conv1d_varlen = \"portable\"\n",
     "2: dispatch.ops.causal_conv1d_varlen: expected a table, got string"},
    {"order is a string", "[dispatch]\norder = \"portable\"\n",
     "2: dispatch.order: expected an array of strings, got string"},
    {"order holds a number (the line of the element)", "[dispatch]\norder = [\"portable\",\n  3]\n",
     "3: dispatch.order[1]: expected a string, got integer"},
    {"order is empty", "[dispatch]\norder = []\n",
     "2: dispatch.order: expected at least one backend, got an empty array"},
    {"order names a backend twice", "[dispatch]\norder = [\"portable\", \"standin\", \"portable\"]\n",
     "2: dispatch.order[2]: backend 'portable' is listed twice"},
    {"validate is a string", "\n[dispatch]\nvalidate = \"yes\"\n",
     "3: dispatch.validate: expected a boolean, got string"},
    {"strict is an integer", "[dispatch]\nstrict = 1\n",
     "2: dispatch.strict: expected a boolean, got integer"},
    {"search_paths is a string", "[plugins]\nsearch_paths = \"plugins\"\n",
     "2: plugins.search_paths: expected an array of strings, got string"},
    {"log level is a number", "[logging]\nlevel = 3\n", "2: logging.level: expected a string, got integer"},
    {"log level unknown", "[logging]\nlevel = \"loud\"\n",
     "2: logging.level: expected one of trace, debug, info, warn, error, off, got 'loud'"},
    {"a date where a boolean belongs", "[dispatch]\nvalidate = 2024-01-01\n",
     "2: dispatch.validate: expected a boolean, got date"},
    {"per-op backend wrong type", "[dispatch.ops.causal_conv1d_varlen]\nbackend = 3\n",
     "2: dispatch.ops.causal_conv1d_varlen.backend: expected a string, got integer"},
    {"per-op order wrong type", "[dispatch.ops.causal_conv1d_update]\norder = [1]\n",
     "2: dispatch.ops.causal_conv1d_update.order[0]: expected a string, got integer"},
    {"per-op backend and order both",
     "[dispatch.ops.causal_conv1d_update]\nbackend = \"portable\"\norder = [\"portable\"]\n",
     "3: dispatch.ops.causal_conv1d_update: give either backend or order, not both"},
    // unknown backends (known only after discovery: the line is still the name's)
    {"unknown backend in order", "[dispatch]\norder = [\"portable\",\n \"nonesuch\"]\n",
     "3: dispatch.order[1]: unknown backend 'nonesuch' (known: KNOWN)"},
    {"unknown per-op backend",
     "[dispatch]\norder = [\"portable\"]\n[dispatch.ops.causal_conv1d_update]\nbackend = \"nonesuch\"\n",
     "4: dispatch.ops.causal_conv1d_update.backend: unknown backend 'nonesuch' (known: KNOWN)"},
    {"unknown backend in a per-op order",
     "[dispatch.ops.causal_conv1d_varlen]\norder = [\"portable\", \"nativ\"]\n",
     "2: dispatch.ops.causal_conv1d_varlen.order[1]: unknown backend 'nativ' (known: KNOWN)"},
    // search paths: an empty entry or a non-directory is an error (a missing one, a warning)
    {"search path empty", "[plugins]\nsearch_paths = [\"plugs\", \"\"]\n",
     "2: plugins.search_paths[1]: expected a directory, got an empty string"},
    {"search path holds a number", "[plugins]\nsearch_paths = [7]\n",
     "2: plugins.search_paths[0]: expected a string, got integer"},
    {"search path is a file", "[plugins]\nsearch_paths = [\"deltakern.toml\"]\n",
     "2: plugins.search_paths[0]: expected a directory, got DIR/deltakern.toml, which is not one"},
    {"search path is a symlink loop", "[plugins]\nsearch_paths = [\"loop\"]\n",
     "2: plugins.search_paths[0]: expected a directory, got DIR/loop: Too many levels of symbolic links"},
};

RuntimeOptions with_config(const fs::path& file) {
  RuntimeOptions o = base_options();
  o.config_file = file;
  return o;
}

// The backends a test runtime knows: the well-known two and every plugin the tests load.
std::string known_backends() {
  std::set<std::string> known{"native", "portable"};
  const Runtime rt(base_options());
  for (const auto& p : rt.plugins())
    if (!p.name.empty()) known.insert(p.name);
  return fmt::format("{}", fmt::join(known, ", "));
}

std::string replaced(std::string text, std::string_view from, const std::string& to) {
  if (const auto at = text.find(from); at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The constructor throws Error(config) whose message is exactly `expected`.
void require_config_error(const std::string& expected, const std::function<void()>& f) {
  try {
    f();
    BOOST_FAIL("no error; expected: " << expected);
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::config));
    BOOST_TEST(std::string(e.what()) == expected);
  }
}

}  // namespace

BOOST_DATA_TEST_CASE(malformed_config_is_an_exact_error, bdata::make(kMalformed), m) {
  const TempDir dir;
  fs::create_directories(dir.path() / "plugs");
  fs::create_symlink(dir.path() / "loop", dir.path() / "loop");
  const fs::path file = dir.write("deltakern.toml", m.toml);
  const std::string message =
      replaced(replaced(m.message, "KNOWN", known_backends()), "DIR", dir.path().string());
  require_config_error(file.string() + ":" + message, [&] { const Runtime rt(with_config(file)); });
}

BOOST_AUTO_TEST_CASE(the_shipped_config_parses_to_the_documented_defaults) {
  const Runtime rt(with_config(source_dir() / "config" / "deltakern.toml"));
  const std::vector<std::string> expected{"native", "portable"};
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_VARLEN) == expected, boost::test_tools::per_element());
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_UPDATE) == expected, boost::test_tools::per_element());
  BOOST_TEST(!rt.forced_backend().has_value());
  BOOST_TEST(!rt.strict());
}

BOOST_AUTO_TEST_CASE(a_valid_config_sets_order_and_per_op_overrides) {
  const TempDir dir;
  const fs::path file = dir.write("deltakern.toml",
                                  "[dispatch]\norder = [\"standin\", \"portable\"]\nvalidate = false\n"
                                  "[dispatch.ops.causal_conv1d_update]\nbackend = \"portable\"\n"
                                  "[logging]\nlevel = \"error\"\n");
  const Runtime rt(with_config(file));
  BOOST_TEST(fs::equivalent(rt.config_file(), file));
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_VARLEN) == (std::vector<std::string>{"standin", "portable"}),
             boost::test_tools::per_element());
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_UPDATE) == (std::vector<std::string>{"portable"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(deltakern_config_points_at_another_file) {
  const TempDir dir;
  const fs::path given = dir.write("given.toml", "[dispatch]\norder = [\"standin\"]\n");
  const fs::path env = dir.write("env.toml", "[dispatch]\norder = [\"portable\", \"standin\"]\n");
  const ScopedEnv config("DELTAKERN_CONFIG", env.string());
  const ScopedEnv backend("DELTAKERN_BACKEND", std::nullopt);
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
  RuntimeOptions o = with_config(given);
  o.read_environment = true;
  const Runtime rt(o);
  BOOST_TEST(fs::equivalent(rt.config_file(), env));
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_VARLEN) == (std::vector<std::string>{"portable", "standin"}),
             boost::test_tools::per_element());

  // Without read_environment the variable is not consulted.
  const Runtime plain(with_config(given));
  BOOST_TEST(fs::equivalent(plain.config_file(), given));
  BOOST_TEST(plain.preference(DK_OP_CAUSAL_CONV1D_VARLEN) == (std::vector<std::string>{"standin"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(deltakern_config_errors_name_that_file) {
  const TempDir dir;
  const fs::path given = dir.write("given.toml", "[dispatch]\norder = [\"standin\"]\n");
  const fs::path bad = dir.write("bad.toml", "[dispatch]\n\norder = 7\n");
  const ScopedEnv backend("DELTAKERN_BACKEND", std::nullopt);
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", std::nullopt);
  RuntimeOptions o = with_config(given);
  o.read_environment = true;
  {
    const ScopedEnv config("DELTAKERN_CONFIG", bad.string());
    require_config_error(bad.string() + ":3: dispatch.order: expected an array of strings, got integer",
                         [&] { const Runtime rt(o); });
  }
  {
    const fs::path missing = dir.path() / "missing.toml";
    const ScopedEnv config("DELTAKERN_CONFIG", missing.string());
    require_config_error(missing.string() + ": cannot read: No such file or directory",
                         [&] { const Runtime rt(o); });
  }
  {
    const ScopedEnv config("DELTAKERN_CONFIG", dir.path().string());
    require_config_error(dir.path().string() + ": cannot read: is a directory", [&] { const Runtime rt(o); });
  }
}

BOOST_AUTO_TEST_CASE(a_search_path_that_does_not_exist_is_a_warning_not_an_error) {
  const TempDir dir;
  const fs::path file = dir.write(
      "deltakern.toml", "[plugins]\nsearch_paths = [\n  \"gone\",\n  \"/nonexistent/deltakern\"]\n");
  const Runtime rt(with_config(file));
  const auto searched = rt.search_path();
  BOOST_TEST(std::count(searched.begin(), searched.end(), dir.path() / "gone") == 1);
  BOOST_TEST(CapturedLog::warnings_containing(file.string() + ":3: plugins.search_paths[0]: directory " +
                                              (dir.path() / "gone").string() +
                                              " does not exist; not searched") == 1u);
  BOOST_TEST(CapturedLog::warnings_containing(file.string() +
                                              ":4: plugins.search_paths[1]: directory /nonexistent/deltakern "
                                              "does not exist; not searched") == 1u);
  BOOST_TEST_REQUIRE(rt.plugin("portable") != nullptr, "the other directories are still searched");
}

BOOST_AUTO_TEST_CASE(search_paths_are_relative_to_the_config_file) {
  const TempDir dir;
  fs::create_directories(dir.path() / "plugs");
  fs::copy_file(test_plugin_file("standin"), dir.path() / "plugs" / "libdeltakern_test_standin.so");
  const fs::path file = dir.write("deltakern.toml", "[plugins]\nsearch_paths = [\"plugs\"]\n");
  RuntimeOptions o = with_config(file);
  o.plugin_path = {};
  o.search_default_dirs = false;
  const Runtime rt(o);
  const PluginInfo* p = rt.plugin("standin");
  BOOST_TEST_REQUIRE(p != nullptr);
  BOOST_TEST(fs::equivalent(p->path, dir.path() / "plugs" / "libdeltakern_test_standin.so"));
}
