// The float64 reference of both ops, written from DESIGN.md section 4 and nothing else:
// no backend shares a line of it. Inputs are the values the backend will read (already
// rounded to their dtypes); outputs are exact float64 values, rounded by the checks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deltakern::conformance::reference {

enum class Act { none, silu };

struct VarlenProblem {
  int64_t dim = 0, tokens = 0, width = 0, state_len = 0, lines = 0;
  std::span<const double> x;                   // [dim][tokens]
  std::span<const double> weight;              // [dim][width]
  std::span<const double> bias;                // [dim], or empty: none
  std::span<const double> states;              // [lines][dim][state_len]
  std::span<const int32_t> query_start_loc;    // [batch + 1]
  std::span<const int32_t> cache_indices;      // [batch], or empty: identity
  std::span<const uint8_t> has_initial_state;  // [batch], or empty: all false
  Act act = Act::none;
  int64_t pad_slot_id = -1;
};

struct VarlenResult {
  std::vector<double> out;          // [dim][tokens]; meaningful where token_live
  std::vector<uint8_t> token_live;  // [tokens]: produced by a sequence that is not padded
  std::vector<double> states;       // [lines][dim][state_len] after the call
  std::vector<uint8_t> line_live;   // [lines]: written by the call
};

VarlenResult causal_conv1d_varlen(const VarlenProblem& p);

struct UpdateProblem {
  int64_t batch = 0, dim = 0, tokens = 1, width = 0, state_len = 0, lines = 0;
  std::span<const double> x;               // [batch][dim][tokens]
  std::span<const double> states;          // [lines][dim][state_len]
  std::span<const double> weight;          // [dim][width]
  std::span<const double> bias;            // [dim], or empty
  std::span<const int32_t> state_indices;  // [batch], or empty: identity
  std::span<const int32_t> cache_seqlens;  // [batch], or empty: shift mode
  Act act = Act::none;
  int64_t pad_slot_id = -1;
};

struct UpdateResult {
  std::vector<double> out;        // [batch][dim][tokens]; meaningful where row_live
  std::vector<uint8_t> row_live;  // [batch]
  std::vector<double> states;     // [lines][dim][state_len]
  std::vector<uint8_t> line_live;
};

UpdateResult causal_conv1d_update(const UpdateProblem& p);

}  // namespace deltakern::conformance::reference
