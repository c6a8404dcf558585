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

// `arg` (annotated as written) changed only in elements where `may_change` is set;
// never in the slack between or after them. `why_not` explains a forbidden element.
std::string check_changes_only_in(const NamedArg& arg, const std::vector<std::byte>& before,
                                  std::span<const uint8_t> may_change, const Describe& describe);

// The result's identity: `-> Tensor(a)` is x's view (same start, shape and strides);
// `-> Tensor` overlaps no argument's allocation or guard zones and, when it came from the
// host allocator, lies inside what was allocated with the guards around it intact.
// Shape, dtype and device must be x's. On CUDA the stream must be synced.
std::string check_result(const OpInfo& info, const Tensor& result, const TensorBuf& x,
                         std::span<const NamedArg> args);

// Every argument's guard zones are intact, and so were those of every buffer the backend
// allocated from the host and released during the call.
std::string check_guards(std::span<const NamedArg> args);

// host_syncs() made by the call against what it may make.
std::string check_syncs(uint64_t made, uint64_t expected, std::string_view situation);

// Whether the op's declaration for `device_type` says it derives max_seq_len.
const OpInfo::Device* device_caps(const OpInfo& info, int device_type);

}  // namespace deltakern::conformance
