"""Figures for chapter 3, "Multi-head attention", plus the two measures they draw.

* :func:`apple_example`: a tiny hand-built model in which three heads each find one relation of "apple".
* :func:`head_similarity`: how alike the heads' attention maps are (chapter 5 uses it on a trained model).
* Figures: :func:`head_split_figure`, :func:`head_maps_figure`, :func:`head_token_figure`,
  :func:`head_similarity_figure`, :func:`speed_ratio_figure`.

Shapes: N batch, H heads, L target length, S source length, E model dimension, D = E // H.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from utils.attention import MultiHeadAttention
from utils.plotting.common import CMAP, to_numpy

__all__ = [
    "APPLE_TOKENS",
    "apple_example",
    "head_similarity",
    "head_split_figure",
    "head_maps_figure",
    "head_token_figure",
    "head_similarity_figure",
    "speed_ratio_figure",
]

APPLE_TOKENS = ("the", "girl", "eats", "a", "red", "apple", ".")
_RELATIONS = (  # (head, token that asks, token that answers)
    (0, "eats", "apple"), (0, "apple", "eats"),  # head 1: what is eaten / what happens to it
    (1, "apple", "red"), (1, "red", "apple"),  # head 2: colour
    (2, "eats", "girl"), (2, "girl", "eats"),  # head 3: who does it
)


def apple_example(num_heads: int = 3, *, strength: float = 3.0) -> tuple[list[str], torch.Tensor, MultiHeadAttention]:
    """A hand-built sentence and attention module in which head h finds relation h of "apple".

    E = 12 features form three blocks of 4, one per relation (action, colour, agent). In each block the
    first 2 features say "what I am" (read by W_K) and the last 2 say "what I look for" (moved onto the
    first 2 by W_Q), so a token's query in block h matches only its partner's key in block h. W_V and
    W_O are the identity and there are no biases. With ``num_heads=3`` each head sees exactly one block;
    other values cut the *same* weights differently (see the chapter).

    Args:
        num_heads: H, a divisor of 12. Default: ``3``.
        strength: length of the query/key codes; larger means sharper attention. Default: ``3.0``.

    Returns:
        ``(tokens, x (1, L, E), module)`` with L = 7, E = 12.

    >>> tokens, x, mha = apple_example()
    >>> x.shape, mha.num_heads
    (torch.Size([1, 7, 12]), 3)
    """
    E, block = 12, 4
    tokens = list(APPLE_TOKENS)
    x = torch.zeros(1, len(tokens), E)  # (N, L, E)
    for relation, asker, answerer in _RELATIONS:
        lo = relation * block
        slot = _slot(relation, asker)
        x[0, tokens.index(asker), lo + 2 + slot] = strength  # what I look for
        x[0, tokens.index(answerer), lo + slot] = strength  # what I am
    module = MultiHeadAttention(E, num_heads, bias=False)
    w_q = torch.zeros(E, E)  # x @ W convention
    for lo in range(0, E, block):
        w_q[lo + 2, lo] = w_q[lo + 3, lo + 1] = 1.0  # move "look for" onto "what I am"
    w_k = torch.zeros(E, E)
    for lo in range(0, E, block):
        w_k[lo, lo] = w_k[lo + 1, lo + 1] = 1.0
    with torch.no_grad():
        module.q_proj.weight.copy_(w_q.T)  # nn.Linear stores W.T
        module.k_proj.weight.copy_(w_k.T)
        module.v_proj.weight.copy_(torch.eye(E))
        module.out_proj.weight.copy_(torch.eye(E))
    return tokens, x, module.eval()


def _slot(relation: int, asker: str) -> int:
    """Each relation uses two codes: slot 0 for its first direction, slot 1 for the reverse."""
    first = {0: "eats", 1: "apple", 2: "eats"}[relation]
    return 0 if asker == first else 1


def head_similarity(weights: torch.Tensor, *, metric: str = "js") -> torch.Tensor:
    """How alike the heads' attention maps are, averaged over the batch and the query rows.

    ``"js"``: ``1 - JS(p, q)``, the Jensen-Shannon divergence in bits between two heads' rows (in [0, 1];
    1 = identical distributions). ``"cosine"``: the cosine similarity of the rows. Rows whose weights
    are all zero (fully masked) are skipped.

    Args:
        weights: ``(N, H, L, S)`` attention weights, rows summing to 1 (or 0 when fully masked).
        metric: ``"js"`` or ``"cosine"``. Default: ``"js"``.

    Returns:
        ``(H, H)`` symmetric matrix with ones on the diagonal.

    >>> w = torch.rand(2, 3, 4, 5).softmax(-1)
    >>> sim = head_similarity(w)
    >>> sim.shape, torch.allclose(sim.diagonal(), torch.ones(3))
    (torch.Size([3, 3]), True)
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4:
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be (N, H, L, S), got {shape}")
    if metric not in ("js", "cosine"):
        raise ValueError(f"metric must be 'js' or 'cosine', got {metric!r}")
    w = weights.detach().double()
    live = (w.sum(-1) > 0).all(dim=1)  # (N, L): rows no head has fully masked
    p = w.unsqueeze(2)  # (N, H, 1, L, S)
    q = w.unsqueeze(1)  # (N, 1, H, L, S)
    if metric == "cosine":
        row = (p * q).sum(-1) / (p.norm(dim=-1) * q.norm(dim=-1)).clamp_min(1e-12)  # (N, H, H, L)
    else:
        m = (p + q) / 2

        def kl(a: torch.Tensor) -> torch.Tensor:
            return torch.where(a > 0, a * (a.clamp_min(1e-300).log() - m.clamp_min(1e-300).log()), 0.0).sum(-1)

        row = 1.0 - (kl(p) + kl(q)) / (2 * torch.log(torch.tensor(2.0, dtype=w.dtype)))  # (N, H, H, L)
    mask = live[:, None, None, :].to(row.dtype)  # (N, 1, 1, L)
    sim = (row * mask).sum(dim=(0, 3)) / mask.sum(dim=(0, 3)).clamp_min(1)  # (H, H)
    return sim.to(weights.dtype if weights.is_floating_point() else torch.float32)


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def head_split_figure(vector: torch.Tensor, num_heads: int, *, token: str = "token") -> Figure:
    """One token's E features as a strip, cut into H heads of D features each.

    Args:
        vector: ``(E,)`` the token's projected features.
        num_heads: H, a divisor of E.
        token: the token's text, for the title.

    >>> fig = head_split_figure(torch.arange(8.0), 4)
    >>> fig.axes[0].get_xlabel()
    'feature index e (0 .. E-1)'
    """
    values = to_numpy(vector).reshape(-1)
    E = values.shape[0]
    if num_heads < 1 or E % num_heads:
        raise ValueError(f"num_heads = {num_heads} must divide E = {E}")
    D = E // num_heads
    fig, ax = plt.subplots(figsize=(min(14.0, 1.5 + 0.45 * E), 2.2))
    image = ax.imshow(values[None, :], cmap=CMAP, aspect="auto")
    for h in range(1, num_heads):
        ax.axvline(h * D - 0.5, color="white", linewidth=3)
    for h in range(num_heads):
        ax.text(h * D + (D - 1) / 2, -0.62, f"head {h + 1}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(E))
    ax.set_yticks([0], [token])
    ax.set_xlabel("feature index e (0 .. E-1)")
    ax.set_ylabel("token")
    ax.set_ylim(0.5, -1.0)
    ax.set_title(f"'{token}': E = {E} features cut into H = {num_heads} contiguous blocks of D = {D}", pad=4)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    return fig


def head_maps_figure(weights: torch.Tensor, tokens: Sequence[str], *, title: str | None = None) -> Figure:
    """A row of per-head attention maps for one sentence, titled "Head 1", "Head 2", ...

    Args:
        weights: ``(H, L, S)`` for one sentence (take ``weights[0]`` of an ``(N, H, L, S)`` tensor).
        tokens: L labels (and S when square).
        title: the figure title. Default: says to compare the heads.

    >>> fig = head_maps_figure(torch.rand(2, 3, 3).softmax(-1), list("abc"))
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['Head 1', 'Head 2']
    """
    maps = torch.as_tensor(weights).detach()
    if maps.dim() != 3:
        raise ValueError(f"weights must be (H, L, S) for one sentence, got {tuple(maps.shape)}")
    H, L, S = maps.shape
    if len(tokens) != L:
        raise ValueError(f"tokens: got {len(tokens)} labels for L = {L} (weights {tuple(maps.shape)})")
    cols = min(H, 6)
    rows = -(-H // cols)
    size = 1.2 + 0.32 * L
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols + 1.0, size * rows + 0.6), squeeze=False)
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= H:
            ax.set_visible(False)
            continue
        image = ax.imshow(to_numpy(maps[h]), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"Head {h + 1}", fontsize=10)
        key_labels = list(tokens) if S == L else list(range(S))
        ax.set_xticks(range(S), key_labels, rotation=90, fontsize=8)
        ax.set_yticks(range(L), list(tokens), fontsize=8)
        ax.set_xlabel("key (S)", fontsize=8)
        if h % cols == 0:
            ax.set_ylabel("query (L)", fontsize=8)
    fig.suptitle(title or f"{H} heads, one sentence: each head attends in its own pattern")
    fig.tight_layout()
    fig.colorbar(image, ax=[ax for ax in axes.flat if ax.get_visible()], fraction=0.02, pad=0.02)
    return fig


def head_token_figure(weights: torch.Tensor, tokens: Sequence[str], head: int, token: int) -> Figure:
    """One head as a heatmap, and one query token's row of it as bars (the explorer's view).

    Args:
        weights: ``(H, L, L)`` for one sentence.
        tokens: L labels.
        head: which head, 0-based.
        token: which query token, 0-based.

    >>> fig = head_token_figure(torch.rand(2, 3, 3).softmax(-1), list("abc"), head=1, token=0)
    >>> fig.axes[1].get_ylabel()
    'weight'
    """
    maps = torch.as_tensor(weights).detach()
    if maps.dim() != 3:
        raise ValueError(f"weights must be (H, L, S), got {tuple(maps.shape)}")
    H, L, _ = maps.shape
    if not 0 <= head < H or not 0 <= token < L:
        raise ValueError(f"head must be in [0, {H}) and token in [0, {L}); got head={head}, token={token}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.8), gridspec_kw={"width_ratios": [1.1, 1]})
    image = left.imshow(to_numpy(maps[head]), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    left.set_xticks(range(L), list(tokens), rotation=45, ha="right")
    left.set_yticks(range(L), list(tokens))
    left.add_patch(plt.Rectangle((-0.5, token - 0.5), L, 1, fill=False, edgecolor="red", linewidth=2))
    left.set_xlabel("key (attended to)")
    left.set_ylabel("query (attending)")
    left.set_title(f"Head {head + 1} of {H}: all queries")
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04)
    row = to_numpy(maps[head, token])
    colours = plt.get_cmap(CMAP)(row)
    right.bar(range(L), row, color=colours, edgecolor="black", linewidth=0.5)
    right.set_xticks(range(L), list(tokens), rotation=45, ha="right")
    right.set_ylim(0, 1)
    right.set_xlabel("key (attended to)")
    right.set_ylabel("weight")
    top = int(row.argmax())
    right.set_title(f"'{tokens[token]}' looks mostly at '{tokens[top]}' ({row[top]:.2f})")
    fig.tight_layout()
    return fig


def head_similarity_figure(similarity: torch.Tensor, *, metric: str = "1 - JS divergence") -> Figure:
    """The ``(H, H)`` head-similarity matrix from :func:`head_similarity`, annotated.

    >>> fig = head_similarity_figure(torch.eye(3))
    >>> fig.axes[0].get_xlabel()
    'head'
    """
    sim = torch.as_tensor(similarity).detach()
    if sim.dim() != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"similarity must be (H, H), got {tuple(sim.shape)}")
    H = sim.shape[0]
    off = sim[~torch.eye(H, dtype=torch.bool)]
    mean_off = float(off.mean()) if off.numel() else float("nan")
    fig, ax = plt.subplots(figsize=(1.6 + 0.55 * H, 1.2 + 0.5 * H))
    image = ax.imshow(to_numpy(sim), cmap=CMAP, vmin=0.0, vmax=1.0)
    labels = [str(h + 1) for h in range(H)]
    ax.set_xticks(range(H), labels)
    ax.set_yticks(range(H), labels)
    ax.set_xlabel("head")
    ax.set_ylabel("head")
    if H <= 10:
        for i in range(H):
            for j in range(H):
                value = float(sim[i, j])
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if value > 0.5 else "white")
    ax.set_title(f"Head similarity ({metric}); mean off-diagonal {mean_off:.2f}\n(near 1 = redundant heads)")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def speed_ratio_figure(rows: Sequence[dict]) -> Figure:
    """Bar chart of time ratios against the PyTorch built-in (1.0 = as fast), with min-max spread.

    Args:
        rows: dicts with ``"name"``, ``"mode"``, ``"ratio"``, ``"ratio_min"``, ``"ratio_max"``, as
            produced by :func:`utils.benchmark.attention_benchmark`.

    >>> fig = speed_ratio_figure([{"name": "a", "mode": "forward", "ratio": 1.1, "ratio_min": 1.0, "ratio_max": 1.2}])
    >>> fig.axes[0].get_ylabel()
    'time / built-in time'
    """
    if not rows:
        raise ValueError("rows: nothing to plot")
    labels = [f"{r['name']}\n{r['mode']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    low = [r["ratio"] - r["ratio_min"] for r in rows]
    high = [r["ratio_max"] - r["ratio"] for r in rows]
    colours = plt.get_cmap(CMAP)([0.25 if r["ratio"] <= 1.0 else 0.75 for r in rows])
    fig, ax = plt.subplots(figsize=(1.5 + 1.3 * len(rows), 3.8))
    ax.bar(range(len(rows)), ratios, yerr=[low, high], capsize=4, color=colours, edgecolor="black")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel("time / built-in time")
    ax.set_xlabel("implementation and mode")
    ax.set_title("Below the dashed line = faster than the PyTorch built-in (median, min-max bars)")
    fig.tight_layout()
    return fig
