#include "loader/loaded_objects.hpp"

#include <link.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace deltakern::detail {

std::vector<std::string> loaded_objects() {
  std::vector<std::string> names;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        // The main program has an empty name, the vDSO a bare one ("linux-vdso.so.1"): no file.
        if (info->dlpi_name != nullptr && info->dlpi_name[0] == '/')
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

bool in_system_library_dir(const std::filesystem::path& object) {
  static constexpr std::array<std::string_view, 4> kRoots{"/lib", "/usr/lib", "/lib64", "/usr/lib64"};
  const std::filesystem::path dir = object.lexically_normal().parent_path();
  const auto is_root = [](const std::filesystem::path& p) {
    return std::find(kRoots.begin(), kRoots.end(), p.string()) != kRoots.end();
  };
  if (is_root(dir)) return true;
  // A multiarch tuple: x86_64-linux-gnu, aarch64-linux-gnu, arm-linux-gnueabihf, ...
  return is_root(dir.parent_path()) && dir.filename().string().find("-linux-") != std::string::npos;
}

std::vector<FileIdentity> non_system_additions(const std::vector<std::string>& before,
                                               const std::vector<std::string>& after,
                                               const FileIdentity& plugin) {
  std::vector<FileIdentity> added;
  for (const auto& name : after) {
    if (std::find(before.begin(), before.end(), name) != before.end() || in_system_library_dir(name))
      continue;
    const auto identity = identity_of(name);
    if (!identity || (identity->device == plugin.device && identity->inode == plugin.inode)) continue;
    if (std::find(added.begin(), added.end(), *identity) == added.end()) added.push_back(*identity);
  }
  return added;
}

}  // namespace deltakern::detail
