// A persistent pool of worker threads for the CPU kernels: created once at plugin init and
// joined at shutdown, so a call costs a wake-up, never a thread creation.
//
// parallel_for hands out work items one at a time from a shared counter (items are sized to
// tens of microseconds, and many are empty tails of short sequences, so static partitioning
// would balance badly). The calling thread works too, and waits only for workers that actually
// joined the job: a worker the OS has not scheduled yet never delays the caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "function_ref.hpp"

namespace deltakern::portable::cpu {

class ThreadPool {
 public:
  using Body = FunctionRef<void(int64_t begin, int64_t end)>;

  // `threads` participants in all, the caller included: threads - 1 workers.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned concurrency() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Runs body over [0, n) in chunks of `grain` items and returns when all have run. A call
  // that finds the pool busy with another thread's job runs inline instead of queueing.
  void parallel_for(int64_t n, int64_t grain, Body body);

 private:
  void worker_loop(std::stop_token stop);
  void run_chunks(Body body);

  std::mutex submit_;  // one job at a time
  // The current job. Workers read it only after joining (in_flight_ raised while open_).
  Body* body_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> open_{false};
  std::atomic<uint32_t> generation_{0};  // bumped per job; workers sleep on it
  std::atomic<int32_t> in_flight_{0};    // workers inside the current job
  std::vector<std::jthread> workers_;
};

}  // namespace deltakern::portable::cpu
