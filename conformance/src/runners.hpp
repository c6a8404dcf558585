// What each kind of case does, given its description; suite.cpp lists the cases.
#pragma once

#include "update.hpp"
#include "varlen.hpp"

#include <deltakern/conformance.hpp>

#include <string>
#include <string_view>

namespace deltakern::conformance {

enum class Mode {
  host_and_derived,  // max_seq_len given, then omitted, from the same inputs (update: one call)
  graph_replay,      // CUDA: captured in a graph, replayed on new values in the same buffers
  gate               // CUDA: called while the stream is blocked; must return before it opens
};

std::string run_varlen(Runtime& runtime, const Target& target, const VarlenConfig& cfg, Mode mode,
                       std::string_view seed);
std::string run_update(Runtime& runtime, const Target& target, const UpdateConfig& cfg, Mode mode,
                       std::string_view seed);

// A prefill over each sequence's first tokens, then single-token updates (shift, or
// circular with cache_seqlens), against one prefill over the whole sequences.
struct SequenceConfig {
  DType x = DType::f32, weight = DType::f32, bias = DType::f32, state = DType::f32;
  int64_t width = 4;
  bool circular = false;
  reference::Act act = reference::Act::silu;
};
std::string run_prefill_then_updates(Runtime& runtime, const Target& target, const SequenceConfig& cfg,
                                     std::string_view seed);

// The declaration itself: the mutation contract is one of the two the ops allow.
std::string check_declaration(const Runtime& runtime, const Target& target, std::string_view op);

}  // namespace deltakern::conformance
