"""Chapter 3's hand-built heads, and how alike heads' attention maps are.

* :func:`apple_example`: a tiny hand-built model in which three heads each find one relation of "apple".
* :func:`head_similarity`: how alike the heads' attention maps are (chapter 5 uses it on a trained model).

The figures that draw them are in :mod:`utils.plotting.multihead`.
Shapes: N batch, H heads, L target length, S source length, E model dimension, D = E // H.
"""

from __future__ import annotations

import torch

from utils.attention import MultiHeadAttention

__all__ = ["APPLE_TOKENS", "apple_example", "head_similarity"]

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
