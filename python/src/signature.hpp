// The dispatch signature of a call, built from its arguments as the core builds it, so that the
// binding can ask Runtime::explain which backend a call will get (and which contract that
// backend keeps) before making it: the in-place op must refuse a fresh-output backend before
// anything is written.
#pragma once

#include <deltakern/runtime.hpp>

#include <optional>
#include <string>

namespace deltakern::python {

// None when the arguments are malformed (wrong rank, no layout): the call itself then reports
// the core's own error for them.
std::optional<CallSignature> varlen_signature(const CausalConv1dVarlenArgs& args, std::string op);
std::optional<CallSignature> update_signature(const CausalConv1dUpdateArgs& args, std::string op);

// The declared op of the backend that `decision` chose; nullptr when there is none.
const OpInfo* serving_op(const Runtime& runtime, const Decision& decision, std::string_view op);

// deltakern::Contract (runtime_types.hpp): in_place or fresh for the ops that return a tensor.
// The contract of the backend that would serve `signature`; nullopt when none would (the call
// itself then reports why).
std::optional<Contract> kept_contract(const Runtime& runtime, const CallSignature& signature);

// Throws Error(unsupported) when the backend that would serve `signature` keeps the other
// contract than `required`. `api_name` names the Python-facing op.
void require_contract(const Runtime& runtime, const CallSignature& signature, Contract required,
                      std::string_view api_name);

}  // namespace deltakern::python
