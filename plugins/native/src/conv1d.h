// Kernel parameters of the native backend, shared by the plugin's host code (plugin.cpp, C++)
// and the kernels (*.cu). Plain structs passed to the kernels by value.
#pragma once

#include <deltakern/scalar_type.hpp>

#include <cstdint>

namespace deltakern::native {

// Rows of the conv state pool: (lines, D, S), any strides, in elements.
struct StateView {
  void* data;
  int64_t line_stride, chan_stride, pos_stride;
  int64_t lines;
  int32_t len;  // S
  ScalarType dtype;
};

// An int32 or uint8 vector on the device, or none.
struct IndexView {
  const void* data;  // nullptr: none
  int64_t stride;
};

struct ConvCommon {
  const void* weight;  // (D, W)
  int64_t w_chan_stride, w_tap_stride;
  ScalarType w_dtype;
  int32_t width;     // 2..4
  const void* bias;  // (D) or nullptr
  int64_t bias_stride;
  ScalarType bias_dtype;
  bool silu;
  int64_t pad_slot_id;
  uint32_t* error_word;  // this device's error word
};

struct VarlenParams {
  ConvCommon conv;
  void* x;  // (D, T), the inputs; written only when out == x (in place)
  int64_t chan_stride, time_stride;
  void* out;  // (D, T), the outputs: x in place, else causal_conv1d_varlen_out's out
  int64_t out_chan_stride, out_time_stride;
  int64_t dim, tokens;
  StateView state;
  IndexView query_start_loc;    // int32, batch+1
  IndexView cache_indices;      // int32 or none
  IndexView has_initial_state;  // uint8 or none
  int32_t batch;
  // Token tiling: tile g covers tokens [g*tile_len, (g+1)*tile_len). In place, a tile never
  // writes the outputs of its last tail_len tokens (the next tile reads them as its halo, and the
  // state of a sequence ending there may need them): it parks them, and the finish pass writes
  // them. Into a separate out, x keeps its originals and nothing is parked (parks_tail).
  int64_t tile_len;
  int32_t ntiles;
  int32_t rows_per_block;  // time-contiguous: channel rows of one block
  int32_t tail_len;        // max(3, S)
  void* park;              // (ntiles-1) tails of x's dtype (in place only); layout per kernel
  float* state_park;       // (ntiles-1, S, D): new states of sequences that end in a later tile
  // Channel-last, every tile in one thread block cluster (sm_90): a tile holds its tail and a
  // crossing sequence's new state in registers and writes them after the cluster's barriers
  // instead of parking them; no scratch and no finish pass.
  bool clustered;
};

struct UpdateParams {
  ConvCommon conv;
  void* x;  // (batch, D, Tq), the inputs; written only when out == x (in place)
  int64_t x_batch_stride, x_chan_stride, x_time_stride;
  void* out;  // (batch, D, Tq), the outputs: x in place, else causal_conv1d_update_out's out
  int64_t out_batch_stride, out_chan_stride, out_time_stride;
  int64_t dim;
  int32_t batch, tokens;  // tokens: Tq
  StateView state;
  IndexView state_indices;  // int32 or none
  IndexView cache_seqlens;  // int32 or none: shift mode
  int32_t chans_per_block;  // channels of one block's slab
  int32_t rows_per_block;   // batch rows of one block
};

}  // namespace deltakern::native
