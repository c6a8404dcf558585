// The shared objects the dynamic loader has mapped into this process, and which of them a
// verdict on a plugin depends on: what loading it added that the system's packages do not own.
#pragma once

#include "loader/probe/probe_verdict.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace deltakern::detail {

// The loader's own names for what it has mapped (dl_iterate_phdr), the main program and the
// vDSO left out.
std::vector<std::string> loaded_objects();

// /lib, /usr/lib, /lib64, /usr/lib64 and their multiarch subdirectories (/usr/lib/x86_64-linux-gnu):
// what the distribution's packages own. /usr/local and /opt (/usr/local/cuda) are not.
bool in_system_library_dir(const std::filesystem::path& object);

// The objects in `after` but not in `before`, outside the system directories, the library
// `plugin` itself left out, with their identities: what a verdict on `plugin` depends on.
std::vector<FileIdentity> non_system_additions(const std::vector<std::string>& before,
                                               const std::vector<std::string>& after,
                                               const FileIdentity& plugin);

}  // namespace deltakern::detail
