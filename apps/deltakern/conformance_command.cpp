// `deltakern conformance`: runs the conformance suite from the installed library against
// every loaded backend (or one), forced through the dispatcher, on every device it can
// use here. Exit status 0 only when every check held.
#include "commands.hpp"
#include "dl_names.hpp"

#include <deltakern/conformance.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace deltakern::cli {

void add_conformance_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("conformance", "Prove the installed backends keep what they declare");
  struct Options {
    std::string backend, device;
    bool verbose = false;
  };
  static Options o;
  cmd->add_option("--backend", o.backend, "only this backend (default: every loaded one)");
  cmd->add_option("--device", o.device, "only this device kind: cpu or cuda");
  cmd->add_flag("-v,--verbose", o.verbose, "print every case, not only failures");
  cmd->callback([] {
    RuntimeOptions base;
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

    // Per target and op: passed / failed counts, for the closing table.
    std::map<std::tuple<std::string, std::string>, std::pair<int, int>> tally;
    const auto summary = conformance::run(base, targets, [&](const conformance::CaseResult& r) {
      auto& [pass, fail] = tally[{r.target.label(), r.op}];
      (r.passed ? pass : fail) += 1;
      if (!r.passed || o.verbose)
        fmt::print("{} {:<16} {:<22} {}{}\n", r.passed ? "PASS" : "FAIL", r.target.label(), r.op, r.name,
                   r.passed ? "" : "\n     " + r.detail);
    });

    fmt::print("\n{:<22} {:<22} {:>7} {:>7}\n", "target", "op", "passed", "failed");
    for (const auto& [key, counts] : tally)
      fmt::print("{:<22} {:<22} {:>7} {:>7}\n", std::get<0>(key), std::get<1>(key), counts.first,
                 counts.second);
    fmt::print("\n{} passed, {} failed\n", summary.passed, summary.failed);
    if (summary.failed > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace deltakern::cli
