// `deltakern list`: every plugin found on the search path, loaded or rejected, with what it
// declares (ops, capabilities, mutation contract) or why it was turned away.
#include "commands.hpp"
#include "dl_names.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/runtime.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace deltakern::cli {
namespace {

std::vector<std::string> dtype_names(const OpInfo& op) {
  std::vector<std::string> names;
  for (const auto& d : op.dtypes) names.push_back(dtype_name(d));
  return names;
}

std::vector<std::string> layout_names(const OpInfo& op) {
  std::vector<std::string> names;
  for (const auto l : op.layouts) names.emplace_back(to_string(l));
  return names;
}

std::string contract_of(const OpInfo& op) {
  const std::string writes = op.mutated.empty() ? "nothing" : fmt::format("{}", fmt::join(op.mutated, ", "));
  const std::string result = !op.returns_tensor ? "returns nothing (the result is in out)"
                             : op.returns_alias_of
                                 ? fmt::format("returns {} (in place)", *op.returns_alias_of)
                                 : "returns a fresh tensor";
  return fmt::format("writes {}; {}", writes, result);
}

std::string device_caps(const OpInfo::Device& d) {
  std::string s = device_name(d.type);
  if (d.type == kDLCUDA && d.min_compute_capability > 0)
    s += fmt::format(" (sm_{}+)", d.min_compute_capability);
  std::vector<std::string> flags;
  flags.emplace_back(d.derives_max_seq_len ? "syncs once when max_seq_len is omitted" : "never syncs");
  if (d.graph_capturable) flags.emplace_back("graph-capturable");
  return fmt::format("{}: {}", s, fmt::join(flags, ", "));
}

const char* probe_source(PluginInfo::Probe probe) {
  switch (probe) {
    case PluginInfo::Probe::child:
      return "child";
    case PluginInfo::Probe::cache:
      return "cache";
    case PluginInfo::Probe::in_process:
      break;
  }
  return "in-process";
}

// Where the verdict on one library came from, for the text listing.
std::string probe_line(const PluginInfo& p) {
  switch (p.probe) {
    case PluginInfo::Probe::child:
      return fmt::format("verdict from a child process ({})", p.probe_note);
    case PluginInfo::Probe::cache:
      return "verdict from the cache (the file is unchanged since its child ran)";
    case PluginInfo::Probe::in_process:
      break;
  }
  return p.probe_note.empty() ? "none: loaded straight into this process"
                              : fmt::format("none: loaded straight into this process ({})", p.probe_note);
}

std::string probe_header(const ProbeSummary& probe) {
  if (probe.mode != "child") return fmt::format("{} (no child processes)", probe.mode);
  return fmt::format("child processes, time-out {} ms, verdict cache {}; {} children spawned now",
                     probe.timeout.count(), probe.cache.empty() ? "off" : probe.cache.string(),
                     probe.children);
}

void print_text(const Runtime& runtime) {
  fmt::print("config: {}\n",
             runtime.config_file().empty() ? "(built-in defaults)" : runtime.config_file().string());
  fmt::print("probe:  {}\n", probe_header(runtime.probe_summary()));
  fmt::print("search path:\n");
  for (const auto& dir : runtime.search_path()) fmt::print("  {}\n", dir.string());
  fmt::print("\n");
  for (const auto& p : runtime.plugins()) {
    const bool loaded = p.state == PluginInfo::State::loaded;
    fmt::print("{} {}{}\n", loaded ? "loaded  " : "rejected", p.name.empty() ? "(unnamed)" : p.name,
               p.version.empty() ? "" : " " + p.version);
    fmt::print("  path: {}\n", p.path.string());
    if (p.abi_major != 0) fmt::print("  abi:  {}.{}\n", p.abi_major, p.abi_minor);
    fmt::print("  probe: {}\n", probe_line(p));
    if (!loaded) {
      fmt::print("  reason: {}\n\n", p.reason);
      continue;
    }
    for (const auto& d : p.devices)
      fmt::print("  device {}: {}\n", device_name(d.type),
                 d.available ? "available" : "unavailable: " + d.reason);
    for (const auto& op : p.ops) {
      fmt::print("  op {}\n", op.name);
      fmt::print("    schema:   {}\n", op.schema);
      fmt::print("    contract: {}\n", contract_of(op));
      for (const auto& d : op.devices) fmt::print("    device:   {}\n", device_caps(d));
      fmt::print("    dtypes:   {}\n", fmt::join(dtype_names(op), ", "));
      fmt::print("    widths:   {}..{}\n", op.min_width, op.max_width);
      fmt::print("    layouts:  {}\n", fmt::join(layout_names(op), ", "));
      if (!op.limits.empty()) {
        std::vector<std::string> limits;
        for (const auto& l : op.limits) limits.push_back(fmt::format("{} {}..{}", l.dim, l.min, l.max));
        fmt::print("    limits:   {}\n", fmt::join(limits, ", "));
      }
    }
    fmt::print("\n");
  }
  for (const std::string op : {DK_OP_CAUSAL_CONV1D_VARLEN, DK_OP_CAUSAL_CONV1D_UPDATE,
                               DK_OP_CAUSAL_CONV1D_VARLEN_OUT, DK_OP_CAUSAL_CONV1D_UPDATE_OUT})
    fmt::print("preference for {}: {}\n", op, fmt::join(runtime.preference(op), " > "));
  if (const auto forced = runtime.forced_backend()) fmt::print("forced backend: {}\n", *forced);
  fmt::print("strict dispatch: {}\n", runtime.strict() ? "on" : "off");
}

nlohmann::json to_json(const Runtime& runtime) {
  using nlohmann::json;
  json out;
  out["config"] = runtime.config_file().string();
  out["search_path"] = json::array();
  for (const auto& dir : runtime.search_path()) out["search_path"].push_back(dir.string());
  const ProbeSummary probe = runtime.probe_summary();
  out["probe"] = {{"mode", probe.mode},
                  {"timeout_ms", probe.timeout.count()},
                  {"cache", probe.cache.string()},
                  {"children", probe.children}};
  out["plugins"] = json::array();
  for (const auto& p : runtime.plugins()) {
    json j{{"name", p.name},
           {"version", p.version},
           {"path", p.path.string()},
           {"abi", fmt::format("{}.{}", p.abi_major, p.abi_minor)},
           {"state", p.state == PluginInfo::State::loaded ? "loaded" : "rejected"}};
    if (p.state != PluginInfo::State::loaded) j["reason"] = p.reason;
    j["probe"] = {{"source", probe_source(p.probe)}, {"note", p.probe_note}};
    j["devices"] = json::array();
    for (const auto& d : p.devices)
      j["devices"].push_back(
          {{"type", device_name(d.type)}, {"available", d.available}, {"reason", d.reason}});
    j["ops"] = json::array();
    for (const auto& op : p.ops) {
      json o{{"name", op.name},           {"schema", op.schema},       {"dtypes", dtype_names(op)},
             {"min_width", op.min_width}, {"max_width", op.max_width}, {"layouts", layout_names(op)},
             {"mutates", op.mutated}};
      o["returns_alias_of"] = op.returns_alias_of ? json(*op.returns_alias_of) : json(nullptr);
      o["returns_tensor"] = op.returns_tensor;
      o["limits"] = json::array();
      for (const auto& l : op.limits) o["limits"].push_back({{"dim", l.dim}, {"min", l.min}, {"max", l.max}});
      o["devices"] = json::array();
      for (const auto& d : op.devices)
        o["devices"].push_back({{"type", device_name(d.type)},
                                {"min_compute_capability", d.min_compute_capability},
                                {"derives_max_seq_len", d.derives_max_seq_len},
                                {"graph_capturable", d.graph_capturable}});
      j["ops"].push_back(std::move(o));
    }
    out["plugins"].push_back(std::move(j));
  }
  out["forced_backend"] = runtime.forced_backend() ? json(*runtime.forced_backend()) : json(nullptr);
  out["strict"] = runtime.strict();
  return out;
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("list", "Every plugin found or rejected, with what it declares or why");
  static bool as_json = false;
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([] {
    Runtime runtime;
    if (as_json)
      fmt::print("{}\n", to_json(runtime).dump(2));
    else
      print_text(runtime);
  });
}

}  // namespace deltakern::cli
