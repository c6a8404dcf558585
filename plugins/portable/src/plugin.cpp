// The portable backend: the plugin descriptor, its two ops and their contracts.
//
// Contract: x is never written; every call of an op returns a fresh tensor allocated through
// the core's allocator (its out-variant writes into the caller's out instead, any strides within
// x's layout), and updates the conv state pool in place. The kernels tile tokens as well
// as channels (a tile reads W-1 tokens before it as halo), so they need a fresh output, and
// they size their launch grid with max_seq_len: given by the host, nothing is read back;
// omitted, it is derived with exactly one counted read_to_host.
#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>
#include <deltakern/plugin_sdk.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "cpu/isa.hpp"
#include "cpu/launch.hpp"
#include "fresh_output.hpp"
#include "layout.hpp"
#include "portable_plugin.hpp"

#if defined(DELTAKERN_PORTABLE_CUDA)
#include "cuda/launch.hpp"
#endif

#ifndef DELTAKERN_PORTABLE_VERSION
#define DELTAKERN_PORTABLE_VERSION "0.0.0"
#endif

namespace deltakern::portable {
namespace {

using plugin::Failure;

constexpr char kVarlenSchema[] =
    "causal_conv1d_varlen(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> Tensor";
constexpr char kUpdateSchema[] =
    "causal_conv1d_update(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, str activation=\"none\", "
    "int pad_slot_id=-1) -> Tensor";

constexpr char kVarlenOutSchema[] =
    "causal_conv1d_varlen_out(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor(a!) out, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()";
constexpr char kUpdateOutSchema[] =
    "causal_conv1d_update_out(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, Tensor(a!) out, str activation=\"none\", "
    "int pad_slot_id=-1) -> ()";

constexpr DLDataType kDtypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}};
constexpr uint32_t kLayouts = DK_LAYOUT_TIME_CONTIGUOUS | DK_LAYOUT_CHANNEL_LAST;

// varlen derives max_seq_len when it is omitted (one sync) and never syncs when it is given;
// update has no max_seq_len and never syncs.
constexpr dk_device_caps kVarlenDevices[] = {
    {sizeof(dk_device_caps), kDLCPU, 0, DK_CAP_DERIVES_MAX_SEQ_LEN},
#if defined(DELTAKERN_PORTABLE_CUDA)
    // PTX for compute capability 7.5 is in the binary, so any GPU from Turing on JITs it.
    {sizeof(dk_device_caps), kDLCUDA, 75, DK_CAP_DERIVES_MAX_SEQ_LEN | DK_CAP_GRAPH_CAPTURABLE},
#endif
};
constexpr dk_device_caps kUpdateDevices[] = {
    {sizeof(dk_device_caps), kDLCPU, 0, 0},
#if defined(DELTAKERN_PORTABLE_CUDA)
    {sizeof(dk_device_caps), kDLCUDA, 75, DK_CAP_GRAPH_CAPTURABLE},
#endif
};

constexpr dk_caps kVarlenCaps = {.struct_size = sizeof(dk_caps),
                                 .n_devices = std::size(kVarlenDevices),
                                 .devices = kVarlenDevices,
                                 .n_dtypes = std::size(kDtypes),
                                 .dtypes = kDtypes,
                                 .min_width = kMinWidth,
                                 .max_width = kMaxWidth,
                                 .layouts = kLayouts};
constexpr dk_caps kUpdateCaps = {.struct_size = sizeof(dk_caps),
                                 .n_devices = std::size(kUpdateDevices),
                                 .devices = kUpdateDevices,
                                 .n_dtypes = std::size(kDtypes),
                                 .dtypes = kDtypes,
                                 .min_width = kMinWidth,
                                 .max_width = kMaxWidth,
                                 .layouts = kLayouts};

PortablePlugin& self(void* p) {
  if (p == nullptr) throw Failure(DK_ERR_INVALID_ARGUMENT, "portable: called without an initialised plugin");
  return *static_cast<PortablePlugin*>(p);
}

const dk_call& require_call(const dk_call* call) {
  if (call == nullptr) throw Failure(DK_ERR_INVALID_ARGUMENT, "portable: called without a call");
  return *call;
}

#if defined(DELTAKERN_PORTABLE_CUDA)
DLManagedTensor* cuda_varlen(PortablePlugin& p, const plugin::VarlenArgs& args) {
  const XLayout layout = varlen_layout(args);
  const int64_t max_seq_len = launch_max_seq_len(p.host, args);
  ResultPtr result = allocate_varlen_output(p.host, *args.x, layout, args.stream);
  cuda::causal_conv1d_varlen(args, result->dl_tensor, max_seq_len);
  return result.release();
}

DLManagedTensor* cuda_update(PortablePlugin& p, const plugin::UpdateArgs& args) {
  ResultPtr result = allocate_update_output(p.host, *args.x, args.stream);
  cuda::causal_conv1d_update(args, result->dl_tensor);
  return result.release();
}
#endif

// OutVariant: the call is the op's out-variant: the kernels write into args.out, nothing returned.
template <bool OutVariant>
int32_t varlen_run(void* p, const dk_call* call, DLManagedTensor** result, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    PortablePlugin& plugin = self(p);
    if (result == nullptr) throw Failure(DK_ERR_INVALID_ARGUMENT, "causal_conv1d_varlen: no result pointer");
    *result = nullptr;
    const plugin::VarlenArgs args = plugin::unpack_varlen(require_call(call), OutVariant);
#if defined(DELTAKERN_PORTABLE_CUDA)
    if (args.x->device.device_type == kDLCUDA) {
      if constexpr (OutVariant)
        cuda::causal_conv1d_varlen(args, *args.out, launch_max_seq_len(plugin.host, args));
      else
        *result = cuda_varlen(plugin, args);
      return;
    }
#endif
    if constexpr (OutVariant)
      cpu::causal_conv1d_varlen_out(plugin.cpu_device(), args);
    else
      *result = cpu::causal_conv1d_varlen(plugin.cpu_device(), args);
  });
}

template <bool OutVariant>
int32_t update_run(void* p, const dk_call* call, DLManagedTensor** result, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    PortablePlugin& plugin = self(p);
    if (result == nullptr) throw Failure(DK_ERR_INVALID_ARGUMENT, "causal_conv1d_update: no result pointer");
    *result = nullptr;
    const plugin::UpdateArgs args = plugin::unpack_update(require_call(call), OutVariant);
#if defined(DELTAKERN_PORTABLE_CUDA)
    if (args.x->device.device_type == kDLCUDA) {
      if constexpr (OutVariant)
        cuda::causal_conv1d_update(args, *args.out);
      else
        *result = cuda_update(plugin, args);
      return;
    }
#endif
    if constexpr (OutVariant)
      cpu::causal_conv1d_update_out(plugin.cpu_device(), args);
    else
      *result = cpu::causal_conv1d_update(plugin.cpu_device(), args);
  });
}

// The out-variants run the same kernels on the same declarations: they write every output
// element through out's own strides, so any out the core admits is theirs to fill.
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenSchema, &kVarlenCaps, nullptr, varlen_run<false>},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateSchema, &kUpdateCaps, nullptr, update_run<false>},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN_OUT, kVarlenOutSchema, &kVarlenCaps, nullptr,
     varlen_run<true>},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE_OUT, kUpdateOutSchema, &kUpdateCaps, nullptr,
     update_run<true>},
};

// DELTAKERN_PORTABLE_THREADS caps the CPU threads (benchmarks, a machine shared with other
// work); the default is one per hardware thread.
unsigned thread_count() {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char* env = std::getenv("DELTAKERN_PORTABLE_THREADS"); env != nullptr && *env != '\0') {
    const long requested = std::strtol(env, nullptr, 10);
    if (requested > 0) threads = static_cast<unsigned>(std::min<long>(requested, 1024));
  }
  return threads;
}

int32_t init(const dk_host* host, void** out, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    if (out == nullptr) throw Failure(DK_ERR_INVALID_ARGUMENT, "portable: init without an output pointer");
    *out = nullptr;
    if (!plugin::usable_host(host))
      throw Failure(DK_ERR_INVALID_ARGUMENT,
                    "portable: the host services table lacks alloc, release or read_to_host (struct_size " +
                        std::to_string(host != nullptr ? host->struct_size : 0) + ", ABI 1.0's is " +
                        std::to_string(DK_HOST_SIZE_1_0) + ")");
    const char* isa_env = std::getenv("DELTAKERN_PORTABLE_ISA");
    std::string why;
    const cpu::KernelTable& kernels = cpu::select_kernels(isa_env != nullptr ? isa_env : "", why);
    if (!why.empty()) plugin::log(host, DK_LOG_WARN, why);  // the core names the plugin
#if defined(DELTAKERN_PORTABLE_CUDA)
    if (const char* tiling = std::getenv("DELTAKERN_PORTABLE_CUDA_TILING");
        tiling != nullptr && *tiling != '\0') {
      std::string bad;
      cuda::set_tiling_override(cuda::parse_tiling_override(tiling, bad));
      plugin::log(host, bad.empty() ? DK_LOG_INFO : DK_LOG_WARN,
                  bad.empty() ? std::string("CUDA tiling forced: ") + tiling : bad + "; ignored");
    }
#endif
    auto instance = std::make_unique<PortablePlugin>(*host, thread_count(), kernels);
    plugin::log(host, DK_LOG_DEBUG,
                std::string("CPU kernels built for ") + kernels.isa + ", " +
                    std::to_string(instance->pool.concurrency()) + " threads");
    *out = instance.release();  // owned by the core until shutdown
  });
}

void shutdown(void* p) { std::unique_ptr<PortablePlugin>(static_cast<PortablePlugin*>(p)).reset(); }

int32_t probe(void* p, int32_t device_type, char* why, size_t why_size) {
  (void)p;
  if (device_type == kDLCPU) return DK_OK;
  if (device_type == kDLCUDA) {
#if defined(DELTAKERN_PORTABLE_CUDA)
    std::string reason;
    try {
      if (cuda::available(reason)) return DK_OK;
    } catch (...) {
      reason = "probing the CUDA driver failed";
    }
    plugin::write_message(why, why_size, reason.empty() ? "no usable CUDA device" : reason);
    return DK_ERR_UNAVAILABLE;
#else
    plugin::write_message(why, why_size, "this build of portable has no CUDA path");
    return DK_ERR_UNAVAILABLE;
#endif
  }
  plugin::write_message(why, why_size, "portable serves cpu and cuda only");
  return DK_ERR_UNAVAILABLE;
}

std::string describe_errors(uint32_t bits) {
  if (bits == 0) return {};
  std::string msg;
  if ((bits & DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE) != 0)
    msg =
        "a cache index was neither pad_slot_id nor in [0, lines): that sequence was skipped (zeros in the "
        "output, its state untouched)";
  if ((bits & ~uint32_t{DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE}) != 0)
    msg += (msg.empty() ? "" : "; ") + std::string("unknown error bits ") + std::to_string(bits);
  return msg;
}

int32_t check_errors(void* p, DLDevice device, void* stream, uint32_t* flags, char* msg, size_t msg_size) {
  return plugin::guarded(msg, msg_size, [&] {
    PortablePlugin& plugin = self(p);
    if (flags == nullptr)
      throw Failure(DK_ERR_INVALID_ARGUMENT, "portable: check_errors without a flags pointer");
    *flags = 0;
    if (device.device_type == kDLCPU) {
      *flags = plugin.cpu_error_word.exchange(0);
#if defined(DELTAKERN_PORTABLE_CUDA)
    } else if (device.device_type == kDLCUDA) {
      const DLTensor word = cuda::error_word(device.device_id);
      uint32_t value = 0;
      const int32_t status = plugin.host.read_to_host(plugin.host.ctx, &value, &word, stream);
      if (status != DK_OK)
        throw Failure(static_cast<dk_status>(status), "portable: reading the CUDA error word failed");
      if (value != 0) cuda::clear_error_word(device.device_id, stream);
      *flags = value;
#endif
    } else {
      (void)stream;
      return;  // nothing of ours runs there
    }
    plugin::write_message(msg, msg_size, describe_errors(*flags));
  });
}

const dk_plugin kPlugin = {.struct_size = sizeof(dk_plugin),
                           .abi_major = DK_ABI_MAJOR,
                           .abi_minor = DK_ABI_MINOR,
                           .name = "portable",
                           .version = DELTAKERN_PORTABLE_VERSION,
                           .init = init,
                           .probe = probe,
                           .shutdown = shutdown,
                           .n_ops = std::size(kOps),
                           .ops = kOps,
                           .check_errors = check_errors};

}  // namespace
}  // namespace deltakern::portable

// The one exported symbol. The descriptor is returned whatever ABI the core asks for: the core
// compares majors and, on a mismatch, refuses the plugin with both versions in its message.
extern "C" __attribute__((visibility("default"))) const dk_plugin* deltakern_plugin_entry(
    uint16_t core_abi_major, uint16_t core_abi_minor) {
  // Nothing here depends on the core's minor: portable declares no limits, which a 1.0 core would
  // not check, and reads the core's structs through the SDK only as far as the core filled them.
  (void)core_abi_major;
  (void)core_abi_minor;
  return &deltakern::portable::kPlugin;
}
