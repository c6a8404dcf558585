#include "subprocess/child_process.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace deltakern::detail {
namespace {

using Clock = ChildProcess::Clock;

// While waiting for a line, how often the child's own exit is looked for.
constexpr int kExitCheckMs = 50;

class SpawnFileActions {
 public:
  SpawnFileActions() { ::posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { ::posix_spawnattr_init(&attributes_); }
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

ChildEnd end_of(int status) {
  if (WIFSIGNALED(status)) return {ChildEnd::Kind::killed, WTERMSIG(status)};
  return {ChildEnd::Kind::exited, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace

std::string signal_label(int signal) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbreviation = ::sigabbrev_np(signal))
    return fmt::format("{} (SIG{})", signal, abbreviation);
#endif
  return fmt::format("{} ({})", signal, ::strsignal(signal));
}

std::string ChildEnd::describe() const {
  switch (kind) {
    case Kind::exited:
      return fmt::format("exited with status {}", value);
    case Kind::killed:
      return fmt::format("killed by signal {}", signal_label(value));
    case Kind::timed_out:
      return "timed out";
    case Kind::lost:
      break;
  }
  return "ended with its exit status lost (SIGCHLD is ignored in this process)";
}

std::string StartFailure::text() const { return std::strerror(error); }

std::variant<ChildProcess, StartFailure> ChildProcess::start(const ChildCommand& command) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return StartFailure{StartFailure::Step::pipe, errno};
  const int read_fd = ends[0], write_fd = ends[1];

  SpawnFileActions actions;
  ::posix_spawn_file_actions_adddup2(actions.get(), write_fd, command.report_fd);
  ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  ::posix_spawn_file_actions_addclosefrom_np(actions.get(), command.report_fd + 1);
#endif
  SpawnAttributes attributes;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  ::posix_spawnattr_setsigmask(attributes.get(), &none);
  ::posix_spawnattr_setsigdefault(attributes.get(), &all);
  ::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args{command.program.string()};
  args.insert(args.end(), command.arguments.begin(), command.arguments.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  const int error =
      ::posix_spawn(&pid, command.program.c_str(), actions.get(), attributes.get(), argv.data(), environ);
  ::close(write_fd);  // the child's copy is the only one left: its exit is our end of file
  if (error != 0) {
    ::close(read_fd);
    return StartFailure{StartFailure::Step::spawn, error};
  }
  return ChildProcess(pid, read_fd);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      read_fd_(std::exchange(other.read_fd_, -1)),
      buffer_(std::move(other.buffer_)),
      discarding_(other.discarding_),
      drained_(other.drained_),
      end_(std::move(other.end_)) {}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !end_) time_out();
  close_pipe();
}

void ChildProcess::close_pipe() {
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
}

bool ChildProcess::read_available(int wait_ms) {
  if (read_fd_ < 0) return false;
  pollfd ready{read_fd_, POLLIN, 0};
  const int r = ::poll(&ready, 1, wait_ms);
  if (r < 0) return errno == EINTR;
  if (r == 0) return true;
  char chunk[4096];
  const ssize_t n = ::read(read_fd_, chunk, sizeof chunk);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

bool ChildProcess::reap_now() {
  if (end_) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    end_ = end_of(status);
  } else if (r < 0 && errno == ECHILD) {  // SIGCHLD is ignored here: the child reaped itself
    end_ = ChildEnd{ChildEnd::Kind::lost, 0};
  }
  return end_.has_value();
}

ChildProcess::Read ChildProcess::read_line(Clock::time_point deadline, std::string& line) {
  for (;;) {
    const size_t newline = buffer_.find('\n');
    if (discarding_) {  // the rest of a line returned cut at kMaxLine
      if (newline == std::string::npos) {
        buffer_.clear();
      } else {
        buffer_.erase(0, newline + 1);
        discarding_ = false;
        continue;
      }
    } else if (newline != std::string::npos) {
      line.assign(buffer_, 0, newline);
      buffer_.erase(0, newline + 1);
      return Read::line;
    } else if (buffer_.size() >= kMaxLine) {
      line.assign(buffer_, 0, kMaxLine);
      buffer_.erase(0, kMaxLine);
      discarding_ = true;
      return Read::line;
    }
    if (drained_ || read_fd_ < 0) return Read::ended;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Read::deadline;
    if (!read_available(static_cast<int>(std::min<int64_t>(left.count(), kExitCheckMs)))) {
      close_pipe();  // end of file: the child and whatever it started have closed their ends
      continue;
    }
    if (reap_now()) {
      // What it wrote before exiting is in the pipe already: take it without waiting (and no
      // more than a line's worth, should a process it started keep writing).
      for (const size_t limit = buffer_.size() + kMaxLine; buffer_.size() < limit;) {
        pollfd more{read_fd_, POLLIN, 0};
        if (::poll(&more, 1, 0) <= 0 || !read_available(0)) break;
      }
      drained_ = true;
    }
  }
}

std::optional<ChildEnd> ChildProcess::wait_until(Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    if (reap_now()) return end_;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10'000));
  }
}

ChildEnd ChildProcess::time_out() {
  if (!end_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    end_ = ChildEnd{ChildEnd::Kind::timed_out, 0};
  }
  return *end_;
}

namespace child_side {

bool die_with_parent(pid_t expected_parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return expected_parent == 0 || ::getppid() == expected_parent;
}

void default_crash_signals() {
  for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
  }
}

void keep_from_exec(int fd) { ::fcntl(fd, F_SETFD, FD_CLOEXEC); }

std::optional<Arguments> parse_arguments(int argc, char** argv,
                                         std::initializer_list<std::string_view> names) {
  Arguments a;
  int i = 1;
  for (; i + 1 < argc && std::string_view(argv[i]) != "--"; i += 2) {
    const std::string_view name(argv[i]), text(argv[i + 1]);
    if (std::find(names.begin(), names.end(), name) == names.end()) return std::nullopt;
    long value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    a.numbers.emplace(name, value);
  }
  if (i + 2 != argc || std::string_view(argv[i]) != "--") return std::nullopt;
  a.last = argv[i + 1];
  return a;
}

bool write_line(int fd, std::string_view text) {
  std::string line;
  line.reserve(text.size() + 1);
  line.append(text);
  line.push_back('\n');
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace child_side

}  // namespace deltakern::detail
