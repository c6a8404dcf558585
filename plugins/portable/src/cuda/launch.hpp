// The portable backend's CUDA path, as seen from the plugin's entry (plugin.cpp): the
// generic kernels tile tokens as well as channels (a tile reads its W-1 halo from x), so
// they write a fresh output and size their grid with max_seq_len.
#pragma once

#include <deltakern/plugin_sdk.hpp>

#include <string>

namespace deltakern::portable::cuda {

// Whether a CUDA driver and at least one device are usable here; the reason when not.
bool available(std::string& why);

// Compute capability (major*10+minor) of the device the tensors live on.
int compute_capability(int device_id);

// Enqueue the op on args.stream. `out` is a fresh tensor on x's device with x's shape
// (for varlen, the same layout as x, compact). Never syncs, never allocates: the caller
// derived max_seq_len (given, or read through dk_host.read_to_host) and allocated out.
void causal_conv1d_varlen(const plugin::VarlenArgs& args, const DLTensor& out, int64_t max_seq_len);
void causal_conv1d_update(const plugin::UpdateArgs& args, const DLTensor& out);

// The device-side error word of `device_id` (one uint32, dk_error_bits), as a tensor
// the plugin reads with read_to_host, and an enqueued reset.
DLTensor error_word(int device_id);
void clear_error_word(int device_id, void* stream);

}  // namespace deltakern::portable::cuda
