// deltakern's vocabulary types: what a backend declares (OpInfo, PluginInfo), what a call is
// judged by (CallSignature) and what the dispatcher decided (Decision), the runtime's options and
// allocator. runtime.hpp declares the Runtime that hands them out; the core's own subsystems
// include this header, never runtime.hpp, so that their includes point down only.
#pragma once

#include <deltakern/plugin_abi.h>
#include <deltakern/deltakern.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace deltakern {

struct RuntimeOptions {
  // Read DELTAKERN_CONFIG, DELTAKERN_PLUGIN_PATH, DELTAKERN_BACKEND, DELTAKERN_STRICT and
  // DELTAKERN_LOG_LEVEL.
  bool read_environment = true;
  // A config file (used when DELTAKERN_CONFIG is unset); none: the built-in defaults.
  std::optional<std::filesystem::path> config_file;
  // Searched before the config's plugins.search_paths (after DELTAKERN_PLUGIN_PATH).
  std::vector<std::filesystem::path> plugin_path;
  // Individual plugin files loaded before any search path (deltakern conformance --plugin).
  std::vector<std::filesystem::path> plugin_files;
  // Search the install's and the build tree's plugin directories.
  bool search_default_dirs = true;
  // Serve every call with this backend or fail (DELTAKERN_BACKEND wins when set).
  std::optional<std::string> force_backend;
};

enum class Layout { time_contiguous, channel_last };
const char* to_string(Layout layout);

// What a call's result is, read off the serving op's schema: x itself (-> Tensor(a) with
// Tensor(a!) x: in place), a new tensor (-> Tensor: fresh), or nothing (-> (): an out-variant,
// the result is in the caller's out).
enum class Contract { in_place, fresh, out };
const char* to_string(Contract contract);  // "in_place", "fresh", "out"

// What a backend declares for one op.
struct OpInfo {
  std::string name;
  std::string schema;  // as the plugin declared it, alias annotations included
  struct Device {
    DLDeviceType type;
    int min_compute_capability;  // CUDA only
    bool derives_max_seq_len;    // one read_to_host when max_seq_len is omitted
    bool graph_capturable;
  };
  std::vector<Device> devices;
  std::vector<DLDataType> dtypes;
  int min_width = 0, max_width = 0;
  std::vector<Layout> layouts;
  // Limits on the op's dimensions (ABI 1.1, op_schemas.h DK_DIMS_*), checked on every call.
  struct Limit {
    std::string dim;
    int64_t min, max;  // inclusive
  };
  std::vector<Limit> limits;
  // The mutation contract read off the schema.
  std::vector<std::string> mutated;             // arguments annotated (x!)
  std::optional<std::string> returns_alias_of;  // "x" for -> Tensor(a) with Tensor(a!) x
  bool returns_tensor = true;                   // false: -> () (an out-variant writes into out)
  Contract contract() const;                    // the three fields above in one word
};

struct PluginInfo {
  enum class State { loaded, rejected };
  std::string name;  // empty when the library was rejected before its name was read
  std::string version;
  std::filesystem::path path;
  uint16_t abi_major = 0, abi_minor = 0;
  State state = State::rejected;
  std::string reason;  // why rejected
  struct DeviceStatus {
    DLDeviceType type;
    bool available;
    std::string reason;  // why unavailable
  };
  std::vector<DeviceStatus> devices;  // one per device type any op declares
  std::vector<OpInfo> ops;
  // Where the verdict that admitted or turned away the library came from: a child process
  // that loaded it first, the verdict cache, or none (loaded straight into this process).
  enum class Probe { in_process, child, cache };
  Probe probe = Probe::in_process;
  std::string probe_note;  // child: how long it took; in_process: why there was no child
};

// How discovery judged candidate libraries before loading them (plugins.probe*).
struct ProbeSummary {
  std::string mode;  // "child" or "in-process"
  std::chrono::milliseconds timeout{0};
  std::filesystem::path cache;  // empty: no verdict cache
  size_t children = 0;          // child processes this runtime's discovery spawned
};

// The properties of a call that selection depends on (and the decision cache key).
struct CallSignature {
  std::string op;
  DLDevice device{kDLCPU, 0};
  DLDataType dtype{kDLFloat, 32, 1};  // x
  DLDataType weight_dtype{kDLFloat, 32, 1};
  DLDataType state_dtype{kDLFloat, 32, 1};
  std::optional<DLDataType> bias_dtype;
  int width = 4;
  Layout layout = Layout::time_contiguous;
  bool max_seq_len_given = true;
  // The call's sizes by the op's dimension names (op_schemas.h, DK_DIMS_*): {"state_len", 100}.
  // Those given are checked against the backends' limits, as a real call's all are.
  std::vector<std::pair<std::string, int64_t>> dims;
};

struct Decision {
  std::optional<std::string> backend;  // none: no backend can serve the call
  std::string why;                     // why this backend (forced, config order, op override)
  struct PassedOver {
    std::string backend;
    std::string reason;
  };
  std::vector<PassedOver> passed_over;  // in preference order
  // The configured first choice and why it cannot serve, when another backend serves (a
  // fallback, counted per call) or, in strict mode, would have served (then `backend` is
  // none and the call is refused).
  std::optional<PassedOver> fallback_from;
  bool strict = false;  // dispatch was strict when this decision was made
  // The serving backend's limits: a call outside them goes to the next backend that admits it.
  std::vector<OpInfo::Limit> limits;
  bool supports_per_call = false;  // the serving backend is an ABI 1.0 plugin: supports() asked per call
  // The serving backend's contract: whether the call's result will be x (none: nobody serves).
  std::optional<Contract> contract;
  std::string describe() const;  // a readable multi-line explanation
};

namespace detail {
class RuntimeAllocator;
}

// A backend's op entry, bound to its plugin instance: what the dispatcher calls. run() is the raw
// entry: no argument is validated and no limit checked (the dispatch benchmark's baseline).
struct BoundOp {
  const dk_op* op = nullptr;
  void* plugin = nullptr;
  // The allocator of the Runtime that bound it, which the op's allocations use; none: the default.
  detail::RuntimeAllocator* allocator = nullptr;
  bool returns_tensor = true;  // false for an out-variant (-> ()): run() then returns nullptr
  DLManagedTensor* run(const dk_call& call) const;  // throws Error on failure
};

// The memory fresh outputs come from. The default is aligned host memory on the CPU and, on
// CUDA, cudaMallocFromPoolAsync on the call's stream (stream-ordered, legal inside capture) from
// a per-device pool of deltakern's own that keeps freed memory for later calls, as a caching
// allocator does, instead of handing it back to the driver at every synchronization.
// An engine installs its own (its caching allocator) before the first call.
struct Allocator {
  std::function<void*(DLDevice device, size_t bytes, void* stream)> allocate;
  std::function<void(DLDevice device, void* ptr, void* stream)> deallocate;
};

}  // namespace deltakern
