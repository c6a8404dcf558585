// The mutation contract as the schema declares it, checked after a call: arguments not
// annotated as written are bit-identical (slack between elements included), annotated
// ones change only where the op may write, the result aliases x exactly when the schema
// says `-> Tensor(a)` and nothing otherwise, and host syncs are the declared ones.
#pragma once

#include "compare.hpp"
#include "tensor.hpp"

#include <deltakern/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace deltakern::conformance {

// A tensor argument by its schema name; buf is null for None.
struct NamedArg {
  std::string name;
  TensorBuf* buf = nullptr;
};

using Snapshot = std::vector<std::vector<std::byte>>;  // parallel to the arguments

Snapshot snapshot(std::span<const NamedArg> args);
void restore(std::span<const NamedArg> args, const Snapshot& before);

bool is_mutated(const OpInfo& info, std::string_view arg);
bool returns_x(const OpInfo& info);

// Every argument the schema does not mark written is bit-identical to `before`.
std::string check_unannotated(const OpInfo& info, std::span<const NamedArg> args, const Snapshot& before);

// Every argument is bit-identical to `expected` (a snapshot taken after the call): nothing
// was written after the call returned. `when` says when this was looked at.
std::string check_unchanged_since(std::span<const NamedArg> args, const Snapshot& expected,
                                  std::string_view when);

// `arg` (annotated as written) changed only in elements for which may_change(linear) holds;
// never in the slack between or after them. `after` is its bytes now (used up).
std::string check_changes_only_in(const NamedArg& arg, const std::vector<std::byte>& before,
                                  std::vector<std::byte> after,
                                  const std::function<bool(int64_t linear)>& may_change,
                                  const Describe& describe);

// An out-variant's out after the call: any of its elements may have changed (a skipped
// sequence's are unspecified), nothing between or after them.
std::string check_out_slack(const NamedArg& out, const std::vector<std::byte>& before,
                            const Describe& describe);

// The result's identity: `-> Tensor(a)` is x's view (same start, shape and strides);
// `-> Tensor` overlaps no argument's allocation or guard zones (each overlapped argument is
// named), lies inside a block the host allocator handed out during call `call` (the
// PoisonScope of the call), with the guards around that block intact. Shape, dtype and
// device must be x's. On CUDA the stream must be synced.
std::string check_result(const OpInfo& info, const Tensor& result, const TensorBuf& x,
                         std::span<const NamedArg> args, uint64_t call);

// Two results held at once share no memory.
std::string check_apart(const Tensor& first, const Tensor& second);

// Every argument's guard zones are intact, and so were those of every buffer the backend
// allocated from the host and released during the call.
std::string check_guards(std::span<const NamedArg> args);

// host_syncs() made by the call against what it may make.
std::string check_syncs(uint64_t made, uint64_t expected, std::string_view situation);

// Drops a result through its deleter; empty, or what went wrong (a deleter that throws).
std::string release_result(Tensor& result);

// The results a case holds, dropped through release_result() whatever way the case ends, so
// that a throwing deleter is a failure of the case and never the end of the process.
class HeldResults {
 public:
  HeldResults() = default;
  HeldResults(const HeldResults&) = delete;
  HeldResults& operator=(const HeldResults&) = delete;
  ~HeldResults() { (void)release_all(); }
  Tensor& add(Tensor t) { return results_.emplace_back(std::move(t)); }  // stays put: a deque
  // Drops every held result; what a deleter did wrong, or empty.
  std::string release_all();

 private:
  std::deque<Tensor> results_;
};

// Whether the op's declaration for `device_type` says it derives max_seq_len.
const OpInfo::Device* device_caps(const OpInfo& info, int device_type);

}  // namespace deltakern::conformance
