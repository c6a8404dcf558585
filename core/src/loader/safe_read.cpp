#include "loader/safe_read.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace deltakern::detail {
namespace {

// Where process_vm_readv is not allowed (a seccomp profile may forbid it), a pipe does the same:
// write() reports EFAULT for a buffer it cannot read instead of faulting.
bool copy_through_pipe(void* dst, const void* src, size_t n) noexcept {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  constexpr size_t kChunk = 4096;  // PIPE_BUF: always fits an empty pipe
  bool ok = true;
  for (size_t done = 0; ok && done < n;) {
    const size_t chunk = std::min(kChunk, n - done);
    const ssize_t written = ::write(ends[1], static_cast<const char*>(src) + done, chunk);
    ok = written > 0 &&
         ::read(ends[0], static_cast<char*>(dst) + done, static_cast<size_t>(written)) == written;
    if (ok) done += static_cast<size_t>(written);
  }
  ::close(ends[0]);
  ::close(ends[1]);
  return ok;
}

}  // namespace

bool copy_from_plugin(void* dst, const void* src, size_t n) noexcept {
  if (n == 0) return true;
  const auto begin = reinterpret_cast<uintptr_t>(src);
  if (src == nullptr || begin + n < begin) return false;
  iovec local{dst, n};
  iovec remote{const_cast<void*>(src), n};
  const ssize_t copied = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  if (copied == static_cast<ssize_t>(n)) return true;
  if (copied < 0 && (errno == ENOSYS || errno == EPERM)) return copy_through_pipe(dst, src, n);
  return false;  // EFAULT, or a short copy that stopped at an unmapped page
}

PluginString read_plugin_string(const char* s, size_t limit) {
  PluginString out;
  if (s == nullptr) return out;
  // One page at a time: a string that ends just before an unmapped page is still read whole.
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::string bytes;
  auto at = reinterpret_cast<uintptr_t>(s);
  while (bytes.size() < limit) {
    const size_t chunk = std::min(limit - bytes.size(), page - at % page);
    const size_t before = bytes.size();
    bytes.resize(before + chunk);
    if (!copy_from_plugin(bytes.data() + before, reinterpret_cast<const void*>(at), chunk)) {
      bytes.resize(before);
      out.outcome = before == 0 ? PluginString::Outcome::unreadable : PluginString::Outcome::unterminated;
      out.readable = before;
      out.faulted = true;
      out.text = std::move(bytes);
      return out;
    }
    if (const void* nul = std::memchr(bytes.data() + before, '\0', chunk)) {
      bytes.resize(static_cast<size_t>(static_cast<const char*>(nul) - bytes.data()));
      out.outcome = PluginString::Outcome::ok;
      out.text = std::move(bytes);
      return out;
    }
    at += chunk;
  }
  out.outcome = PluginString::Outcome::unterminated;
  out.readable = bytes.size();
  out.text = std::move(bytes);
  return out;
}

std::optional<std::string> string_problem(std::string_view field, const PluginString& s, size_t limit) {
  switch (s.outcome) {
    case PluginString::Outcome::ok:
      return std::nullopt;
    case PluginString::Outcome::null:
      return fmt::format("{} is null", field);
    case PluginString::Outcome::unreadable:
      return fmt::format("{} points to unreadable memory", field);
    case PluginString::Outcome::unterminated:
      break;
  }
  if (s.faulted)
    return fmt::format(
        "{} is not NUL-terminated within {} bytes (the memory after its first {} bytes is unreadable)", field,
        limit, s.readable);
  return fmt::format("{} is not NUL-terminated within {} bytes", field, limit);
}

}  // namespace deltakern::detail
