// `deltakern conformance`: runs the conformance suite from the installed library against
// every loaded backend (or one), forced through the dispatcher, on every device it can
// use here. Exit status 0 only when every check held.
#include "commands.hpp"
#include "dl_names.hpp"

#include <deltakern/conformance.hpp>

#include <fmt/core.h>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include <filesystem>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace deltakern::cli {
namespace {

// JUnit XML, which CI systems read: one <testsuite> per target, one <testcase> per case.
void write_junit(const std::filesystem::path& file, const conformance::Summary& summary) {
  namespace pt = boost::property_tree;
  pt::ptree root;
  auto& suites = root.add_child("testsuites", pt::ptree{});
  suites.put("<xmlattr>.name", "deltakern conformance");
  suites.put("<xmlattr>.tests", summary.passed + summary.failed);
  suites.put("<xmlattr>.failures", summary.failed);
  std::map<std::string, pt::ptree> by_target;
  for (const auto& r : summary.results) {
    pt::ptree& suite = by_target[r.target.label()];
    pt::ptree& test = suite.add_child("testcase", pt::ptree{});
    test.put("<xmlattr>.classname", r.target.label() + "." + r.op);
    test.put("<xmlattr>.name", r.name);
    if (!r.passed) {
      // The detail names the op, the case and the first differing element; in the
      // attribute for one-line readers, in the body for those that show it in full.
      pt::ptree& failure = test.add_child("failure", pt::ptree{r.detail});
      failure.put("<xmlattr>.message", r.detail);
      failure.put("<xmlattr>.type", r.op);
    }
  }
  for (auto& [label, suite] : by_target) {
    int tests = 0, failures = 0;
    for (const auto& [tag, test] : suite) {
      tests += tag == "testcase";
      failures += tag == "testcase" && test.count("failure") > 0;
    }
    suite.put("<xmlattr>.name", label);
    suite.put("<xmlattr>.tests", tests);
    suite.put("<xmlattr>.failures", failures);
    suites.add_child("testsuite", suite);
  }
  pt::write_xml(file.string(), root, std::locale(), pt::xml_writer_make_settings<std::string>(' ', 2));
}

}  // namespace

void add_conformance_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("conformance", "Prove the installed backends keep what they declare");
  struct Options {
    std::string backend, device, plugin, junit;
    bool verbose = false;
  };
  static Options o;
  cmd->add_option("--backend", o.backend, "only this backend (default: every loaded one)");
  cmd->add_option("--device", o.device, "only this device kind: cpu or cuda");
  cmd->add_option("--plugin", o.plugin,
                  "a plugin library to test, loaded before (and so winning over) the search path")
      ->check(CLI::ExistingFile);
  cmd->add_option("--junit", o.junit, "also write the results as JUnit XML to this file");
  cmd->add_flag("-v,--verbose", o.verbose, "print every case, not only failures");
  cmd->callback([] {
    RuntimeOptions base;
    if (!o.plugin.empty()) {
      const auto path = std::filesystem::absolute(o.plugin);
      base.plugin_files = {path};
      const Runtime runtime(base);
      const auto& plugins = runtime.plugins();
      const auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginInfo& p) {
        std::error_code ec;
        return std::filesystem::equivalent(p.path, path, ec);
      });
      if (it == plugins.end()) throw Error(ErrorCode::config, fmt::format("{}: not loaded", path.string()));
      if (it->state != PluginInfo::State::loaded)
        throw Error(ErrorCode::config, fmt::format("{}: rejected: {}", path.string(), it->reason));
      if (!o.backend.empty() && o.backend != it->name)
        throw Error(ErrorCode::config,
                    fmt::format("--backend {} but {} is plugin '{}'", o.backend, path.string(), it->name));
      o.backend = it->name;
    }
    std::vector<conformance::Target> targets;
    {
      const Runtime runtime(base);
      for (auto& t : conformance::targets(runtime)) {
        if (!o.backend.empty() && t.backend != o.backend) continue;
        if (!o.device.empty() && device_name(static_cast<DLDeviceType>(t.device.device_type)) != o.device)
          continue;
        targets.push_back(std::move(t));
      }
      if (!o.backend.empty() && runtime.plugin(o.backend) == nullptr)
        throw Error(ErrorCode::config,
                    fmt::format("no loaded backend named '{}' (see deltakern list)", o.backend));
    }
    if (targets.empty()) throw Error(ErrorCode::unsupported, "no backend/device to test here");

    // Per target and op: passed / failed counts and the first failure, for the closing table.
    struct Tally {
      int passed = 0, failed = 0;
      std::string first_case, first_detail;
    };
    std::map<std::tuple<std::string, std::string>, Tally> tally;
    const auto summary = conformance::run(base, targets, [&](const conformance::CaseResult& r) {
      auto& t = tally[{r.target.label(), r.op}];
      (r.passed ? t.passed : t.failed) += 1;
      if (!r.passed && t.first_case.empty()) {
        t.first_case = r.name;
        t.first_detail = r.detail;
      }
      if (!r.passed || o.verbose)
        fmt::print("{} {:<16} {:<22} {}{}\n", r.passed ? "PASS" : "FAIL", r.target.label(), r.op, r.name,
                   r.passed ? "" : "\n     " + r.detail);
    });

    fmt::print("\n{:<22} {:<22} {:>7} {:>7}  {}\n", "target", "op", "passed", "failed", "first failed case");
    for (const auto& [key, t] : tally)
      fmt::print("{:<22} {:<22} {:>7} {:>7}  {}\n", std::get<0>(key), std::get<1>(key), t.passed, t.failed,
                 t.first_case);
    bool heading = false;
    for (const auto& [key, t] : tally) {
      if (t.first_detail.empty()) continue;
      if (!heading) fmt::print("\nfirst failure per target and op:\n");
      heading = true;
      fmt::print("  {}: {}\n", std::get<0>(key), t.first_detail);
    }
    if (!o.junit.empty()) write_junit(o.junit, summary);
    fmt::print("\n{} passed, {} failed\n", summary.passed, summary.failed);
    if (summary.failed > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace deltakern::cli
