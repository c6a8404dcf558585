#include "worker_protocol.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace deltakern::conformance::worker_protocol {
namespace {

using nlohmann::json;

std::vector<std::string> strings_of(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(p.string());
  return out;
}

std::vector<std::filesystem::path> paths_of(const json& j) {
  std::vector<std::filesystem::path> out;
  for (const auto& p : j) out.emplace_back(p.get<std::string>());
  return out;
}

int64_t ticks(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Clock::time_point time_of(const json& j) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(j.get<int64_t>())));
}

// A backend's messages may hold any bytes; the line must stay valid JSON.
std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string to_json(const Request& r) {
  json runtime{{"read_environment", r.runtime.read_environment},
               {"plugin_path", strings_of(r.runtime.plugin_path)},
               {"plugin_files", strings_of(r.runtime.plugin_files)},
               {"search_default_dirs", r.runtime.search_default_dirs}};
  if (r.runtime.config_file) runtime["config_file"] = r.runtime.config_file->string();
  if (r.runtime.force_backend) runtime["force_backend"] = *r.runtime.force_backend;
  json j{{"runtime", runtime},
         {"target",
          {{"backend", r.target.backend},
           {"device_type", static_cast<int>(r.target.device.device_type)},
           {"device_id", r.target.device.device_id}}},
         {"suite",
          {{"tier", to_string(r.suite.tier)},
           {"seed", r.suite.seed},
           {"budget_seconds", r.suite.budget_seconds},
           {"sweep_cases", r.suite.sweep_cases}}},
         {"case_names", r.case_names},
         {"first", r.first}};
  if (r.sweep_deadline) j["sweep_deadline_ns"] = ticks(*r.sweep_deadline);
  return line_of(j);
}

Request request_from_json(std::string_view text) {
  const json j = json::parse(text);
  Request r;
  const json& rt = j.at("runtime");
  r.runtime.read_environment = rt.at("read_environment").get<bool>();
  r.runtime.plugin_path = paths_of(rt.at("plugin_path"));
  r.runtime.plugin_files = paths_of(rt.at("plugin_files"));
  r.runtime.search_default_dirs = rt.at("search_default_dirs").get<bool>();
  if (rt.contains("config_file")) r.runtime.config_file = rt.at("config_file").get<std::string>();
  if (rt.contains("force_backend")) r.runtime.force_backend = rt.at("force_backend").get<std::string>();
  const json& t = j.at("target");
  r.target.backend = t.at("backend").get<std::string>();
  r.target.device.device_type = static_cast<DLDeviceType>(t.at("device_type").get<int>());
  r.target.device.device_id = t.at("device_id").get<int32_t>();
  const json& s = j.at("suite");
  const auto tier = tier_from_string(s.at("tier").get<std::string>());
  if (!tier) throw std::invalid_argument("unknown tier " + s.at("tier").dump());
  r.suite.tier = *tier;
  r.suite.seed = s.at("seed").get<uint64_t>();
  r.suite.budget_seconds = s.at("budget_seconds").get<double>();
  r.suite.sweep_cases = s.at("sweep_cases").get<uint64_t>();
  r.case_names = j.at("case_names").get<std::vector<std::string>>();
  r.first = j.at("first").get<uint64_t>();
  if (j.contains("sweep_deadline_ns")) r.sweep_deadline = time_of(j.at("sweep_deadline_ns"));
  return r;
}

std::string plan_line(const std::vector<Case>& cases) {
  json list = json::array();
  for (const auto& c : cases) list.push_back({c.op, c.name});
  return line_of({{"event", "plan"}, {"cases", list}});
}

std::string start_line(uint64_t index, const Case& c) {
  return line_of({{"event", "start"}, {"index", index}, {"op", c.op}, {"name", c.name}});
}

std::string end_line(uint64_t index, const CaseResult& result, double milliseconds) {
  return line_of({{"event", "end"},
                  {"index", index},
                  {"passed", result.passed},
                  {"detail", result.detail},
                  {"ms", milliseconds}});
}

std::string sweep_line(Clock::time_point deadline) {
  return line_of({{"event", "sweep"}, {"deadline_ns", ticks(deadline)}});
}

std::string setup_failed_line(const std::string& detail) {
  return line_of({{"event", "setup_failed"}, {"detail", detail}});
}

std::string done_line(uint64_t next) { return line_of({{"event", "done"}, {"index", next}}); }

Event parse_event(std::string_view line) {
  const json j = json::parse(line);
  const std::string kind = j.at("event").get<std::string>();
  Event e;
  if (kind == "plan") {
    e.kind = Event::Kind::plan;
    for (const auto& c : j.at("cases"))
      e.plan.emplace_back(c.at(0).get<std::string>(), c.at(1).get<std::string>());
  } else if (kind == "start") {
    e.kind = Event::Kind::start;
    e.index = j.at("index").get<uint64_t>();
    e.op = j.at("op").get<std::string>();
    e.name = j.at("name").get<std::string>();
  } else if (kind == "end") {
    e.kind = Event::Kind::end;
    e.index = j.at("index").get<uint64_t>();
    e.passed = j.at("passed").get<bool>();
    e.detail = j.at("detail").get<std::string>();
    e.milliseconds = j.at("ms").get<double>();
  } else if (kind == "sweep") {
    e.kind = Event::Kind::sweep;
    e.deadline = time_of(j.at("deadline_ns"));
  } else if (kind == "setup_failed") {
    e.kind = Event::Kind::setup_failed;
    e.detail = j.at("detail").get<std::string>();
  } else if (kind == "done") {
    e.kind = Event::Kind::done;
    e.index = j.at("index").get<uint64_t>();
  } else {
    throw std::invalid_argument("unknown event '" + kind + "'");
  }
  return e;
}

}  // namespace deltakern::conformance::worker_protocol
