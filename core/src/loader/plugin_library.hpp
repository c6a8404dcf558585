// One plugin library mapped into this process and the steps of its life: open (map it, call
// its entry, read and check its descriptor), start (init, then the device probe), stop
// (shutdown), close (unmap). Each step is announced to a listener first, so that a process
// that dies during one can be said to have died there. Anything else a plugin does wrong here
// becomes a Rejection with its reason; only a crash gets through, which a child survives.
#pragma once

#include "loader/descriptor.hpp"
#include "services/host_services.hpp"

#include <deltakern/runtime_types.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string_view>

namespace deltakern::detail {

// Told the step a load is about to take ("loading", "running init", ...) and what is known
// of the library so far, so that a process that dies during it can be said to have died
// there, and which plugin it was.
using PhaseListener = std::function<void(std::string_view phase, const PluginInfo& so_far)>;

// How a start announces itself and words its failure: the probe child starts a library twice.
struct StartRound {
  std::string_view init_phase, probe_phase, init_failed;
};
inline constexpr StartRound kFirstStart{"running init", "running probe", "init failed"};
inline constexpr StartRound kStartAgain{"running init again after shutdown",
                                        "running probe again after shutdown",
                                        "init failed again after shutdown"};

class PluginLibrary {
 public:
  // Maps the library and reads its descriptor into info (name, version, ABI, ops). `named`
  // may reject the name (a duplicate) before anything of the plugin but its entry has run.
  // Throws Rejection.
  PluginLibrary(const std::filesystem::path& path, PluginInfo& info, const PhaseListener& on_phase,
                const std::function<void(const PluginInfo&)>& named);
  ~PluginLibrary();  // stops it when started, then unmaps it
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  // init, then the probe of every device type an op declares, into info.devices (replaced).
  // Throws Rejection; the plugin is then not started.
  void start(PluginInfo& info, const PhaseListener& on_phase, const StartRound& round = kFirstStart);
  void stop() noexcept;  // shutdown, when started; an exception it throws is logged

  const Descriptor& descriptor() const { return descriptor_; }
  void* instance() const { return instance_; }

 private:
  std::shared_ptr<void> library_;  // the boost::dll::shared_library, type-erased
  Descriptor descriptor_;
  std::unique_ptr<PluginHost> host_;
  void* instance_ = nullptr;
  bool started_ = false;
};

}  // namespace deltakern::detail
