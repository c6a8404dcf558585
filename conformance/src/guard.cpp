#include "guard.hpp"

#include <vector>

namespace deltakern::conformance {

namespace {

std::string hex(unsigned v) {
  static constexpr char digits[] = "0123456789ABCDEF";
  return std::string("0x") + digits[(v >> 4) & 0xF] + digits[v & 0xF];
}

// `offset` is the byte's distance from the buffer in the direction `where` names.
std::string stray_write(std::string_view name, size_t offset, std::string_view where, std::byte now,
                        size_t changed) {
  return "wrote outside " + std::string(name) + ": byte offset " + std::to_string(offset) + " " +
         std::string(where) + " (guard byte " + hex(kGuardByte) + " is now " +
         hex(static_cast<unsigned>(now)) + "; " + std::to_string(changed) + " of the " +
         std::to_string(kGuardBytes) + " guard bytes " +
         (where == "after the end" ? "after the end" : "before the start") + " changed)";
}

}  // namespace

std::string check_guards(DLDevice device, const void* buffer, size_t bytes, std::string_view name) {
  const auto* start = static_cast<const char*>(buffer);
  std::vector<std::byte> before(kGuardBytes), after(kGuardBytes);
  copy_to_host(device, before.data(), start - kGuardBytes, kGuardBytes);
  copy_to_host(device, after.data(), start + bytes, kGuardBytes);
  const auto intact = [](std::byte b) { return b == std::byte{kGuardByte}; };
  // After the end first: one element too many is the common stray write. Offsets count
  // from the buffer's edge: 0 is the first byte past the end, 1 the last byte before the start.
  size_t first = kGuardBytes, changed = 0;
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (!intact(after[i])) {
      if (first == kGuardBytes) first = i;
      ++changed;
    }
  if (changed > 0) return stray_write(name, first, "after the end", after[first], changed);
  size_t nearest = 0;  // bytes before the start; 0: none changed
  for (size_t k = 1; k <= kGuardBytes; ++k)
    if (!intact(before[kGuardBytes - k])) {
      if (nearest == 0) nearest = k;
      ++changed;
    }
  if (changed > 0)
    return stray_write(name, nearest, "before the start", before[kGuardBytes - nearest], changed);
  return {};
}

GuardedMemory::GuardedMemory(DLDevice device, size_t bytes)
    : memory_(device, kGuardBytes + bytes + kGuardBytes), bytes_(bytes) {
  const std::vector<std::byte> guard(kGuardBytes, std::byte{kGuardByte});
  copy_from_host(device, memory_.get(), guard.data(), kGuardBytes);
  copy_from_host(device, start() + bytes, guard.data(), kGuardBytes);
}

}  // namespace deltakern::conformance
