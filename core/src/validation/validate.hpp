// Host-side argument checks of both ops, before anything runs: a rejected call has written
// nothing. Each rejection is Error(invalid_argument) naming the op, the argument, what was
// expected and what came. The checks read only tensor metadata, never device memory; the
// contents checks (validate = true) read index tensors through one counted host read.
#pragma once

#include <deltakern/deltakern.hpp>
#include <deltakern/runtime_types.hpp>

#include <cstdint>

namespace deltakern::detail {

struct VarlenGeometry {
  int64_t dim, tokens, width, state_len, lines, batch;
  Layout layout;
};

struct UpdateGeometry {
  int64_t batch, dim, tokens, width, state_len, lines;
  Layout layout;
};

// out: the out-variant's out (checked too); nullptr for the op itself.
VarlenGeometry check_varlen_arguments(const CausalConv1dVarlenArgs& args, const DLTensor* out = nullptr);
UpdateGeometry check_update_arguments(const CausalConv1dUpdateArgs& args, const DLTensor* out = nullptr);

// query_start_loc offsets, cache index ranges and uniqueness, has_initial_state values,
// max_seq_len against the longest sequence. One counted sync.
void check_varlen_contents(const CausalConv1dVarlenArgs& args, const VarlenGeometry& geometry);
// conv_state_indices ranges and uniqueness, cache_seqlens >= 0. One counted sync.
void check_update_contents(const CausalConv1dUpdateArgs& args, const UpdateGeometry& geometry);

}  // namespace deltakern::detail
