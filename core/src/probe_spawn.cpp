#include "probe_spawn.hpp"

#include "log.hpp"
#include "probe_protocol.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace deltakern::detail {
namespace {

namespace protocol = probe_protocol;
using Clock = std::chrono::steady_clock;

// What the child may write before the parent stops keeping it: a verdict is a few hundred bytes.
constexpr size_t kMaxOutput = 1 << 20;

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

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

std::string error_text(int error) { return std::strerror(error); }

// The child's lines, read as far as they got.
struct Transcript {
  std::string last_phase;             // empty: it never reached the library
  std::optional<ProbeVerdict> named;  // its name, version and ABI, once it had read them
  std::optional<ProbeVerdict> verdict;
  std::string garbled;  // a verdict line that did not parse
};

Transcript read_transcript(std::string_view output) {
  Transcript t;
  while (!output.empty()) {
    const size_t end = output.find('\n');
    if (end == std::string_view::npos) break;  // an unfinished line: the child died writing it
    const std::string_view line = output.substr(0, end);
    output.remove_prefix(end + 1);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view tag = line.substr(0, space), rest = line.substr(space + 1);
    if (tag == protocol::kPhase) {
      t.last_phase = rest;
    } else if (tag == protocol::kNamed || tag == protocol::kVerdict) {
      try {
        (tag == protocol::kNamed ? t.named : t.verdict) = nlohmann::json::parse(rest).get<ProbeVerdict>();
      } catch (const std::exception& e) {
        if (tag == protocol::kVerdict) t.garbled = e.what();
      }
    }
  }
  return t;
}

// Waits for the child until the deadline; false when it is still running then.
bool reap_before(pid_t pid, Clock::time_point deadline, int& status, bool& lost) {
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // ECHILD: SIGCHLD is ignored in this process, so the child reaped itself
      lost = true;
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10'000));
  }
}

void kill_and_reap(pid_t pid, int& status, bool& lost) {
  ::kill(pid, SIGKILL);
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, 0);
    if (r == pid) return;
    if (r < 0 && errno == EINTR) continue;
    lost = true;
    return;
  }
}

std::string where(const Transcript& t) { return "while " + t.last_phase; }

}  // namespace

std::string signal_label(int signal) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbreviation = ::sigabbrev_np(signal))
    return fmt::format("{} (SIG{})", signal, abbreviation);
#endif
  return fmt::format("{} ({})", signal, ::strsignal(signal));
}

ChildOutcome probe_in_child(const ChildProbe& how, const std::filesystem::path& library) {
  ChildOutcome outcome;
  const auto start = Clock::now();
  const auto fail_helper = [&](std::string why) {
    outcome.helper_failure = std::move(why);
    outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return outcome;
  };
  if (::access(how.helper.c_str(), X_OK) != 0)
    return fail_helper(
        fmt::format("probe helper {} is not executable: {}", how.helper.string(), error_text(errno)));

  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return fail_helper(fmt::format("pipe: {}", error_text(errno)));
  UniqueFd read_end(ends[0]), write_end(ends[1]);

  // The child gets the pipe's write end at a fixed descriptor, nothing of the engine's other
  // descriptors, stdin and stdout on /dev/null (a plugin's prints cannot reach the verdict),
  // stderr shared (the plugin's log lines stay visible), every signal at its default and
  // unblocked (so a crash is a crash, not a signal the engine chose to ignore).
  SpawnFileActions actions;
  ::posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), protocol::kVerdictFd);
  ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  ::posix_spawn_file_actions_addclosefrom_np(actions.get(), protocol::kVerdictFd + 1);
#endif
  SpawnAttributes attributes;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  ::posix_spawnattr_setsigmask(attributes.get(), &none);
  ::posix_spawnattr_setsigdefault(attributes.get(), &all);
  ::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args{how.helper.string(),
                                "--verdict-fd",
                                std::to_string(protocol::kVerdictFd),
                                "--parent",
                                std::to_string(::getpid()),
                                "--log-level",
                                std::to_string(static_cast<int>(how.log_level)),
                                "--",
                                library.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = 0;
  if (const int error =
          ::posix_spawn(&pid, how.helper.c_str(), actions.get(), attributes.get(), argv.data(), environ);
      error != 0)
    return fail_helper(
        fmt::format("cannot start probe helper {}: {}", how.helper.string(), error_text(error)));
  write_end.reset();  // the child's copy is the only one left: its exit is our end of file

  const auto deadline = start + how.timeout;
  std::string output;
  const auto read_available = [&](int wait_ms) {  // false at end of file or on an error
    pollfd ready{read_end.get(), POLLIN, 0};
    const int r = ::poll(&ready, 1, wait_ms);
    if (r < 0) return errno == EINTR;
    if (r == 0) return true;
    char buffer[4096];
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    if (output.size() < kMaxOutput) output.append(buffer, static_cast<size_t>(n));
    return true;
  };
  int status = 0;
  bool timed_out = false, reaped = false, lost = false;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    // End of file normally comes as the child exits. A grandchild the plugin started may
    // hold the pipe open past that, so the child's own exit is looked for between reads.
    if (!read_available(static_cast<int>(std::min<int64_t>(left.count(), 50)))) break;
    if (const pid_t r = ::waitpid(pid, &status, WNOHANG); r == pid || (r < 0 && errno == ECHILD)) {
      reaped = true;
      lost = r < 0;
      // What it wrote before exiting is in the pipe already: take it without waiting.
      while (output.size() < kMaxOutput) {
        pollfd more{read_end.get(), POLLIN, 0};
        if (::poll(&more, 1, 0) <= 0 || !read_available(0)) break;
      }
      break;
    }
  }
  if (!timed_out && !reaped && !reap_before(pid, deadline, status, lost)) timed_out = true;
  if (timed_out) kill_and_reap(pid, status, lost);
  outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);

  const Transcript t = read_transcript(output);
  const auto died = [&](std::string reason) {
    ProbeVerdict v;
    v.passed = false;
    v.reason = std::move(reason);
    if (const auto& named = t.verdict ? t.verdict : t.named) {  // it got as far as naming itself
      v.name = named->name;
      v.version = named->version;
      v.abi_major = named->abi_major;
      v.abi_minor = named->abi_minor;
    }
    outcome.verdict = std::move(v);
    return outcome;
  };
  if (timed_out) {
    died(fmt::format("probe timed out after {} ms {}; the child was killed", how.timeout.count(),
                     t.last_phase.empty() ? "before it reached the library" : where(t)));
    outcome.verdict->timed_out = true;
    outcome.verdict->timeout_ms = static_cast<uint32_t>(how.timeout.count());
    return outcome;
  }
  if (lost) {
    // SIGCHLD ignored: no exit status to read, so the transcript is all there is.
    if (t.verdict)
      outcome.verdict = t.verdict;
    else if (t.last_phase.empty())
      return fail_helper("probe helper ended without a word (its exit status was lost)");
    else
      return died(fmt::format("probe child ended without a verdict {}", where(t)));
    return outcome;
  }
  if (WIFSIGNALED(status)) {
    if (t.last_phase.empty())
      return fail_helper(fmt::format("probe helper killed by signal {} before it reached the library",
                                     signal_label(WTERMSIG(status))));
    return died(fmt::format("probe child killed by signal {} {}", signal_label(WTERMSIG(status)), where(t)));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (t.last_phase.empty())
    return fail_helper(fmt::format("probe helper exited with status {} before it reached the library", code));
  if (code != 0) return died(fmt::format("probe child exited with status {} {}", code, where(t)));
  if (!t.verdict)
    return died(t.garbled.empty() ? fmt::format("probe child exited without a verdict {}", where(t))
                                  : fmt::format("probe child's verdict is unreadable: {}", t.garbled));
  outcome.verdict = t.verdict;
  return outcome;
}

}  // namespace deltakern::detail
