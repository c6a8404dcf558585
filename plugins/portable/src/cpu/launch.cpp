#include "launch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "../fresh_output.hpp"
#include "../layout.hpp"

namespace deltakern::portable::cpu {

static_assert(kMinWidth == portable::kMinWidth && kMaxWidth == portable::kMaxWidth,
              "the kernels are instantiated for exactly the widths the plugin declares");

namespace {

// Below this much work (elements touched) a call runs on the calling thread: waking workers
// costs more than a decode step over a few thousand channels.
constexpr int64_t kInlineWork = int64_t{1} << 16;

// Time-contiguous items: a long tile of tokens for a block of channel rows. Items run channel
// block first, so a thread walks a channel row from one sequence into the next; long runs are
// what lets the prefetchers keep up (1024-token tiles were 10-25% slower). 64 rows give short
// sequences, computed across channels, a vector's worth of work per token.
constexpr int64_t kTimeTile = 8192;
constexpr int64_t kTimeChannels = 64;
// Channel-last items: a tile of token rows, each a contiguous block of channels; 512 f32
// channels keep the ring of W rows and the weights in L1 (wider blocks were slower).
constexpr int64_t kChannelLastTile = 256;
constexpr int64_t kChannelLastChannels = 512;
// Update items: a batch row's block of channels, computed token by token across channels.
constexpr int64_t kUpdateChannels = 512;

// Chunks of work items a thread takes (run_grid). Items of equal cost (decode's, whole rows) go
// in long chunks, whose consecutive items share a channel block; a varlen grid sized by the
// longest sequence has many empty tails of shorter ones, and small chunks balance them (handing
// them out a few at a time keeps the shared counter cold).
constexpr int64_t kEvenChunksPerThread = 8;
constexpr int64_t kRaggedChunksPerThread = 512;

ElemType elem_type(const DLDataType& t) {
  if (plugin::is_bf16(t)) return ElemType::bf16;
  if (plugin::is_f16(t)) return ElemType::f16;
  return ElemType::f32;
}

StridedRef strided(const DLTensor* t) {
  StridedRef ref;
  if (t == nullptr) return ref;
  ref.data = plugin::data_of<char>(*t);
  for (int d = 0; d < t->ndim && d < 3; ++d) ref.stride[d] = plugin::stride_of(*t, d);
  ref.type = elem_type(t->dtype);
  return ref;
}

IndexRef index_ref(const DLTensor* t) {
  if (t == nullptr) return {};
  return {plugin::data_of<const char>(*t), plugin::stride_of(*t, 0)};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t index_at_host(const IndexRef& ref, int64_t i) {
  return static_cast<const int32_t*>(ref.data)[i * ref.stride];
}

// The calling thread's kernel scratch, kept between calls (a fresh allocation per call would
// fault its pages in every time). At least `floats` floats, 64-byte aligned.
float* thread_scratch(int64_t floats) {
  thread_local std::unique_ptr<float[]> storage;
  thread_local int64_t capacity = 0;
  if (floats > capacity) {
    storage = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(floats + 16));
    capacity = floats;
  }
  const auto address = reinterpret_cast<uintptr_t>(storage.get());
  return reinterpret_cast<float*>((address + 63) / 64 * 64);
}

// Runs items [0, n) of a kernel, on the pool unless the call is small, in chunks of about
// items / (threads * chunks_per_thread), and raises the device error word with whatever the
// items flagged.
template <class Plan, class Kernel>
void run_grid(const Device& device, const Plan& plan, Kernel kernel, int64_t items, int64_t work,
              int64_t scratch_floats, int64_t chunks_per_thread) {
  std::atomic<uint32_t> flagged{0};
  auto body = [&](int64_t begin, int64_t end) {
    const uint32_t bits =
        kernel(plan, begin, end, scratch_floats > 0 ? thread_scratch(scratch_floats) : nullptr);
    if (bits != 0) flagged.fetch_or(bits, std::memory_order_relaxed);
  };
  if (work < kInlineWork || items == 1) {
    body(0, items);
  } else {
    const int64_t grain =
        std::max<int64_t>(1, items / (int64_t{device.pool.concurrency()} * chunks_per_thread));
    device.pool.parallel_for(items, grain, body);
  }
  if (const uint32_t bits = flagged.load(); bits != 0) device.error_word.fetch_or(bits);
}

// Outputs beyond this size are written with non-temporal stores (where the layout allows).
constexpr int64_t kStreamOutputBytes = int64_t{64} << 20;
// Software prefetch distance in token rows of a channel-last block: each row of a block is a
// 1 KiB run, too short for the hardware prefetchers (without it, channel-last ran 35% slower).
// Time-contiguous rows are walked in memory order (see kTimeTile), where the hardware does
// better alone: prefetching there cost 10-15%.
constexpr int64_t kChannelLastPrefetch = 2;

// Whether a time-contiguous call goes by whole channel rows (rows_time_contiguous): several
// sequences whose offsets do not decrease, so that they lie end to end in [first start, last
// end). A single sequence, or offsets that break the rules, take the per-sequence items.
bool whole_rows_fit(const VarlenPlan& p) {
  if (p.batch < 2) return false;
  for (int64_t b = 0; b < p.batch; ++b)
    if (index_at_host(p.query_start_loc, b + 1) < index_at_host(p.query_start_loc, b)) return false;
  return true;
}

int act_index(plugin::Activation a) { return a == plugin::Activation::silu ? 1 : 0; }

// out: a fresh output or the caller's (any strides within x's layout, checked by the core).
// fresh: every token must be written, those of no sequence included (with zeros); a caller's
// out holds those only in a call that breaks query_start_loc's rules.
void varlen_into(const Device& device, const plugin::VarlenArgs& args, const DLTensor& out,
                 int64_t max_seq_len, bool fresh) {
  const XLayout layout = varlen_layout(args);

  VarlenPlan p;
  p.x = strided(args.x);
  p.out = strided(&out);
  p.weight = strided(args.weight);
  p.bias = strided(args.bias);
  p.states = strided(args.conv_states);
  p.query_start_loc = index_ref(args.query_start_loc);
  p.cache_indices = index_ref(args.cache_indices);
  p.has_initial_state = index_ref(args.has_initial_state);
  p.dim = args.dim();
  p.tokens = args.tokens();
  p.width = args.width();
  p.state_len = args.state_len();
  p.lines = args.conv_states->shape[0];
  p.batch = args.batch();
  p.pad_slot_id = args.pad_slot_id;
  const bool channel_last = layout == XLayout::channel_last;
  p.token_tile = channel_last ? kChannelLastTile : kTimeTile;
  p.channel_block = channel_last ? kChannelLastChannels : kTimeChannels;
  p.prefetch_ahead = channel_last ? kChannelLastPrefetch : 0;
  // Channel-last rows are whole aligned blocks; time-contiguous rows start and end mid-line at
  // every sequence boundary, and there streaming stores measured 35% slower on one thread.
  p.stream_output = channel_last && p.dim * p.tokens * (out.dtype.bits / 8) > kStreamOutputBytes;
  p.n_tiles = std::max<int64_t>(1, ceil_div(max_seq_len, p.token_tile));
  p.n_channel_blocks = ceil_div(p.dim, p.channel_block);
  p.scratch_floats =
      (kScratchRowsPerWidth * p.width + kScratchRowsFixed) * ceil_div(p.channel_block, 16) * 16;

  if (p.dim == 0) return;
  if (p.batch == 0) {  // no sequence: every token lies outside all of them (fresh: compact)
    if (fresh && p.tokens > 0)
      std::memset(out.data, 0, static_cast<size_t>(p.dim * p.tokens) * (out.dtype.bits / 8));
    return;
  }
  const VarlenKernel kernel = device.kernels.varlen[static_cast<int>(p.x.type)][channel_last ? 1 : 0]
                                                   [p.width - kMinWidth][act_index(args.activation)];
  const int64_t work = (p.tokens + p.batch * p.state_len) * p.dim;
  if (!channel_last && whole_rows_fit(p)) {
    p.whole_rows = true;
    p.scratch_floats = std::max(p.scratch_floats, kHeadScratchFloats);
    run_grid(device, p, kernel, p.n_channel_blocks, work, p.scratch_floats, kEvenChunksPerThread);
    return;
  }
  run_grid(device, p, kernel, p.batch * p.n_tiles * p.n_channel_blocks, work, p.scratch_floats,
           kRaggedChunksPerThread);
}

void update_into(const Device& device, const plugin::UpdateArgs& args, const DLTensor& out) {
  UpdatePlan p;
  p.x = strided(args.x);
  p.out = strided(&out);
  if (args.x->ndim == 2) {  // seen as (batch, D, 1)
    p.x.stride[2] = 1;
    p.out.stride[2] = 1;
  }
  p.weight = strided(args.weight);
  p.bias = strided(args.bias);
  p.state = strided(args.conv_state);
  p.state_indices = index_ref(args.conv_state_indices);
  p.cache_seqlens = index_ref(args.cache_seqlens);
  p.batch = args.batch();
  p.dim = args.dim();
  p.new_tokens = args.tokens();
  p.width = args.width();
  p.state_len = args.state_len();
  p.lines = args.conv_state->shape[0];
  p.pad_slot_id = args.pad_slot_id;
  p.channel_block = kUpdateChannels;
  p.n_channel_blocks = ceil_div(p.dim, p.channel_block);
  p.scratch_floats = (3 * p.width + 1) * ceil_div(p.channel_block, 16) * 16;
  if (p.batch == 0 || p.dim == 0 || p.new_tokens == 0) return;

  const UpdateKernel kernel =
      device.kernels.update[static_cast<int>(p.x.type)][p.width - kMinWidth][act_index(args.activation)];
  const int64_t work = p.batch * p.dim * (p.new_tokens + p.state_len);
  run_grid(device, p, kernel, p.batch * p.n_channel_blocks, work, p.scratch_floats, kEvenChunksPerThread);
}

}  // namespace

DLManagedTensor* causal_conv1d_varlen(const Device& device, const plugin::VarlenArgs& args) {
  const int64_t max_seq_len = launch_max_seq_len(device.host, args);
  ResultPtr result = allocate_varlen_output(device.host, *args.x, varlen_layout(args), args.stream);
  varlen_into(device, args, result->dl_tensor, max_seq_len, true);
  return result.release();
}

void causal_conv1d_varlen_out(const Device& device, const plugin::VarlenArgs& args) {
  varlen_into(device, args, *args.out, launch_max_seq_len(device.host, args), false);
}

DLManagedTensor* causal_conv1d_update(const Device& device, const plugin::UpdateArgs& args) {
  ResultPtr result = allocate_update_output(device.host, *args.x, args.stream);
  update_into(device, args, result->dl_tensor);
  return result.release();
}

void causal_conv1d_update_out(const Device& device, const plugin::UpdateArgs& args) {
  update_into(device, args, *args.out);
}

}  // namespace deltakern::portable::cpu
