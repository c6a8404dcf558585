// The DLPack C exchange API (the `__dlpack_c_exchange_api__` class attribute, a PyCapsule named
// "dlpack_exchange_api"): a table of C functions through which a tensor library hands its
// tensors, its allocator and its current stream to a consumer without running Python. torch
// >= 2.10 exposes it on torch.Tensor. The project builds against Debian's DLPack 0.6, which has
// only DLTensor, so the few types used here mirror DLPack 1.3's (DLPackVersion,
// DLManagedTensorVersioned, DLPackExchangeAPIHeader, DLPackExchangeAPI and its function types)
// field for field; DLTensor, DLDevice and DLDataType are laid out alike in 0.6 and 1.3. A table
// whose version does not fit (exchange_api_of checks header.version at run time) is not used:
// the caller then takes the nanobind ndarray path.
#pragma once

#include <dlpack/dlpack.h>
#include <nanobind/nanobind.h>

#include <cstdint>

namespace deltakern::python::dlpack_exchange {

// The table layout below is DLPack 1.3's; a producer of another major version, or of an older
// minor one (pre-release tables of 1.1 had another layout), is not read past its header.
inline constexpr uint32_t kMajor = 1;
inline constexpr uint32_t kMinMinor = 3;

struct Version {
  uint32_t major;
  uint32_t minor;
};

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

using SetError = void (*)(void* error_ctx, const char* kind, const char* message);
using ManagedTensorAllocator = int (*)(DLTensor* prototype, ManagedTensorVersioned** out, void* error_ctx,
                                       SetError set_error);
using ManagedTensorFromPyObjectNoSync = int (*)(void* py_object, ManagedTensorVersioned** out);
using ManagedTensorToPyObjectNoSync = int (*)(ManagedTensorVersioned* tensor, void** out_py_object);
using DLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
using CurrentWorkStream = int (*)(DLDeviceType device_type, int32_t device_id, void** out_current_stream);

struct ApiHeader {
  Version version;
  ApiHeader* prev_api;
};

struct Api {
  ApiHeader header;
  ManagedTensorAllocator managed_tensor_allocator;
  ManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  ManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;  // may be null (then unused)
  CurrentWorkStream current_work_stream;
};

inline constexpr const char* kCapsuleName = "dlpack_exchange_api";

// The exchange table of `object`'s type, or nullptr when the type has none, it is not a capsule
// of that name, or its version does not fit. Looked up once per type (the attribute lives on the
// type, and the table for the life of the process).
const Api* exchange_api_of(nanobind::handle object);

}  // namespace deltakern::python::dlpack_exchange
