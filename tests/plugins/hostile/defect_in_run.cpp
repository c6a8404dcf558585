// A plugin that loads, probes and declares like any fresh-output CPU backend (f32, widths 2-4,
// both ops) and computes correctly, except for one defect in `run` that takes down the
// process it runs in. tests/CMakeLists.txt builds one library per defect from this file:
//   DK_DEFECT_NAME  the plugin's name;
//   DK_DEFECT       one of the Defect values below.
// Each one strikes only some calls (strikes() says which), so that the cases around the
// ones it kills still run, and pass, in the conformance worker that replaces the dead one.
#include "../kernels.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <chrono>
#include <cstdlib>
#include <iterator>
#include <thread>

namespace {

using namespace deltakern::testplugins;
namespace plugin = deltakern::plugin;

enum class Defect {
  exit_process,   // exit(0) in every varlen call: a process that ends "successfully" mid-case
  abort_process,  // abort() in update calls of width 2
  segfault,       // a store through a null pointer in every update call
  hang,           // sleeps forever in varlen calls of width 3 without bias, with silu
  write_far,      // after an update of width 4, writes every 4 KiB up to 64 MiB past its output
};
constexpr Defect kDefect = Defect::DK_DEFECT;

// Read through a volatile so the compiler cannot see the null and turn the store into a trap.
int* volatile nowhere = nullptr;

bool strikes(const plugin::VarlenArgs& a) {
  if (kDefect == Defect::exit_process) return true;
  return kDefect == Defect::hang && a.width() == 3 && a.bias == nullptr &&
         a.activation == plugin::Activation::silu;
}

bool strikes(const plugin::UpdateArgs& a) {
  return kDefect == Defect::segfault || (kDefect == Defect::abort_process && a.width() == 2) ||
         (kDefect == Defect::write_far && a.width() == 4);
}

// The defects that strike before the call computes anything.
void strike_first() {
  switch (kDefect) {
    case Defect::exit_process:
      std::exit(0);
    case Defect::abort_process:
      std::abort();
    case Defect::segfault:
      *nowhere = 42;
      break;
    case Defect::hang:
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    case Defect::write_far:
      break;
  }
}

// Far enough to leave any heap this process has: the first unmapped page ends it.
void write_far_past(const DLManagedTensor& out) {
  auto* end = static_cast<unsigned char*>(out.dl_tensor.data) + out.dl_tensor.byte_offset +
              static_cast<size_t>(plugin::numel(out.dl_tensor)) * sizeof(float);
  auto* volatile at = end;
  for (size_t offset = 0; offset <= size_t{64} << 20; offset += 4096) at[offset] = 0x5A;
}

// A call the SDK cannot unpack is left to the honest kernel, which reports it.
template <typename Unpack>
bool strikes_call(Unpack unpack) {
  try {
    return strikes(unpack());
  } catch (...) {
    return false;
  }
}

int32_t varlen(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  if (strikes_call([c] { return plugin::unpack_varlen(*c); })) strike_first();
  return run_varlen(p, c, r, e, n, {.in_place = false});
}

int32_t update(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  const bool struck = strikes_call([c] { return plugin::unpack_update(*c); });
  if (struck) strike_first();
  const int32_t status = run_update(p, c, r, e, n, {.in_place = false});
  if (struck && kDefect == Defect::write_far && status == DK_OK) write_far_past(**r);
  return status;
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update},
};
const dk_plugin kPlugin = {
    sizeof(dk_plugin), DK_ABI_MAJOR,     DK_ABI_MINOR,    DK_DEFECT_NAME, "test", init_keep_host,
    probe_cpu_only,    shutdown_nothing, std::size(kOps), kOps,           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
