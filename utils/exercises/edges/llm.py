"""Chapter 7's cases, public and hidden, and their parts: RMSNorm, rotate-half RoPE, grouped-query attention,
the attention-sink window mask.

The public cases are chosen so that every listed slip shows on one of them: a non-zero mean (LayerNorm), an
eps that matters (eps = 0.1, or |x| ~ 1e-3, or a row of zeros), a random gain; positions that are not
0..L-1 and a base that is not 10000, D wide enough for the frequencies to differ; H_kv >= 2 key/value heads
shared by G >= 2 query heads (a tiled repeat differs from a grouped one only there), D != Dv, causal cases
with L == S only (top-left and bottom-right alignment agree); windows shorter than the sequence with sinks
before, inside and beyond them. Every exercise has a float64 case: the dtype is kept.
"""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part

# --------------------------------------------------------------------------------------------------
# ch7.rms_norm
# --------------------------------------------------------------------------------------------------


def _rms_case(gen, shape, *, eps=1e-6, scale=1.0, shift=0.0, dtype=torch.float32, zero_row=False) -> Case:
    x = (torch.randn(*shape, generator=gen) * scale + shift).to(dtype)
    if zero_row:
        x.view(-1, shape[-1])[0] = 0.0  # a vector of zeros: its RMS is 0, only eps keeps the division finite
    weight = (1 + torch.randn(shape[-1], generator=gen) / 2).to(dtype)  # a learned gain, not all ones
    return {"x": x, "weight": weight, "eps": eps}


def rms_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    E = rng.choice([6, 8, 10])
    return [
        _rms_case(gen, (2, rng.randint(3, 5), E), shift=0.5),  # a non-zero mean: LayerNorm differs
        _rms_case(gen, (E,), eps=0.1),  # one vector; an eps that shows
        _rms_case(gen, (3, 4, rng.choice([4, 6])), eps=1e-5, scale=1e-3),  # tiny x: eps is most of the mean square
        _rms_case(gen, (rng.randint(3, 5), 16), dtype=torch.float64, shift=-0.25),  # the dtype is kept
        _rms_case(gen, (2, 3, 5), zero_row=True, shift=1.0),  # a row of zeros must give zeros
        _rms_case(gen, (1, 2, 4, E), eps=1e-2),  # 4-D: heads too
    ]


def rms_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """Float16 (Llama computes the mean square in float32 and casts back: within float16's tolerance either
    way), one feature, and large values."""
    return [_rms_case(gen, (2, 3, 8), dtype=torch.float16, shift=0.5), _rms_case(gen, (4, 1), eps=1e-3),
            _rms_case(gen, (2, rng.randint(2, 6), 12), scale=50.0, shift=10.0)]


# --------------------------------------------------------------------------------------------------
# ch7.rotate_half_rope
# --------------------------------------------------------------------------------------------------


def _rope_case(gen, shape, positions, base=10000.0, dtype=torch.float32) -> Case:
    return {"x": torch.randn(*shape, generator=gen, dtype=dtype), "positions": torch.tensor(positions),
            "base": base}


def rope_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    start = rng.randint(3, 9)  # decoding after a cache of `start` tokens
    return [
        _rope_case(gen, (1, 2, 5, 8), list(range(start, start + 5))),
        _rope_case(gen, (2, 3, 4, 16), [0, 1, 2, 3], base=100000.0),  # SmolLM2's base
        _rope_case(gen, (6, 8), sorted(rng.sample(range(1, 40), 6))),  # 2-D x; positions with gaps
        _rope_case(gen, (1, 1, 1, 2), [rng.randint(2, 9)]),  # one pair, one position
        _rope_case(gen, (2, 2, 6, 8), [0, 1, 2, 3, 4, 5], base=500.0, dtype=torch.float64),  # the dtype is kept
        _rope_case(gen, (3, 7, 32), [2 * p for p in range(7)]),  # 3-D x, D = 32: many frequencies
    ]


def rope_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """Float16, a long position, one query of a batch of heads (decoding), D = 64 at base 100000."""
    return [_rope_case(gen, (2, 3, 4, 8), [5, 6, 7, 8], dtype=torch.float16),
            _rope_case(gen, (2, 9, 1, 64), [rng.randint(100, 200)], base=100000.0),
            _rope_case(gen, (4, 6), [1, 3, 5, 7], base=float(rng.choice([50, 1000])))]


ROPE_PARTS = (Part("float16", "0.5", lambda case: case["x"].dtype == torch.float16), Part("all other cases", "1.5"))


# --------------------------------------------------------------------------------------------------
# ch7.grouped_query_attention
# --------------------------------------------------------------------------------------------------


def _gqa_case(gen, N, H, H_kv, L, S, D, Dv, is_causal, dtype=torch.float32) -> Case:
    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)
    return {"query": randn(N, H, L, D), "key": randn(N, H_kv, S, D), "value": randn(N, H_kv, S, Dv),
            "is_causal": is_causal}


def gqa_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    L = rng.randint(4, 6)
    return [
        _gqa_case(gen, 2, 6, 2, L, L, 8, 8, True),  # G = 3 query heads per K/V head, causal
        _gqa_case(gen, 1, 4, 1, 3, rng.randint(5, 8), 4, 6, False),  # MQA; L != S; D != Dv
        _gqa_case(gen, 2, 4, 4, 4, 4, 8, 8, True),  # MHA: G = 1
        _gqa_case(gen, 1, 6, 3, 4, 6, 16, 4, False),  # G = 2, L != S, D != Dv
        _gqa_case(gen, 2, 4, 2, 3, 3, 4, 4, True, dtype=torch.float64),  # the dtype is kept
        _gqa_case(gen, 3, 8, 2, 1, rng.randint(4, 7), 8, 8, False),  # one new query (decoding)
    ]


def gqa_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """SmolLM2's 9 query heads on 3 K/V heads, long causal sequence; float16; a batch of one with many groups."""
    return [_gqa_case(gen, 1, 9, 3, 12, 12, 16, 16, True), _gqa_case(gen, 2, 4, 2, 5, 5, 8, 8, True, torch.float16),
            _gqa_case(gen, 1, 12, 4, 2, rng.randint(3, 9), 4, 3, False)]


GQA_PARTS = (Part("causal", 1, lambda case: bool(case["is_causal"])), Part("not causal", 1))


# --------------------------------------------------------------------------------------------------
# ch7.sink_window_mask
# --------------------------------------------------------------------------------------------------


def sink_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen  # three ints
    return [
        {"L": rng.randint(11, 13), "window": 3, "sinks": 2},  # sinks before a window shorter than the sequence
        {"L": 8, "window": 4, "sinks": 1},
        {"L": rng.randint(4, 6), "window": 10, "sinks": 2},  # a window wider than the sequence: causal
        {"L": 10, "window": 2, "sinks": 0},  # no sinks: chapter 6's causal window
        {"L": 5, "window": 1, "sinks": 3},  # more sinks than the window holds
        {"L": 2, "window": 1, "sinks": 3},  # more sinks than positions: every key a sink (none in the future)
        {"L": rng.randint(14, 18), "window": 5, "sinks": 4},  # StreamingLLM's four sinks
    ]


def sink_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    L = rng.randint(20, 30)
    return [{"L": L, "window": rng.randint(2, 6), "sinks": rng.randint(1, 4)}, {"L": L, "window": 1, "sinks": 0},
            {"L": 6, "window": 2, "sinks": 8}]
