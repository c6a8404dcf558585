#include "contract.hpp"

#include "poison.hpp"

#include <algorithm>

namespace deltakern::conformance {

Snapshot snapshot(std::span<const NamedArg> args) {
  Snapshot s;
  for (const auto& a : args) s.push_back(a.buf != nullptr ? a.buf->bytes() : std::vector<std::byte>{});
  return s;
}

void restore(std::span<const NamedArg> args, const Snapshot& before) {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].buf != nullptr) args[i].buf->set_bytes(before[i]);
}

bool is_mutated(const OpInfo& info, std::string_view arg) {
  return std::find(info.mutated.begin(), info.mutated.end(), arg) != info.mutated.end();
}

bool returns_x(const OpInfo& info) {
  return info.returns_alias_of.has_value() && *info.returns_alias_of == "x";
}

namespace {

// The element that byte `b` of the allocation belongs to, or -1 for slack.
std::vector<int64_t> byte_owners(const TensorBuf& buf) {
  std::vector<int64_t> owner(buf.alloc_bytes(), -1);
  const auto offs = buf.alloc_offsets();
  const size_t size = size_of(buf.dtype());
  for (size_t e = 0; e < offs.size(); ++e)
    for (size_t k = 0; k < size; ++k) owner[static_cast<size_t>(offs[e]) + k] = static_cast<int64_t>(e);
  return owner;
}

std::string index_of(const TensorBuf& buf, int64_t element) { return index_string(buf.shape(), element); }

std::string range_string(const AddressRange& r, uintptr_t origin) {
  const auto signed_offset = [origin](uintptr_t a) {
    return std::to_string(static_cast<int64_t>(a - origin));
  };
  return "[" + signed_offset(r.lo) + ", " + signed_offset(r.hi) + ")";
}

std::string shape_string(const DLTensor& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + ")";
}

}  // namespace

std::string check_unannotated(const OpInfo& info, std::span<const NamedArg> args, const Snapshot& before) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a.buf == nullptr || is_mutated(info, a.name)) continue;
    const auto after = a.buf->bytes();
    if (after == before[i]) continue;
    const auto owner = byte_owners(*a.buf);
    size_t b = 0;
    while (b < after.size() && after[b] == before[i][b]) ++b;
    std::string where;
    if (owner[b] >= 0) {
      where = "element " + index_of(*a.buf, owner[b]);
    } else {
      where = "byte " + std::to_string(b) + " of its allocation, outside its elements";
    }
    return a.name + " changed at " + where + " although the schema (" + info.schema +
           ") does not mark it written";
  }
  return {};
}

std::string check_changes_only_in(const NamedArg& arg, const std::vector<std::byte>& before,
                                  std::span<const uint8_t> may_change, const Describe& describe) {
  const auto after = arg.buf->bytes();
  if (after == before) return {};
  const auto owner = byte_owners(*arg.buf);
  for (size_t b = 0; b < after.size(); ++b) {
    if (after[b] == before[b]) continue;
    const int64_t e = owner[b];
    if (e >= 0 && may_change[static_cast<size_t>(e)]) continue;
    if (e < 0)
      return arg.name + " changed at byte " + std::to_string(b) +
             " of its allocation, outside its elements (slack the op must not touch)";
    return arg.name + " changed at " + describe(e) + ", which this call must leave bit-identical";
  }
  return {};
}

std::string check_result(const OpInfo& info, const Tensor& result, const TensorBuf& x,
                         std::span<const NamedArg> args) {
  if (!result) return "the call returned no tensor";
  const DLTensor& r = result.dl();
  const DLTensor& xd = *x.dl();
  if (r.ndim != xd.ndim || !std::equal(r.shape, r.shape + r.ndim, xd.shape))
    return "the result's shape " + shape_string(r) + " differs from x's " + shape_string(xd);
  if (!same(r.dtype, xd.dtype))
    return "the result's dtype " + name_of(r.dtype) + " is not x's " + name_of(xd.dtype);
  if (r.device.device_type != xd.device.device_type || r.device.device_id != xd.device.device_id)
    return "the result is on another device than x";
  const AddressRange rr = address_range(r);
  if (returns_x(info)) {
    const auto start = [](const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data) + t.byte_offset; };
    bool same_view = start(r) == start(xd);
    for (int d = 0; d < r.ndim && same_view; ++d)
      if (r.shape[d] > 1 && stride(r, d) != stride(xd, d)) same_view = false;
    if (!same_view)
      return "the schema returns Tensor(a), an alias of x, but the result is not x's view (result aliases "
             "x: " +
             std::string(result.aliases(xd) ? "yes" : "no") + ")";
    return {};
  }
  if (info.returns_alias_of.has_value())
    return "the schema's result aliases '" + *info.returns_alias_of + "', which no op of ABI 1 may return";
  // Guards included: a result there would live in memory the backend was never given.
  for (const auto& a : args) {
    if (a.buf == nullptr) continue;
    const AddressRange ar = a.buf->with_guards();
    if (rr.overlaps(ar))
      return "the schema returns a fresh Tensor but the result overlaps the memory of " + a.name +
             " (result bytes " + range_string(rr, ar.lo) + " from the start of " + a.name + "'s guarded " +
             std::to_string(ar.hi - ar.lo) + " bytes)";
  }
  if (rr.empty()) return {};
  // A result from the host allocator: its elements inside what was asked for, its guards intact.
  const auto allocation = find_allocation(rr.lo);
  if (!allocation) return {};
  const uintptr_t end = allocation->start + allocation->bytes;
  if (rr.hi > end)
    return "the result's elements reach " + std::to_string(rr.hi - end) + " byte(s) past the end of the " +
           std::to_string(allocation->bytes) + " bytes it was allocated";
  return check_guards(allocation->device, reinterpret_cast<const void*>(allocation->start), allocation->bytes,
                      "the output");
}

std::string check_guards(std::span<const NamedArg> args) {
  for (const auto& a : args)
    if (a.buf != nullptr)
      if (auto m = a.buf->check_guards(a.name); !m.empty()) return m;
  return take_release_violations();
}

std::string check_syncs(uint64_t made, uint64_t expected, std::string_view situation) {
  if (made == expected) return {};
  const std::string counts = std::to_string(made) + " host sync(s) (read_to_host) " + std::string(situation) +
                             ", expected " + std::to_string(expected);
  if (made > expected) return "unexpected sync: " + counts;
  return "missing sync: " + counts;
}

const OpInfo::Device* device_caps(const OpInfo& info, int device_type) {
  for (const auto& d : info.devices)
    if (static_cast<int>(d.type) == device_type) return &d;
  return nullptr;
}

}  // namespace deltakern::conformance
