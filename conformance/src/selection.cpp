// Which fixed cases a run executes: the whole suite, or the ones asked for by name.
#include <deltakern/conformance.hpp>

namespace deltakern::conformance {

std::vector<Case> selected_cases(const Runtime& runtime, const Target& target, const SuiteOptions& options,
                                 const std::vector<std::string>& names) {
  if (names.empty()) return cases(runtime, target, options);
  std::vector<Case> out;
  for (const auto& name : names)
    if (auto c = case_named(runtime, target, options, name)) out.push_back(std::move(*c));
  return out;
}

}  // namespace deltakern::conformance
