// Configuration: malformed TOML, unknown keys, wrong types and unknown backend names are
// errors naming the file, the line and the key; DELTAKERN_CONFIG chooses the file.
#define BOOST_TEST_MODULE config
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include <deltakern/op_schemas.h>

#include <ostream>

using namespace deltakern;
using namespace deltakern::test;
namespace bdata = boost::unit_test::data;

namespace {

struct Malformed {
  const char* what;
  const char* toml;
  int line;         // the line the message must name
  const char* key;  // what the message must name ("" for a syntax error)
};
std::ostream& operator<<(std::ostream& os, const Malformed& m) { return os << m.what; }

const Malformed kMalformed[] = {
    {"syntax error", "[dispatch]\nvalidate = yes\n", 2, ""},
    {"unterminated table header", "[plugins]\nsearch_paths = []\n[dispatch\n", 3, ""},
    {"unknown table", "[plugins]\nsearch_paths = []\n\n[dispatchh]\norder = [\"portable\"]\n", 4,
     "dispatchh"},
    {"unknown key in [dispatch]", "[dispatch]\norder = [\"portable\"]\nordr = [\"native\"]\n", 3,
     "dispatch.ordr"},
    {"unknown key in [plugins]", "[plugins]\npaths = []\n", 2, "plugins.paths"},
    {"unknown key in [logging]", "[logging]\nlevel = \"warn\"\nfile = \"log.txt\"\n", 3, "logging.file"},
    {"dispatch is not a table", "dispatch = 3\n", 1, "dispatch"},
    {"order is a string", "[dispatch]\norder = \"portable\"\n", 2, "dispatch.order"},
    {"order holds a number (the line of the element)", "[dispatch]\norder = [\"portable\",\n  3]\n", 3,
     "dispatch.order"},
    {"validate is a string", "\n[dispatch]\nvalidate = \"yes\"\n", 3, "dispatch.validate"},
    {"search_paths is a string", "[plugins]\nsearch_paths = \"plugins\"\n", 2, "plugins.search_paths"},
    {"log level unknown", "[logging]\nlevel = \"loud\"\n", 2, "logging.level"},
    {"unknown backend in order", "[dispatch]\norder = [\"portable\", \"nonesuch\"]\n", 2, "nonesuch"},
    {"unknown backend names its key", "[dispatch]\norder = [\"nonesuch\"]\n", 2, "dispatch.order"},
    {"unknown op", "[dispatch.ops.no_such_op]\nbackend = \"portable\"\n", 1, "no_such_op"},
    {"per-op backend wrong type", "[dispatch.ops.causal_conv1d_varlen]\nbackend = 3\n", 2,
     "dispatch.ops.causal_conv1d_varlen.backend"},
    {"per-op unknown backend",
     "[dispatch]\norder = [\"portable\"]\n[dispatch.ops.causal_conv1d_update]\nbackend = \"nonesuch\"\n", 4,
     "nonesuch"},
    {"per-op unknown key", "[dispatch.ops.causal_conv1d_update]\nbackends = \"portable\"\n", 2,
     "dispatch.ops.causal_conv1d_update.backends"},
    {"per-op order wrong type", "[dispatch.ops.causal_conv1d_update]\norder = [1]\n", 2,
     "dispatch.ops.causal_conv1d_update.order"},
};

RuntimeOptions with_config(const fs::path& file) {
  RuntimeOptions o = base_options();
  o.config_file = file;
  return o;
}

// The message names the file and the line ("<file>:<line>:") and the key.
void require_config_error(const fs::path& file, int line, std::string_view key,
                          const std::function<void()>& f) {
  try {
    f();
    BOOST_FAIL("no error for " << file);
  } catch (const Error& e) {
    const std::string msg = e.what();
    BOOST_TEST_CONTEXT("message: " << msg) {
      BOOST_TEST((e.code() == ErrorCode::config));
      BOOST_TEST(contains(msg, file.string() + ":" + std::to_string(line) + ":"),
                 "the message should begin with " << file.string() << ":" << line << ":");
      if (!key.empty()) BOOST_TEST(contains(msg, key), "the message should name '" << key << "'");
    }
  }
}

}  // namespace

BOOST_DATA_TEST_CASE(malformed_config_names_file_line_and_key, bdata::make(kMalformed), m) {
  const TempDir dir;
  const fs::path file = dir.write("deltakern.toml", m.toml);
  require_config_error(file, m.line, m.key, [&] { const Runtime rt(with_config(file)); });
}

BOOST_AUTO_TEST_CASE(the_shipped_config_parses_to_the_documented_defaults) {
  const Runtime rt(with_config(source_dir() / "config" / "deltakern.toml"));
  const std::vector<std::string> expected{"native", "portable"};
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_VARLEN) == expected, boost::test_tools::per_element());
  BOOST_TEST(rt.preference(DK_OP_CAUSAL_CONV1D_UPDATE) == expected, boost::test_tools::per_element());
  BOOST_TEST(!rt.forced_backend().has_value());
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
    require_config_error(bad, 3, "dispatch.order", [&] { const Runtime rt(o); });
  }
  {
    const fs::path missing = dir.path() / "missing.toml";
    const ScopedEnv config("DELTAKERN_CONFIG", missing.string());
    try {
      const Runtime rt(o);
      BOOST_FAIL("a missing DELTAKERN_CONFIG file was accepted");
    } catch (const Error& e) {
      BOOST_TEST((e.code() == ErrorCode::config));
      BOOST_TEST(contains(e.what(), missing.string()), e.what());
    }
  }
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
