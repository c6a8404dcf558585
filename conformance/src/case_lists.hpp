// What each tier's cases are: the knobs of every case and the case lists built from an op's
// declaration (widths, dtypes, layouts, devices), never beyond it. suite.cpp puts them together.
#pragma once

#include "runners.hpp"

#include <deltakern/conformance.hpp>

#include <cstdint>
#include <vector>

namespace deltakern::conformance {

// Widths 2..4 within what the backend declares, plus its widest when wider.
std::vector<int64_t> widths_of(const OpInfo& info);
std::vector<DType> dtypes_of(const OpInfo& info);
// Whether the op can run on the target's device at all (CUDA: compute capability).
bool serves(const OpInfo& info, const Target& target);

// Every dtype, width, layout, bias, activation and initial-state combination at small
// shapes, edge lengths, padded slots, graph capture and the gate on CUDA: the quick tier.
void add_varlen_cases(std::vector<Case>& out, const OpInfo& info, const Target& target,
                      const SuiteOptions& o);
void add_update_cases(std::vector<Case>& out, const OpInfo& info, const Target& target,
                      const SuiteOptions& o);
// The declarations themselves, and a prefill followed by updates against one whole prefill.
void add_contract_cases(std::vector<Case>& out, const std::vector<const OpInfo*>& ops, const SuiteOptions& o);
// Out-of-range cache indices: skipped, flagged, reported by check_errors, nothing outside
// the pool written.
void add_out_of_range_cases(std::vector<Case>& out, const OpInfo& info, const Target& target,
                            const SuiteOptions& o);
// The shapes engines use (full tier) and GPU-sized ones (large tier).
void add_size_cases(std::vector<Case>& out, const OpInfo& info, const Target& target, const SuiteOptions& o);

// Sweep case k of options.seed over the ops the target serves.
Case make_sweep_case(const std::vector<const OpInfo*>& served, const SuiteOptions& options, uint64_t k);

}  // namespace deltakern::conformance
