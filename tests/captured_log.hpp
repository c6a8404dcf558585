// The core's log, captured: the core logs through the spdlog logger named "deltakern" when
// one is registered before its first message (spdlog is a shared library, so the registry is
// the process's). Use as BOOST_TEST_GLOBAL_FIXTURE(CapturedLog), so it is in place first.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deltakern::test {

struct CapturedLog {
  CapturedLog() {
    sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
    sink->set_pattern("%l: %v");
    spdlog::register_logger(std::make_shared<spdlog::logger>("deltakern", sink));
  }
  static inline std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink;

  // The warnings logged so far (the last 256 lines of any level), oldest first.
  static std::vector<std::string> warnings() {
    std::vector<std::string> out;
    for (auto& line : sink->last_formatted()) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      if (line.starts_with("warning: ")) out.push_back(line.substr(9));
    }
    return out;
  }
  // Lines of any level ("error: ...", "warning: ...") that contain `text`.
  static size_t lines_containing(std::string_view text) {
    const auto all = sink->last_formatted();
    return static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [&](const std::string& l) { return l.find(text) != l.npos; }));
  }
  static size_t warnings_containing(std::string_view text) {
    const auto all = warnings();
    return static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [&](const std::string& w) { return w.find(text) != w.npos; }));
  }
};

}  // namespace deltakern::test
