// Fallback accounting: how many calls each op's configured first choice could not serve,
// per (op, serving backend, first choice, reason). A counter is made, and warned about, once
// per distinct entry, when a decision first falls back; after that the call path only adds
// to it through the pointer its cached decision holds, with a relaxed atomic.
#pragma once

#include "ops.hpp"

#include <deltakern/deltakern.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace deltakern::detail {

class FallbackCounters {
 public:
  // The counter of one entry, made (and warned about, with `warning`) when first asked
  // for. Counters never move or go away while the FallbackCounters lives.
  std::atomic<uint64_t>* counter(OpId op, std::string_view backend, std::string_view first_choice,
                                 std::string_view reason, std::string_view warning);

  std::vector<FallbackCount> counts() const;  // entries with count 0 left out
  void reset();

 private:
  using Key = std::tuple<OpId, std::string, std::string, std::string>;  // op, backend, first, reason
  mutable std::mutex mutex_;
  std::map<Key, std::atomic<uint64_t>> counters_;  // map nodes never move
};

}  // namespace deltakern::detail
