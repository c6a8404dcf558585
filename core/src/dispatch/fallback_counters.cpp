#include "dispatch/fallback_counters.hpp"

#include "services/log.hpp"

namespace deltakern::detail {

std::atomic<uint64_t>* FallbackCounters::counter(OpId op, std::string_view backend,
                                                 std::string_view first_choice, std::string_view reason,
                                                 std::string_view warning) {
  const std::lock_guard lock(mutex_);
  auto [it, made] =
      counters_.try_emplace(Key{op, std::string(backend), std::string(first_choice), std::string(reason)}, 0);
  // Two threads deciding the same new signature both ask; only the first warns.
  if (made) logger().warn("{}", warning);
  return &it->second;
}

std::vector<FallbackCount> FallbackCounters::counts() const {
  const std::lock_guard lock(mutex_);
  std::vector<FallbackCount> out;
  for (const auto& [key, counter] : counters_) {
    const uint64_t count = counter.load(std::memory_order_relaxed);
    if (count == 0) continue;
    const auto& [op, backend, first_choice, reason] = key;
    out.push_back({std::string(op_name(op)), backend, first_choice, reason, count});
  }
  return out;
}

void FallbackCounters::reset() {
  const std::lock_guard lock(mutex_);
  for (auto& [key, counter] : counters_) counter.store(0, std::memory_order_relaxed);
}

}  // namespace deltakern::detail
