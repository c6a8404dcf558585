// deltakern runtime: plugin discovery, configuration and per-call backend selection.
// Engines normally use the free functions of deltakern.hpp (they go through
// Runtime::global()); tools, tests and benchmarks build their own Runtime.
#pragma once

#include <deltakern/runtime_types.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deltakern {

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process-wide runtime, built on first use from the environment and config.
  static Runtime& global();

  [[nodiscard]] Tensor causal_conv1d_varlen(const CausalConv1dVarlenArgs& args);
  [[nodiscard]] Tensor causal_conv1d_update(const CausalConv1dUpdateArgs& args);
  void causal_conv1d_varlen_out(const CausalConv1dVarlenArgs& args, const DLTensor& out);
  void causal_conv1d_update_out(const CausalConv1dUpdateArgs& args, const DLTensor& out);
  void check_errors(DLDevice device, void* stream);

  const std::vector<PluginInfo>& plugins() const;
  const PluginInfo* plugin(std::string_view name) const;           // loaded plugins only
  std::vector<std::string> preference(std::string_view op) const;  // config order for op
  std::optional<std::string> forced_backend() const;
  // Strict dispatch: a call its op's first choice cannot serve is an error, not a fallback.
  bool strict() const;
  std::filesystem::path config_file() const;  // empty: built-in defaults
  std::vector<std::filesystem::path> search_path() const;
  ProbeSummary probe_summary() const;

  Decision explain(const CallSignature& signature) const;
  BoundOp bound_op(std::string_view backend, std::string_view op) const;  // throws if absent

  // See FallbackCount (deltakern.hpp): counted on every call, a relaxed atomic add.
  std::vector<FallbackCount> fallback_counts() const;
  void reset_fallback_counts();

  void set_allocator(Allocator allocator);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltakern
