// The per-signature cache that makes dispatch a lookup: a call's signature packs into four
// words (no strings on the hot path), and a decision once made is never changed or removed,
// so a reader may keep the pointer it found after releasing the lock.
#pragma once

#include "ops.hpp"

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime_types.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace deltakern::detail {

// CallSignature without the op's name as a string: what the hot path can build for free.
struct SignatureFields {
  OpId op;
  DLDevice device;
  DLDataType x, weight, state;
  std::optional<DLDataType> bias;
  int32_t width;
  Layout layout;
  bool max_seq_len_given;
};

struct DecisionKey {
  std::array<uint64_t, 4> words;
  bool operator==(const DecisionKey&) const = default;
};

inline uint64_t pack(DLDataType t) {
  return uint64_t{t.code} | uint64_t{t.bits} << 8 | uint64_t{t.lanes} << 16;
}

inline DecisionKey key_of(const SignatureFields& f) {
  const uint64_t shape = uint64_t{static_cast<uint8_t>(f.op)} |
                         uint64_t{static_cast<uint8_t>(f.layout)} << 8 | uint64_t{f.max_seq_len_given} << 16 |
                         uint64_t{f.bias.has_value()} << 24 | uint64_t{static_cast<uint32_t>(f.width)} << 32;
  const uint64_t device = uint64_t{static_cast<uint32_t>(f.device.device_type)} |
                          uint64_t{static_cast<uint32_t>(f.device.device_id)} << 32;
  return {
      {shape, device, pack(f.x) | pack(f.weight) << 32, pack(f.state) | (f.bias ? pack(*f.bias) : 0) << 32}};
}

struct DecisionKeyHash {
  size_t operator()(const DecisionKey& k) const noexcept {
    const uint64_t h = k.words[0] * 0x9e3779b97f4a7c15ull ^ k.words[1] * 0xc2b2ae3d27d4eb4full ^
                       k.words[2] * 0x165667b19e3779f9ull ^ k.words[3] * 0xff51afd7ed558ccdull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// One limit of a backend's op on one of the call's dimensions (an index into CallDims).
struct LimitCheck {
  uint8_t dim;
  int64_t min, max;
};
inline constexpr size_t kMaxLimitChecks = 16;  // as many as a descriptor may declare

// A backend that can serve a signature, and what it still checks per call.
struct CachedFit {
  const dk_op* op = nullptr;
  void* instance = nullptr;
  const char* backend = nullptr;  // the backend's name, owned by the Runtime
  std::array<LimitCheck, kMaxLimitChecks> limits{};
  uint8_t n_limits = 0;
  bool supports_per_call = false;  // an ABI 1.0 plugin's supports(), which may look at shapes

  // The hot path's whole per-call check: a few compares.
  bool admits(const CallDims& dims) const {
    for (uint8_t i = 0; i < n_limits; ++i) {
      const LimitCheck& l = limits[i];
      if (dims[l.dim] < l.min || dims[l.dim] > l.max) return false;
    }
    return true;
  }
};

// What one call runs.
struct Served {
  const dk_op* op;
  void* instance;
  const char* backend;
};

// What a call needs from a decision: the backend that serves every call of the signature its
// limits admit, or why there is none.
struct CachedDecision {
  CachedFit fit;  // op null: the call is refused with `refusal`, an Error of `refusal_code`
  std::string refusal;
  ErrorCode refusal_code = ErrorCode::unsupported;
  // Set when fit is not the op's first choice: each call it serves adds one (relaxed).
  std::atomic<uint64_t>* fallback_count = nullptr;
};

// A decision a thread found in a cache. Cache ids start at 1 and are never reused, so a memo
// of a destroyed cache can never match a new one built at the same address.
struct DecisionMemo {
  uint64_t cache_id = 0;
  DecisionKey key{};
  const CachedDecision* decision = nullptr;
};

class DecisionCache {
 public:
  DecisionCache() : id_(next_id_.fetch_add(1, std::memory_order_relaxed)) {}
  DecisionCache(const DecisionCache&) = delete;
  DecisionCache& operator=(const DecisionCache&) = delete;

  const CachedDecision* find(const DecisionKey& key) const {
    // Each thread remembers the last few decisions it found, so the steady state (the same
    // few signatures call after call) takes no lock: a shared lock is still an atomic
    // write to a line every calling thread shares.
    const size_t hash = DecisionKeyHash{}(key);
    DecisionMemo& memo = memos_[hash % kMemos];
    if (memo.cache_id == id_ && memo.key == key) [[likely]]
      return memo.decision;
    const std::shared_lock lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    memo = {id_, key, &it->second};
    return &it->second;
  }

  // Keeps the first decision when two threads made one for the same key; returns the kept
  // one and whether it is the given one.
  std::pair<const CachedDecision*, bool> insert(const DecisionKey& key, CachedDecision decision) {
    const std::unique_lock lock(mutex_);
    const auto [it, inserted] = entries_.try_emplace(key, std::move(decision));
    return {&it->second, inserted};
  }

 private:
  static constexpr size_t kMemos = 4;
  static inline std::atomic<uint64_t> next_id_{1};
  static inline thread_local std::array<DecisionMemo, kMemos> memos_{};

  const uint64_t id_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<DecisionKey, CachedDecision, DecisionKeyHash> entries_;  // nodes never move
};

}  // namespace deltakern::detail
