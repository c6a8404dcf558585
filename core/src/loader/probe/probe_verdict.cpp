#include "loader/probe/probe_verdict.hpp"

#include <sys/stat.h>
#include <nlohmann/json.hpp>

namespace deltakern::detail {

void to_json(nlohmann::json& j, const ProbeVerdict& v) {
  j = {{"passed", v.passed},       {"reason", v.reason},         {"name", v.name},
       {"version", v.version},     {"abi_major", v.abi_major},   {"abi_minor", v.abi_minor},
       {"timed_out", v.timed_out}, {"timeout_ms", v.timeout_ms}, {"dependencies", v.dependencies}};
}

void from_json(const nlohmann::json& j, ProbeVerdict& v) {
  j.at("passed").get_to(v.passed);
  j.at("reason").get_to(v.reason);
  j.at("name").get_to(v.name);
  j.at("version").get_to(v.version);
  j.at("abi_major").get_to(v.abi_major);
  j.at("abi_minor").get_to(v.abi_minor);
  j.at("timed_out").get_to(v.timed_out);
  j.at("timeout_ms").get_to(v.timeout_ms);
  j.at("dependencies").get_to(v.dependencies);
}

std::optional<FileIdentity> identity_of(const std::filesystem::path& file) {
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(file, ec);
  if (ec) return std::nullopt;
  struct stat st {};
  if (::stat(canonical.c_str(), &st) != 0) return std::nullopt;
  const auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  return FileIdentity{canonical.string(),
                      static_cast<uint64_t>(st.st_size),
                      static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_dev),
                      ns(st.st_mtim),
                      ns(st.st_ctim)};
}

void to_json(nlohmann::json& j, const FileIdentity& f) {
  j = {{"path", f.path},     {"size", f.size},         {"inode", f.inode},
       {"device", f.device}, {"mtime_ns", f.mtime_ns}, {"ctime_ns", f.ctime_ns}};
}

void from_json(const nlohmann::json& j, FileIdentity& f) {
  j.at("path").get_to(f.path);
  j.at("size").get_to(f.size);
  j.at("inode").get_to(f.inode);
  j.at("device").get_to(f.device);
  j.at("mtime_ns").get_to(f.mtime_ns);
  j.at("ctime_ns").get_to(f.ctime_ns);
}

}  // namespace deltakern::detail
