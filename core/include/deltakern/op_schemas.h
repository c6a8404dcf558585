/* The ops of ABI 1: names, canonical schemas, argument positions and dimensions.
 *
 * A plugin declares each op's schema with its own alias annotations (its mutation
 * contract); the core checks that, with the annotations removed, it is exactly the
 * canonical schema below. The positions index dk_call.tensors and dk_call.scalars.
 * The dimensions (1.1) are the sizes the core derives from every call of the op, by the
 * names a dk_limit uses. Adding an op or a dimension appends here and bumps DK_ABI_MINOR.
 *
 * An out-variant (1.1: *_out) is its op with the result written into a caller's tensor `out`:
 * the same arguments, then `out` after the last tensor argument, and no return. Its plugin
 * schema annotates out as written (Tensor(a!) out) and never x; the core checks out is x's
 * shape, dtype, device and layout and shares no memory with any other argument. */
#ifndef DELTAKERN_OP_SCHEMAS_H
#define DELTAKERN_OP_SCHEMAS_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- causal_conv1d_varlen: prefill over a packed batch of variable-length sequences */
#define DK_OP_CAUSAL_CONV1D_VARLEN "causal_conv1d_varlen"
#define DK_SCHEMA_CAUSAL_CONV1D_VARLEN                                               \
  "causal_conv1d_varlen(Tensor x, Tensor weight, Tensor? bias, Tensor conv_states, " \
  "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, "       \
  "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> Tensor"

enum {
  DK_VARLEN_X = 0,                 /* (D, T) f32/f16/bf16, time-contiguous or channel-last */
  DK_VARLEN_WEIGHT = 1,            /* (D, W), x's dtype or f32                             */
  DK_VARLEN_BIAS = 2,              /* (D) or NULL                                          */
  DK_VARLEN_CONV_STATES = 3,       /* (lines, D, S), S >= W-1, any strides                 */
  DK_VARLEN_QUERY_START_LOC = 4,   /* (batch+1) int32 on x's device                        */
  DK_VARLEN_CACHE_INDICES = 5,     /* (batch) int32 or NULL (identity)                     */
  DK_VARLEN_HAS_INITIAL_STATE = 6, /* (batch) uint8 or NULL (all false)                    */
  DK_VARLEN_N_TENSORS = 7
};
enum {
  DK_VARLEN_ACTIVATION = 0,  /* STRING: "none" or "silu" (the core maps "swish" to "silu") */
  DK_VARLEN_PAD_SLOT_ID = 1, /* INT                                                        */
  DK_VARLEN_MAX_SEQ_LEN = 2, /* INT, or NONE when the host did not give it                 */
  DK_VARLEN_N_SCALARS = 3
};
/* dim: D; tokens: T, all sequences together; batch: sequences; width: W; state_len: S;
 * lines: conv_states' first extent (cache lines). */
#define DK_DIMS_CAUSAL_CONV1D_VARLEN "dim", "tokens", "batch", "width", "state_len", "lines"

/* ---- causal_conv1d_varlen_out (1.1): causal_conv1d_varlen into out, x untouched. Out's
 * tokens of a skipped sequence (pad_slot_id or out of range) are unspecified afterwards (left,
 * zeroed or overwritten: engines discard them); out's elements outside its view are never
 * written. Positions are causal_conv1d_varlen's, with out after the tensors. */
#define DK_OP_CAUSAL_CONV1D_VARLEN_OUT "causal_conv1d_varlen_out"
#define DK_SCHEMA_CAUSAL_CONV1D_VARLEN_OUT                                                 \
  "causal_conv1d_varlen_out(Tensor x, Tensor weight, Tensor? bias, Tensor conv_states, "   \
  "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor out, " \
  "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()"
enum {
  DK_VARLEN_OUT = 7, /* x's shape, dtype, device and layout; apart from every other argument */
  DK_VARLEN_OUT_N_TENSORS = 8
};

/* ---- causal_conv1d_update: decode, one or a few new tokens per sequence */
#define DK_OP_CAUSAL_CONV1D_UPDATE "causal_conv1d_update"
#define DK_SCHEMA_CAUSAL_CONV1D_UPDATE                                              \
  "causal_conv1d_update(Tensor x, Tensor conv_state, Tensor weight, Tensor? bias, " \
  "Tensor? conv_state_indices, Tensor? cache_seqlens, str activation=\"none\", "    \
  "int pad_slot_id=-1) -> Tensor"

enum {
  DK_UPDATE_X = 0,                  /* (batch, D) or (batch, D, Tq)                        */
  DK_UPDATE_CONV_STATE = 1,         /* (lines, D, S), S >= W-1                              */
  DK_UPDATE_WEIGHT = 2,             /* (D, W)                                               */
  DK_UPDATE_BIAS = 3,               /* (D) or NULL                                          */
  DK_UPDATE_CONV_STATE_INDICES = 4, /* (batch) int32 or NULL (identity)                     */
  DK_UPDATE_CACHE_SEQLENS = 5,      /* (batch) int32 or NULL (shift mode)                   */
  DK_UPDATE_N_TENSORS = 6
};
enum { DK_UPDATE_ACTIVATION = 0, DK_UPDATE_PAD_SLOT_ID = 1, DK_UPDATE_N_SCALARS = 2 };
/* batch: sequences; dim: D; tokens_per_update: Tq (1 for a 2-D x); width: W;
 * state_len: S; lines: conv_state's first extent. */
#define DK_DIMS_CAUSAL_CONV1D_UPDATE "batch", "dim", "tokens_per_update", "width", "state_len", "lines"

/* ---- causal_conv1d_update_out (1.1): causal_conv1d_update into out, x untouched; out's rows of
 * a skipped sequence are unspecified afterwards. Positions are causal_conv1d_update's, with out
 * after the tensors. */
#define DK_OP_CAUSAL_CONV1D_UPDATE_OUT "causal_conv1d_update_out"
#define DK_SCHEMA_CAUSAL_CONV1D_UPDATE_OUT                                                   \
  "causal_conv1d_update_out(Tensor x, Tensor conv_state, Tensor weight, Tensor? bias, "      \
  "Tensor? conv_state_indices, Tensor? cache_seqlens, Tensor out, str activation=\"none\", " \
  "int pad_slot_id=-1) -> ()"
enum {
  DK_UPDATE_OUT = 6, /* x's shape, dtype, device and layout; apart from every other argument */
  DK_UPDATE_OUT_N_TENSORS = 7
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DELTAKERN_OP_SCHEMAS_H */
