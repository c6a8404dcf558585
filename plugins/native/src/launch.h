// Host entry points of the native kernels (compiled by nvcc, called from plugin.cpp). They
// return a cudaError_t as int; none of them synchronizes or allocates.
#pragma once

#include <cstddef>
#include <cstdint>

#include "conv1d.h"

namespace deltakern::native {

struct LaunchOptions {
  bool pdl = false;  // programmatic dependent launch (compute capability >= 9.0)
  int sm_count = 1;
  int channel_last_vec_bytes = 0;  // bytes of channels a channel-last thread (8 or 16); 0: the plan's choice
  int cluster_tiles = 0;           // channel-last: the most tiles one cluster holds (0: no clusters)
  int time_staged = -1;  // time-contiguous staged rows: -1 the plan's choice, 0 never, 1 where they fit,
                         // 4..32 that many rows a block where they fit
  int time_heads = -1;   // time-contiguous staged: -1 the plan's choice, 0 heads after the runs, 1 first
  int update_rows = 0;   // rows a block of the 16-byte decode kernel; 0: the launcher's choice
};

// How one varlen call is tiled, and the scratch it needs (none when ntiles == 1).
struct VarlenPlan {
  bool channel_last = false;
  bool vectorized = false;   // vector accesses along the contiguous dimension, else the scalar kernel
  int32_t vec_bytes = 0;     // channel-last, vectorized: bytes of channels a thread (16 or 8)
  bool clustered = false;    // channel-last: every tile in one cluster, no scratch and no finish pass
  bool row_walker = false;   // time-contiguous: one warp per row, no tiles (varlen_time_walker.cu)
  bool short_rows = false;   // row walker: rows short enough for the half-size chunks
  bool time_staged = false;  // time-contiguous: whole rows staged per block (varlen_time_staged.cu)
  bool heads_first = false;  // time_staged: each sequence's first outputs before the runs are stored
  int64_t tile_len = 0;
  int32_t ntiles = 1;
  int32_t tail_len = 0;
  int32_t rows_per_block = 1;
  size_t park_bytes = 0;        // parked tail outputs, x's dtype (in place only: parks_tail)
  size_t state_park_bytes = 0;  // parked new states, f32
  size_t scratch_bytes() const { return park_bytes + state_park_bytes; }
};

// Largest S the kernels accept: a tile's parked tail must hold the last S originals of a
// sequence that ends just after it, and the time-contiguous kernel defers stores by one chunk.
constexpr int32_t kMaxStateLen = 64;

// The whole kernel choice of a varlen call: layout, vector or scalar, row walker or tiles, and
// the tiling. `tile_tokens` > 0 overrides the heuristic (benchmark sweeps).
VarlenPlan plan_varlen(const VarlenParams& p, ScalarType x_dtype, bool channel_last, const LaunchOptions& o,
                       int64_t tile_tokens = 0);

// Main pass, then (ntiles > 1) the finish pass. p.park / p.state_park point at plan-sized scratch.
int launch_varlen(VarlenParams p, ScalarType x_dtype, const VarlenPlan& plan, const LaunchOptions& o,
                  void* stream);

// Channels per block and rows per block are chosen here; returns the error, or
// cudaErrorInvalidValue when the call's slab cannot fit in shared memory.
int launch_update(UpdateParams p, ScalarType x_dtype, const LaunchOptions& o, void* stream);

// Largest Tq the update kernel stages in shared memory at the smallest slab.
constexpr int32_t kMaxUpdateTokens = 64;

// Loads every kernel (and caches occupancy figures) on the current device, so that a first
// call made inside a stream capture loads nothing. Returns the first error.
int preload_varlen();
int preload_update();
int preload_channel_last();
int channel_last_cluster_limit();  // after preload_channel_last, on the current device
int preload_time_contiguous();

// This device's error word (the current device's), or nullptr with the error in *err.
uint32_t* error_word_address(int* err);

// Internal: the per-layout main passes, each with its instantiations (the plan has chosen).
int launch_varlen_channel_last(const VarlenParams& p, ScalarType dtype, int vec_bytes, const LaunchOptions& o,
                               void* stream);
int launch_varlen_time_contiguous(const VarlenParams& p, ScalarType dtype, bool vectorized,
                                  const LaunchOptions& o, void* stream);
int launch_varlen_time_walker(const VarlenParams& p, ScalarType dtype, bool short_rows,
                              const LaunchOptions& o, void* stream);
int preload_time_walker();
int launch_varlen_time_staged(const VarlenParams& p, ScalarType dtype, bool heads_first,
                              const LaunchOptions& o, void* stream);
int preload_time_staged();
// Shared memory of a staged block of `rows` rows (launch and plan agree through this), and the
// most one block takes: two blocks per SM on sm_90.
int64_t time_staged_smem_bytes(int32_t batch, int32_t rows, int64_t tokens, int esz, bool heads_first);
// Whether a staged call of `batch` sequences computes their first outputs before storing its runs.
bool time_staged_heads_first(int32_t batch);
constexpr int64_t kTimeStagedSmemBytes = 112 * 1024;
int time_staged_threads();
// The geometry the plan sizes tiles with.
int channel_last_threads();
int time_contiguous_segment(ScalarType dtype, bool vectorized);
int time_contiguous_warps();

}  // namespace deltakern::native
