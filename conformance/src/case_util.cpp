#include "case_util.hpp"

#include <stdexcept>

namespace deltakern::conformance {

const OpInfo& op_info(const Runtime& runtime, const Target& target, std::string_view op) {
  const PluginInfo* plugin = runtime.plugin(target.backend);
  if (plugin == nullptr) throw std::runtime_error("backend '" + target.backend + "' is not loaded");
  for (const auto& o : plugin->ops)
    if (o.name == op) return o;
  throw std::runtime_error("backend '" + target.backend + "' declares no " + std::string(op));
}

}  // namespace deltakern::conformance
