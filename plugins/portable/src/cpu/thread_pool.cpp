#include "thread_pool.hpp"

#include <algorithm>

namespace deltakern::portable::cpu {

ThreadPool::ThreadPool(unsigned threads) {
  const unsigned workers = threads > 1 ? threads - 1 : 0;
  workers_.reserve(workers);
  for (unsigned i = 0; i < workers; ++i)
    workers_.emplace_back([this](std::stop_token stop) { worker_loop(stop); });
}

ThreadPool::~ThreadPool() {
  for (std::jthread& w : workers_) w.request_stop();
  generation_.fetch_add(1);
  generation_.notify_all();
  workers_.clear();  // joins
}

void ThreadPool::run_chunks(Body body) {
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) return;
    body(begin, std::min(begin + grain_, n_));
  }
}

void ThreadPool::worker_loop(std::stop_token stop) {
  uint32_t seen = generation_.load();
  for (;;) {
    // A worker that started after the destructor's bump has already read the bumped
    // generation and would wait for a next one forever: the stop request precedes the bump,
    // so checking it here, after the load, catches that case.
    if (stop.stop_requested()) return;
    generation_.wait(seen);
    // Stop is checked after reading the generation: the destructor requests stop before it
    // bumps the generation, so a worker that read the bumped value also sees the request.
    seen = generation_.load();
    if (stop.stop_requested()) return;
    // Join first, then check the job is still open: the caller closes it before it waits for
    // in_flight_ to drain, so either it sees this worker or this worker sees it closed.
    in_flight_.fetch_add(1);
    if (open_.load()) run_chunks(*body_);
    if (in_flight_.fetch_sub(1) == 1) in_flight_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, Body body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    body(0, n);
    return;
  }
  std::unique_lock lock(submit_, std::try_to_lock);
  if (!lock.owns_lock()) {  // another thread's job is running: do not wait behind it
    body(0, n);
    return;
  }
  body_ = &body;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  open_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  run_chunks(body);
  open_.store(false);
  for (int32_t joined = in_flight_.load(); joined != 0; joined = in_flight_.load()) in_flight_.wait(joined);
  body_ = nullptr;
}

}  // namespace deltakern::portable::cpu
