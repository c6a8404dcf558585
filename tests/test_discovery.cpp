// Discovery: every plugin in the search path is loaded or rejected with its reason, and
// the search order decides which of two plugins with one name wins.
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <algorithm>

using namespace deltakern;
using namespace deltakern::test;

namespace {

const PluginInfo& by_file(const Runtime& rt, std::string_view test_plugin) {
  const PluginInfo* p = find_by_path(rt, test_plugin_file(test_plugin));
  BOOST_TEST_REQUIRE(p != nullptr, "discovery did not list " << test_plugin_file(test_plugin));
  return *p;
}

void require_rejected(const PluginInfo& p, std::initializer_list<std::string_view> reason_has) {
  BOOST_TEST_CONTEXT(p.path << " (reason: '" << p.reason << "')") {
    BOOST_TEST((p.state == PluginInfo::State::rejected));
    for (auto s : reason_has) BOOST_TEST(icontains(p.reason, s), "the reason should mention '" << s << "'");
  }
}

const OpInfo* op_of(const PluginInfo& p, std::string_view name) {
  for (const auto& op : p.ops)
    if (op.name == name) return &op;
  return nullptr;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(standin_is_loaded_with_the_in_place_contract) {
  const Runtime rt(base_options());
  const PluginInfo* p = rt.plugin("standin");
  BOOST_TEST_REQUIRE(p != nullptr);
  BOOST_TEST((p->state == PluginInfo::State::loaded));
  BOOST_TEST(fs::equivalent(p->path, test_plugin_file("standin")));
  BOOST_TEST(p->abi_major == DK_ABI_MAJOR);
  BOOST_TEST_REQUIRE(p->ops.size() == 4u);
  const OpInfo* varlen = op_of(*p, DK_OP_CAUSAL_CONV1D_VARLEN);
  const OpInfo* update = op_of(*p, DK_OP_CAUSAL_CONV1D_UPDATE);
  BOOST_TEST_REQUIRE(varlen != nullptr);
  BOOST_TEST_REQUIRE(update != nullptr);
  BOOST_TEST(sorted(varlen->mutated) == (std::vector<std::string>{"conv_states", "x"}),
             boost::test_tools::per_element());
  BOOST_TEST(sorted(update->mutated) == (std::vector<std::string>{"conv_state", "x"}),
             boost::test_tools::per_element());
  BOOST_TEST(varlen->returns_alias_of.value_or("") == "x");
  BOOST_TEST(update->returns_alias_of.value_or("") == "x");
  BOOST_TEST(varlen->returns_tensor);
  // The out-variants: out written, x never, nothing returned.
  for (const char* name : {DK_OP_CAUSAL_CONV1D_VARLEN_OUT, DK_OP_CAUSAL_CONV1D_UPDATE_OUT}) {
    const OpInfo* out = op_of(*p, name);
    BOOST_TEST_REQUIRE(out != nullptr);
    BOOST_TEST(
        sorted(out->mutated) ==
            (std::vector<std::string>{
                std::string(name).find("varlen") != std::string::npos ? "conv_states" : "conv_state", "out"}),
        boost::test_tools::per_element());
    BOOST_TEST(!out->returns_alias_of.has_value());
    BOOST_TEST(!out->returns_tensor);
  }
  BOOST_TEST_REQUIRE(varlen->devices.size() == 1u);
  BOOST_TEST((varlen->devices[0].type == kDLCPU));
  BOOST_TEST(!varlen->devices[0].derives_max_seq_len);
  BOOST_TEST(varlen->min_width == 2);
  BOOST_TEST(varlen->max_width == 4);
  BOOST_TEST(varlen->dtypes.size() == 3u);
  BOOST_TEST(varlen->layouts.size() == 2u);
  BOOST_TEST_REQUIRE(p->devices.size() == 1u);
  BOOST_TEST(p->devices[0].available);
}

BOOST_AUTO_TEST_CASE(liars_are_loaded_since_only_running_them_shows_the_lie) {
  const Runtime rt(base_options());
  for (const char* name :
       {"liar_mutates_x", "liar_undeclared_sync", "liar_writes_outside", "liar_leaves_unwritten"}) {
    BOOST_TEST_CONTEXT(name) {
      const PluginInfo* p = rt.plugin(name);
      BOOST_TEST_REQUIRE(p != nullptr);
      BOOST_TEST((p->state == PluginInfo::State::loaded));
      const OpInfo* varlen = op_of(*p, DK_OP_CAUSAL_CONV1D_VARLEN);
      BOOST_TEST_REQUIRE(varlen != nullptr);
      BOOST_TEST(varlen->mutated == std::vector<std::string>{"conv_states"},
                 boost::test_tools::per_element());
      BOOST_TEST(!varlen->returns_alias_of.has_value());
      BOOST_TEST(!varlen->devices.at(0).derives_max_seq_len);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_library_without_the_entry_symbol_is_skipped) {
  const Runtime rt(base_options());
  require_rejected(by_file(rt, "no_entry"), {DK_PLUGIN_ENTRY_SYMBOL});
}

BOOST_AUTO_TEST_CASE(a_plugin_of_another_abi_major_is_skipped_naming_both_versions) {
  const Runtime rt(base_options());
  const auto& p = by_file(rt, "wrong_abi");
  require_rejected(p, {"abi", "99", std::to_string(DK_ABI_MAJOR) + "." + std::to_string(DK_ABI_MINOR)});
  BOOST_TEST(p.abi_major == 99);
  BOOST_TEST(rt.plugin("wrong_abi") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_plugin_whose_init_fails_is_skipped_with_its_message) {
  const Runtime rt(base_options());
  require_rejected(by_file(rt, "init_fails"), {"init", "init_fails refuses to start (test plugin)"});
  BOOST_TEST(rt.plugin("init_fails") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_schema_that_is_not_the_op_signature_is_skipped) {
  const Runtime rt(base_options());
  require_rejected(by_file(rt, "bad_schema"), {"schema", DK_OP_CAUSAL_CONV1D_VARLEN});
  BOOST_TEST(rt.plugin("bad_schema") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_duplicate_name_is_skipped_and_the_first_found_wins) {
  const Runtime rt(base_options());
  require_rejected(by_file(rt, "dup_portable"), {"duplicate", "portable"});
  const PluginInfo* portable = rt.plugin("portable");
  BOOST_TEST_REQUIRE(portable != nullptr,
                     "the real portable plugin is not loaded from " << real_plugin_dir());
  BOOST_TEST(fs::equivalent(portable->path.parent_path(), real_plugin_dir()));
}

BOOST_AUTO_TEST_CASE(search_order_decides_which_duplicate_wins) {
  RuntimeOptions o = base_options();
  o.plugin_path = {test_plugin_dir(), real_plugin_dir()};
  const Runtime rt(o);
  const PluginInfo* portable = rt.plugin("portable");
  BOOST_TEST_REQUIRE(portable != nullptr);
  BOOST_TEST(fs::equivalent(portable->path, test_plugin_file("dup_portable")));
  const bool real_rejected = std::any_of(rt.plugins().begin(), rt.plugins().end(), [](const PluginInfo& p) {
    return p.state == PluginInfo::State::rejected &&
           fs::equivalent(p.path.parent_path(), real_plugin_dir()) && icontains(p.reason, "duplicate");
  });
  BOOST_TEST(real_rejected, "the real portable should be listed as a duplicate");
}

BOOST_AUTO_TEST_CASE(deltakern_plugin_path_is_searched_first) {
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", test_plugin_dir().string());
  const ScopedEnv config("DELTAKERN_CONFIG", std::nullopt);
  const ScopedEnv backend("DELTAKERN_BACKEND", std::nullopt);
  RuntimeOptions o = base_options();
  o.read_environment = true;
  o.plugin_path = {real_plugin_dir()};
  const Runtime rt(o);
  const auto sp = rt.search_path();
  BOOST_TEST_REQUIRE(!sp.empty());
  BOOST_TEST(fs::equivalent(sp.front(), test_plugin_dir()));
  const PluginInfo* portable = rt.plugin("portable");
  BOOST_TEST_REQUIRE(portable != nullptr);
  BOOST_TEST(fs::equivalent(portable->path, test_plugin_file("dup_portable")));
}

BOOST_AUTO_TEST_CASE(deltakern_plugin_path_is_ignored_without_read_environment) {
  const ScopedEnv path("DELTAKERN_PLUGIN_PATH", test_plugin_dir().string());
  RuntimeOptions o = base_options();
  o.plugin_path = {};
  o.search_default_dirs = false;
  const Runtime rt(o);
  BOOST_TEST(rt.plugin("standin") == nullptr);
}

BOOST_AUTO_TEST_CASE(plugin_files_load_one_library) {
  RuntimeOptions o = base_options();
  o.plugin_path = {};
  o.search_default_dirs = false;
  o.plugin_files = {test_plugin_file("standin")};
  const Runtime rt(o);
  BOOST_TEST(rt.plugin("standin") != nullptr);
  BOOST_TEST(rt.plugin("liar_mutates_x") == nullptr);
}

BOOST_AUTO_TEST_CASE(every_unavailable_device_says_why) {
  const Runtime rt(base_options());
  for (const auto& p : rt.plugins()) {
    if (p.state != PluginInfo::State::loaded) {
      BOOST_TEST(!p.reason.empty(), p.path << " was rejected without a reason");
      continue;
    }
    for (const auto& d : p.devices)
      if (!d.available)
        BOOST_TEST(!d.reason.empty(), p.name << ": device " << d.type << " unavailable without a reason");
  }
}
