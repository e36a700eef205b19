"""Contrast probes: the same exercise at sizes or settings that differ in one respect, so that a function
right on some and wrong on others shows where its fault lies (:func:`utils.exercises.probing.kit.contrast`).

The respects chosen are the ones a learner's code most often gets right only by accident: a batch of one
against a batch of three, a 2-D ``x`` against a 3-D or 4-D one, as many queries as keys against fewer, one
head against several, k > 0 against k < 0, a window inside the sequence against one wider than it.
Each ``make_inputs`` draws from the probe generator, so its inputs are the same on every run.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import torch

from utils.exercises.probing.kit import contrast


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def _project(gen: torch.Generator) -> list:
    E = 6
    weights = {"w_q": _randn(gen, E, 4) / E ** 0.5, "w_k": _randn(gen, E, 4) / E ** 0.5,
               "w_v": _randn(gen, E, 3) / E ** 0.5}
    return [{"x": _randn(gen, *lead, 5, E), **weights} for lead in ((), (1,), (3,), (2, 3))]


def _scores(gen: torch.Generator) -> list:
    shapes = (((), 4, 4), ((1,), 4, 4), ((3,), 4, 4), ((3,), 4, 6), ((2, 2), 3, 5))
    return [{"q": _randn(gen, *lead, L, 3), "k": _randn(gen, *lead, S, 3)} for lead, L, S in shapes]


def _sdpa(gen: torch.Generator) -> list:
    shapes = (((), 4, 4), ((1,), 4, 4), ((3,), 4, 4), ((3,), 4, 6), ((2, 2), 3, 5))
    return [{"q": _randn(gen, *lead, L, 3), "k": _randn(gen, *lead, S, 3), "v": _randn(gen, *lead, S, 2),
             "mask": None} for lead, L, S in shapes]


def _causal(gen: torch.Generator) -> list:
    return [{"size": size} for size in (1, 2, 3, 6)]


def _padding(gen: torch.Generator) -> list:
    return [{"lengths": torch.tensor(lengths), "max_len": max_len}
            for lengths, max_len in (([3], 3), ([3, 3], 3), ([2, 4, 1], 4), ([2, 0], 3), ([5, 2], 6))]


def _split(gen: torch.Generator) -> list:
    shapes = ((1, 4, 2), (3, 4, 2), (2, 4, 1), (2, 4, 3), (2, 4, 6), (2, 6, 2), (2, 6, 3))  # (N, L, H); L = E last
    return [{"x": _randn(gen, N, L, 6), "num_heads": H} for N, L, H in shapes]


def _merge(gen: torch.Generator) -> list:
    return [{"x": _randn(gen, N, H, 4, D)} for N, H, D in ((1, 2, 3), (3, 2, 3), (2, 1, 6), (2, 3, 2))]


def _mha(gen: torch.Generator) -> list:
    E = 6
    weights = {name: _randn(gen, E, E) / E ** 0.5 for name in ("w_q", "w_k", "w_v", "w_o")}
    return [{"x": _randn(gen, N, L, E), **weights, "num_heads": H, "mask": None}
            for N, L, H in ((1, 4, 2), (3, 4, 2), (2, 1, 2), (2, 4, 1), (2, 4, 3))]


def _add(gen: torch.Generator) -> list:
    pe = _randn(gen, 9, 4)
    return [{"x": _randn(gen, N, L, 4), "pe": pe[:max_len]} for N, L, max_len in
            ((1, 5, 9), (3, 5, 9), (3, 5, 5), (5, 5, 9), (2, 1, 9))]


def _shift(gen: torch.Generator) -> list:
    return [{"k": k, "d_model": 4} for k in (0, 1, 2, 3, -1, -2)]


def _sinusoidal(gen: torch.Generator) -> list:
    return [{"length": length, "d_model": d_model} for length, d_model in ((1, 2), (6, 2), (6, 4), (6, 8), (16, 16))]


def _feed_forward(gen: torch.Generator) -> list:
    E, F = 4, 6
    weights = {"w1": _randn(gen, E, F) / 2, "b1": _randn(gen, F) / 2, "w2": _randn(gen, F, E) / 2,
               "b2": _randn(gen, E) / 2}
    return [{"x": _randn(gen, *lead, E), **weights} for lead in ((), (3,), (1, 3), (2, 3), (2, 2, 3))]


def _online(gen: torch.Generator) -> list:
    def case(*rows: int, width: int = 4) -> dict:
        running_max = _randn(gen, *rows)
        return {"running_max": running_max, "running_sum": 1 + torch.rand(*rows, generator=gen),
                "block": _randn(gen, *rows, width)}

    return [case(3), case(1, 3), case(2, 3), case(2, 2, 3), case(3, width=1)]


def _block_grad(gen: torch.Generator) -> list:
    def case(*lead: int, L: int = 3, B: int = 4, Dv: int = 5) -> dict:
        weights = torch.softmax(_randn(gen, *lead, L, 2 * B), dim=-1)[..., :B]  # one block of a longer row
        return {"grad_out": _randn(gen, *lead, L, Dv), "out": _randn(gen, *lead, L, Dv), "weights": weights,
                "value": _randn(gen, *lead, B, Dv)}

    return [case(), case(1, 1), case(2, 3), case(2, 2, L=1), case(2, 2, B=1)]


def _window(gen: torch.Generator) -> list:
    return [{"L": L, "window": window} for L, window in ((8, 2), (8, 1), (8, 0), (4, 3), (3, 5), (1, 2))]


def _cache(gen: torch.Generator) -> list:
    def case(N: int, H: int, T: int, D: int = 4) -> dict:
        return {"q_new": _randn(gen, N, H, 1, D), "k_new": _randn(gen, N, H, 1, D), "v_new": _randn(gen, N, H, 1, D),
                "k_cache": _randn(gen, N, H, T, D), "v_cache": _randn(gen, N, H, T, D)}

    return [case(1, 1, 3), case(3, 1, 3), case(1, 3, 3), case(2, 2, 1), case(2, 2, 6)]


PROJECT_QKV_CONTRAST = contrast("shapes", _project)
ATTENTION_SCORES_CONTRAST = contrast("shapes", _scores)
SDPA_CONTRAST = contrast("shapes", _sdpa)
CAUSAL_MASK_CONTRAST = contrast("sizes", _causal)
PADDING_MASK_CONTRAST = contrast("sizes", _padding)
SPLIT_HEADS_CONTRAST = contrast("shapes", _split)
MERGE_HEADS_CONTRAST = contrast("shapes", _merge)
MULTI_HEAD_CONTRAST = contrast("shapes", _mha)
ADD_POSITIONAL_CONTRAST = contrast("shapes", _add)
RELATIVE_SHIFT_CONTRAST = contrast("shifts", _shift)
SINUSOIDAL_CONTRAST = contrast("sizes", _sinusoidal)
FEED_FORWARD_CONTRAST = contrast("shapes", _feed_forward)
ONLINE_SOFTMAX_CONTRAST = contrast("shapes", _online)
BLOCK_GRAD_CONTRAST = contrast("shapes", _block_grad)
WINDOW_CONTRAST = contrast("sizes", _window)
CACHE_CONTRAST = contrast("shapes", _cache)
