// The native backend: tuned CUDA kernels for sm_80 and sm_90 that convolve x in place, or into
// a caller's out with x untouched (the *_out ops, ABI 1.1). This file is the plugin's C ABI side:
// capabilities and limits (the core checks every call against them, so native has no
// supports()), argument unpacking, the per-device state (SM count, error word), and the launches.
#include <cuda_runtime_api.h>
#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>
#include <deltakern/plugin_sdk.hpp>
#include <deltakern/plugin_sdk_cuda.hpp>
#include <deltakern/scalar_type.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <mutex>
#include <string>
#include <type_traits>

#include "conv1d.h"
#include "launch.h"

namespace deltakern::native {
namespace {

using plugin::Failure;

constexpr int kMinComputeCapability = 80;
constexpr int kMaxDevices = 64;

// ---- declarations

constexpr DLDataType kDtypes[] = {to_dl(ScalarType::f32), to_dl(ScalarType::f16), to_dl(ScalarType::bf16)};
constexpr dk_device_caps kDevices[] = {
    {sizeof(dk_device_caps), kDLCUDA, kMinComputeCapability, DK_CAP_GRAPH_CAPTURABLE}};
constexpr int64_t kMaxInt32 = (int64_t{1} << 31) - 1;  // indices and sizes the kernels hold in int32
// The state lives in registers (launch.h): S and Tq are bounded there.
constexpr dk_limit kVarlenLimits[] = {{sizeof(dk_limit), "state_len", 1, kMaxStateLen},
                                      {sizeof(dk_limit), "tokens", 0, kMaxInt32},
                                      {sizeof(dk_limit), "batch", 0, kMaxInt32}};
constexpr dk_limit kUpdateLimits[] = {{sizeof(dk_limit), "state_len", 1, kMaxStateLen},
                                      {sizeof(dk_limit), "tokens_per_update", 1, kMaxUpdateTokens},
                                      {sizeof(dk_limit), "batch", 0, kMaxInt32}};
constexpr dk_caps caps_with(const dk_limit* limits, size_t n_limits) {
  return {.struct_size = sizeof(dk_caps),
          .n_devices = 1,
          .devices = kDevices,
          .n_dtypes = 3,
          .dtypes = kDtypes,
          .min_width = 2,
          .max_width = 4,
          .layouts = DK_LAYOUT_TIME_CONTIGUOUS | DK_LAYOUT_CHANNEL_LAST,
          .n_limits = n_limits,
          .limits = limits};
}
constexpr dk_caps kVarlenCaps = caps_with(kVarlenLimits, std::size(kVarlenLimits));
constexpr dk_caps kUpdateCaps = caps_with(kUpdateLimits, std::size(kUpdateLimits));

// The core's ABI minor (from the entry): a 1.0 core does not check limits, so run() does.
uint16_t core_abi_minor = 0;

constexpr const char* kVarlenSchema =
    "causal_conv1d_varlen(Tensor(a!) x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> Tensor(a)";
constexpr const char* kUpdateSchema =
    "causal_conv1d_update(Tensor(a!) x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, str activation=\"none\", "
    "int pad_slot_id=-1) -> Tensor(a)";
// The out-variants write out alone (and the states): x is an input like the others.
constexpr const char* kVarlenOutSchema =
    "causal_conv1d_varlen_out(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor(a!) out, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()";
constexpr const char* kUpdateOutSchema =
    "causal_conv1d_update_out(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, Tensor(a!) out, str activation=\"none\", "
    "int pad_slot_id=-1) -> ()";

// ---- per-device state, resolved on first use

struct DeviceInfo {
  std::once_flag once;
  int sm_count = 0;
  int compute_capability = 0;
  uint32_t* error_word = nullptr;
  int cluster_tiles = 0;  // channel_last_cluster_limit()
  int error = cudaSuccess;
};

struct Plugin {
  const dk_host* host = nullptr;
  std::array<DeviceInfo, kMaxDevices> devices;
  int64_t tile_tokens = 0;         // DELTAKERN_NATIVE_TILE: tile length override for tests and sweeps
  bool pdl = true;                 // DELTAKERN_NATIVE_PDL=0 turns programmatic dependent launch off
  int channel_last_vec_bytes = 0;  // DELTAKERN_NATIVE_CL_VEC: 8 or 16 bytes a channel-last thread, for sweeps
  bool clusters = true;  // DELTAKERN_NATIVE_CLUSTERS=0: channel-last never in clusters (tests, sweeps)
  // DELTAKERN_NATIVE_TIME_STAGED=0|1|4..32: time-contiguous staged rows never / where they fit /
  // that many rows a block where they fit (sweeps)
  int time_staged = -1;
  int time_heads =
      -1;  // DELTAKERN_NATIVE_TIME_HEADS=0|1: staged rows' sequence heads after / before the runs
  int update_rows = 0;  // DELTAKERN_NATIVE_UPDATE_ROWS: rows a block of the 16-byte decode kernel (sweeps)
};

LaunchOptions launch_options(const Plugin& plugin, const DeviceInfo& dev) {
  return LaunchOptions{plugin.pdl && dev.compute_capability >= 90,
                       dev.sm_count,
                       plugin.channel_last_vec_bytes,
                       plugin.clusters ? dev.cluster_tiles : 0,
                       plugin.time_staged,
                       plugin.time_heads,
                       plugin.update_rows};
}

std::string cuda_message(const char* what, int err) {
  return plugin::cuda::message(what, static_cast<cudaError_t>(err));
}

using plugin::cuda::DeviceGuard;

// Attributes, the error word's address and the kernels of the current device, resolved on the
// first call there. That call may come inside a stream capture: loading the module (lazy
// loading) is not a stream operation but global capture mode refuses it, so this runs in
// relaxed mode; nothing is enqueued.
const DeviceInfo& device_info(Plugin& plugin, int device) {
  if (device < 0 || device >= kMaxDevices)
    throw Failure(DK_ERR_UNSUPPORTED, "native: device id out of range");
  DeviceInfo& info = plugin.devices[device];
  std::call_once(info.once, [&] {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    info.compute_capability = major * 10 + minor;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    info.error_word = error_word_address(&info.error);
    if (info.error == cudaSuccess) info.error = preload_varlen();
    if (info.error == cudaSuccess) info.error = preload_update();
    if (info.error == cudaSuccess && info.compute_capability >= 90)
      info.cluster_tiles = channel_last_cluster_limit();
    cudaThreadExchangeStreamCaptureMode(&mode);
  });
  if (info.error != cudaSuccess)
    throw Failure(DK_ERR_RUNTIME, cuda_message("native: device error word", info.error));
  return info;
}

// Scratch from the core's stream-ordered allocator, released on the same stream after the
// kernels that use it were enqueued (legal inside graph capture).
class Scratch {
 public:
  Scratch(const dk_host& host, DLDevice device, size_t bytes, void* stream)
      : host_(host), device_(device), stream_(stream) {
    if (bytes == 0) return;
    if (host.alloc(host.ctx, device, bytes, stream, &ptr_) != DK_OK || ptr_ == nullptr)
      throw Failure(DK_ERR_OUT_OF_MEMORY,
                    "native: allocating " + std::to_string(bytes) + " bytes of scratch failed");
  }
  ~Scratch() {
    if (ptr_ != nullptr) host_.release(host_.ctx, device_, ptr_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  const dk_host& host_;
  DLDevice device_;
  void* stream_;
  void* ptr_ = nullptr;
};

// ---- argument checks: the core validated every argument against the declarations (devices,
// dtypes, widths, layouts, limits) before the call gets here; what is left is what a 1.0 core
// did not check.

// The reason is built only when the check fails: these run on every call under a 1.0 core.
template <typename Why>
void require(bool ok, Why&& why) {
  if (ok) return;
  if constexpr (std::is_invocable_v<Why>)
    throw Failure(DK_ERR_UNSUPPORTED, "native: " + std::string(why()));
  else
    throw Failure(DK_ERR_UNSUPPORTED, "native: " + std::string(why));
}

// The declared limits, which a 1.1 core checks itself.
template <size_t N>
void check_limits_for_a_1_0_core(const dk_limit (&limits)[N], std::initializer_list<int64_t> dims) {
  if (core_abi_minor >= 1) return;
  size_t i = 0;
  for (const int64_t value : dims) {
    const dk_limit& l = limits[i++];
    require(value >= l.min && value <= l.max, [&] {
      return std::string(l.dim) + " = " + std::to_string(value) + " outside " + std::to_string(l.min) + ".." +
             std::to_string(l.max);
    });
  }
}

void check_varlen(const plugin::VarlenArgs& a) {
  check_limits_for_a_1_0_core(kVarlenLimits, {a.state_len(), a.tokens(), a.batch()});
}

void check_update(const plugin::UpdateArgs& a) {
  check_limits_for_a_1_0_core(kUpdateLimits, {a.state_len(), a.tokens(), a.batch()});
}

// ---- parameter packing

// The core checked every dtype against kDtypes (anything else would run as bf16, as it did before).
ScalarType scalar_type(const DLDataType& t) {
  ScalarType s = ScalarType::bf16;
  scalar_type_of(t, &s);
  return s;
}

ConvCommon conv_common(const DLTensor* weight, const DLTensor* bias, plugin::Activation act,
                       int64_t pad_slot_id, uint32_t* error_word) {
  ConvCommon c{};
  c.weight = plugin::data_of<const void>(*weight);
  c.w_chan_stride = plugin::stride_of(*weight, 0);
  c.w_tap_stride = plugin::stride_of(*weight, 1);
  c.w_dtype = scalar_type(weight->dtype);
  c.width = static_cast<int32_t>(weight->shape[1]);
  c.bias = bias != nullptr ? plugin::data_of<const void>(*bias) : nullptr;
  c.bias_stride = bias != nullptr ? plugin::stride_of(*bias, 0) : 0;
  c.bias_dtype = bias != nullptr ? scalar_type(bias->dtype) : ScalarType::f32;
  c.silu = act == plugin::Activation::silu;
  c.pad_slot_id = pad_slot_id;
  c.error_word = error_word;
  return c;
}

StateView state_view(const DLTensor& s) {
  return StateView{plugin::data_of<void>(s),
                   plugin::stride_of(s, 0),
                   plugin::stride_of(s, 1),
                   plugin::stride_of(s, 2),
                   s.shape[0],
                   static_cast<int32_t>(s.shape[2]),
                   scalar_type(s.dtype)};
}

IndexView index_view(const DLTensor* t) {
  if (t == nullptr) return IndexView{nullptr, 0};
  return IndexView{plugin::data_of<const void>(*t), plugin::stride_of(*t, 0)};
}

// out_variant: causal_conv1d_varlen_out (the core checked out against x: shape, dtype, device,
// layout class, no overlap with any argument).
void run_varlen(Plugin& plugin, const dk_call& call, bool out_variant) {
  const plugin::VarlenArgs a = plugin::unpack_varlen(call, out_variant);
  check_varlen(a);
  const DLTensor& x = *a.x;
  const DLTensor& out = a.out != nullptr ? *a.out : x;
  DeviceGuard guard(x.device.device_id);
  const DeviceInfo& dev = device_info(plugin, x.device.device_id);

  VarlenParams p{};
  p.conv = conv_common(a.weight, a.bias, a.activation, a.pad_slot_id, dev.error_word);
  p.x = plugin::data_of<void>(x);
  p.chan_stride = plugin::stride_of(x, 0);
  p.time_stride = plugin::stride_of(x, 1);
  p.out = plugin::data_of<void>(out);
  p.out_chan_stride = plugin::stride_of(out, 0);
  p.out_time_stride = plugin::stride_of(out, 1);
  p.dim = x.shape[0];
  p.tokens = x.shape[1];
  p.state = state_view(*a.conv_states);
  p.query_start_loc = index_view(a.query_start_loc);
  p.cache_indices = index_view(a.cache_indices);
  p.has_initial_state = index_view(a.has_initial_state);
  p.batch = static_cast<int32_t>(a.batch());
  if (p.batch == 0 || p.dim == 0) return;

  const ScalarType dt = scalar_type(x.dtype);
  const bool channel_last = a.channel_last();
  if (!channel_last) {  // the time-contiguous kernels take stride(time) as 1 (x's layout class)
    p.time_stride = 1;
    p.out_time_stride = 1;
  }

  const LaunchOptions options = launch_options(plugin, dev);
  const VarlenPlan plan = plan_varlen(p, dt, channel_last, options, plugin.tile_tokens);
  Scratch scratch(*plugin.host, x.device, plan.scratch_bytes(), call.stream);
  p.park = scratch.get();
  p.state_park =
      plan.state_park_bytes == 0 ? nullptr : reinterpret_cast<float*>(scratch.get() + plan.park_bytes);
  const int err = launch_varlen(p, dt, plan, options, call.stream);
  if (err != cudaSuccess)
    throw Failure(DK_ERR_RUNTIME, cuda_message(out_variant ? "native: causal_conv1d_varlen_out launch"
                                                           : "native: causal_conv1d_varlen launch",
                                               err));
}

// out_variant: causal_conv1d_update_out (out checked by the core as for varlen).
void run_update(Plugin& plugin, const dk_call& call, bool out_variant) {
  const plugin::UpdateArgs a = plugin::unpack_update(call, out_variant);
  check_update(a);
  const DLTensor& x = *a.x;
  const DLTensor& out = a.out != nullptr ? *a.out : x;
  DeviceGuard guard(x.device.device_id);
  const DeviceInfo& dev = device_info(plugin, x.device.device_id);

  UpdateParams p{};
  p.conv = conv_common(a.weight, a.bias, a.activation, a.pad_slot_id, dev.error_word);
  p.x = plugin::data_of<void>(x);
  p.x_batch_stride = plugin::stride_of(x, 0);
  p.x_chan_stride = plugin::stride_of(x, 1);
  p.x_time_stride = x.ndim == 3 ? plugin::stride_of(x, 2) : 1;
  p.out = plugin::data_of<void>(out);
  p.out_batch_stride = plugin::stride_of(out, 0);
  p.out_chan_stride = plugin::stride_of(out, 1);
  p.out_time_stride = out.ndim == 3 ? plugin::stride_of(out, 2) : 1;
  p.dim = x.shape[1];
  p.batch = static_cast<int32_t>(a.batch());
  p.tokens = static_cast<int32_t>(a.tokens());
  p.state = state_view(*a.conv_state);
  p.state_indices = index_view(a.conv_state_indices);
  p.cache_seqlens = index_view(a.cache_seqlens);
  const int err = launch_update(p, scalar_type(x.dtype), launch_options(plugin, dev), call.stream);
  if (err != cudaSuccess)
    throw Failure(DK_ERR_RUNTIME, cuda_message(out_variant ? "native: causal_conv1d_update_out launch"
                                                           : "native: causal_conv1d_update launch",
                                               err));
}

// ---- the C ABI

// One C entry per op and contract: the in-place op returns a view of x (its result is x), the
// out-variant returns nothing (out holds the result).
template <void (*run)(Plugin&, const dk_call&, bool), size_t x_arg, bool out_variant>
int32_t run_entry(void* self, const dk_call* call, DLManagedTensor** result, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    *result = nullptr;
    run(*static_cast<Plugin*>(self), *call, out_variant);
    if constexpr (!out_variant) *result = plugin::make_view_result(*call->tensors[x_arg]);
  });
}
constexpr auto* varlen_run = run_entry<run_varlen, DK_VARLEN_X, false>;
constexpr auto* varlen_out_run = run_entry<run_varlen, DK_VARLEN_X, true>;
constexpr auto* update_run = run_entry<run_update, DK_UPDATE_X, false>;
constexpr auto* update_out_run = run_entry<run_update, DK_UPDATE_X, true>;

int32_t plugin_init(const dk_host* host, void** out, char* error, size_t error_size) {
  return plugin::guarded(error, error_size, [&] {
    if (!plugin::usable_host(host))
      throw Failure(DK_ERR_INVALID_ARGUMENT,
                    "native: the core's host services lack alloc/release/read_to_host");
    auto* plugin = new Plugin;
    plugin->host = host;
    if (const char* tile = std::getenv("DELTAKERN_NATIVE_TILE")) plugin->tile_tokens = std::atoll(tile);
    if (const char* pdl = std::getenv("DELTAKERN_NATIVE_PDL")) plugin->pdl = std::string(pdl) != "0";
    if (const char* vec = std::getenv("DELTAKERN_NATIVE_CL_VEC"))
      plugin->channel_last_vec_bytes = std::atoi(vec);
    if (const char* clusters = std::getenv("DELTAKERN_NATIVE_CLUSTERS"))
      plugin->clusters = std::string(clusters) != "0";
    if (const char* staged = std::getenv("DELTAKERN_NATIVE_TIME_STAGED"))
      plugin->time_staged = std::max(0, std::atoi(staged));
    if (const char* heads = std::getenv("DELTAKERN_NATIVE_TIME_HEADS"))
      plugin->time_heads = std::string(heads) != "0" ? 1 : 0;
    if (const char* rows = std::getenv("DELTAKERN_NATIVE_UPDATE_ROWS"))
      plugin->update_rows = std::max(0, std::atoi(rows));
    *out = plugin;
  });
}

int32_t plugin_probe(void*, int32_t device_type, char* why, size_t why_size) {
  if (device_type != kDLCUDA) {
    plugin::write_message(why, why_size, "native serves CUDA devices only");
    return DK_ERR_UNAVAILABLE;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so later calls start clean
    // With no driver installed at all the runtime reports an "insufficient" driver: say both.
    plugin::write_message(
        why, why_size,
        err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
            ? std::string("no usable CUDA driver or device (") + cudaGetErrorString(err) + ")"
            : std::string("CUDA runtime: ") + cudaGetErrorString(err));
    return DK_ERR_UNAVAILABLE;
  }
  if (count == 0) {
    plugin::write_message(why, why_size, "no CUDA device");
    return DK_ERR_UNAVAILABLE;
  }
  int best = 0;
  for (int d = 0; d < count; ++d) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
    best = std::max(best, major * 10 + minor);
  }
  if (best < kMinComputeCapability) {
    plugin::write_message(why, why_size,
                          "compute capability " + std::to_string(best / 10) + "." +
                              std::to_string(best % 10) + " < 8.0 on every device");
    return DK_ERR_UNAVAILABLE;
  }
  return DK_OK;
}

void plugin_shutdown(void* self) { delete static_cast<Plugin*>(self); }

int32_t plugin_check_errors(void* self, DLDevice device, void* stream, uint32_t* flags, char* msg,
                            size_t msg_size) {
  return plugin::guarded(msg, msg_size, [&] {
    *flags = 0;
    if (device.device_type != kDLCUDA) return;
    auto& plugin = *static_cast<Plugin*>(self);
    DeviceGuard guard(device.device_id);
    const DeviceInfo& dev = device_info(plugin, device.device_id);
    int64_t shape[1] = {1};
    DLTensor word{};
    word.data = dev.error_word;
    word.device = device;
    word.ndim = 1;
    word.dtype = DLDataType{kDLUInt, 32, 1};
    word.shape = shape;
    uint32_t value = 0;
    if (plugin.host->read_to_host(plugin.host->ctx, &value, &word, stream) != DK_OK)
      throw Failure(DK_ERR_RUNTIME, "native: reading the device error word failed");
    if (value != 0) {
      const cudaError_t err =
          cudaMemsetAsync(dev.error_word, 0, sizeof(uint32_t), static_cast<cudaStream_t>(stream));
      if (err != cudaSuccess)
        throw Failure(DK_ERR_RUNTIME, cuda_message("native: clearing the error word", err));
      plugin::write_message(msg, msg_size,
                            (value & DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE)
                                ? "native: a cache index was out of range; those sequences were skipped"
                                : "native: device error flags set");
    }
    *flags = value;
  });
}

const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenSchema, &kVarlenCaps, nullptr, varlen_run},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateSchema, &kUpdateCaps, nullptr, update_run},
    // Same caps and limits as their base ops: the same kernels serve them.
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN_OUT, kVarlenOutSchema, &kVarlenCaps, nullptr, varlen_out_run},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE_OUT, kUpdateOutSchema, &kUpdateCaps, nullptr, update_out_run},
};

const dk_plugin kPlugin = {sizeof(dk_plugin), DK_ABI_MAJOR, DK_ABI_MINOR,       "native",
                           "0.1.0",           plugin_init,  plugin_probe,       plugin_shutdown,
                           std::size(kOps),   kOps,         plugin_check_errors};

}  // namespace
}  // namespace deltakern::native

extern "C" __attribute__((visibility("default"))) const dk_plugin* deltakern_plugin_entry(
    uint16_t core_abi_major, uint16_t core_abi_minor) {
  // A different major is refused by the core with both versions in the message; the table
  // says which one this plugin speaks.
  (void)core_abi_major;
  deltakern::native::core_abi_minor = core_abi_minor;
  return &deltakern::native::kPlugin;
}
