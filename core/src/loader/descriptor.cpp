#include "loader/descriptor.hpp"

#include "loader/rejection.hpp"
#include "loader/safe_read.hpp"
#include "loader/schema.hpp"
#include "services/log.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace deltakern::detail {
namespace {

// The ABI 1.0 fields every plugin must fill; check_errors, after them, is optional.
constexpr size_t kPluginHeaderSize = DK_SIZE_THROUGH(dk_plugin, abi_minor);
constexpr size_t kPluginWithCheckErrors = DK_SIZE_THROUGH(dk_plugin, check_errors);
constexpr size_t kCapsWithLimits = DK_SIZE_THROUGH(dk_caps, limits);
constexpr size_t kMaxLimits = 16;

const Schema& canonical_schema(OpId op) {
  static const std::array<Schema, kOpCount> schemas = [] {
    std::array<Schema, kOpCount> parsed;
    for (const auto& def : kOps) parsed[index_of(def.id)] = parse_schema(def.canonical_schema);
    return parsed;
  }();
  return schemas[index_of(op)];
}

std::vector<Layout> layouts_of(uint32_t bits) {
  std::vector<Layout> layouts;
  if ((bits & DK_LAYOUT_TIME_CONTIGUOUS) != 0) layouts.push_back(Layout::time_contiguous);
  if ((bits & DK_LAYOUT_CHANNEL_LAST) != 0) layouts.push_back(Layout::channel_last);
  return layouts;
}

// Element i of a plugin's array of structs: the stride is the plugin's struct size, which a
// newer minor may have grown. Only the address: nothing is read through it.
template <class T>
const T* element(const T* array, size_t stride, size_t i) {
  return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(array) + i * stride);
}

// The struct_size of the struct at `src` (for an array, its first element's: the stride).
template <class T>
size_t struct_size_of(const T* src, std::string_view what, const auto& where) {
  const auto size = read_from_plugin(&src->struct_size);
  if (!size) reject(where(fmt::format("{} points to unreadable memory", what)));
  return *size;
}

std::string read_string(const char* s, size_t limit, std::string_view field, const auto& where) {
  const PluginString read = read_plugin_string(s, limit);
  if (auto problem = string_problem(field, read, limit)) reject(where(*problem));
  return read.text;
}

std::string smaller_than_abi(std::string_view what, size_t size, size_t minimum,
                             std::string_view abi = "1.0") {
  return fmt::format("{}struct_size {} is smaller than ABI {}'s {}", what, size, abi, minimum);
}

// The struct at src as far as both its writer and this core know it: a smaller (older) one
// leaves the fields it lacks zero, a larger (newer) one has its extra fields ignored.
template <class T>
bool copy_known(T& dst, const T* src, size_t struct_size) {
  dst = T{};
  return copy_from_plugin(&dst, src, std::min(struct_size, sizeof(T)));
}

std::vector<OpInfo::Limit> read_limits(const dk_caps& caps, size_t caps_size, OpId op, const auto& old,
                                       const auto& bound) {
  std::vector<OpInfo::Limit> limits;
  if (caps_size < kCapsWithLimits || caps.n_limits == 0) return limits;
  if (caps.n_limits > kMaxLimits)
    reject(bound(fmt::format("declares {} limits; at most {}", caps.n_limits, kMaxLimits)));
  if (caps.limits == nullptr)
    reject(old(fmt::format("declares {} limits but no limit table", caps.n_limits)));
  const size_t stride = struct_size_of(caps.limits, "limits", bound);
  if (stride < DK_LIMIT_SIZE_1_1)
    reject(old(smaller_than_abi("limit 0: ", stride, DK_LIMIT_SIZE_1_1, "1.1")));
  if (stride > kMaxStructSize)
    reject(bound(fmt::format("limit 0: struct_size {} exceeds {}", stride, kMaxStructSize)));
  for (size_t j = 0; j < caps.n_limits; ++j) {
    dk_limit l;
    if (!copy_known(l, element(caps.limits, stride, j), stride))
      reject(bound(fmt::format("limit {} points to unreadable memory", j)));
    const std::string which = fmt::format("limit {}: ", j);
    if (l.struct_size != stride)
      reject(bound(fmt::format("{}struct_size {} differs from limit 0's {}", which, l.struct_size, stride)));
    if (l.dim == nullptr) reject(old(which + "no dimension"));
    std::string dim = read_string(l.dim, kMaxNameBytes, "dimension", bound);
    if (!dim_index(op, dim))
      reject(old(fmt::format("{}dimension '{}' is not one of {}'s ({}): built for a newer ABI than {}.{}?",
                             which, dim, op_name(op), fmt::join(kOps[index_of(op)].dims, ", "), DK_ABI_MAJOR,
                             DK_ABI_MINOR)));
    if (l.max < l.min)
      reject(old(fmt::format("{}{} limited to {}..{}, an empty range", which, dim, l.min, l.max)));
    limits.push_back({std::move(dim), l.min, l.max});
  }
  return limits;
}

OpInfo read_op(const dk_op& op, size_t index, std::string_view name) {
  // The checks an ABI 1.0 core always made keep their words; the bounds name the op by index too.
  const auto old = [&](std::string_view what) { return fmt::format("op '{}': {}", name, what); };
  const auto bound = [&](std::string_view what) { return fmt::format("op {} ({}): {}", index, name, what); };
  if (op.schema == nullptr) reject(old("no schema"));
  const std::string schema = read_string(op.schema, kMaxSchemaBytes, "schema", bound);
  if (op.run == nullptr) reject(old("no run function"));
  OpInfo info;
  info.name = name;
  info.schema = schema;
  try {
    const Schema declared = parse_schema(schema);
    if (auto difference = schema_difference(declared, canonical_schema(*op_from_name(name))))
      reject(old(fmt::format("schema does not match the canonical one: {}", *difference)));
    MutationContract contract = mutation_contract(declared);
    info.mutated = std::move(contract.written);
    info.returns_alias_of = std::move(contract.returns_alias_of);
    info.returns_tensor = !declared.returns.empty();
    if (is_out_variant(*op_from_name(name))) {
      // An out-variant's whole point: the result lands in out and x stays as it was.
      const auto writes = [&](std::string_view argument) {
        return std::find(info.mutated.begin(), info.mutated.end(), argument) != info.mutated.end();
      };
      if (!writes("out")) reject(old("an out-variant must annotate out as written (Tensor(a!) out)"));
      if (writes("x")) reject(old("an out-variant must not write x (x is annotated as written)"));
    }
  } catch (const SchemaError& e) {
    reject(old(fmt::format("invalid schema: {}", e.what())));
  }

  if (op.caps == nullptr) reject(old("no capabilities"));
  const size_t caps_size = struct_size_of(op.caps, "capabilities", bound);
  if (caps_size < DK_CAPS_SIZE_1_0)
    reject(old(smaller_than_abi("capabilities ", caps_size, DK_CAPS_SIZE_1_0)));
  if (caps_size > kMaxStructSize)
    reject(bound(fmt::format("capabilities struct_size {} exceeds {}", caps_size, kMaxStructSize)));
  dk_caps caps;
  if (!copy_known(caps, op.caps, caps_size)) reject(bound("capabilities point to unreadable memory"));
  if (caps.min_width < 1 || caps.max_width < caps.min_width)
    reject(old(fmt::format("invalid widths {}..{}", caps.min_width, caps.max_width)));
  if (caps.n_dtypes == 0 || caps.dtypes == nullptr) reject(old("declares no dtypes"));
  if (caps.n_dtypes > kMaxDtypes)
    reject(bound(fmt::format("declares {} dtypes; at most {}", caps.n_dtypes, kMaxDtypes)));
  if (caps.n_devices == 0 || caps.devices == nullptr) reject(old("declares no devices"));
  if (caps.n_devices > kMaxDevices)
    reject(bound(fmt::format("declares {} devices; at most {}", caps.n_devices, kMaxDevices)));
  info.layouts = layouts_of(caps.layouts);
  if (info.layouts.empty()) reject(old("declares no layouts"));
  info.min_width = caps.min_width;
  info.max_width = caps.max_width;
  info.dtypes.resize(caps.n_dtypes);
  if (!copy_from_plugin(info.dtypes.data(), caps.dtypes, caps.n_dtypes * sizeof(DLDataType)))
    reject(bound(fmt::format("its {} dtypes point to unreadable memory", caps.n_dtypes)));
  info.limits = read_limits(caps, caps_size, *op_from_name(name), old, bound);

  const size_t stride = struct_size_of(caps.devices, "devices", bound);
  if (stride < DK_DEVICE_CAPS_SIZE_1_0)
    reject(old(smaller_than_abi("device 0: ", stride, DK_DEVICE_CAPS_SIZE_1_0)));
  if (stride > kMaxStructSize)
    reject(bound(fmt::format("device 0: struct_size {} exceeds {}", stride, kMaxStructSize)));
  for (size_t j = 0; j < caps.n_devices; ++j) {
    dk_device_caps d;
    if (!copy_known(d, element(caps.devices, stride, j), stride))
      reject(bound(fmt::format("device {} points to unreadable memory", j)));
    const std::string which = fmt::format("device {}: ", j);
    if (d.struct_size != stride)
      reject(bound(fmt::format("{}struct_size {} differs from device 0's {}", which, d.struct_size, stride)));
    info.devices.push_back({static_cast<DLDeviceType>(d.device_type), d.min_compute_capability,
                            (d.flags & DK_CAP_DERIVES_MAX_SEQ_LEN) != 0,
                            (d.flags & DK_CAP_GRAPH_CAPTURABLE) != 0});
  }
  return info;
}

void read_ops(const dk_plugin& d, PluginInfo& info, Descriptor& out) {
  if (d.n_ops == 0) return;
  if (d.n_ops > kMaxOps) reject(fmt::format("declares {} ops; at most {}", d.n_ops, kMaxOps));
  if (d.ops == nullptr) reject(fmt::format("declares {} ops but no op table", d.n_ops));
  const auto as_is = [](std::string_view what) { return std::string(what); };
  const size_t stride = struct_size_of(d.ops, "the op table", as_is);
  if (stride < DK_OP_SIZE_1_0) reject(smaller_than_abi("op 0: ", stride, DK_OP_SIZE_1_0));
  if (stride > kMaxStructSize) reject(fmt::format("op 0: struct_size {} exceeds {}", stride, kMaxStructSize));
  for (size_t i = 0; i < d.n_ops; ++i) {
    const auto at = [&](std::string_view what) { return fmt::format("op {}: {}", i, what); };
    dk_op op;
    if (!copy_known(op, element(d.ops, stride, i), stride)) reject(at("points to unreadable memory"));
    if (op.struct_size != stride)
      reject(at(fmt::format("struct_size {} differs from op 0's {}", op.struct_size, stride)));
    if (op.name == nullptr) reject(fmt::format("op {} has no name", i));
    const std::string name = read_string(op.name, kMaxNameBytes, "name", at);
    if (name.empty()) reject(fmt::format("op {} has no name", i));
    const auto id = op_from_name(name);
    if (!id) {
      // A plugin of a newer minor may declare ops this core has never heard of.
      logger().debug("plugin '{}': ignoring op '{}', which this core does not know", info.name, name);
      continue;
    }
    const size_t slot = index_of(*id);
    if (out.op(slot) != nullptr) reject(fmt::format("op '{}' is declared twice", name));
    info.ops.push_back(read_op(op, i, name));
    dk_op& kept = out.op_entries[slot];
    kept = op;
    kept.struct_size = sizeof(dk_op);
    kept.name = kOps[slot].name.data();  // a string literal: NUL-terminated
    kept.schema = nullptr;
    kept.caps = nullptr;
    out.op_info[slot] = static_cast<int>(info.ops.size() - 1);
  }
}

}  // namespace

Descriptor read_descriptor(const dk_plugin* descriptor, PluginInfo& info,
                           const std::function<void(const PluginInfo&)>& named) {
  if (descriptor == nullptr) reject("the entry returned no descriptor");
  const auto size = read_from_plugin(&descriptor->struct_size);
  if (!size) reject("the descriptor points to unreadable memory");
  if (*size > kMaxStructSize)
    reject(fmt::format("descriptor struct_size {} exceeds {}: not a dk_plugin", *size, kMaxStructSize));
  if (*size < kPluginHeaderSize)
    reject(fmt::format("descriptor struct_size {} is too small to hold its ABI version", *size));
  // A newer minor's struct is longer: only the fields this core knows are read.
  dk_plugin d{};
  if (!copy_from_plugin(&d, descriptor, std::min(*size, sizeof(dk_plugin))))
    reject(fmt::format("the descriptor's {} bytes are not all readable", *size));
  info.abi_major = d.abi_major;
  info.abi_minor = d.abi_minor;
  if (d.abi_major != DK_ABI_MAJOR)
    reject(fmt::format("built for ABI {}.{}; this core speaks ABI {}.{}", d.abi_major, d.abi_minor,
                       DK_ABI_MAJOR, DK_ABI_MINOR));
  if (d.struct_size < DK_PLUGIN_SIZE_1_0)
    reject(fmt::format("descriptor struct_size {} is smaller than ABI 1.0's minimum {}", d.struct_size,
                       DK_PLUGIN_SIZE_1_0));
  const auto field = [](std::string_view what) { return fmt::format("the descriptor's {}", what); };
  if (d.name == nullptr) reject("the descriptor has no name");
  info.name = read_string(d.name, kMaxNameBytes, "name", field);
  if (info.name.empty()) reject("the descriptor has no name");
  info.version = d.version != nullptr ? read_string(d.version, kMaxNameBytes, "version", field) : "";
  named(info);
  if (d.init == nullptr) reject("the descriptor has no init function");
  Descriptor out;
  read_ops(d, info, out);
  out.init = d.init;
  out.probe = d.probe;
  out.shutdown = d.shutdown;
  if (d.struct_size >= kPluginWithCheckErrors) out.check_errors = d.check_errors;
  return out;
}

}  // namespace deltakern::detail
