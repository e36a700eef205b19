"""The explorer state of chapter 3, "Multi-head attention": what its head explorer draws, computed by
pure functions (tested by pytest); :mod:`utils.widgets.multihead` wires them to controls and
:func:`utils.plotting.multihead.head_token_figure` draws them.

* :func:`head_count_options`: the numbers of heads H that divide E;
* :func:`head_explorer_state`: the apple sentence's per-head weights and one query token's row
  (:class:`HeadExplorerState`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from utils.heads import apple_example
from utils.i18n.messages import tr

__all__ = ["HeadExplorerState", "head_count_options", "head_explorer_state"]


def head_count_options(d_model: int) -> list[int]:
    """The numbers of heads H that divide ``d_model``: the only ones the explorer offers.

    >>> head_count_options(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [h for h in range(1, d_model + 1) if d_model % h == 0]


@dataclass(frozen=True)
class HeadExplorerState:
    """What the head explorer draws for one (H, head, query token)."""

    tokens: list[str]  # L
    weights: torch.Tensor  # (H, L, L)
    head: int  # 0-based, clipped into [0, H)
    token: int  # the query token, 0-based
    row: torch.Tensor  # (L,) weights[head, token]
    top: str | None  # the token it attends to most; None when the row is uniform (a tie has no argmax)
    head_dim: int  # D = 12 // H
    tied: tuple[str, ...] = ()  # every token that shares the largest weight (more than one: a tie)

    @property
    def preference(self) -> str:
        """One phrase for the chosen row: where it looks most, "uniform: no preference", or a tie."""
        if self.top is None:
            return tr("uniform: no preference")
        if len(self.tied) > 1:
            return tr("attends most, equally, to {keys}", keys=tr(" and ").join(f"'{t}'" for t in self.tied))
        return tr("attends most to '{key}'", key=self.top)


def head_explorer_state(num_heads: int = 3, head: int = 0, token: int = 5) -> HeadExplorerState:
    """What the explorer shows for the apple sentence: per-head weights and the chosen row.

    Args:
        num_heads: H, a divisor of 12.
        head: which head, 0-based; clipped into ``[0, H)``.
        token: which query token, 0-based.

    Returns:
        A :class:`HeadExplorerState`: ``tokens`` (L), ``weights`` (H, L, L), ``head`` (clipped),
        ``token``, ``row`` (L,), ``top`` (the token it attends to most, or None when the row is
        uniform) and ``head_dim`` D.

    >>> state = head_explorer_state(3, head=1, token=5)
    >>> state.tokens[state.token], state.top
    ('apple', 'red')
    >>> head_explorer_state(6, head=1, token=5).preference  # an idle head
    'uniform: no preference'
    """
    if num_heads not in head_count_options(12):
        raise ValueError(f"num_heads = {num_heads} must divide d_model = 12; pick one of {head_count_options(12)}")
    tokens, x, module = apple_example(num_heads)
    with torch.no_grad():
        _, weights = module(x)  # (1, H, L, L)
    weights = weights[0]  # (H, L, L)
    head = max(0, min(head, num_heads - 1))
    if not 0 <= token < len(tokens):
        raise ValueError(f"token must be in [0, {len(tokens)}), got {token}")
    row = weights[head, token]  # (L,)
    uniform = bool(row.max() - row.min() < 1e-6)
    tied = tuple(tokens[i] for i in range(len(tokens)) if row.max() - row[i] < 1e-6)
    return HeadExplorerState(tokens=tokens, weights=weights, head=head, token=token, row=row,
                             top=None if uniform else tied[0], head_dim=12 // num_heads,
                             tied=() if uniform else tied)
