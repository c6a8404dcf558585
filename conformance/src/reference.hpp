// The float64 reference of both ops, written from the design's op semantics (docs/design.md)
// and nothing else: no backend shares a line of it. Inputs are the values the backend will
// read (already rounded to their dtypes), given as accessors so that an engine-sized call is
// never copied into float64 arrays; an output element is computed when a check asks for it,
// with what its error bound needs (compare.hpp). States are computed in full: they are small.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace deltakern::conformance::reference {

enum class Act { none, silu };

// One output element: its exact value, the pre-activation sum, and what the bound on a
// float32 evaluation of that sum needs: the sum of the magnitudes of its terms and their count.
struct Output {
  double value = 0, pre = 0, magnitude = 0;
  int terms = 0;
};

struct VarlenProblem {
  int64_t dim = 0, tokens = 0, width = 0, state_len = 0, lines = 0;
  std::function<double(int64_t d, int64_t t)> x;
  std::function<double(int64_t d, int64_t k)> weight;
  std::function<double(int64_t d)> bias;  // empty: none
  std::function<double(int64_t line, int64_t d, int64_t s)> states;
  std::span<const int32_t> query_start_loc;    // [batch + 1]
  std::span<const int32_t> cache_indices;      // [batch], or empty: identity
  std::span<const uint8_t> has_initial_state;  // [batch], or empty: all false
  Act act = Act::none;
  int64_t pad_slot_id = -1;
};

// A sequence is skipped when its cache index is pad_slot_id or outside [0, lines) (a backend
// flags the latter in its device error word): its state line is neither read nor written.
class Varlen {
 public:
  explicit Varlen(VarlenProblem p);
  int64_t batch() const { return static_cast<int64_t>(p_.query_start_loc.size()) - 1; }
  int64_t sequence_of(int64_t t) const;  // the sequence holding token t
  bool sequence_live(int64_t b) const { return live_[static_cast<size_t>(b)] != 0; }
  bool token_live(int64_t t) const { return sequence_live(sequence_of(t)); }
  std::vector<uint8_t> live_tokens() const;  // token_live of every token
  Output out(int64_t d, int64_t t) const;    // meaningful where token_live(t)
  // The pool after the call, [lines][dim][state_len], and which lines the call wrote.
  const std::vector<double>& states() const { return states_; }
  const std::vector<uint8_t>& line_live() const { return line_live_; }

 private:
  double prior(int64_t b, int64_t d, int64_t i) const;  // entry i < S of sequence b's prior state
  VarlenProblem p_;
  std::vector<int64_t> line_;  // per sequence; -1 when skipped
  std::vector<uint8_t> live_, initial_, line_live_;
  std::vector<double> states_;
};

struct UpdateProblem {
  int64_t batch = 0, dim = 0, tokens = 1, width = 0, state_len = 0, lines = 0;
  std::function<double(int64_t b, int64_t d, int64_t t)> x;
  std::function<double(int64_t line, int64_t d, int64_t s)> states;
  std::function<double(int64_t d, int64_t k)> weight;
  std::function<double(int64_t d)> bias;   // empty: none
  std::span<const int32_t> state_indices;  // [batch], or empty: identity
  std::span<const int32_t> cache_seqlens;  // [batch], or empty: shift mode
  Act act = Act::none;
  int64_t pad_slot_id = -1;
};

class Update {
 public:
  explicit Update(UpdateProblem p);
  bool row_live(int64_t b) const { return line_[static_cast<size_t>(b)] >= 0; }
  Output out(int64_t b, int64_t d, int64_t t) const;  // meaningful where row_live(b)
  const std::vector<double>& states() const { return states_; }
  const std::vector<uint8_t>& line_live() const { return line_live_; }

 private:
  UpdateProblem p_;
  std::vector<int64_t> line_;
  std::vector<uint8_t> line_live_;
  std::vector<double> states_;
};

}  // namespace deltakern::conformance::reference
