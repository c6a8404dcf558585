// Reading memory a plugin points to without trusting the pointer: a descriptor may hold any
// address, and dereferencing one that is unmapped would kill the engine in-process. Every
// struct and string the core takes from a plugin's descriptor comes through these.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace deltakern::detail {

// Copies n bytes from src into dst; false (dst partly written) where any of them cannot be read.
// Never faults: the kernel does the reading (process_vm_readv on this process).
bool copy_from_plugin(void* dst, const void* src, size_t n) noexcept;

template <class T>
std::optional<T> read_from_plugin(const T* src) noexcept {
  T value;
  if (!copy_from_plugin(&value, src, sizeof(T))) return std::nullopt;
  return value;
}

// A C string a plugin points to, read up to `limit` bytes (its NUL included).
struct PluginString {
  enum class Outcome { ok, null, unreadable, unterminated };
  Outcome outcome = Outcome::null;
  std::string text;      // ok: the string; unterminated: the bytes read
  size_t readable = 0;   // unterminated: how many bytes could be read before the limit or a fault
  bool faulted = false;  // unterminated: the bytes after `readable` are unreadable
};
PluginString read_plugin_string(const char* s, size_t limit);

// "name points to unreadable memory", "schema is not NUL-terminated within 8192 bytes", ...:
// why `field` could not be read; nullopt when it was.
std::optional<std::string> string_problem(std::string_view field, const PluginString& s, size_t limit);

}  // namespace deltakern::detail
