// Building a Runtime (configuration, discovery) and everything it answers besides the calls.
#include "runtime_impl.hpp"

#include "dispatch/placeholder_call.hpp"
#include "loader/plugin_exception.hpp"
#include "loader/probe/probe_gate.hpp"
#include "services/dlpack_util.hpp"
#include "services/log.hpp"
#include "status.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cstdlib>
#include <limits>

namespace deltakern {
namespace {

std::atomic<detail::RuntimeAllocator*> global_runtime_allocator{nullptr};

std::optional<detail::ForcedBackend> forced_backend_of(const RuntimeOptions& options) {
  if (options.read_environment) {
    if (const char* env = std::getenv("DELTAKERN_BACKEND"); env != nullptr && *env != '\0')
      return detail::ForcedBackend{env, "DELTAKERN_BACKEND"};
  }
  if (options.force_backend)
    return detail::ForcedBackend{*options.force_backend, "RuntimeOptions::force_backend"};
  return std::nullopt;
}

detail::OpId op_id(std::string_view name) {
  if (const auto op = detail::op_from_name(name)) return *op;
  throw Error(ErrorCode::invalid_argument,
              fmt::format("unknown op '{}' (known: {})", name, detail::kKnownOpNames));
}

std::string flag_names(uint32_t flags) {
  std::vector<std::string> names;
  if ((flags & DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE) != 0) names.emplace_back("cache index out of range");
  if (const uint32_t unknown = flags & ~uint32_t{DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE}; unknown != 0)
    names.push_back(fmt::format("unknown flags 0x{:x}", unknown));
  return fmt::format("{}", fmt::join(names, ", "));
}

bool serves_device(const detail::Plugins& plugins, const detail::Backend& backend, int32_t device_type) {
  for (const auto& status : plugins.info(backend).devices)
    if (status.type == device_type) return status.available;
  return false;
}

}  // namespace

Runtime::Impl::Impl(RuntimeOptions runtime_options)
    : options(std::move(runtime_options)),
      config(detail::load_config(options)),
      forced(forced_backend_of(options)) {
  detail::logger().set_level(config.log_level);
  for (const auto& warning : config.warnings) detail::logger().warn("{}", warning);
  search_path = detail::plugin_search_dirs(options, config);
  plugins = detail::discover_plugins(options.plugin_files, search_path, config.probe);
  std::vector<std::string> names;
  for (const auto& info : plugins.infos)
    if (!info.name.empty()) names.push_back(info.name);
  detail::check_backend_names(config, names);
}

const detail::CachedDecision& Runtime::Impl::decide_and_cache(const detail::SignatureFields& signature,
                                                              const dk_call& call) {
  detail::Choice choice = [&] {
    const detail::CallAllocatorScope scope(&allocator);  // supports() runs for this Runtime
    return detail::decide(signature, call, plugins, config, forced);
  }();
  detail::CachedDecision entry;
  if (choice.backend != nullptr) {
    entry.fit = choice.fits.front();  // without limits checked, the first fit serves
    if (const auto& first = choice.decision.fallback_from)
      entry.fallback_count =
          fallbacks.counter(signature.op, choice.backend->name, first->backend, choice.fallback_reason,
                            detail::fallback_warning(signature, choice.decision, config));
  } else {
    entry.refusal = detail::refusal(signature, choice, config, forced);
    entry.refusal_code = detail::refusal_code(choice);
  }
  const auto [kept, inserted] = decisions.insert(detail::key_of(signature), std::move(entry));
  if (inserted)
    detail::logger().debug("{} ({}): new decision\n{}", detail::op_name(signature.op),
                           detail::summary(signature), choice.decision.describe());
  return *kept;
}

detail::Served Runtime::Impl::serve_one(const detail::SignatureFields& signature, const dk_call& call,
                                        const detail::CallDims& dims,
                                        const detail::CachedDecision& decision) {
  if (decision.fit.op == nullptr) throw Error(decision.refusal_code, decision.refusal);
  const detail::CallAllocatorScope scope(&allocator);  // supports() runs for this Runtime
  const detail::Choice choice = detail::decide(signature, call, plugins, config, forced, &dims);
  if (choice.backend == nullptr)
    throw Error(detail::refusal_code(choice), detail::refusal(signature, choice, config, forced, &dims));
  if (const auto& first = choice.decision.fallback_from)
    fallbacks
        .counter(signature.op, choice.backend->name, first->backend, choice.fallback_reason,
                 detail::fallback_warning(signature, choice.decision, config))
        ->fetch_add(1, std::memory_order_relaxed);
  return {choice.op, choice.backend->instance, choice.backend->name.c_str()};
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Runtime::~Runtime() = default;

Runtime& Runtime::global() {
  // Never destroyed: a tensor a backend returned may be dropped during static destruction,
  // and its deleter lives in a plugin this runtime keeps loaded.
  static Runtime& instance = []() -> Runtime& {
    auto& runtime = *new Runtime();
    global_runtime_allocator = &runtime.impl_->allocator;
    return runtime;
  }();
  return instance;
}

detail::RuntimeAllocator& detail::global_allocator() {
  Runtime::global();
  return *global_runtime_allocator.load();
}

const std::vector<PluginInfo>& Runtime::plugins() const { return impl_->plugins.infos; }

const PluginInfo* Runtime::plugin(std::string_view name) const {
  const detail::Backend* backend = impl_->plugins.find(name);
  return backend == nullptr ? nullptr : &impl_->plugins.info(*backend);
}

std::vector<std::string> Runtime::preference(std::string_view op) const {
  return impl_->config.order_for(op_id(op)).names;
}

std::optional<std::string> Runtime::forced_backend() const {
  if (!impl_->forced) return std::nullopt;
  return impl_->forced->name;
}

bool Runtime::strict() const { return impl_->config.strict; }

std::vector<FallbackCount> Runtime::fallback_counts() const { return impl_->fallbacks.counts(); }

void Runtime::reset_fallback_counts() { impl_->fallbacks.reset(); }

std::filesystem::path Runtime::config_file() const { return impl_->config.file; }

std::vector<std::filesystem::path> Runtime::search_path() const { return impl_->search_path; }

ProbeSummary Runtime::probe_summary() const {
  const auto& probe = impl_->config.probe;
  const bool child = probe.mode == detail::ProbeMode::child;
  return {child ? "child" : "in-process", probe.timeout,
          child ? detail::verdict_cache_file(probe) : std::filesystem::path(), impl_->plugins.probe_children};
}

Decision Runtime::explain(const CallSignature& signature) const {
  const detail::OpId op = op_id(signature.op);
  const detail::SignatureFields fields{op,
                                       signature.device,
                                       signature.dtype,
                                       signature.weight_dtype,
                                       signature.state_dtype,
                                       signature.bias_dtype,
                                       signature.width,
                                       signature.layout,
                                       signature.max_seq_len_given};
  detail::CallDims dims{};
  uint32_t known = 0;
  for (const auto& [name, value] : signature.dims) {
    const auto index = detail::dim_index(op, name);
    if (!index)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("explain: '{}' is not a dimension of {} ({})", name, signature.op,
                              fmt::join(detail::kOps[detail::index_of(op)].dims, ", ")));
    dims[*index] = value;
    known |= 1u << *index;
  }
  if (const auto width = detail::dim_index(op, "width")) {
    dims[*width] = signature.width;
    known |= 1u << *width;
  }
  const detail::PlaceholderCall placeholder(fields);
  const detail::CallAllocatorScope scope(&impl_->allocator);  // supports() runs for this Runtime
  return detail::decide(fields, placeholder.call(), impl_->plugins, impl_->config, impl_->forced,
                        signature.dims.empty() ? nullptr : &dims, known)
      .decision;
}

BoundOp Runtime::bound_op(std::string_view backend, std::string_view op) const {
  const detail::Backend* found = impl_->plugins.find(backend);
  if (found == nullptr)
    throw Error(ErrorCode::unavailable, fmt::format("bound_op: backend '{}' is not loaded", backend));
  const detail::OpId id = op_id(op);
  const dk_op* entry = found->ops[detail::index_of(id)];
  if (entry == nullptr)
    throw Error(ErrorCode::unsupported,
                fmt::format("bound_op: backend '{}' does not declare {}", backend, op));
  return BoundOp{entry, found->instance, &impl_->allocator, !detail::is_out_variant(id)};
}

void Runtime::set_allocator(Allocator allocator) { impl_->allocator.set(std::move(allocator)); }

void Runtime::check_errors(DLDevice device, void* stream) {
  std::vector<std::string> flagged, failed;
  for (const auto& backend : impl_->plugins.backends) {
    if (backend->check_errors == nullptr || !serves_device(impl_->plugins, *backend, device.device_type))
      continue;
    uint32_t flags = 0;
    char message[512] = {};
    int32_t status = DK_ERR_INTERNAL;
    try {
      const detail::CallAllocatorScope scope(&impl_->allocator);
      status = backend->check_errors(backend->instance, device, stream, &flags, message, sizeof message);
    } catch (...) {
      std::snprintf(message, sizeof message, "threw %s", detail::current_exception_text().c_str());
    }
    message[sizeof message - 1] = '\0';
    const std::string note = message[0] != '\0' ? fmt::format(" ({})", message) : std::string();
    if (status != DK_OK)
      failed.push_back(
          fmt::format("{}: check_errors failed: {}{}", backend->name, detail::status_name(status), note));
    else if (flags != 0)
      flagged.push_back(fmt::format("{}: {}{}", backend->name, flag_names(flags), note));
  }
  if (!flagged.empty()) {
    flagged.insert(flagged.end(), failed.begin(), failed.end());
    throw Error(
        ErrorCode::invalid_argument,
        fmt::format("device-side errors on {}: {}", detail::device_name(device), fmt::join(flagged, "; ")));
  }
  if (!failed.empty())
    throw Error(ErrorCode::runtime,
                fmt::format("check_errors on {}: {}", detail::device_name(device), fmt::join(failed, "; ")));
}

}  // namespace deltakern
