"""x's layout by the core's one rule (``plugin::layout_of`` in plugin_sdk.hpp), from sizes and
element strides, for what the Python side must know before a call: the layout of an ``out`` it
allocates, and the signature it asks dispatch about. The core validates with the rule itself;
this mirror only picks allocations and cache keys, so a disagreement would surface as the core's
error naming the argument, never as a wrong result.
"""

from __future__ import annotations

TIME_CONTIGUOUS = "time_contiguous"
CHANNEL_LAST = "channel_last"


def layout_of(dim: int, tokens: int, channel_stride: int, time_stride: int) -> str | None:
    """T <= 1 is time-contiguous whatever the strides; a unit time stride is time-contiguous;
    a unit channel stride (or one channel) with a time stride of at least D is channel-last;
    anything else has no layout (None: the core rejects it)."""
    if tokens <= 1 or time_stride == 1:
        return TIME_CONTIGUOUS
    if (dim <= 1 or channel_stride == 1) and time_stride >= dim:
        return CHANNEL_LAST
    return None


def varlen_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """Varlen's x is (D, T)."""
    if len(shape) != 2:
        return None
    return layout_of(shape[0], shape[1], strides[0], strides[1])


def update_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """Update's x is (batch, D) (one token: time-contiguous) or (batch, D, Tq)."""
    if len(shape) == 2:
        return TIME_CONTIGUOUS
    if len(shape) != 3:
        return None
    return layout_of(shape[1], shape[2], strides[1], strides[2])
