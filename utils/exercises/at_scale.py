"""Exercises of chapter 6: the online-softmax update, the sliding-window mask, one decoding step with a
KV cache. See :mod:`utils.exercises.definition` for the contract. Masks: True = may attend.
"""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake

__all__ = [
    "CACHE",
    "EXERCISES",
    "ONLINE",
    "WINDOW",
    "attend_with_cache_reference",
    "online_softmax_update_reference",
    "sliding_window_mask_reference",
]


# --------------------------------------------------------------------------------------------------
# ch6.online_softmax_update
# --------------------------------------------------------------------------------------------------


def online_softmax_update_reference(running_max: torch.Tensor, running_sum: torch.Tensor, block: torch.Tensor):
    new_max = torch.maximum(running_max, block.amax(dim=-1))  # (...,)
    shift = torch.where(new_max == float("-inf"), 0.0, new_max)
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)
    return new_max, new_sum


def _online_no_rescale(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum + torch.exp(block - new_max[..., None]).sum(-1)


def _online_wrong_sign(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    rescale = torch.exp(new_max - running_max).nan_to_num(posinf=0.0)
    return new_max, running_sum * rescale + torch.exp(block - new_max[..., None]).sum(-1)


def _online_block_max(running_max, running_sum, block):
    block_max = block.amax(dim=-1)
    return block_max, running_sum * torch.exp(running_max - block_max) + torch.exp(block - block_max[..., None]).sum(-1)


def _online_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def state(shape, scale=3.0):
        m = torch.randn(shape, generator=gen) * scale
        s = torch.rand(shape, generator=gen) * 5 + 1.0  # >= 1: it contains exp(max - max) = 1
        return m, s

    cases = []
    m, s = state((rng.randint(2, 5),))
    # a block whose values sit well above the running max: the max must rise and the old sum shrink
    cases.append({"running_max": m, "running_sum": s, "block": torch.randn(m.shape[0], rng.randint(2, 6), generator=gen) * 2 + 6})
    m, s = state((2, 3))
    cases.append({"running_max": m, "running_sum": s, "block": torch.randn(2, 3, rng.randint(1, 4), generator=gen) - 6})
    m, s = state((rng.randint(3, 6),))
    cases.append({"running_max": m, "running_sum": s, "block": torch.randn(m.shape[0], 7, generator=gen) * 3})
    # the first block: running max -inf, sum 0
    B = rng.randint(2, 5)
    cases.append({"running_max": torch.full((3,), float("-inf")), "running_sum": torch.zeros(3),
                  "block": torch.randn(3, B, generator=gen)})
    # one row, a block of one score
    cases.append({"running_max": torch.tensor([0.5]), "running_sum": torch.tensor([2.0]),
                  "block": torch.tensor([[3.0]])})
    return cases


ONLINE = Exercise(
    id="ch6.online_softmax_update",
    reference=online_softmax_update_reference,
    make_cases=_online_cases,
    points=2,
    mistakes=(
        Mistake("no_rescale", _online_no_rescale,
                "when the max rises from m to m', the old sum was measured relative to m: multiply it by "
                "exp(m - m') before adding the new block's terms"),
        Mistake("wrong_sign", _online_wrong_sign,
                "your rescale factor is upside down: it is exp(old_max - new_max), which is <= 1, not "
                "exp(new_max - old_max)"),
        Mistake("block_max", _online_block_max,
                "the new running max is the larger of the old max and the block's max "
                "(torch.maximum(running_max, block.amax(-1))), not the block's max alone"),
    ),
    forbidden=("torch.softmax", "torch.nn.functional.softmax", "torch.logsumexp", "utils.tiled_attention.online_softmax_update"),
    hint="new_max = max(old_max, block max); new_sum = old_sum * exp(old_max - new_max) + sum(exp(block - new_max)); "
         "treat new_max = -inf as 0 in the shifts",
)


# --------------------------------------------------------------------------------------------------
# ch6.sliding_window_mask
# --------------------------------------------------------------------------------------------------


def sliding_window_mask_reference(L: int, window: int) -> torch.Tensor:
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (L, L)


def _window_strict(L, window):
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() < window


def _window_one_sided(L, window):
    positions = torch.arange(L)
    offset = positions[:, None] - positions[None, :]
    return (offset >= 0) & (offset <= window)


def _window_inverted(L, window):
    return ~sliding_window_mask_reference(L, window)


def _window_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    return [
        {"L": rng.randint(6, 12), "window": rng.randint(1, 3)},
        {"L": rng.randint(3, 5), "window": 0},  # each query sees only itself
        {"L": 1, "window": rng.randint(1, 3)},
        {"L": rng.randint(4, 6), "window": 10},  # a window wider than the sequence: everything
        {"L": rng.randint(13, 20), "window": rng.randint(2, 5)},
    ]


WINDOW = Exercise(
    id="ch6.sliding_window_mask",
    reference=sliding_window_mask_reference,
    make_cases=_window_cases,
    points=1,
    mistakes=(
        Mistake("strict", _window_strict,
                "a key exactly `window` positions away is inside the window: use |i - j| <= window, not <"),
        Mistake("one_sided", _window_one_sided,
                "your band only looks back (a causal window); Longformer's window is symmetric: keys on both "
                "sides, |i - j| <= window"),
        Mistake("inverted", _window_inverted,
                "your mask is True outside the window; here True means *may attend*"),
    ),
    hint="positions = torch.arange(L); (positions[:, None] - positions[None, :]).abs() <= window",
)


# --------------------------------------------------------------------------------------------------
# ch6.attend_with_cache
# --------------------------------------------------------------------------------------------------


def attend_with_cache_reference(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)  # (N, H, T + 1, D)
    v_all = torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)  # (N, H, 1, T + 1)
    return weights @ v_all, k_all, v_all


def _cache_only_new(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    v_all = torch.cat([v_cache, v_new], dim=-2)
    weights = torch.softmax(q_new @ k_new.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return weights @ v_new, k_all, v_all


def _cache_prepend(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_new, k_cache], dim=-2)
    v_all = torch.cat([v_new, v_cache], dim=-2)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return weights @ v_all, k_all, v_all


def _cache_not_updated(q_new, k_new, v_new, k_cache, v_cache):
    output, _, _ = attend_with_cache_reference(q_new, k_new, v_new, k_cache, v_cache)
    return output, k_cache, v_cache


def _cache_no_scale(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    v_all = torch.cat([v_cache, v_new], dim=-2)
    return torch.softmax(q_new @ k_all.transpose(-2, -1), dim=-1) @ v_all, k_all, v_all


def _cache_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def case(N, H, T, D):
        return {"q_new": torch.randn(N, H, 1, D, generator=gen), "k_new": torch.randn(N, H, 1, D, generator=gen),
                "v_new": torch.randn(N, H, 1, D, generator=gen), "k_cache": torch.randn(N, H, T, D, generator=gen),
                "v_cache": torch.randn(N, H, T, D, generator=gen)}

    D = rng.choice([16, 32])
    return [
        case(rng.randint(2, 3), rng.randint(2, 4), rng.randint(3, 9), D),
        case(1, 1, 1, rng.randint(4, 8)),  # one cached token, batch 1, one head
        case(2, 2, rng.randint(10, 20), 8),
        case(1, rng.randint(2, 4), rng.randint(2, 5), D),
    ]


CACHE = Exercise(
    id="ch6.attend_with_cache",
    reference=attend_with_cache_reference,
    make_cases=_cache_cases,
    points=3,
    mistakes=(
        Mistake("only_new", _cache_only_new,
                "your new query attends only to the new key, so its weight is always 1: attend to the whole "
                "cache plus the new key (torch.cat([k_cache, k_new], dim=-2))"),
        Mistake("prepend", _cache_prepend,
                "your caches are in the wrong order: the new token is the latest one, so append it at the end "
                "(torch.cat([k_cache, k_new], dim=-2)), not at the front"),
        Mistake("not_updated", _cache_not_updated,
                "return the *updated* caches (T + 1 positions), or the next step will forget this token"),
        Mistake("no_scale", _cache_no_scale,
                "your weights are too peaked: divide the scores by sqrt(D), D = q_new.shape[-1]"),
    ),
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention",
               "utils.at_scale.attend_with_cache"),
    hint="k_all = torch.cat([k_cache, k_new], dim=-2) (same for v); weights = softmax(q_new @ k_all^T / sqrt(D)); "
         "return weights @ v_all, k_all, v_all",
)

EXERCISES: tuple[Exercise, ...] = (ONLINE, WINDOW, CACHE)  # notebook order
