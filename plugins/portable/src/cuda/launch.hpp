// The portable backend's CUDA path, as seen from the plugin's entry (plugin.cpp): the
// generic kernels tile tokens as well as channels (a tile reads its W-1 halo from x), so
// they write a fresh output and size their grid with max_seq_len.
#pragma once

#include <deltakern/plugin_sdk.hpp>

#include <cstdint>
#include <string>

namespace deltakern::portable::cuda {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether a CUDA driver and at least one device are usable here; the reason when not.
bool available(std::string& why);

// Compute capability (major*10+minor) of the device the tensors live on.
int compute_capability(int device_id);

// Enqueue the op on args.stream. `out` is a fresh tensor on x's device with x's shape
// (for varlen, the same layout as x, compact). Never syncs, never allocates: the caller
// derived max_seq_len (given, or read through dk_host.read_to_host) and allocated out.
void causal_conv1d_varlen(const plugin::VarlenArgs& args, const DLTensor& out, int64_t max_seq_len);
void causal_conv1d_update(const plugin::UpdateArgs& args, const DLTensor& out);

// How the prefill kernels cut a call is chosen from max_seq_len, the batch and the machine's size,
// so the conformance suite's small shapes reach only some of the cuts. DELTAKERN_PORTABLE_CUDA_TILING
// (read once, at init) forces them, for tests and sweeps: "lanes=8,steps=2,iters=3,chunks=1,flat=1",
// any subset; time-contiguous lanes per channel (8, 16, 32), steps per tile (1..64), channels per
// row group (1..8), flat walk (1) or per-sequence walk (0); channel-last chunks per tile (1..64).
// Zero or absent: the launcher's choice (for flat: 1 forces it, 2 forbids it).
struct TilingOverride {
  int lanes = 0, steps = 0, iters = 0, chunks = 0, flat = 0;
};
// Parses a spec; on a bad one returns no override and says why.
TilingOverride parse_tiling_override(const std::string& spec, std::string& why);
void set_tiling_override(const TilingOverride& o);

// The device-side error word of `device_id` (one uint32, dk_error_bits), as a tensor
// the plugin reads with read_to_host, and an enqueued reset.
DLTensor error_word(int device_id);
void clear_error_word(int device_id, void* stream);

}  // namespace deltakern::portable::cuda
