// Reading a plugin's descriptor (dk_plugin, its op table, capabilities and strings) without
// trusting it: every struct and string is copied through copy_from_plugin, which cannot fault,
// and checked against the limits below before any of it is used. What the core keeps is its
// own copy; a violation is a Rejection naming the field and the bound.
#pragma once

#include "ops.hpp"

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime_types.hpp>

#include <array>
#include <cstddef>
#include <functional>

namespace deltakern::detail {

// No ABI 1.x struct comes near this; a larger struct_size is garbage, not a newer minor.
inline constexpr size_t kMaxStructSize = 64 * 1024;
inline constexpr size_t kMaxOps = 256;
inline constexpr size_t kMaxDtypes = 256;
inline constexpr size_t kMaxDevices = 256;
// Bytes a string may take, its terminating NUL included.
inline constexpr size_t kMaxNameBytes = 256;  // plugin name, version, op names
inline constexpr size_t kMaxSchemaBytes = 8192;

// The core's copy of what a descriptor declares. Its function pointers are the plugin's; every
// pointer to data is either the core's own or null.
struct Descriptor {
  decltype(dk_plugin::init) init = nullptr;
  decltype(dk_plugin::probe) probe = nullptr;
  decltype(dk_plugin::shutdown) shutdown = nullptr;
  decltype(dk_plugin::check_errors) check_errors = nullptr;  // null when absent or too old a minor
  // By OpId, with `name` pointing at the core's own op name and no schema or caps.
  std::array<dk_op, kOpCount> op_entries{};
  std::array<int, kOpCount> op_info = kNoOpInfo;  // index into the PluginInfo's ops; -1: not declared

  // Null where the plugin lacks the op; valid as long as this Descriptor is where it is.
  const dk_op* op(size_t slot) const { return op_info[slot] >= 0 ? &op_entries[slot] : nullptr; }
};

// Reads the header (struct_size, ABI version, name, version) into info as it is found, so a
// rejection keeps what was read before it; calls `named` once the name is known (it may reject
// a duplicate before any op is read); then reads the op table into info.ops. Throws Rejection.
Descriptor read_descriptor(const dk_plugin* descriptor, PluginInfo& info,
                           const std::function<void(const PluginInfo&)>& named);

}  // namespace deltakern::detail
