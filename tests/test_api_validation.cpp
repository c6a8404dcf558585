// Public API argument validation, audited class by class (issue 5, item 4): every class of
// bad argument, for both ops, is rejected on the host before anything runs, with a message
// that names the op and the argument and says what was expected and what came; and the
// rejected call leaves x, the states and every other tensor bit-identical. The calls are
// forced onto the in-place test backend, which writes x and the states: a check that let a
// bad call through would show up as a changed tensor.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <deltakern/op_schemas.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <set>

using namespace deltakern;
using namespace deltakern::test;
namespace bdata = boost::unit_test::data;

namespace {

constexpr DLDevice kCuda{kDLCUDA, 0};
constexpr DLDataType kI8{kDLInt, 8, 1};

Runtime& runtime() { return standin_runtime(); }

// The classes issue 5 lists; every one has rows for both ops (checked below).
const std::set<std::string> kClasses{
    "device",      "dtype",      "rank",  "shape",        "strides/layout", "width",  "alignment",
    "index dtype", "batch size", "lines", "state length", "aliasing",       "scalar", "contents"};

template <class Call>
struct Break {
  const char* input_class;  // one of kClasses
  const char* what;
  // What the message must contain after "<op>: ": the argument, what was expected and what
  // came (a prefix where the rest is an address).
  std::string message;
  std::function<void(Call&)> breaks;
  ErrorCode code = ErrorCode::invalid_argument;
};
template <class Call>
std::ostream& operator<<(std::ostream& os, const Break<Call>& b) {
  return os << b.input_class << ": " << b.what;
}

using V = VarlenCall;
using U = UpdateCall;
using Shape = std::vector<int64_t>;

// Makes `t`'s view start at `other`'s memory (its own buffer is still compared).
void point_at(HostTensor& t, HostTensor& other, int64_t byte_offset = 0) {
  t.dl()->data = other.dl()->data;
  t.dl()->byte_offset = static_cast<uint64_t>(byte_offset);
}

const Break<V> kVarlenBreaks[] = {
    // device: everything on x's device; x's id is a real one
    {"device", "weight on cuda", "weight: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.weight->set_device(kCuda); }},
    {"device", "weight on another cpu", "weight: expected a tensor on cpu:0 (x's device), got cpu:1",
     [](V& c) {
       c.weight->set_device({kDLCPU, 1});
     }},
    {"device", "bias on cuda", "bias: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.bias->set_device(kCuda); }},
    {"device", "conv_states on cuda", "conv_states: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.states->set_device(kCuda); }},
    {"device", "query_start_loc on cuda",
     "query_start_loc: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.qsl->set_device(kCuda); }},
    {"device", "cache_indices on cuda", "cache_indices: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.indices->set_device(kCuda); }},
    {"device", "has_initial_state on cuda",
     "has_initial_state: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](V& c) { c.initial->set_device(kCuda); }},
    {"device", "x on device id -1", "x: expected a device id >= 0, got cpu:-1",
     [](V& c) {
       c.x->set_device({kDLCPU, -1});
     }},
    // dtype
    {"dtype", "x of int32", "x: expected dtype float32, float16 or bfloat16, got int32",
     [](V& c) {
       c.x.emplace(kI32, Shape{V::D, V::T});
     }},
    {"dtype", "x of float64", "x: expected dtype float32, float16 or bfloat16, got float64",
     [](V& c) {
       c.x.emplace(kF64, Shape{V::D, V::T});
     }},
    {"dtype", "x of float32x2",
     "x: expected dtype float32, float16 or bfloat16, got dtype(code=2, bits=32, lanes=2)",
     [](V& c) {
       c.x.emplace(DLDataType{kDLFloat, 32, 2}, Shape{V::D, V::T});
     }},
    {"dtype", "weight of float16 with float32 x", "weight: expected dtype float32, got float16",
     [](V& c) {
       c.weight.emplace(kF16, Shape{V::D, V::W});
     }},
    {"dtype", "weight of float16 with bfloat16 x",
     "weight: expected dtype bfloat16 (x's) or float32, got float16",
     [](V& c) {
       c.x.emplace(kBF16, Shape{V::D, V::T});
       c.states.emplace(kBF16, Shape{V::lines, V::D, V::S});
       c.weight.emplace(kF16, Shape{V::D, V::W});
     }},
    {"dtype", "bias of float16", "bias: expected dtype float32, got float16",
     [](V& c) { c.bias.emplace(kF16, Shape{V::D}); }},
    {"dtype", "conv_states of float16", "conv_states: expected dtype float32, got float16",
     [](V& c) {
       c.states.emplace(kF16, Shape{V::lines, V::D, V::S});
     }},
    // rank (and presence)
    {"rank", "x missing", "x: expected a tensor, got none", [](V& c) { c.x.reset(); }},
    {"rank", "x of rank 3", "x: expected 2 dimensions (D, T), got 3",
     [](V& c) {
       c.x.emplace(kF32, Shape{V::D, V::T, 1});
     }},
    {"rank", "weight missing", "weight: expected a tensor, got none", [](V& c) { c.weight.reset(); }},
    {"rank", "weight of rank 1", "weight: expected 2 dimensions (D, W), got 1",
     [](V& c) { c.weight.emplace(kF32, Shape{V::D}); }},
    {"rank", "bias of rank 2", "bias: expected 1 dimension (D), got 2",
     [](V& c) {
       c.bias.emplace(kF32, Shape{V::D, 1});
     }},
    {"rank", "conv_states missing", "conv_states: expected a tensor, got none",
     [](V& c) { c.states.reset(); }},
    {"rank", "conv_states of rank 2", "conv_states: expected 3 dimensions (lines, D, S), got 2",
     [](V& c) {
       c.states.emplace(kF32, Shape{V::lines, V::D});
     }},
    {"rank", "query_start_loc missing", "query_start_loc: expected a tensor, got none",
     [](V& c) { c.qsl.reset(); }},
    {"rank", "query_start_loc of rank 2", "query_start_loc: expected 1 dimension (batch+1), got 2",
     [](V& c) {
       c.qsl.emplace(kI32, Shape{3, 1});
     }},
    {"rank", "cache_indices of rank 2", "cache_indices: expected 1 dimension (batch=2), got 2",
     [](V& c) {
       c.indices.emplace(kI32, Shape{2, 1});
     }},
    {"rank", "has_initial_state of rank 0", "has_initial_state: expected 1 dimension (batch=2), got 0",
     [](V& c) { c.initial.emplace(kU8, Shape{}); }},
    // shape
    {"shape", "x with no channels", "x: expected D >= 1 channels, got shape (0, 10)",
     [](V& c) {
       c.x.emplace(kF32, Shape{0, V::T});
     }},
    {"shape", "x of negative length", "x: expected non-negative sizes, got (8, -1)",
     [](V& c) { c.x->dl()->shape[1] = -1; }},
    {"shape", "x too large to address",
     "x: expected a shape and strides whose extent fits the address space, got shape (8, "
     "4611686018427387904) "
     "with strides (10, 1)",
     [](V& c) { c.x->dl()->shape[1] = int64_t{1} << 62; }},
    {"shape", "weight with other channels", "weight: expected shape (D=8, W) with D matching x, got (9, 4)",
     [](V& c) {
       c.weight.emplace(kF32, Shape{V::D + 1, V::W});
     }},
    {"shape", "bias with other channels", "bias: expected shape (D=8), got (9)",
     [](V& c) { c.bias.emplace(kF32, Shape{V::D + 1}); }},
    {"shape", "conv_states with other channels",
     "conv_states: expected shape (lines, D=8, S) with D matching x, got (4, 9, 3)",
     [](V& c) {
       c.states.emplace(kF32, Shape{V::lines, V::D + 1, V::S});
     }},
    {"shape", "query_start_loc empty",
     "query_start_loc: expected shape (batch+1) with at least 1 entry, got (0)",
     [](V& c) { c.qsl.emplace(kI32, Shape{0}); }},
    // strides and layout
    {"strides/layout", "x strided in both dims",
     "x: expected time-contiguous (stride(1) == 1) or channel-last (stride(0) == 1, stride(1) >= D=8) "
     "layout, "
     "got strides (20, 2)",
     [](V& c) {
       c.x.emplace(kF32, Shape{V::D, V::T}, Shape{2 * V::T, 2});
     }},
    {"strides/layout", "x channel-last with a time stride below D",
     "x: expected time-contiguous (stride(1) == 1) or channel-last (stride(0) == 1, stride(1) >= D=8) "
     "layout, "
     "got strides (1, 4)",
     [](V& c) {
       c.x.emplace(kF32, Shape{V::D, V::T}, Shape{1, 4});
     }},
    {"strides/layout", "x with a negative stride", "x: expected non-negative strides, got (10, -1)",
     [](V& c) { c.x->dl()->strides[1] = -1; }},
    {"strides/layout", "x broadcast over channels",
     "x: expected elements that do not overlap, got shape (8, 10) with strides (0, 1)",
     [](V& c) {
       c.x.emplace(kF32, Shape{V::D, V::T}, Shape{0, 1});
     }},
    {"strides/layout", "conv_states broadcast over lines",
     "conv_states: expected elements that do not overlap, got shape (4, 8, 3) with strides (0, 3, 1)",
     [](V& c) {
       c.states.emplace(kF32, Shape{V::lines, V::D, V::S}, Shape{0, V::S, 1});
     }},
    {"strides/layout", "query_start_loc strided",
     "query_start_loc: expected a contiguous tensor (stride 1), got stride 2",
     [](V& c) { c.qsl.emplace(kI32, Shape{3}, Shape{2}); }},
    {"strides/layout", "cache_indices strided",
     "cache_indices: expected a contiguous tensor (stride 1), got stride 3",
     [](V& c) { c.indices.emplace(kI32, Shape{2}, Shape{3}); }},
    {"strides/layout", "has_initial_state strided",
     "has_initial_state: expected a contiguous tensor (stride 1), got stride 2",
     [](V& c) { c.initial.emplace(kU8, Shape{2}, Shape{2}); }},
    // width: W >= 1 on the host; a width no backend declares is refused by dispatch
    {"width", "weight of width 0", "weight: expected width W >= 1, got shape (8, 0)",
     [](V& c) {
       c.weight.emplace(kF32, Shape{V::D, 0});
     }},
    {"width", "a width the backend does not declare",
     "forced backend 'standin' (RuntimeOptions::force_backend) cannot serve this call (cpu:0, x float32, "
     "width 9, time_contiguous): width 9 outside 2..4",
     [](V& c) {
       c.weight.emplace(kF32, Shape{V::D, 9});
       c.states.emplace(kF32, Shape{V::lines, V::D, 8});
     },
     ErrorCode::unsupported},
    // alignment: whole elements
    {"alignment", "x misaligned", "x: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](V& c) { c.x->dl()->byte_offset = 2; }},
    {"alignment", "weight misaligned",
     "weight: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](V& c) { c.weight->dl()->byte_offset = 1; }},
    {"alignment", "conv_states misaligned",
     "conv_states: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](V& c) { c.states->dl()->byte_offset = 2; }},
    {"alignment", "query_start_loc misaligned",
     "query_start_loc: expected data aligned to its 4-byte elements (int32), got address 0x",
     [](V& c) { c.qsl->dl()->byte_offset = 2; }},
    {"alignment", "cache_indices misaligned",
     "cache_indices: expected data aligned to its 4-byte elements (int32), got address 0x",
     [](V& c) { c.indices->dl()->byte_offset = 3; }},
    {"alignment", "x with no data", "x: expected data, got a null pointer",
     [](V& c) { c.x->dl()->data = nullptr; }},
    // index dtypes
    {"index dtype", "query_start_loc of int64", "query_start_loc: expected dtype int32, got int64",
     [](V& c) { c.qsl.emplace(kI64, Shape{3}); }},
    {"index dtype", "cache_indices of int64", "cache_indices: expected dtype int32, got int64",
     [](V& c) { c.indices.emplace(kI64, Shape{2}); }},
    {"index dtype", "has_initial_state of float32", "has_initial_state: expected dtype uint8, got float32",
     [](V& c) { c.initial.emplace(kF32, Shape{2}); }},
    {"index dtype", "has_initial_state of int8", "has_initial_state: expected dtype uint8, got int8",
     [](V& c) { c.initial.emplace(kI8, Shape{2}); }},
    // sizes against the batch (query_start_loc has batch+1 = 3 entries)
    {"batch size", "cache_indices of another batch", "cache_indices: expected shape (batch=2), got (3)",
     [](V& c) { c.indices.emplace(kI32, Shape{3}); }},
    {"batch size", "has_initial_state of another batch",
     "has_initial_state: expected shape (batch=2), got (1)", [](V& c) { c.initial.emplace(kU8, Shape{1}); }},
    // conv_states line count
    {"lines", "conv_states with no lines", "conv_states: expected at least 1 line, got (0, 8, 3)",
     [](V& c) {
       c.states.emplace(kF32, Shape{0, V::D, V::S});
     }},
    {"lines", "fewer lines than sequences without cache_indices",
     "conv_states: expected at least batch=2 lines (cache_indices is none: sequence b uses line b), got 1",
     [](V& c) {
       c.indices.reset();
       c.states.emplace(kF32, Shape{1, V::D, V::S});
     }},
    // state length
    {"state length", "conv_states shorter than W-1",
     "conv_states: expected state length S >= W-1 = 3, got S=2",
     [](V& c) {
       c.states.emplace(kF32, Shape{V::lines, V::D, V::W - 2});
     }},
    // aliasing: x and the states are written; nothing read may share their memory
    {"aliasing", "conv_states in x's memory",
     "conv_states: expected memory apart from x, got overlapping byte ranges",
     [](V& c) { point_at(*c.states, *c.x); }},
    {"aliasing", "weight in x's memory", "weight: expected memory apart from x, got overlapping byte ranges",
     [](V& c) { point_at(*c.weight, *c.x, 8); }},
    {"aliasing", "bias in conv_states' memory",
     "bias: expected memory apart from conv_states, got overlapping byte ranges",
     [](V& c) { point_at(*c.bias, *c.states, 16); }},
    {"aliasing", "query_start_loc in x's memory",
     "query_start_loc: expected memory apart from x, got overlapping byte ranges",
     [](V& c) { point_at(*c.qsl, *c.x, 36); }},
    {"aliasing", "cache_indices in conv_states' memory",
     "cache_indices: expected memory apart from conv_states, got overlapping byte ranges",
     [](V& c) { point_at(*c.indices, *c.states, 4 * (V::lines * V::D * V::S - 1)); }},
    {"aliasing", "has_initial_state in x's memory",
     "has_initial_state: expected memory apart from x, got overlapping byte ranges",
     [](V& c) { point_at(*c.initial, *c.x, 1); }},
    // scalars
    {"scalar", "activation out of range", "activation: expected none or silu, got 7",
     [](V& c) { c.activation = static_cast<Activation>(7); }},
    {"scalar", "pad_slot_id beyond int32",
     "pad_slot_id: expected a value that fits int32 (cache indices are int32), got 4294967296",
     [](V& c) { c.pad_slot_id = int64_t{1} << 32; }},
    {"scalar", "max_seq_len negative", "max_seq_len: expected >= 0, got -1",
     [](V& c) { c.max_seq_len = -1; }},
    // contents, checked only when asked (one counted sync)
    {"contents", "query_start_loc not starting at 0",
     "query_start_loc: expected query_start_loc[0] == 0, got 1",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{1, 4, V::T});
     }},
    {"contents", "query_start_loc decreasing",
     "query_start_loc: expected non-decreasing offsets, got query_start_loc[2] = 4 < query_start_loc[1] = 7",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{0, 7, 4});
     }},
    {"contents", "query_start_loc past the tokens",
     "query_start_loc: expected query_start_loc[2] == T = 10, got 12",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{0, 4, V::T + 2});
     }},
    {"contents", "query_start_loc short of the tokens",
     "query_start_loc: expected query_start_loc[2] == T = 10, got 9",
     [](V& c) {
       c.validate = true;
       c.qsl->fill(std::vector<int32_t>{0, 4, V::T - 1});
     }},
    {"contents", "cache index past the lines",
     "cache_indices: expected cache_indices[1] in [0, 4) or pad_slot_id = -1, got 4",
     [](V& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{3, V::lines});
     }},
    {"contents", "cache index negative, not the pad",
     "cache_indices: expected cache_indices[0] in [0, 4) or pad_slot_id = -1, got -2",
     [](V& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{-2, 1});
     }},
    {"contents", "two live sequences on one line",
     "cache_indices: expected distinct lines for live sequences, got line 1 for sequences 0 and 1",
     [](V& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{1, 1});
     }},
    {"contents", "has_initial_state not a flag",
     "has_initial_state: expected has_initial_state[1] in {0, 1}, got 2",
     [](V& c) {
       c.validate = true;
       c.initial->fill(std::vector<uint8_t>{1, 2});
     }},
    {"contents", "max_seq_len below the longest sequence",
     "max_seq_len: expected >= the longest sequence (6), got 5",
     [](V& c) {
       c.validate = true;
       c.max_seq_len = 5;
     }},
};

const Break<U> kUpdateBreaks[] = {
    // device
    {"device", "x on device id -1", "x: expected a device id >= 0, got cpu:-1",
     [](U& c) {
       c.x->set_device({kDLCPU, -1});
     }},
    {"device", "conv_state on cuda", "conv_state: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](U& c) { c.states->set_device(kCuda); }},
    {"device", "weight on cuda", "weight: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](U& c) { c.weight->set_device(kCuda); }},
    {"device", "bias on cuda", "bias: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](U& c) { c.bias->set_device(kCuda); }},
    {"device", "conv_state_indices on cuda",
     "conv_state_indices: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](U& c) { c.indices->set_device(kCuda); }},
    {"device", "cache_seqlens on cuda", "cache_seqlens: expected a tensor on cpu:0 (x's device), got cuda:0",
     [](U& c) {
       c.seqlens.emplace(kI32, Shape{U::B});
       c.seqlens->set_device(kCuda);
     }},
    // dtype
    {"dtype", "x of int32", "x: expected dtype float32, float16 or bfloat16, got int32",
     [](U& c) {
       c.x.emplace(kI32, Shape{U::B, U::D});
     }},
    {"dtype", "x of float64", "x: expected dtype float32, float16 or bfloat16, got float64",
     [](U& c) {
       c.x.emplace(kF64, Shape{U::B, U::D});
     }},
    {"dtype", "conv_state of float16", "conv_state: expected dtype float32, got float16",
     [](U& c) {
       c.states.emplace(kF16, Shape{U::lines, U::D, U::S});
     }},
    {"dtype", "weight of bfloat16", "weight: expected dtype float32, got bfloat16",
     [](U& c) {
       c.weight.emplace(kBF16, Shape{U::D, U::W});
     }},
    {"dtype", "bias of float16", "bias: expected dtype float32, got float16",
     [](U& c) { c.bias.emplace(kF16, Shape{U::D}); }},
    // rank
    {"rank", "x missing", "x: expected a tensor, got none", [](U& c) { c.x.reset(); }},
    {"rank", "x of rank 1", "x: expected 2 or 3 dimensions (batch, D) or (batch, D, Tq), got 1",
     [](U& c) { c.x.emplace(kF32, Shape{U::B}); }},
    {"rank", "x of rank 4", "x: expected 2 or 3 dimensions (batch, D) or (batch, D, Tq), got 4",
     [](U& c) {
       c.x.emplace(kF32, Shape{U::B, U::D, 1, 1});
     }},
    {"rank", "conv_state missing", "conv_state: expected a tensor, got none", [](U& c) { c.states.reset(); }},
    {"rank", "conv_state of rank 2", "conv_state: expected 3 dimensions (lines, D, S), got 2",
     [](U& c) {
       c.states.emplace(kF32, Shape{U::lines, U::D});
     }},
    {"rank", "weight missing", "weight: expected a tensor, got none", [](U& c) { c.weight.reset(); }},
    {"rank", "weight of rank 3", "weight: expected 2 dimensions (D, W), got 3",
     [](U& c) {
       c.weight.emplace(kF32, Shape{U::D, U::W, 1});
     }},
    {"rank", "bias of rank 2", "bias: expected 1 dimension (D), got 2",
     [](U& c) {
       c.bias.emplace(kF32, Shape{1, U::D});
     }},
    {"rank", "conv_state_indices of rank 2", "conv_state_indices: expected 1 dimension (batch=3), got 2",
     [](U& c) {
       c.indices.emplace(kI32, Shape{U::B, 1});
     }},
    {"rank", "cache_seqlens of rank 2", "cache_seqlens: expected 1 dimension (batch=3), got 2",
     [](U& c) {
       c.seqlens.emplace(kI32, Shape{U::B, 1});
     }},
    // shape
    {"shape", "x with no channels", "x: expected D >= 1 channels, got shape (3, 0)",
     [](U& c) {
       c.x.emplace(kF32, Shape{U::B, 0});
     }},
    {"shape", "x of negative batch", "x: expected non-negative sizes, got (-3, 8)",
     [](U& c) { c.x->dl()->shape[0] = -3; }},
    {"shape", "x too large to address",
     "x: expected a shape and strides whose extent fits the address space, got shape (3, 8) with strides "
     "(4611686018427387904, 1)",
     [](U& c) { c.x->dl()->strides[0] = int64_t{1} << 62; }},
    {"shape", "weight with other channels", "weight: expected shape (D=8, W) with D matching x, got (9, 4)",
     [](U& c) {
       c.weight.emplace(kF32, Shape{U::D + 1, U::W});
     }},
    {"shape", "bias with other channels", "bias: expected shape (D=8), got (7)",
     [](U& c) { c.bias.emplace(kF32, Shape{U::D - 1}); }},
    {"shape", "conv_state with other channels",
     "conv_state: expected shape (lines, D=8, S) with D matching x, got (5, 9, 3)",
     [](U& c) {
       c.states.emplace(kF32, Shape{U::lines, U::D + 1, U::S});
     }},
    // strides and layout
    {"strides/layout", "x of 3 dims in neither layout",
     "x: expected time-contiguous (stride(2) == 1) or channel-last (stride(1) == 1, stride(2) >= D=8) "
     "layout, "
     "got strides (48, 2, 3)",
     [](U& c) {
       c.x.emplace(kF32, Shape{U::B, U::D, 2}, Shape{48, 2, 3});
     }},
    {"strides/layout", "x with a negative stride", "x: expected non-negative strides, got (-8, 1)",
     [](U& c) { c.x->dl()->strides[0] = -8; }},
    {"strides/layout", "x broadcast over the batch",
     "x: expected elements that do not overlap, got shape (3, 8) with strides (0, 1)",
     [](U& c) {
       c.x.emplace(kF32, Shape{U::B, U::D}, Shape{0, 1});
     }},
    {"strides/layout", "conv_state broadcast over channels",
     "conv_state: expected elements that do not overlap, got shape (5, 8, 3) with strides (24, 0, 1)",
     [](U& c) {
       c.states.emplace(kF32, Shape{U::lines, U::D, U::S}, Shape{U::D * U::S, 0, 1});
     }},
    {"strides/layout", "conv_state_indices strided",
     "conv_state_indices: expected a contiguous tensor (stride 1), got stride 2",
     [](U& c) { c.indices.emplace(kI32, Shape{U::B}, Shape{2}); }},
    {"strides/layout", "cache_seqlens strided",
     "cache_seqlens: expected a contiguous tensor (stride 1), got stride 4",
     [](U& c) { c.seqlens.emplace(kI32, Shape{U::B}, Shape{4}); }},
    // width
    {"width", "weight of width 0", "weight: expected width W >= 1, got shape (8, 0)",
     [](U& c) {
       c.weight.emplace(kF32, Shape{U::D, 0});
     }},
    {"width", "a width the backend does not declare",
     "forced backend 'standin' (RuntimeOptions::force_backend) cannot serve this call (cpu:0, x float32, "
     "width 9, time_contiguous): width 9 outside 2..4",
     [](U& c) {
       c.weight.emplace(kF32, Shape{U::D, 9});
       c.states.emplace(kF32, Shape{U::lines, U::D, 8});
     },
     ErrorCode::unsupported},
    // alignment
    {"alignment", "x misaligned", "x: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](U& c) { c.x->dl()->byte_offset = 2; }},
    {"alignment", "conv_state misaligned",
     "conv_state: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](U& c) { c.states->dl()->byte_offset = 1; }},
    {"alignment", "bias misaligned",
     "bias: expected data aligned to its 4-byte elements (float32), got address 0x",
     [](U& c) { c.bias->dl()->byte_offset = 3; }},
    {"alignment", "conv_state_indices misaligned",
     "conv_state_indices: expected data aligned to its 4-byte elements (int32), got address 0x",
     [](U& c) { c.indices->dl()->byte_offset = 2; }},
    {"alignment", "conv_state with no data", "conv_state: expected data, got a null pointer",
     [](U& c) { c.states->dl()->data = nullptr; }},
    // index dtypes
    {"index dtype", "conv_state_indices of int64", "conv_state_indices: expected dtype int32, got int64",
     [](U& c) { c.indices.emplace(kI64, Shape{U::B}); }},
    {"index dtype", "cache_seqlens of float32", "cache_seqlens: expected dtype int32, got float32",
     [](U& c) { c.seqlens.emplace(kF32, Shape{U::B}); }},
    {"index dtype", "cache_seqlens of uint8", "cache_seqlens: expected dtype int32, got uint8",
     [](U& c) { c.seqlens.emplace(kU8, Shape{U::B}); }},
    // sizes against the batch (x's first dimension, 3)
    {"batch size", "conv_state_indices of another batch",
     "conv_state_indices: expected shape (batch=3), got (4)",
     [](U& c) { c.indices.emplace(kI32, Shape{U::B + 1}); }},
    {"batch size", "cache_seqlens of another batch", "cache_seqlens: expected shape (batch=3), got (2)",
     [](U& c) { c.seqlens.emplace(kI32, Shape{U::B - 1}); }},
    // conv_state line count
    {"lines", "conv_state with no lines", "conv_state: expected at least 1 line, got (0, 8, 3)",
     [](U& c) {
       c.states.emplace(kF32, Shape{0, U::D, U::S});
     }},
    {"lines", "fewer lines than sequences without conv_state_indices",
     "conv_state: expected at least batch=3 lines (conv_state_indices is none: sequence b uses line b), got "
     "2",
     [](U& c) {
       c.indices.reset();
       c.states.emplace(kF32, Shape{2, U::D, U::S});
     }},
    // state length
    {"state length", "conv_state shorter than W-1", "conv_state: expected state length S >= W-1 = 3, got S=2",
     [](U& c) {
       c.states.emplace(kF32, Shape{U::lines, U::D, U::W - 2});
     }},
    // aliasing
    {"aliasing", "conv_state in x's memory",
     "conv_state: expected memory apart from x, got overlapping byte ranges",
     [](U& c) { point_at(*c.states, *c.x); }},
    {"aliasing", "weight in x's memory", "weight: expected memory apart from x, got overlapping byte ranges",
     [](U& c) { point_at(*c.weight, *c.x, 4); }},
    {"aliasing", "bias in conv_state's memory",
     "bias: expected memory apart from conv_state, got overlapping byte ranges",
     [](U& c) { point_at(*c.bias, *c.states, 40); }},
    {"aliasing", "conv_state_indices in x's memory",
     "conv_state_indices: expected memory apart from x, got overlapping byte ranges",
     [](U& c) { point_at(*c.indices, *c.x, 80); }},
    {"aliasing", "cache_seqlens in conv_state's memory",
     "cache_seqlens: expected memory apart from conv_state, got overlapping byte ranges",
     [](U& c) {
       c.seqlens.emplace(kI32, Shape{U::B});
       point_at(*c.seqlens, *c.states);
     }},
    // scalars
    {"scalar", "activation out of range", "activation: expected none or silu, got -1",
     [](U& c) { c.activation = static_cast<Activation>(-1); }},
    {"scalar", "pad_slot_id below int32",
     "pad_slot_id: expected a value that fits int32 (cache indices are int32), got -2147483649",
     [](U& c) { c.pad_slot_id = int64_t{std::numeric_limits<int32_t>::min()} - 1; }},
    // contents
    {"contents", "state index past the lines",
     "conv_state_indices: expected conv_state_indices[1] in [0, 5) or pad_slot_id = -1, got 8",
     [](U& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{4, U::lines + 3, 2});
     }},
    {"contents", "state index negative, not the pad",
     "conv_state_indices: expected conv_state_indices[2] in [0, 5) or pad_slot_id = 7, got -1",
     [](U& c) {
       c.validate = true;
       c.pad_slot_id = 7;
       c.indices->fill(std::vector<int32_t>{4, 0, -1});
     }},
    {"contents", "two live sequences on one line",
     "conv_state_indices: expected distinct lines for live sequences, got line 2 for sequences 0 and 2",
     [](U& c) {
       c.validate = true;
       c.indices->fill(std::vector<int32_t>{2, 0, 2});
     }},
    {"contents", "cache_seqlens negative", "cache_seqlens: expected cache_seqlens[1] >= 0, got -3",
     [](U& c) {
       c.validate = true;
       c.seqlens.emplace(kI32, Shape{U::B});
       c.seqlens->fill(std::vector<int32_t>{0, -3, 2});
     }},
};

template <class Call>
void require_rejected(Call& call, const Break<Call>& b, const char* op, const std::function<Tensor()>& run) {
  const auto before = call.snapshot();
  try {
    const Tensor t = run();
    BOOST_FAIL("the call was accepted");
  } catch (const Error& e) {
    BOOST_TEST_CONTEXT("message: " << e.what()) {
      BOOST_TEST((e.code() == b.code));
      BOOST_TEST(contains(e.what(), std::string(op) + ": " + b.message),
                 "the message should contain '" << op << ": " << b.message << "'");
    }
  }
  const auto after = call.snapshot();
  BOOST_TEST_REQUIRE(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i)
    BOOST_TEST((before[i] == after[i]), "tensor " << i << " was changed");
}

template <class Call, size_t N>
std::set<std::string> classes_of(const Break<Call> (&breaks)[N]) {
  std::set<std::string> out;
  for (const auto& b : breaks) out.insert(b.input_class);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_unbroken_calls_are_accepted) {
  VarlenCall v;
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_varlen(v.args()));
  VarlenCall padded;  // the pad slot may repeat: padded sequences touch no line
  padded.validate = true;
  padded.indices->fill(std::vector<int32_t>{-1, -1});
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_varlen(padded.args()));
  UpdateCall u;
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_update(u.args()));
  UpdateCall c;
  c.seqlens.emplace(kI32, std::vector<int64_t>{U::B});
  c.validate = true;
  c.indices->fill(std::vector<int32_t>{-1, 3, -1});
  BOOST_CHECK_NO_THROW((void)runtime().causal_conv1d_update(c.args()));
}

BOOST_AUTO_TEST_CASE(every_input_class_is_covered_for_both_ops) {
  BOOST_TEST(classes_of(kVarlenBreaks) == kClasses, boost::test_tools::per_element());
  BOOST_TEST(classes_of(kUpdateBreaks) == kClasses, boost::test_tools::per_element());
  BOOST_TEST_MESSAGE(kClasses.size() << " classes; " << std::size(kVarlenBreaks) << " varlen and "
                                     << std::size(kUpdateBreaks) << " update bad calls");
}

BOOST_DATA_TEST_CASE(bad_varlen_arguments_are_rejected_untouched, bdata::make(kVarlenBreaks), b) {
  VarlenCall call;
  b.breaks(call);
  require_rejected(call, b, DK_OP_CAUSAL_CONV1D_VARLEN,
                   [&] { return runtime().causal_conv1d_varlen(call.args()); });
}

BOOST_DATA_TEST_CASE(bad_update_arguments_are_rejected_untouched, bdata::make(kUpdateBreaks), b) {
  UpdateCall call;
  b.breaks(call);
  require_rejected(call, b, DK_OP_CAUSAL_CONV1D_UPDATE,
                   [&] { return runtime().causal_conv1d_update(call.args()); });
}

BOOST_AUTO_TEST_CASE(activation_names) {
  BOOST_TEST((activation_from_string("none") == Activation::none));
  BOOST_TEST((activation_from_string("silu") == Activation::silu));
  BOOST_TEST((activation_from_string("swish") == Activation::silu));
  try {
    (void)activation_from_string("relu");
    BOOST_FAIL("relu was accepted");
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::invalid_argument));
    BOOST_TEST(std::string(e.what()) == "activation: expected none, silu or swish, got 'relu'");
  }
}
