// Which output elements a check compares with the float64 reference: every live one up to
// kDenseElements; beyond, a dense sample that still sees what a defect at size looks like:
// every token of a few channels (the first two, the middle one, the last two and random ones),
// every channel at each sequence's first and last W + S tokens (where the halo and the state
// are read), and a million elements drawn at random. Bit identity between a case's two calls,
// the mutation contract and the guards are checked on every element and byte regardless.
#pragma once

#include "update.hpp"
#include "varlen.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace deltakern::conformance {

// Row-major indices into the (D, T) output, sorted, live tokens only.
std::vector<int64_t> varlen_sample(const VarlenConfig& c, std::span<const int32_t> qsl,
                                   const reference::Varlen& ref, std::string_view seed);
// Row-major indices into the (batch, D, Tq) output, sorted, live rows only.
std::vector<int64_t> update_sample(const UpdateConfig& c, const reference::Update& ref,
                                   std::string_view seed);

}  // namespace deltakern::conformance
