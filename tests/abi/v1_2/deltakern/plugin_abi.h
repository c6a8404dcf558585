/* TEST COPY: core/include/deltakern/plugin_abi.h as a future ABI 1.2 might grow it, a field
 * appended to every struct (tests/plugins/versioned.cpp builds a plugin against it). Not installed.
 *
 * deltakern plugin ABI: the C boundary between the core and a backend plugin.
 *
 * Versioning (as PJRT does it): every struct starts with struct_size, the size its writer
 * compiled. A reader reads only the fields that size covers: the core reads a plugin's
 * structs (dk_plugin, dk_op, dk_caps, dk_device_caps, dk_limit), the plugin SDK reads the
 * core's (dk_host, dk_call), each up to the smaller of both sizes, and refuses a struct
 * smaller than its DK_*_SIZE_1_0 (the end of its last ABI 1.0 field). A field added in a
 * later minor is read only where struct_size covers it, else its default (given below).
 * In an array of structs the stride is element 0's struct_size (dk_scalar, which has no
 * struct_size, is strided by dk_call.scalar_size). A plugin reports the ABI it was built
 * against in dk_plugin and learns the core's from the entry's arguments; the core refuses
 * a different major and accepts any minor, older or newer. Adding an op, a field at the
 * end of a struct, a flag, a dimension or a status code is a minor bump; anything else is
 * a major bump.
 *
 * Threads: the core calls run, supports and check_errors from many threads at once, for
 * one plugin instance; init, probe and shutdown from one thread, never during calls.
 * Strings a plugin hands over (names, versions, schemas, dimension names) must stay valid
 * while the library is loaded; the core copies what it keeps.
 *
 * Ops are generic: a call carries its arguments positionally in the order of the op's
 * schema (PyTorch schema syntax), tensors and scalars in two arrays. A new op is a new
 * schema and a new entry in dk_plugin.ops, never a new struct.
 *
 * No C++ exception may cross this boundary; errors are status codes plus a message
 * written into a caller-provided buffer. */
#ifndef DELTAKERN_PLUGIN_ABI_H
#define DELTAKERN_PLUGIN_ABI_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DK_ABI_MAJOR 1
#define DK_ABI_MINOR 2

/* The end of a struct's last field: a struct_size below DK_*_SIZE_1_0 is refused. */
#define DK_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* The one symbol a plugin exports. */
#define DK_PLUGIN_ENTRY_SYMBOL "deltakern_plugin_entry"

typedef enum dk_status {
  DK_OK = 0,
  DK_ERR_INVALID_ARGUMENT = 1, /* the call's arguments are wrong; nothing was written   */
  DK_ERR_UNSUPPORTED = 2,      /* valid, but this backend cannot serve it               */
  DK_ERR_UNAVAILABLE = 3,      /* the backend cannot run here (no driver, no device)    */
  DK_ERR_OUT_OF_MEMORY = 4,
  DK_ERR_RUNTIME = 5, /* a launch or device error                                       */
  DK_ERR_INTERNAL = 6
} dk_status;

typedef enum dk_log_level {
  DK_LOG_TRACE = 0,
  DK_LOG_DEBUG = 1,
  DK_LOG_INFO = 2,
  DK_LOG_WARN = 3,
  DK_LOG_ERROR = 4
} dk_log_level;

/* Services the core gives a plugin at init. Owned by the core; valid until shutdown;
 * every entry is set and may be called from any thread. */
typedef struct dk_host {
  size_t struct_size;
  void* ctx; /* passed back to every entry below */
  /* Routes the plugin's messages through the core's spdlog sinks. */
  void (*log)(void* ctx, int32_t level, const char* msg);
  /* Device memory for fresh outputs and scratch. Stream-ordered on CUDA (safe inside
   * graph capture); the engine may install its own allocator behind these. */
  int32_t (*alloc)(void* ctx, DLDevice device, size_t bytes, void* stream, void** out);
  void (*release)(void* ctx, DLDevice device, void* ptr, void* stream);
  /* The only way a plugin may read device memory on the host: copies the whole of src
   * (compact or strided) into dst as a compact array and waits for it. Counted in
   * deltakern::host_syncs() of the calling thread. DK_ERR_INVALID_ARGUMENT, with no read
   * attempted, when device memory is to be read on a stream that is capturing a CUDA graph
   * (a copy and a sync there would invalidate the engine's capture). */
  int32_t (*read_to_host)(void* ctx, void* dst, const DLTensor* src, void* stream);
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_host;
#define DK_HOST_SIZE_1_0 DK_SIZE_THROUGH(dk_host, read_to_host)

typedef enum dk_scalar_kind {
  DK_SCALAR_NONE = 0, /* an omitted optional argument */
  DK_SCALAR_INT = 1,
  DK_SCALAR_FLOAT = 2,
  DK_SCALAR_BOOL = 3,
  DK_SCALAR_STRING = 4
} dk_scalar_kind;

/* An array element without struct_size: a later minor may only append fields, and
 * readers step through dk_call.scalars by dk_call.scalar_size. */
typedef struct dk_scalar {
  int32_t kind;  /* dk_scalar_kind */
  int64_t i;     /* INT and BOOL */
  double f;      /* FLOAT */
  const char* s; /* STRING; valid for the call */
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_scalar;
#define DK_SCALAR_SIZE_1_0 DK_SIZE_THROUGH(dk_scalar, s)

/* One call, valid only until run or supports returns. tensors[i] is the i-th Tensor
 * argument of the schema (NULL for None); scalars[j] the j-th non-tensor argument,
 * defaults already applied by the core. */
typedef struct dk_call {
  size_t struct_size;
  void* stream; /* cudaStream_t on CUDA; NULL on the CPU */
  size_t n_tensors;
  const DLTensor* const* tensors;
  size_t n_scalars;
  const dk_scalar* scalars;
  /* 1.1: the byte stride of scalars; absent (a 1.0 core): DK_SCALAR_SIZE_1_0. */
  size_t scalar_size;
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_call;
#define DK_CALL_SIZE_1_0 DK_SIZE_THROUGH(dk_call, scalars)

/* Layouts of the op's main tensor x (for causal_conv1d_varlen: (D, T)). */
typedef enum dk_layout_bits {
  DK_LAYOUT_TIME_CONTIGUOUS = 1u << 0, /* x.stride(-1) == 1                              */
  DK_LAYOUT_CHANNEL_LAST = 1u << 1     /* x.stride(channel) == 1, time stride >= D         */
} dk_layout_bits;

typedef enum dk_cap_flags {
  /* With max_seq_len omitted the backend derives it with exactly one read_to_host; with
   * it given, it never reads device memory on the host. Without this flag the backend
   * never syncs at all. */
  DK_CAP_DERIVES_MAX_SEQ_LEN = 1u << 0,
  /* On CUDA the call records into a CUDA graph (global capture mode) and replays
   * correctly; for a backend that derives max_seq_len, only when it is given. */
  DK_CAP_GRAPH_CAPTURABLE = 1u << 1
} dk_cap_flags;

typedef struct dk_device_caps {
  size_t struct_size;
  int32_t device_type;            /* DLDeviceType: kDLCPU, kDLCUDA                         */
  int32_t min_compute_capability; /* CUDA: major*10+minor (e.g. 80); 0 otherwise         */
  uint32_t flags;                 /* dk_cap_flags on this device                            */
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_device_caps;
#define DK_DEVICE_CAPS_SIZE_1_0 DK_SIZE_THROUGH(dk_device_caps, flags)

/* 1.1: the sizes a backend serves along one dimension of the op's calls. The core derives
 * every dimension an op names (op_schemas.h: DK_DIMS_*) from each call and checks it
 * against the limits before the call's decision is used: a call outside them goes to the
 * next backend that can serve it, as a counted fallback. */
typedef struct dk_limit {
  size_t struct_size;
  const char* dim;  /* a dimension the op names, e.g. "state_len"; an unknown one refuses the plugin */
  int64_t min, max; /* inclusive */
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_limit;
#define DK_LIMIT_SIZE_1_1 DK_SIZE_THROUGH(dk_limit, max)

typedef struct dk_caps {
  size_t struct_size;
  size_t n_devices;
  const dk_device_caps* devices;
  size_t n_dtypes;
  const DLDataType* dtypes; /* of x; weight, bias, states: x's dtype or float32           */
  int32_t min_width, max_width;
  uint32_t layouts; /* dk_layout_bits */
  /* 1.1 (optional): limits on the op's dimensions; absent or 0: none beyond the widths. */
  size_t n_limits;
  const dk_limit* limits;
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_caps;
#define DK_CAPS_SIZE_1_0 DK_SIZE_THROUGH(dk_caps, layouts)

typedef struct dk_op {
  size_t struct_size;
  const char* name; /* an op of op_schemas.h; one this core does not know is ignored        */
  /* PyTorch schema with alias annotations: the mutation contract. The core checks it is
   * the op's canonical signature with only the annotations differing. */
  const char* schema;
  const dk_caps* caps; /* read once, at load */
  /* (optional; NULL: every call the caps admit) Finer checks than caps can say ("weight
   * in f16 with x in bf16"). DK_OK or DK_ERR_UNSUPPORTED with the reason in why. Must not
   * touch device memory. For a 1.1 plugin a pure function of the call's signature (device,
   * dtypes, width, layout, bias and max_seq_len present or not): the core asks it once per
   * signature and caches the answer; shapes belong in dk_caps.limits. A 1.0 plugin's is
   * asked on every call. */
  int32_t (*supports)(void* plugin, const dk_call* call, char* why, size_t why_size);
  /* Runs the op on call->stream. *result receives the returned tensor: a fresh one the
   * plugin allocated (through dk_host.alloc), or a view of an input it aliases. The core
   * calls result->deleter (from any thread) when the caller drops it; an op that returns
   * nothing (-> (), the *_out ops) leaves *result NULL. A call the caps and
   * supports() admitted must not be answered DK_ERR_UNSUPPORTED: the core reports that as
   * the backend's fault, naming it, and never retries elsewhere (run may have written). */
  int32_t (*run)(void* plugin, const dk_call* call, DLManagedTensor** result, char* error, size_t error_size);
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_op;
#define DK_OP_SIZE_1_0 DK_SIZE_THROUGH(dk_op, run)

typedef struct dk_plugin {
  size_t struct_size;
  uint16_t abi_major, abi_minor; /* the ABI the plugin was built against                 */
  const char* name;              /* unique among loaded plugins: "portable", "native"     */
  const char* version;           /* (optional; NULL: "") the plugin's own version         */
  /* Makes the instance every other entry receives; host stays valid until shutdown. May be
   * called more than once in a process (two Runtimes), each time for a new instance. */
  int32_t (*init)(const dk_host* host, void** plugin, char* error, size_t error_size);
  /* (optional; NULL: available on every device it declares) Whether the plugin can run on
   * this kind of device here; DK_ERR_UNAVAILABLE with the reason ("no CUDA driver"). */
  int32_t (*probe)(void* plugin, int32_t device_type, char* why, size_t why_size);
  void (*shutdown)(void* plugin); /* (optional) frees the instance; no call is in flight */
  size_t n_ops;
  const dk_op* ops; /* n_ops entries, strided by ops[0].struct_size */
  /* (optional; NULL: never flags anything) Reads and clears the device-side error word of
   * device, on stream (a sync, made through dk_host.read_to_host). *flags receives
   * dk_error_bits; 0 when clean. */
  int32_t (*check_errors)(void* plugin, DLDevice device, void* stream, uint32_t* flags, char* msg,
                          size_t msg_size);
  uint64_t added_in_1_2; /* 1.2: a field a 1.1 reader must not need */
} dk_plugin;
#define DK_PLUGIN_SIZE_1_0 DK_SIZE_THROUGH(dk_plugin, ops) /* check_errors is optional */

/* Bits of the device-side error word: kernels never write out of bounds, they skip the
 * offending sequence and set a bit. */
typedef enum dk_error_bits { DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE = 1u << 0 } dk_error_bits;

/* The entry: the core's ABI version in, the plugin's descriptor (static, never freed) out.
 * A plugin may return NULL for a core it cannot serve; the core reports it with its own version. */
typedef const dk_plugin* (*dk_plugin_entry_fn)(uint16_t core_abi_major, uint16_t core_abi_minor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DELTAKERN_PLUGIN_ABI_H */
