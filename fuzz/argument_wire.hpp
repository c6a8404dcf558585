// The byte format fuzz_validate decodes into a call's arguments, shared with the seed writer.
// libFuzzer's FuzzedDataProvider takes integers from the end of the input, which makes
// hand-written seeds impractical; this format is read front to back, little-endian, and
// every field past the end of the input reads as zero, so any byte string is a valid input.
//
//   header:  u8 op (even: causal_conv1d_varlen, odd: causal_conv1d_update)
//            u8 flags (bit 0: also check index contents, bit 1: max_seq_len given)
//            i32 activation, i64 pad_slot_id, i64 max_seq_len
//   then one record per tensor argument, in the op's schema order
//   (varlen: x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state;
//    update: x, conv_state, weight, bias, conv_state_indices, cache_seqlens):
//            u8 present (0: none)
//            i8 ndim, u8 dtype code, u8 dtype bits, u16 dtype lanes, i32 device type, i32 device id
//            u8 geometry (0: compact, strides null; 1: explicit strides; 2: shape null)
//            i64 shape[d] for d < clamp(ndim, 0, 8), then i64 strides[d] likewise when explicit
//            u64 byte_offset
//            u8 data (0: null; 1: its own buffer; 2: into another argument's buffer; 3: a
//               pointer to nothing, never to be read)
//            u8 other argument, u32 offset in its buffer (both read always, used by data 2)
//            u16 n, then n content bytes: its own buffer is filled with them, repeated
#pragma once

#include <cstdint>

namespace deltakern::fuzz {

inline constexpr int kMaxRank = 8;
inline constexpr int kVarlenTensors = 7;
inline constexpr int kUpdateTensors = 6;

enum Flags : uint8_t { kCheckContents = 1, kMaxSeqLenGiven = 2 };
enum ShapeEncoding : uint8_t { kCompact = 0, kExplicitStrides = 1, kNullShape = 2 };
enum Data : uint8_t { kNullData = 0, kOwnBuffer = 1, kOtherBuffer = 2, kDanglingPointer = 3 };

}  // namespace deltakern::fuzz
