#include "contract.hpp"

#include "poison.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <algorithm>
#include <cstring>
#include <exception>

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

// The first byte at which two images of one allocation differ; none when they are equal.
std::optional<size_t> first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  if (a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0))
    return std::nullopt;
  const size_t n = std::min(a.size(), b.size());
  const auto at = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
  return static_cast<size_t>(at.first - a.begin());
}

std::string where_in(const TensorBuf& buf, size_t byte) {
  if (const auto e = buf.element_at_byte(byte)) return "element " + index_string(buf.shape(), *e);
  return "byte " + std::to_string(byte) + " of its allocation, outside its elements";
}

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

// The arguments whose memory (guards included) the range shares, as "x (result bytes [a, b)
// from the start of x's guarded N bytes)", joined; empty when none.
std::string overlapped(const AddressRange& r, std::span<const NamedArg> args) {
  std::string names;
  for (const auto& a : args) {
    if (a.buf == nullptr) continue;
    const AddressRange ar = a.buf->with_guards();
    if (!r.overlaps(ar)) continue;
    names += (names.empty() ? "" : ", ") + a.name + " (result bytes " + range_string(r, ar.lo) +
             " from the start of " + a.name + "'s guarded " + std::to_string(ar.hi - ar.lo) + " bytes)";
  }
  return names;
}

}  // namespace

std::string check_unannotated(const OpInfo& info, std::span<const NamedArg> args, const Snapshot& before) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a.buf == nullptr || is_mutated(info, a.name)) continue;
    const auto b = first_difference(a.buf->bytes(), before[i]);
    if (!b) continue;
    return a.name + " changed at " + where_in(*a.buf, *b) + " although the schema (" + info.schema +
           ") does not mark it written";
  }
  return {};
}

std::string check_unchanged_since(std::span<const NamedArg> args, const Snapshot& expected,
                                  std::string_view when) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a.buf == nullptr) continue;
    if (const auto b = first_difference(a.buf->bytes(), expected[i]))
      return a.name + " changed at " + where_in(*a.buf, *b) + " " + std::string(when) +
             " (a write after the call returned)";
  }
  return {};
}

std::string check_changes_only_in(const NamedArg& arg, const std::vector<std::byte>& before,
                                  std::vector<std::byte> after,
                                  const std::function<bool(int64_t linear)>& may_change,
                                  const Describe& describe) {
  if (!first_difference(after, before)) return {};
  // Put the elements that may change back as they were: what is left must be identical.
  std::vector<std::byte>& masked = after;
  arg.buf->copy_elements(masked, before, may_change);
  const auto b = first_difference(masked, before);
  if (!b) return {};
  if (const auto e = arg.buf->element_at_byte(*b))
    return arg.name + " changed at " + describe(*e) + ", which this call must leave bit-identical";
  return arg.name + " changed at byte " + std::to_string(*b) +
         " of its allocation, outside its elements (slack the op must not touch)";
}

std::string check_result(const OpInfo& info, const Tensor& result, const TensorBuf& x,
                         std::span<const NamedArg> args, uint64_t call) {
  if (!result) return "the call returned no tensor";
  const DLTensor& r = result.dl();
  const DLTensor& xd = *x.dl();
  if (r.ndim != xd.ndim || !std::equal(r.shape, r.shape + r.ndim, xd.shape))
    return "the result's shape " + shape_string(r) + " differs from x's " + shape_string(xd);
  if (!plugin::same_dtype(r.dtype, xd.dtype))
    return "the result's dtype " + plugin::dtype_name(r.dtype) + " is not x's " +
           plugin::dtype_name(xd.dtype);
  if (r.device.device_type != xd.device.device_type || r.device.device_id != xd.device.device_id)
    return "the result is on another device than x";
  const AddressRange rr = address_range(r);
  if (returns_x(info)) {
    const auto start = [](const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data) + t.byte_offset; };
    bool same_view = start(r) == start(xd);
    for (int d = 0; d < r.ndim && same_view; ++d)
      if (r.shape[d] > 1 && stride(r, d) != stride(xd, d)) same_view = false;
    if (same_view) return {};
    const std::string where = overlapped(rr, args);
    return "the schema returns Tensor(a), an alias of x, but the result is not x's view (" +
           (where.empty() ? std::string("it overlaps no argument") : "it overlaps " + where) + ")";
  }
  if (info.returns_alias_of.has_value())
    return "the schema's result aliases '" + *info.returns_alias_of + "', which no op of ABI 1 may return";
  // Guards included: a result there would live in memory the backend was never given.
  if (const std::string where = overlapped(rr, args); !where.empty())
    return "the schema returns a fresh Tensor but the result overlaps the memory of " + where;
  if (rr.empty()) return {};
  // A fresh result is memory the host allocator handed out for this very call: anything else
  // (a buffer of the plugin's own, one kept from an earlier call) is shared by the results an
  // engine holds at once.
  const auto allocation = find_allocation(rr.lo);
  if (!allocation)
    return "the fresh result's memory was not handed out by the host allocator (a buffer of the "
           "backend's own: two results held at once would share it)";
  if (call != 0 && allocation->call != call)
    return "the fresh result lies in a block the host allocator handed out for an earlier call (call " +
           std::to_string(allocation->call) + "; this is call " + std::to_string(call) +
           "): a buffer kept and returned again, shared by the results an engine holds at once";
  const uintptr_t end = allocation->start + allocation->bytes;
  if (rr.hi > end)
    return "the result's elements reach " + std::to_string(rr.hi - end) + " byte(s) past the end of the " +
           std::to_string(allocation->bytes) + " bytes it was allocated";
  return check_guards(allocation->device, reinterpret_cast<const void*>(allocation->start), allocation->bytes,
                      "the output");
}

std::string check_apart(const Tensor& first, const Tensor& second) {
  if (!first || !second) return {};
  const AddressRange a = address_range(first.dl()), b = address_range(second.dl());
  if (!a.overlaps(b)) return {};
  return "the second call's fresh result shares memory with the first call's, which the caller still "
         "holds (bytes " +
         range_string(b, a.lo) + " from the start of the first result)";
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

std::string release_result(Tensor& result) {
  DLManagedTensor* managed = result.release();
  if (managed == nullptr || managed->deleter == nullptr) return {};
  try {
    managed->deleter(managed);
  } catch (const std::exception& e) {
    return std::string("the result's deleter threw (nothing may unwind across the ABI): ") + e.what();
  } catch (...) {
    return "the result's deleter threw a non-standard exception (nothing may unwind across the ABI)";
  }
  return {};
}

std::string HeldResults::release_all() {
  std::string first;
  for (auto& t : results_)
    if (auto m = release_result(t); !m.empty() && first.empty()) first = m;
  results_.clear();
  return first;
}

const OpInfo::Device* device_caps(const OpInfo& info, int device_type) {
  for (const auto& d : info.devices)
    if (static_cast<int>(d.type) == device_type) return &d;
  return nullptr;
}

std::string check_out_slack(const NamedArg& out, const std::vector<std::byte>& before,
                            const Describe& describe) {
  return check_changes_only_in(
      out, before, out.buf->bytes(), [](int64_t) { return true; }, describe);
}

}  // namespace deltakern::conformance
