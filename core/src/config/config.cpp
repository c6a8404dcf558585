#include "config/config.hpp"

#include "config/install_paths.hpp"
#include "services/log.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace deltakern::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kProbeModeNames = "\"child\" or \"in-process\"";
constexpr int64_t kMinProbeTimeoutMs = 1;
constexpr int64_t kMaxProbeTimeoutMs = 3'600'000;

std::optional<ProbeMode> parse_probe_mode(std::string_view name) {
  if (name == "child") return ProbeMode::child;
  if (name == "in-process") return ProbeMode::in_process;
  return std::nullopt;
}

bool probe_timeout_in_range(int64_t ms) { return ms >= kMinProbeTimeoutMs && ms <= kMaxProbeTimeoutMs; }

[[noreturn]] void config_error(const std::string& message) { throw Error(ErrorCode::config, message); }

std::string_view kind_of(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::array:
      return "array";
    case toml::node_type::table:
      return "table";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

// Walks the parsed document; every complaint carries the file and the line of the key.
class Reader {
 public:
  explicit Reader(Config& config) : config_(config), file_(config.file.string()) {}

  void read(const toml::table& root) {
    for (auto&& [key, node] : root) {
      if (key == "plugins")
        plugins(table(node, "plugins"));
      else if (key == "dispatch")
        dispatch(table(node, "dispatch"));
      else if (key == "logging")
        logging(table(node, "logging"));
      else
        unknown_key(key, key.str());
    }
  }

 private:
  uint32_t line_of(const toml::node& node) const { return node.source().begin.line; }

  [[noreturn]] void fail(const toml::node& node, std::string_view key, std::string_view what) const {
    config_error(fmt::format("{}:{}: {}: {}", file_, line_of(node), key, what));
  }

  [[noreturn]] void unknown_key(const toml::key& key, std::string_view dotted) const {
    config_error(fmt::format("{}:{}: unknown key '{}'", file_, key.source().begin.line, dotted));
  }

  const toml::table& table(const toml::node& node, std::string_view key) const {
    if (const auto* t = node.as_table()) return *t;
    fail(node, key, fmt::format("expected a table, got {}", kind_of(node)));
  }

  bool boolean(const toml::node& node, std::string_view key) const {
    if (const auto* b = node.as_boolean()) return b->get();
    fail(node, key, fmt::format("expected a boolean, got {}", kind_of(node)));
  }

  std::string string(const toml::node& node, std::string_view key) const {
    if (const auto* s = node.as_string()) return s->get();
    fail(node, key, fmt::format("expected a string, got {}", kind_of(node)));
  }

  std::vector<std::pair<std::string, uint32_t>> strings(const toml::node& node, std::string_view key) const {
    const auto* array = node.as_array();
    if (array == nullptr) fail(node, key, fmt::format("expected an array of strings, got {}", kind_of(node)));
    std::vector<std::pair<std::string, uint32_t>> out;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const auto* s = element.as_string();
      if (s == nullptr)
        fail(element, fmt::format("{}[{}]", key, i),
             fmt::format("expected a string, got {}", kind_of(element)));
      out.emplace_back(s->get(), line_of(element));
    }
    return out;
  }

  BackendOrder backend_order(const toml::node& node, const std::string& key) const {
    BackendOrder order{{}, {}, key, false};
    for (auto& [name, line] : strings(node, key)) {
      if (std::find(order.names.begin(), order.names.end(), name) != order.names.end())
        config_error(fmt::format("{}:{}: {}[{}]: backend '{}' is listed twice", file_, line, key,
                                 order.names.size(), name));
      order.names.push_back(std::move(name));
      order.lines.push_back(line);
    }
    if (order.names.empty()) fail(node, key, "expected at least one backend, got an empty array");
    return order;
  }

  void plugins(const toml::table& t) {
    const fs::path base = config_.file.parent_path();
    for (auto&& [key, node] : t) {
      if (key == "search_paths") {
        config_.search_paths.clear();
        for (const auto& [path, line] : strings(node, "plugins.search_paths")) {
          const std::string entry_key = fmt::format("plugins.search_paths[{}]", config_.search_paths.size());
          config_.search_paths.push_back(search_path(path, line, entry_key, base));
        }
      } else if (key == "probe") {
        const std::string mode = string(node, "plugins.probe");
        const auto parsed = parse_probe_mode(mode);
        if (!parsed) fail(node, "plugins.probe", fmt::format("expected {}, got '{}'", kProbeModeNames, mode));
        config_.probe.mode = *parsed;
      } else if (key == "probe_timeout_ms") {
        const auto* value = node.as_integer();
        if (value == nullptr)
          fail(node, "plugins.probe_timeout_ms", fmt::format("expected an integer, got {}", kind_of(node)));
        if (!probe_timeout_in_range(value->get()))
          fail(node, "plugins.probe_timeout_ms",
               fmt::format("expected {}..{} milliseconds, got {}", kMinProbeTimeoutMs, kMaxProbeTimeoutMs,
                           value->get()));
        config_.probe.timeout = std::chrono::milliseconds(value->get());
      } else if (key == "probe_cache") {
        const fs::path p(string(node, "plugins.probe_cache"));
        config_.probe.cache = p.empty() || p.is_absolute() ? p : base / p;
      } else {
        unknown_key(key, "plugins." + std::string(key.str()));
      }
    }
  }

  // Like PATH, a directory that does not exist is skipped (one config serves machines with
  // and without an optional plugin directory), with a warning so that a typo is seen. An
  // empty entry, or one that exists but is no directory, is a mistake: an error.
  fs::path search_path(const std::string& entry, uint32_t line, const std::string& key,
                       const fs::path& base) {
    if (entry.empty())
      config_error(fmt::format("{}:{}: {}: expected a directory, got an empty string", file_, line, key));
    const fs::path path = fs::path(entry).is_absolute() ? fs::path(entry) : base / entry;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found)
      config_.warnings.push_back(fmt::format("{}:{}: {}: directory {} does not exist; not searched", file_,
                                             line, key, path.string()));
    else if (ec)
      config_error(fmt::format("{}:{}: {}: expected a directory, got {}: {}", file_, line, key, path.string(),
                               ec.message()));
    else if (status.type() != fs::file_type::directory)
      config_error(fmt::format("{}:{}: {}: expected a directory, got {}, which is not one", file_, line, key,
                               path.string()));
    return path;
  }

  void dispatch(const toml::table& t) {
    for (auto&& [key, node] : t) {
      if (key == "order")
        config_.order = backend_order(node, "dispatch.order");
      else if (key == "validate")
        config_.validate = boolean(node, "dispatch.validate");
      else if (key == "strict")
        set_strict(boolean(node, "dispatch.strict"), "dispatch.strict");
      else if (key == "ops")
        ops(table(node, "dispatch.ops"));
      else
        unknown_key(key, "dispatch." + std::string(key.str()));
    }
  }

  void set_strict(bool strict, std::string source) {
    config_.strict = strict;
    config_.strict_source = strict ? std::move(source) : std::string();
  }

  void ops(const toml::table& t) {
    for (auto&& [key, node] : t) {
      const std::string prefix = "dispatch.ops." + std::string(key.str());
      const auto op = op_from_name(key.str());
      if (!op)
        config_error(fmt::format("{}:{}: {}: unknown op '{}' (known: {})", file_, key.source().begin.line,
                                 prefix, key.str(), kKnownOpNames));
      one_op(table(node, prefix), prefix, config_.ops[index_of(*op)]);
    }
  }

  void one_op(const toml::table& t, const std::string& prefix, OpConfig& op) {
    const toml::node* backend_node = nullptr;
    const toml::node* order_node = nullptr;
    for (auto&& [key, node] : t) {
      if (key == "backend") {
        backend_node = &node;
        BackendOrder order{{string(node, prefix + ".backend")}, {line_of(node)}, prefix + ".backend", true};
        op.order = std::move(order);
      } else if (key == "order") {
        order_node = &node;
        op.order = backend_order(node, prefix + ".order");
      } else if (key == "validate") {
        op.validate = boolean(node, prefix + ".validate");
      } else {
        unknown_key(key, prefix + "." + std::string(key.str()));
      }
    }
    if (backend_node != nullptr && order_node != nullptr)
      fail(*order_node, prefix, "give either backend or order, not both");
  }

  void logging(const toml::table& t) {
    for (auto&& [key, node] : t) {
      if (key != "level") unknown_key(key, "logging." + std::string(key.str()));
      const std::string name = string(node, "logging.level");
      const auto level = parse_log_level(name);
      if (!level)
        fail(node, "logging.level", fmt::format("expected one of {}, got '{}'", kLogLevelNames, name));
      config_.log_level = *level;
    }
  }

  Config& config_;
  std::string file_;
};

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) config_error(fmt::format("{}: cannot read: is a directory", path.string()));
  std::ifstream in(path, std::ios::binary);
  if (!in) config_error(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) config_error(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  return std::move(content).str();
}

std::optional<fs::path> chosen_file(const RuntimeOptions& options) {
  if (options.read_environment) {
    if (const char* env = std::getenv("DELTAKERN_CONFIG"); env != nullptr && *env != '\0')
      return fs::path(env);
  }
  if (options.config_file) return *options.config_file;
  std::error_code ec;
  if (auto installed = installed_config_file(); fs::is_regular_file(installed, ec)) return installed;
  return std::nullopt;
}

// DELTAKERN_PROBE, DELTAKERN_PROBE_TIMEOUT_MS and DELTAKERN_PROBE_CACHE (empty: no cache)
// override the file, as DELTAKERN_LOG_LEVEL does.
void probe_environment(ProbeConfig& probe) {
  if (const char* env = std::getenv("DELTAKERN_PROBE"); env != nullptr && *env != '\0') {
    const auto mode = parse_probe_mode(env);
    if (!mode) config_error(fmt::format("DELTAKERN_PROBE: expected {}, got '{}'", kProbeModeNames, env));
    probe.mode = *mode;
  }
  if (const char* env = std::getenv("DELTAKERN_PROBE_TIMEOUT_MS"); env != nullptr && *env != '\0') {
    const std::string_view text(env);
    int64_t ms = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || end != text.data() + text.size() || !probe_timeout_in_range(ms))
      config_error(
          fmt::format("DELTAKERN_PROBE_TIMEOUT_MS: expected an integer {}..{} (milliseconds), got '{}'",
                      kMinProbeTimeoutMs, kMaxProbeTimeoutMs, text));
    probe.timeout = std::chrono::milliseconds(ms);
  }
  if (const char* env = std::getenv("DELTAKERN_PROBE_CACHE"); env != nullptr)
    probe.cache = *env == '\0' ? fs::path() : fs::absolute(fs::path(env)).lexically_normal();
}

}  // namespace

Config load_config(const RuntimeOptions& options) {
  Config config;
  if (const auto file = chosen_file(options)) {
    config.file = fs::absolute(*file).lexically_normal();
    const std::string content = read_file(config.file);
    toml::table root;
    try {
      root = toml::parse(content, config.file.string());
    } catch (const toml::parse_error& e) {
      config_error(fmt::format("{}:{}: {}", config.file.string(), e.source().begin.line, e.description()));
    }
    Reader(config).read(root);
  }
  if (options.read_environment) {
    // Wins over dispatch.strict either way, so a deployment can turn it off for one run.
    if (const char* env = std::getenv("DELTAKERN_STRICT"); env != nullptr && *env != '\0') {
      const std::string_view value(env);
      if (value != "0" && value != "1")
        config_error(fmt::format("DELTAKERN_STRICT: expected 0 or 1, got '{}'", value));
      config.strict = value == "1";
      config.strict_source = config.strict ? "DELTAKERN_STRICT=1" : "";
    }
    if (const char* env = std::getenv("DELTAKERN_LOG_LEVEL"); env != nullptr && *env != '\0') {
      const auto level = parse_log_level(env);
      if (!level)
        config_error(fmt::format("DELTAKERN_LOG_LEVEL: expected one of {}, got '{}'", kLogLevelNames, env));
      config.log_level = *level;
    }
    probe_environment(config.probe);
  }
  config.probe.child_log_level = config.log_level;
  return config;
}

void check_backend_names(const Config& config, const std::vector<std::string>& discovered) {
  std::set<std::string> known{"native", "portable"};
  known.insert(discovered.begin(), discovered.end());
  const auto check = [&](const BackendOrder& order) {
    for (size_t i = 0; i < order.names.size(); ++i) {
      if (known.contains(order.names[i])) continue;
      const std::string key = order.single ? order.key : fmt::format("{}[{}]", order.key, i);
      const std::string file =
          config.file.empty() ? std::string("<built-in defaults>") : config.file.string();
      config_error(fmt::format("{}:{}: {}: unknown backend '{}' (known: {})", file, order.lines[i], key,
                               order.names[i], fmt::join(known, ", ")));
    }
  };
  check(config.order);
  for (const auto& op : config.ops)
    if (op.order) check(*op.order);
}

}  // namespace deltakern::detail
