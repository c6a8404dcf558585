// The CPU path's launch plans: plain data that the host-side launchers (launch.cpp) fill in
// and the work-item kernels (kernels/, compiled once per instruction set) read. Nothing here
// may pull in the plugin SDK or the standard library's templates: the kernel translation
// units are built with different -march flags, and an inline function they share would be
// merged by the linker into one copy of unknown instruction set. So: data only, no functions.
#pragma once

#include <cstdint>

namespace deltakern::portable::cpu {

enum class ElemType : uint8_t { f32 = 0, f16 = 1, bf16 = 2 };
inline constexpr int kElemTypes = 3;

enum class Act : uint8_t { none = 0, silu = 1 };
inline constexpr int kActs = 2;

inline constexpr int kMinWidth = 2;
inline constexpr int kMaxWidth = 8;
inline constexpr int kWidths = kMaxWidth - kMinWidth + 1;

// Time-contiguous tiles shorter than this are computed across channels (see varlen_kernel.hpp).
inline constexpr int64_t kShortTile = 32;
// Rows of per-thread scratch a varlen item uses, each of channel_block floats rounded up to
// 16: weights, ring and conversion buffer (width rows each), the bias, a short tile transposed
// (kShortTile + kMaxWidth rows) and its output (kShortTile rows). See ChannelScratch.
inline constexpr int64_t kScratchRowsPerWidth = 3;
inline constexpr int64_t kScratchRowsFixed = 1 + 2 * kShortTile + kMaxWidth;
// Sequences per pass of a whole-rows item's heads: their windows and outputs, 2 * kMaxWidth
// floats each, also live in the scratch.
inline constexpr int64_t kHeadGroup = 64;
inline constexpr int64_t kHeadScratchFloats = kHeadGroup * 2 * 2 * kMaxWidth;

// A strided tensor as the kernels see it: element strides, 64-bit throughout.
struct StridedRef {
  void* data = nullptr;  // byte_offset already applied; nullptr for an omitted tensor
  int64_t stride[3] = {0, 0, 0};
  ElemType type = ElemType::f32;
};

struct IndexRef {  // a 1-d int32 or uint8 tensor on the host
  const void* data = nullptr;
  int64_t stride = 1;
};

// causal_conv1d_varlen: a grid of (sequence, token tile, channel block) work items, sized on
// the host from max_seq_len. Each item reads its sequence's bounds from query_start_loc
// itself, as device code would, and returns early when its tile lies past the end. Items are
// numbered channel block first, then sequence, then tile: a thread taking consecutive items
// walks each channel row (or each token row) through memory in order.
struct VarlenPlan {
  StridedRef x;                // (D, T)
  StridedRef out;              // (D, T), compact in x's layout
  StridedRef weight;           // (D, W)
  StridedRef bias;             // (D) or data == nullptr
  StridedRef states;           // (lines, D, S)
  IndexRef query_start_loc;    // int32 (batch + 1)
  IndexRef cache_indices;      // int32 (batch) or none: identity
  IndexRef has_initial_state;  // uint8 (batch) or none: all false
  int64_t dim = 0, tokens = 0, width = 0, state_len = 0, lines = 0, batch = 0;
  int64_t pad_slot_id = -1;
  int64_t token_tile = 0;     // tokens per item
  int64_t channel_block = 0;  // channels per item
  int64_t n_tiles = 0;        // per sequence: ceil(max_seq_len / token_tile), at least 1
  int64_t n_channel_blocks = 0;
  // Write the output with non-temporal stores (where the build has them): set when the output
  // is far larger than the caches, so reading it for ownership would only cost bandwidth.
  bool stream_output = false;
  int64_t prefetch_ahead = 0;  // token rows of a channel-last block to prefetch ahead
  // Time-contiguous x, several sequences with monotonic offsets: items are channel blocks over
  // the whole batch (rows_time_contiguous), not (sequence, tile, channel block).
  bool whole_rows = false;
  // Per-thread scratch the kernel needs, 64-byte aligned: (kScratchRowsPerWidth * W +
  // kScratchRowsFixed) rows of channel_block floats rounded up to 16.
  int64_t scratch_floats = 0;
};

// causal_conv1d_update: a grid of (batch row, channel block) items.
struct UpdatePlan {
  StridedRef x;            // (batch, D, Tq); a 2-d x is seen with Tq = 1
  StridedRef out;          // (batch, D, Tq), compact
  StridedRef weight;       // (D, W)
  StridedRef bias;         // (D) or data == nullptr
  StridedRef state;        // (lines, D, S)
  IndexRef state_indices;  // int32 (batch) or none: identity
  IndexRef cache_seqlens;  // int32 (batch) or none: shift mode
  int64_t batch = 0, dim = 0, new_tokens = 0, width = 0, state_len = 0, lines = 0;
  int64_t pad_slot_id = -1;
  int64_t channel_block = 0;
  int64_t n_channel_blocks = 0;
  int64_t scratch_floats = 0;  // per thread: (3W + 1) rows of channel_block rounded up to 16
};

// A kernel runs work items [begin, end) of its plan and returns dk_error_bits for them;
// `scratch` is the calling thread's (plan.scratch_floats floats, 64-byte aligned).
using VarlenKernel = uint32_t (*)(const VarlenPlan& plan, int64_t begin, int64_t end, float* scratch);
using UpdateKernel = uint32_t (*)(const UpdatePlan& plan, int64_t begin, int64_t end, float* scratch);

// One instruction set's kernels, indexed by x's dtype, layout (varlen: 0 time-contiguous,
// 1 channel-last), width - kMinWidth and activation.
struct KernelTable {
  const char* isa;
  VarlenKernel varlen[kElemTypes][2][kWidths][kActs];
  UpdateKernel update[kElemTypes][kWidths][kActs];
};

}  // namespace deltakern::portable::cpu
