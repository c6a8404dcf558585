// What probing a plugin library in a child process concludes, and the file identity a
// cached verdict is valid for. Both travel as JSON: on the child's pipe and in the cache.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace deltakern::detail {

// Everything about a file on disk whose change must invalidate a verdict: replacing it
// (new inode), rewriting it (size, mtime) or touching it (mtime, ctime).
struct FileIdentity {
  std::string path;  // canonical
  uint64_t size = 0, inode = 0, device = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct ProbeVerdict {
  bool passed = false;
  std::string reason;  // why not, when !passed
  // As far as the child got: empty/zero when it died before reading the descriptor.
  std::string name, version;
  uint16_t abi_major = 0, abi_minor = 0;
  // A time-out is cached with the limit it ran under, so that a longer limit probes again.
  bool timed_out = false;
  uint32_t timeout_ms = 0;
  // The shared objects loading the library added to the child that the system's packages do
  // not own (its own dependencies, as the loader resolved them): the verdict holds only while
  // they are what they were.
  std::vector<FileIdentity> dependencies;
};

void to_json(nlohmann::json& j, const ProbeVerdict& v);
void from_json(const nlohmann::json& j, ProbeVerdict& v);

// nullopt when the file cannot be stat'ed.
std::optional<FileIdentity> identity_of(const std::filesystem::path& file);

void to_json(nlohmann::json& j, const FileIdentity& f);
void from_json(const nlohmann::json& j, FileIdentity& f);

}  // namespace deltakern::detail
