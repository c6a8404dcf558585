// Verdicts of earlier probes, kept in a small JSON file so that the next start spawns no
// child for a library that has not changed. A verdict holds only while the library's file
// identity (canonical path, size, inode, mtime, ctime), those of the non-system libraries
// loading it pulled in (its own dependencies, as the child's loader resolved them), the
// LD_LIBRARY_PATH they were resolved under, the core library and the probe helper (both by
// identity: a rebuilt core may judge differently) and the ABI version are what they were. Failing verdicts
// are cached too: a crashing plugin must not cost a child, and a hanging one a time-out, on every start; a
// changed file is probed again, and a time-out is probed again under a longer limit.
#pragma once

#include "loader/probe/probe_verdict.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <vector>

namespace deltakern::detail {

// Who judged: a verdict of another core, helper or ABI does not count.
struct ProbeContext {
  std::string abi;  // "major.minor"
  FileIdentity core, helper;
  bool operator==(const ProbeContext&) const = default;
};

class VerdictCache {
 public:
  // Reads the file. A missing one is an empty cache; an unreadable or corrupt one is
  // ignored with a warning (and replaced at the next save).
  VerdictCache(std::filesystem::path file, ProbeContext context);

  // `ld_library_path`: this process's, which a child inherits ("" when unset).
  std::optional<ProbeVerdict> find(const FileIdentity& library, std::chrono::milliseconds timeout,
                                   const std::string& ld_library_path) const;
  void store(const FileIdentity& library, const ProbeVerdict& verdict, const std::string& ld_library_path);

  // Writes the file when something was stored: merged with what another process may have
  // written meanwhile, entries of vanished libraries dropped, written to a temporary file
  // and renamed over the old one. A failure is a warning; the verdicts still hold for now.
  void save();

  const std::filesystem::path& file() const { return file_; }

  struct Entry {
    FileIdentity library;
    ProbeContext context;
    ProbeVerdict verdict;  // with the dependencies it was made with
    std::string ld_library_path;
  };

 private:
  std::vector<Entry> read(bool warn) const;
  void write_merged();

  std::filesystem::path file_;
  ProbeContext context_;
  std::vector<Entry> entries_;
  std::vector<Entry> stored_;  // this run's, to merge at save
};

// LD_LIBRARY_PATH as this process has it, "" when unset: the loader searches it first.
std::string current_ld_library_path();

// $XDG_CACHE_HOME/deltakern/probe-verdicts.json, else ~/.cache/...; nullopt with neither.
std::optional<std::filesystem::path> default_verdict_cache_file();

}  // namespace deltakern::detail
