// Descriptors that cannot be read as they come (a struct_size of 2^40, 2^60 ops or dtypes, a
// schema running into unmapped memory, an op name pointing there, no capabilities): every
// struct and string is copied through a read that cannot fault and checked against a bound,
// so each is rejected naming the field and the bound, with the same reason whether the child
// probe or this process reads it, and this process survives both.
#include <boost/test/unit_test.hpp>

#include "test_support.hpp"

using namespace deltakern;
using namespace deltakern::test;

namespace {

struct Defect {
  std::string name;
  std::string reason;
};

const std::vector<Defect> kDefects{
    {"struct_size_huge", "descriptor struct_size 1099511627776 exceeds 65536: not a dk_plugin"},
    {"n_ops_huge", "declares 1152921504606846976 ops; at most 256"},
    {"n_dtypes_huge", "op 0 (causal_conv1d_varlen): declares 1152921504606846976 dtypes; at most 256"},
    {"unterminated_schema", "op 0 (causal_conv1d_varlen): schema is not NUL-terminated within 8192 bytes"},
    {"op_name_unmapped", "op 1: name points to unreadable memory"},
    {"null_caps", "op 'causal_conv1d_varlen': no capabilities"},
    {"limit_unknown_dim",
     "op 'causal_conv1d_varlen': limit 0: dimension 'heads' is not one of causal_conv1d_varlen's (dim, "
     "tokens, "
     "batch, width, state_len, lines)"},
    {"limit_empty_range", "op 'causal_conv1d_varlen': limit 0: state_len limited to 65..64, an empty range"},
    {"n_limits_huge", "op 0 (causal_conv1d_varlen): declares 1152921504606846976 limits; at most 16"},
    {"op_too_small", "op 0: struct_size 40 is smaller than ABI 1.0's 48"},
};

fs::path defective(const Defect& d) { return hostile_plugin("descriptor", "bad_descriptor_" + d.name); }

// Every defective library and the standin, judged in `probe` mode with no verdict cache.
Runtime runtime(const TempDir& dir, std::string_view probe) {
  RuntimeOptions o;
  o.read_environment = false;
  o.search_default_dirs = false;
  o.config_file = dir.write("deltakern.toml", "[plugins]\nprobe = \"" + std::string(probe) +
                                                  "\"\nprobe_cache = \"\"\n[logging]\nlevel = \"off\"\n");
  for (const auto& d : kDefects) o.plugin_files.push_back(defective(d));
  o.plugin_files.push_back(test_plugin_file("standin"));
  return Runtime(o);
}

void check_rejections(const Runtime& rt, PluginInfo::Probe judged_by) {
  for (const auto& d : kDefects) {
    BOOST_TEST_CONTEXT(d.name) {
      const PluginInfo* p = find_by_path(rt, defective(d));
      BOOST_TEST_REQUIRE(p != nullptr);
      BOOST_TEST((p->state == PluginInfo::State::rejected));
      BOOST_TEST(contains(p->reason, d.reason), "reason: '" << p->reason << "'");
      BOOST_TEST((p->probe == judged_by));
      BOOST_TEST(rt.plugin("bad_descriptor_" + d.name) == nullptr);
    }
  }
  BOOST_TEST(rt.plugin("standin") != nullptr, "a good plugin beside them still loads");
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_defect_is_rejected_in_the_child_with_the_field_and_the_bound) {
  const TempDir dir;
  const Runtime rt = runtime(dir, "child");
  check_rejections(rt, PluginInfo::Probe::child);
  BOOST_TEST(rt.probe_summary().children == kDefects.size() + 1);
}

BOOST_AUTO_TEST_CASE(each_defect_is_rejected_in_process_with_the_same_reason_and_this_process_survives) {
  const TempDir dir;
  const Runtime in_process = runtime(dir, "in-process");
  check_rejections(in_process, PluginInfo::Probe::in_process);
  const Runtime child = runtime(dir, "child");
  for (const auto& d : kDefects) {
    BOOST_TEST_CONTEXT(d.name) {
      BOOST_TEST(find_by_path(in_process, defective(d))->reason == find_by_path(child, defective(d))->reason);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_schema_that_ends_where_memory_ends_says_how_much_could_be_read) {
  const TempDir dir;
  const Runtime rt = runtime(dir, "in-process");
  const PluginInfo* p = find_by_path(rt, defective(kDefects[3]));
  BOOST_TEST_REQUIRE(p != nullptr);
  BOOST_TEST(contains(p->reason, "is unreadable"), p->reason);
}
