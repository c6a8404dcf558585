// A helper program run as a child process that reports on a pipe, for work that may crash
// or hang the process it runs in (loading a plugin, running its kernels). Started with
// posix_spawn, never fork: the caller may have threads, and a forked child of a threaded
// process may only call async-signal-safe functions until it execs, which dlopen is not.
//
// The child gets the pipe's write end at a fixed descriptor, stdin and stdout on /dev/null (a
// plugin's prints cannot garble the report), stderr shared (its log lines stay visible),
// no other descriptor of the caller's, and every signal at its default and unblocked (so a
// crash is a crash, not a signal the caller chose to ignore or block). The parent reads
// whole lines with a deadline, and kills and reaps the child; what happened to it is a
// ChildEnd. The child's side of the bargain is in child_side below.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace deltakern::detail {

// "11 (SIGSEGV)".
std::string signal_label(int signal);

// How a child process ended.
struct ChildEnd {
  enum class Kind {
    exited,     // value: its exit status
    killed,     // value: the signal
    timed_out,  // it was still running at the deadline and was killed
    lost,       // SIGCHLD is ignored in this process: it reaped itself, its status is gone
  };
  Kind kind = Kind::lost;
  int value = 0;
  // "exited with status 3", "killed by signal 11 (SIGSEGV)", "timed out",
  // "ended with its exit status lost (SIGCHLD is ignored in this process)".
  std::string describe() const;
};

struct ChildCommand {
  std::filesystem::path program;
  std::vector<std::string> arguments;  // after argv[0], which is the program
  int report_fd = 3;                   // where the child finds the report pipe's write end
};

// Why a child could not be started: the step that failed, and its errno.
struct StartFailure {
  enum class Step { pipe, spawn };
  Step step = Step::spawn;
  int error = 0;
  std::string text() const;  // strerror(error)
};

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  static std::variant<ChildProcess, StartFailure> start(const ChildCommand& command);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running is killed and reaped: none outlives its owner.
  ~ChildProcess();

  pid_t pid() const { return pid_; }

  enum class Read {
    line,      // `line` holds the next whole line, without its '\n'
    ended,     // no more lines: the pipe closed, or the child exited and what it wrote is taken
    deadline,  // no whole line came before the deadline
  };
  // End of file normally comes as the child exits, but a process it started may hold the
  // pipe open past that, so the child's own exit is looked for between reads. An unfinished
  // last line (the child died writing it) is dropped; a line longer than kMaxLine is
  // returned cut at that length.
  Read read_line(Clock::time_point deadline, std::string& line);

  // Waits for its exit until the deadline; none when it is still running then.
  std::optional<ChildEnd> wait_until(Clock::time_point deadline);

  // Kills it (SIGKILL) and reaps it: it timed out, whatever it was doing. One that has
  // already been reaped keeps the end it had.
  ChildEnd time_out();

  static constexpr size_t kMaxLine = 8 << 20;

 private:
  ChildProcess(pid_t pid, int read_fd) : pid_(pid), read_fd_(read_fd) {}
  bool read_available(int wait_ms);  // false at end of file or on an error
  bool reap_now();                   // true once the child is reaped (end_ is set)
  void close_pipe();

  pid_t pid_ = -1;
  int read_fd_ = -1;
  std::string buffer_;       // read, not yet returned
  bool discarding_ = false;  // inside a line cut at kMaxLine: skip to its end
  bool drained_ = false;     // the child has exited and the pipe was emptied: nothing more to read
  std::optional<ChildEnd> end_;
};

// What a helper started as a ChildProcess does first, and how it reports.
namespace child_side {

// A helper whose parent dies (Ctrl-C while a plugin hangs) must not live on: it asks to be
// killed with its parent, and returns false when the parent is already gone (or was never
// `expected_parent`), in which case the helper should exit at once.
bool die_with_parent(pid_t expected_parent);

// A sanitizer runtime (or anything else) linked into the helper may have installed crash
// handlers that turn a segfault into a report and exit(1); the parent needs the crash
// itself, since the signal is what names it. (The plugin may still install its own.)
void default_crash_signals();

// The report descriptor is not inherited by programs the plugin executes: the parent reads
// to end of file.
void keep_from_exec(int fd);

// One whole line, unbuffered: what was written before a crash has reached the parent.
// Returns false when the parent has gone or given up.
bool write_line(int fd, std::string_view text);

// A helper's command line as its parent writes it: `--name NUMBER` pairs, then `--` and one last
// argument. None when it is not of that form (a name not in `names`, a value that is not an
// integer, no `--`).
struct Arguments {
  std::map<std::string, long, std::less<>> numbers;
  std::string last;
};
std::optional<Arguments> parse_arguments(int argc, char** argv,
                                         std::initializer_list<std::string_view> names);

}  // namespace child_side

}  // namespace deltakern::detail
