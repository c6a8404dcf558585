// What every test program shares: where the build put the plugins, the runtime options
// that make a test independent of the caller's environment, and small RAII helpers.
#pragma once

#include <deltakern/runtime.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace deltakern::test {

namespace fs = std::filesystem;

// The real plugins first, so the real `portable` wins over the test duplicate.
inline fs::path real_plugin_dir() { return DK_TEST_REAL_PLUGIN_DIR; }
inline fs::path test_plugin_dir() { return DK_TEST_PLUGIN_DIR; }
inline fs::path source_dir() { return DK_TEST_SOURCE_DIR; }
inline fs::path test_plugin_file(std::string_view name) {
  return test_plugin_dir() / ("libdeltakern_test_" + std::string(name) + ".so");
}

// A hostile plugin of the build, in the folder of its kind ("" for the first six, "later",
// "descriptor", "exceptions", "shared", "dependency").
inline fs::path hostile_plugin(std::string_view folder, std::string_view name) {
  return fs::path(DK_TEST_HOSTILE_PLUGIN_DIR) / folder /
         ("libdeltakern_hostile_" + std::string(name) + ".so");
}

// A defect plugin of the build (plugins/defects.cpp): correct but for one Defect.
inline fs::path defect_plugin(std::string_view name) {
  return fs::path(DK_TEST_DEFECT_PLUGIN_DIR) / ("libdeltakern_defect_" + std::string(name) + ".so");
}

inline RuntimeOptions base_options() {
  RuntimeOptions o;
  o.read_environment = false;
  o.config_file = source_dir() / "tests" / "deltakern-test.toml";
  o.plugin_path = {real_plugin_dir(), test_plugin_dir()};
  return o;
}

// One runtime per test program, forced to the in-place CPU test backend, so a call runs wherever
// validation lets it through.
inline Runtime& standin_runtime() {
  static Runtime rt([] {
    RuntimeOptions o = base_options();
    o.force_backend = "standin";
    return o;
  }());
  return rt;
}

// The default allocator's host memory, counted: which Runtime's allocator served a call, and
// whether what it gave came back to it. The counts outlive the Runtime it is installed on.
struct CountingAllocator {
  struct Counts {
    std::atomic<int64_t> allocated{0}, released{0};
  };
  std::shared_ptr<Counts> counts = std::make_shared<Counts>();
  Allocator allocator() const {
    return {[c = counts](DLDevice, size_t bytes, void*) -> void* {
              ++c->allocated;
              return ::operator new (std::max<size_t>(bytes, 1), std::align_val_t{64});
            },
            [c = counts](DLDevice, void* ptr, void*) {
              ++c->released;
              ::operator delete (ptr, std::align_val_t{64});
            }};
  }
  int64_t allocated() const { return counts->allocated.load(); }
  int64_t released() const { return counts->released.load(); }
};

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh directory removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("deltakern-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, std::string_view text) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  fs::path path_;
};

inline std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}
inline bool icontains(std::string_view haystack, std::string_view needle) {
  return contains(lower(haystack), lower(needle));
}

// `name` appears as a word of its own: "x" in "x: expected 2 dims" but not in "max_seq_len".
inline bool names_word(std::string_view text, std::string_view name) {
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    const bool left = at == 0 || !is_word(text[at - 1]);
    const bool right = at + name.size() == text.size() || !is_word(text[at + name.size()]);
    if (left && right) return true;
  }
  return false;
}

inline const PluginInfo* find_by_path(const Runtime& rt, const fs::path& path) {
  for (const auto& p : rt.plugins())
    if (fs::weakly_canonical(p.path) == fs::weakly_canonical(path)) return &p;
  return nullptr;
}

}  // namespace deltakern::test
