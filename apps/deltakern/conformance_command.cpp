// `deltakern conformance`: runs the conformance suite from the installed library against
// every loaded backend (or one), forced through the dispatcher, on every device it can
// use here; each target in worker processes of its own unless --in-process. Exit status 0
// only when every declared case ran and every check held, 1 when any failed, 2 for usage
// and configuration errors.
#include "commands.hpp"
#include "dl_names.hpp"

#include <deltakern/conformance.hpp>

#include <fmt/core.h>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace deltakern::cli {
namespace {

namespace conf = conformance;
using Milliseconds = std::chrono::duration<double, std::milli>;

// The op of the one case a plugin rejected at load gets; its target is the library's file.
constexpr const char* kLoadOp = "load";

std::string label_of(const conf::CaseResult& r) {
  return r.op == kLoadOp ? r.target.backend : r.target.label();
}

// JUnit XML, which CI systems read: one <testsuite> per target, one <testcase> per case.
void write_junit(const std::filesystem::path& file, const conf::Summary& summary,
                 const std::vector<Milliseconds>& took) {
  namespace pt = boost::property_tree;
  pt::ptree root;
  auto& suites = root.add_child("testsuites", pt::ptree{});
  suites.put("<xmlattr>.name", "deltakern conformance");
  suites.put("<xmlattr>.tests", summary.passed + summary.failed);
  suites.put("<xmlattr>.failures", summary.failed);
  std::map<std::string, pt::ptree> by_target;
  for (size_t i = 0; i < summary.results.size(); ++i) {
    const auto& r = summary.results[i];
    pt::ptree& suite = by_target[label_of(r)];
    pt::ptree& test = suite.add_child("testcase", pt::ptree{});
    test.put("<xmlattr>.classname", label_of(r) + "." + r.op);
    test.put("<xmlattr>.name", r.name);
    if (i < took.size()) test.put("<xmlattr>.time", fmt::format("{:.3f}", took[i].count() / 1000));
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

// A number given on the command line; anything else is a usage error (exit status 2).
template <typename T>
T number_of(const std::string& flag, const std::string& text, T low, const char* expected) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low)
    throw Error(ErrorCode::invalid_argument, fmt::format("{}: expected {}, got '{}'", flag, expected, text));
  return value;
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32 | device()) % 1'000'000'000'000ULL;  // short enough to retype
}

struct Options {
  std::string backend, device, plugin, junit;
  std::string tier = "full", seed, budget, sweep_cases, case_timeout = "300", max_failures = "0";
  std::vector<std::string> cases;
  bool in_process = false, verbose = false;
};

// Every verdict as it comes, flushed: a run that hangs or dies later has said this much.
class Progress {
 public:
  Progress(const Options& o, conf::Tier tier) : o_(o), tier_(tier) {}

  void started(const conf::Target& target, const std::string& op, const std::string& name) const {
    if (!o_.verbose) return;
    fmt::print("...  {:<16} {:<22} {}\n", target.label(), op, name);
    std::fflush(stdout);
  }

  void verdict(const conf::CaseResult& r, Milliseconds took) {
    took_.push_back(took);
    auto& t = tally_[{label_of(r), r.op}];
    (r.passed ? t.passed : t.failed) += 1;
    if (!r.passed && t.first_case.empty()) {
      t.first_case = r.name;
      t.first_detail = r.detail;
    }
    fmt::print("{} {:<16} {:<22} {} ({:.1f} ms)\n", r.passed ? "PASS" : "FAIL", label_of(r), r.op, r.name,
               took.count());
    if (!r.passed) {
      fmt::print("     {}\n", r.detail);
      if (r.op != kLoadOp && r.op != "setup" && r.op != "teardown")
        fmt::print("     reproduce: {}\n", reproduce(r));
    }
    std::fflush(stdout);
  }

  // The table, the first failures and the closing line; always, whatever happened before.
  void close(const conf::Summary& summary) const {
    fmt::print("\n{:<22} {:<24} {:>7} {:>7}  {}\n", "target", "op", "passed", "failed", "first failed case");
    for (const auto& [key, t] : tally_)
      fmt::print("{:<22} {:<24} {:>7} {:>7}  {}\n", std::get<0>(key), std::get<1>(key), t.passed, t.failed,
                 t.first_case);
    bool heading = false;
    for (const auto& [key, t] : tally_) {
      if (t.first_detail.empty()) continue;
      if (!heading) fmt::print("\nfirst failure per target and op:\n");
      heading = true;
      fmt::print("  {}: {}\n", std::get<0>(key), t.first_detail);
    }
    if (!o_.junit.empty()) write_junit(o_.junit, summary, took_);
    if (summary.stopped)
      fmt::print("\nstopped after {} failed case{} (--max-failures): the cases after it did not run\n",
                 summary.failed, summary.failed == 1 ? "" : "s");
    fmt::print("\n{} passed, {} failed\n", summary.passed, summary.failed);
    std::fflush(stdout);
  }

 private:
  // The command that runs this case alone, as this run was asked for.
  std::string reproduce(const conf::CaseResult& r) const {
    std::string command = "deltakern conformance";
    if (!o_.plugin.empty())
      command += " --plugin " + o_.plugin;
    else
      command += " --backend " + r.target.backend;
    if (!o_.device.empty()) command += " --device " + o_.device;
    if (tier_ == conf::Tier::large) command += " --tier large";  // the default tier holds the others' cases
    return command + " --case " + r.name;
  }

  struct Tally {
    int passed = 0, failed = 0;
    std::string first_case, first_detail;
  };
  const Options& o_;
  const conf::Tier tier_;
  std::map<std::tuple<std::string, std::string>, Tally> tally_;
  std::vector<Milliseconds> took_;  // in the order of the summary's results
};

// What --in-process runs: conf::run(), or the named cases alone.
}  // namespace

void add_conformance_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("conformance", "Prove the installed backends keep what they declare");
  static Options o;
  cmd->add_option("--backend", o.backend, "only this backend (default: every loaded one)");
  cmd->add_option("--device", o.device, "only this device kind: cpu or cuda");
  cmd->add_option("--plugin", o.plugin,
                  "a plugin library to test, loaded before (and so winning over) the search path");
  cmd->add_option("--junit", o.junit, "also write the results as JUnit XML to this file");
  cmd->add_option(
         "--tier", o.tier,
         "quick (small shapes, for CI), full (the shapes engines use), large (full and GPU-sized calls)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "the random sweep's seed (default: drawn at random and printed)");
  cmd->add_option("--budget", o.budget,
                  "seconds of random sweep after the fixed cases (default: 30, quick: 0)");
  cmd->add_option("--sweep-cases", o.sweep_cases,
                  "run exactly this many sweep cases instead of a time budget (verdicts that do not "
                  "depend on the machine's speed)");
  cmd->add_option("--case-timeout", o.case_timeout,
                  "seconds a case may run before it fails and its worker process is killed")
      ->capture_default_str();
  cmd->add_option("--case", o.cases, "run only this case (repeatable); sweep/<seed>/<k> is that sweep case");
  cmd->add_option("--max-failures", o.max_failures,
                  "stop after this many failed cases (default 0: run every case)")
      ->capture_default_str();
  cmd->add_flag(
      "--in-process", o.in_process,
      "run the cases in this process, for debugging: a backend that crashes, exits or hangs then takes "
      "the command with it, with no verdict");
  cmd->add_flag("-v,--verbose", o.verbose, "also print each case as it starts (out of process)");
  cmd->callback([] {
    const auto tier = conf::tier_from_string(o.tier);
    if (!tier)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("--tier: expected quick, full or large, got '{}'", o.tier));
    conf::SuiteOptions suite;
    suite.tier = *tier;
    suite.seed =
        o.seed.empty() ? random_seed() : number_of<uint64_t>("--seed", o.seed, 0, "a non-negative integer");
    suite.budget_seconds = o.budget.empty()
                               ? (*tier == conf::Tier::quick ? 0.0 : 30.0)
                               : number_of<double>("--budget", o.budget, 0, "seconds, 0 or more");
    conf::Isolation isolation;
    isolation.case_names = o.cases;
    isolation.case_timeout = std::chrono::duration<double>(
        number_of<double>("--case-timeout", o.case_timeout, 1e-3, "seconds, above 0"));
    if (!o.sweep_cases.empty()) {
      suite.sweep_cases = number_of<uint64_t>("--sweep-cases", o.sweep_cases, 1, "a positive integer");
      if (!o.budget.empty())
        throw Error(ErrorCode::invalid_argument, "--sweep-cases: give it or --budget, not both");
      suite.budget_seconds = 0;
    }
    if (!o.cases.empty()) suite.budget_seconds = 0, suite.sweep_cases = 0;  // the named cases are the run
    suite.max_failures = number_of<size_t>("--max-failures", o.max_failures, 0, "a non-negative integer");

    RuntimeOptions base;
    std::optional<conf::CaseResult> load_failure;
    std::vector<conf::Target> targets;
    {
      if (!o.plugin.empty()) {
        if (!std::filesystem::is_regular_file(o.plugin))
          throw Error(ErrorCode::invalid_argument, fmt::format("--plugin: no such file: {}", o.plugin));
        base.plugin_files = {std::filesystem::absolute(o.plugin)};
      }
      const Runtime runtime(base);
      if (!o.plugin.empty()) {
        const auto& path = base.plugin_files.front();
        const auto& plugins = runtime.plugins();
        const auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginInfo& p) {
          std::error_code ec;
          return std::filesystem::equivalent(p.path, path, ec);
        });
        if (it == plugins.end() || it->state != PluginInfo::State::loaded) {
          // A plugin the loader turns away fails its one case: the run still ends in a table
          // (and JUnit XML) saying why.
          const std::string why = it == plugins.end() ? "not loaded" : "rejected: " + it->reason;
          load_failure = conf::CaseResult{{path.filename().string(), {kDLCPU, 0}},
                                          kLoadOp,
                                          path.filename().string(),
                                          false,
                                          fmt::format("[load {}] {}", path.string(), why)};
        } else {
          if (!o.backend.empty() && o.backend != it->name)
            throw Error(ErrorCode::config, fmt::format("--backend {} but {} is plugin '{}'", o.backend,
                                                       path.string(), it->name));
          o.backend = it->name;
        }
      }
      if (!load_failure) {
        for (auto& t : conf::targets(runtime)) {
          if (!o.backend.empty() && t.backend != o.backend) continue;
          if (!o.device.empty() && device_name(static_cast<DLDeviceType>(t.device.device_type)) != o.device)
            continue;
          targets.push_back(std::move(t));
        }
        if (!o.backend.empty() && runtime.plugin(o.backend) == nullptr)
          throw Error(ErrorCode::config,
                      fmt::format("no loaded backend named '{}' (see deltakern list)", o.backend));
        if (targets.empty()) throw Error(ErrorCode::unsupported, "no backend/device to test here");
        // A name no target has is a typing error; one that some targets lack is said so.
        for (const auto& name : o.cases) {
          std::vector<std::string> lacking;
          for (const auto& t : targets)
            if (!conf::case_named(runtime, t, suite, name)) lacking.push_back(t.label());
          if (lacking.size() == targets.size())
            throw Error(ErrorCode::invalid_argument,
                        fmt::format("--case: no target has a case named '{}'", name));
          for (const auto& label : lacking)
            fmt::print("note: {} has no case named '{}'; not run there\n", label, name);
        }
      }
    }

    Progress progress(o, *tier);
    conf::Summary summary;
    if (load_failure) {
      fmt::print("deltakern conformance: {} was not loaded; its cases cannot run\n", o.plugin);
      progress.verdict(*load_failure, Milliseconds(0));
      summary.results.push_back(*load_failure);
      summary.failed = 1;
    } else {
      std::string labels;
      for (const auto& t : targets) labels += (labels.empty() ? "" : ", ") + t.label();
      const std::string sweep = suite.sweep_cases > 0 ? fmt::format("{} cases", suite.sweep_cases)
                                                      : fmt::format("{:g} s", suite.budget_seconds);
      fmt::print("deltakern conformance: {}; tier {}, seed {} (--seed {} repeats it), sweep {}, {}\n", labels,
                 conf::to_string(*tier), suite.seed, suite.seed, sweep,
                 o.in_process ? "in this process (--in-process)"
                              : fmt::format("each target in a worker process, per-case time-out {:g} s",
                                            isolation.case_timeout.count()));
      std::fflush(stdout);
      if (o.in_process) {
        auto last = std::chrono::steady_clock::now();
        summary = conf::run(
            base, targets,
            [&](const conf::CaseResult& r) {
              const auto now = std::chrono::steady_clock::now();
              progress.verdict(r, now - last);
              last = now;
            },
            suite, o.cases);
      } else {
        isolation.on_start = [&](const conf::Target& t, const std::string& op, const std::string& name) {
          progress.started(t, op, name);
        };
        summary = conf::run_isolated(
            base, targets, suite, isolation,
            [&](const conf::CaseResult& r, Milliseconds took) { progress.verdict(r, took); });
      }
    }
    progress.close(summary);
    if (summary.failed > 0) throw CLI::RuntimeError(1);
    if (summary.passed == 0) {
      fmt::print("no case ran\n");
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace deltakern::cli
