"""Chapter 2's probes: properties the chapter states, asked of the learner's function on chosen inputs.

* ``scaled_dot_product_attention``: the weights sum to 1 over the keys (not the queries); the scores are
  scaled by 1/sqrt(D) (the scale actually used is read back from the weights); blocked weights are exactly
  0 and True = may attend; a query whose keys are all blocked gets zero weights and a zero output (the
  chapter's rule); a causal output does not change when a future token does; the output is linear in v.
* ``causal_mask``: which region of the matrix differs (future keys, the diagonal, past keys), polarity.
* ``padding_mask``: which positions a sentence of a given length marks real, polarity.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import math

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing import contrasts
from utils.exercises.probing.kit import numbers, probe_output, reference_output, same
from utils.i18n.messages import tr

# --------------------------------------------------------------------------------------------------
# ch2.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------------


def _qkv(gen: torch.Generator, L: int, S: int, D: int, Dv: int, scale: float = 1.0) -> dict:
    return {"q": scale * torch.randn(1, L, D, generator=gen), "k": torch.randn(1, S, D, generator=gen),
            "v": torch.randn(1, S, Dv, generator=gen)}


_SUM_TOLERANCE = 5e-3  # a float16 softmax sums to 1 within a few units in the last place


def _rows_inputs(gen: torch.Generator) -> list:
    return [{**_qkv(gen, 3, 5, 4, 2), "mask": None}]  # L != S, no mask: rows and columns differ


def _rows_explain(reference, inputs, outcomes) -> str | None:
    weights = probe_output(outcomes, 0, 1)
    if weights is None or weights.shape != (1, 3, 5) or not weights.is_floating_point():
        return None
    weights = weights.double()
    if not bool(torch.isfinite(weights).all()):
        return None
    rows, columns = weights.sum(-1), weights.sum(-2)
    if torch.allclose(rows, torch.ones_like(rows), atol=_SUM_TOLERANCE):
        return None
    if torch.allclose(columns, torch.ones_like(columns), atol=_SUM_TOLERANCE):
        return tr("with no mask, your weights sum to 1 down each column, over the queries, not along each row: "
                  "each query's weights over the S keys must sum to 1, so take the softmax over the keys, dim=-1")
    if float(rows.max() - rows.min()) < _SUM_TOLERANCE:
        return tr("with no mask, each row of your weights sums to {total:.4g}, not 1: the weights are the softmax "
                  "of the scaled scores over the keys, and nothing may change them after the softmax",
                  total=float(rows[0, 0]))
    return tr("with no mask, the rows of your weights sum to {low:.3g} … {high:.3g}, not 1: the weights are the "
              "softmax of the scaled scores over the keys (dim=-1)", low=float(rows.min()), high=float(rows.max()))


_SCALE_D = 16


def _scale_inputs(gen: torch.Generator) -> list:
    # one query row over 7 keys, D = 16 (not L, S, Dv or 8): the scale the learner used is read back
    return [{**_qkv(gen, 2, 7, _SCALE_D, 3, scale=0.5), "mask": None}]


def _scale_explain(reference, inputs, outcomes) -> str | None:
    weights = probe_output(outcomes, 0, 1)
    case = inputs[0]
    if weights is None or weights.shape != (1, 2, 7) or not weights.is_floating_point():
        return None
    weights = weights.double()
    if not bool((weights > 0).all() and torch.isfinite(weights).all()):
        return None
    if not torch.allclose(weights.sum(-1), torch.ones(1, 2, dtype=torch.float64), atol=1e-4):
        return None  # not a softmax over the keys: another probe speaks
    scores = (case["q"] @ case["k"].transpose(-2, -1)).double()
    logs = weights.log()
    x = scores - scores.mean(-1, keepdim=True)
    y = logs - logs.mean(-1, keepdim=True)
    factor = float((x * y).sum() / (x * x).sum())  # weights = softmax(factor * scores), if they are one
    if float((y - factor * x).abs().max()) > 1e-3 * max(1.0, float(y.abs().max())):
        return None  # not the softmax of scaled scores at all
    expected = 1 / math.sqrt(_SCALE_D)
    if abs(factor - expected) <= 1e-3 * expected:
        return None
    sizes = {"L": 2, "S": 7, "Dv": 3}
    named = next((tr(": that is 1/sqrt({name}), not 1/sqrt(D)", name=name) for name, n in sizes.items()
                  if abs(factor * math.sqrt(n) - 1) < 1e-3), "")
    return tr("on a probe input with D = q.shape[-1] = {D}, L = 2 queries, S = 7 keys and Dv = 3, your weights are "
              "the softmax of q @ kᵀ times {factor:.4g} (1/{inverse:.4g}){named}; the chapter scales the scores by "
              "1/sqrt(D) = {expected:.4g}", factor=factor, inverse=1 / factor, expected=expected, D=_SCALE_D,
              named=named)


def _masked_inputs(gen: torch.Generator) -> list:
    mask = torch.tensor([[True, False, True, False, True], [False, True, True, False, False],
                         [True, True, False, True, False]])
    return [{**_qkv(gen, 3, 5, 4, 2), "mask": mask}, {**_qkv(gen, 3, 5, 4, 2), "mask": None}]


def _masked_explain(reference, inputs, outcomes) -> str | None:
    weights = probe_output(outcomes, 0, 1)
    mask = inputs[0]["mask"]
    if weights is None or weights.shape != (1, 3, 5) or not weights.is_floating_point():
        return None
    weights = weights.double()
    blocked = weights[0][~mask]
    if not bool(torch.isfinite(weights).all()):
        return None
    if bool((blocked == 0).all()):
        allowed = weights[0].sum(-1)
        if bool((allowed == 0).any()):
            return tr("a query that has allowed keys gets all-zero weights from you: only a query with *no* allowed "
                      "key gets zeros, the rows where ~mask.any(-1, keepdim=True) is True")
        if not torch.allclose(allowed, torch.ones_like(allowed), atol=_SUM_TOLERANCE):
            return tr("your blocked weights are 0, but each query's allowed weights sum to {low:.3g} … {high:.3g}, "
                      "not 1: mask the scores (fill with float('-inf')) before the softmax, so that the allowed "
                      "keys share all the weight", low=float(allowed.min()), high=float(allowed.max()))
        return None
    if bool((weights[0][mask] == 0).all()):
        return tr("your weights are 0 where the mask is True and positive where it is False: the mask works the "
                  "wrong way round. Here True = may attend, so fill the scores where the mask is False (~mask)")
    unmasked = reference_output(reference, {**inputs[0], "mask": None})[1]
    if same(weights, unmasked):
        return tr("your weights do not change when a mask is given: blocked keys (mask False) still get weight. "
                  "Fill their scores with float('-inf') before the softmax")
    return tr("your blocked keys (mask False) get weights up to {largest:.3g}, not exactly 0: fill their scores "
              "with float('-inf') before the softmax (a finite fill or a 0 score leaves them some weight)",
              largest=float(blocked.abs().max()))


def _fully_masked_inputs(gen: torch.Generator) -> list:
    mask = torch.tensor([[True, False, True, True], [False, False, False, False], [False, True, False, True]])
    return [{**_qkv(gen, 3, 4, 4, 3), "mask": mask}]


def _fully_masked_explain(reference, inputs, outcomes) -> str | None:
    output, weights = probe_output(outcomes, 0, 0), probe_output(outcomes, 0, 1)
    if output is None or weights is None or output.shape != (1, 3, 3) or weights.shape != (1, 3, 4):
        return None
    row_out, row_weights = output[0, 1].double(), weights[0, 1].double()
    if bool((row_out == 0).all() and (row_weights == 0).all()):
        return None
    if not bool(torch.isfinite(row_out).all() and torch.isfinite(row_weights).all()):
        return tr("a query whose keys are all blocked gets NaN in your output or weights (the softmax of a row of "
                  "-inf is 0/0); the chapter's rule is zero weights and a zero output for such a query: set those "
                  "rows of the weights to 0 after the softmax, then mix the values")
    if torch.allclose(row_weights, torch.full_like(row_weights, 0.25), atol=1e-4):
        return tr("a query whose keys are all blocked gets equal weights 1/S from you (the mean of v): a finite "
                  "fill such as -1e9 or finfo.min treats all its keys alike. The chapter's rule is zero weights and a "
                  "zero output: fill with float('-inf'), then set the rows with no allowed key to 0")
    if bool((row_weights == 0).all()):
        return tr("a query whose keys are all blocked gets zero weights from you, but not a zero output: compute the "
                  "output from those zeroed weights (weights @ v)")
    return tr("a query whose keys are all blocked gets weights {weights} from you; the chapter's rule is zero "
              "weights and a zero output for such a query", weights=numbers(row_weights))


def _causal_inputs(gen: torch.Generator) -> list:
    q, k, v = torch.randn(1, 4, 4, generator=gen), torch.randn(1, 4, 4, generator=gen), torch.randn(1, 4, 3,
                                                                                                   generator=gen)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    k2, v2 = k.clone(), v.clone()
    k2[:, -1], v2[:, -1] = 3 * torch.randn(4, generator=gen), 3 * torch.randn(3, generator=gen)
    return [{"q": q, "k": k, "v": v, "mask": mask}, {"q": q, "k": k2, "v": v2, "mask": mask}]


def _causal_explain(reference, inputs, outcomes) -> str | None:
    first, second = probe_output(outcomes, 0, 0), probe_output(outcomes, 1, 0)
    if first is None or second is None or first.shape != (1, 4, 3) or second.shape != first.shape:
        return None
    if same(first[:, :3], second[:, :3], atol=1e-6, rtol=1e-5):
        return None
    return tr("with a causal mask, changing only the last token's key and value changed your output for earlier "
              "queries: a blocked (future) key still leaks into the output. Blocked scores must be float('-inf') "
              "before the softmax, so their weights are exactly 0")


def _linear_inputs(gen: torch.Generator) -> list:
    q, k = torch.randn(1, 3, 4, generator=gen), torch.randn(1, 5, 4, generator=gen)
    v1, v2 = torch.randn(1, 5, 2, generator=gen), torch.randn(1, 5, 2, generator=gen)
    return [{"q": q, "k": k, "v": v, "mask": None} for v in (v1, v2, v1 + v2, 3 * v1)]


def _linear_explain(reference, inputs, outcomes) -> str | None:
    outputs = [probe_output(outcomes, i, 0) for i in range(4)]
    weights = [probe_output(outcomes, i, 1) for i in range(4)]
    if any(t is None or t.shape != (1, 3, 2) for t in outputs) or any(w is None for w in weights):
        return None
    if not all(same(w, weights[0], atol=1e-6, rtol=1e-5) for w in weights[1:]):
        return tr("your weights change when only v changes: the weights come from q and k alone (the scores "
                  "q @ kᵀ); v enters only at the end, weights @ v")
    o1, o2, o12, o3 = (t.double() for t in outputs)
    if not (same(o12, o1 + o2) and same(o3, 3 * o1)):
        return tr("your output is not linear in v (doubling v should double it, and adding two v's should add the "
                  "outputs): the output is weights @ v, with nothing added or applied after the product")
    return None


SDPA_PROBES = (
    Probe("weights_over_keys", _rows_inputs, _rows_explain),
    Probe("mask_zero_and_polarity", _masked_inputs, _masked_explain),
    Probe("scale_read_back", _scale_inputs, _scale_explain),
    Probe("fully_masked_row", _fully_masked_inputs, _fully_masked_explain),
    Probe("causal_future_token", _causal_inputs, _causal_explain),
    Probe("linear_in_v", _linear_inputs, _linear_explain),
    contrasts.SDPA_CONTRAST,
)


# --------------------------------------------------------------------------------------------------
# ch2.causal_mask and ch2.padding_mask
# --------------------------------------------------------------------------------------------------


def _causal_mask_inputs(gen: torch.Generator) -> list:
    return [{"size": 5}]


def _causal_mask_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or got.dtype != torch.bool or torch.equal(got, expected):
        return None
    if torch.equal(got, ~expected):
        return tr("your mask is True exactly where a key is blocked: here True = may attend, so query i's row is "
                  "True at keys 0..i. Invert it")
    wrong = got != expected
    regions = []
    if bool(wrong.triu(1).any()):
        regions.append(tr("above the diagonal (keys after the query, the future: they must be False)"))
    if bool(wrong.diagonal().any()):
        regions.append(tr("on the diagonal (each query's own key: it must be True)"))
    if bool(wrong.tril(-1).any()):
        regions.append(tr("below the diagonal (keys before the query: they must be True)"))
    return tr("for size = 5, your mask differs from the causal one {regions}", regions="; ".join(regions))


def _padding_inputs(gen: torch.Generator) -> list:
    return [{"lengths": torch.tensor([3, 6, 1, 0]), "max_len": 6}]


def _padding_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.dtype != torch.bool or got.numel() != expected.numel() or torch.equal(got, expected):
        return None
    if got.shape != expected.shape:
        return None  # the cases' diagnosis names the shape
    flat, want = got.reshape(4, 6), expected.reshape(4, 6)
    if torch.equal(flat, ~want):
        return tr("your mask is True at the padding: here True marks a real token (a key that may be attended "
                  "to). Invert it")
    for row, length in enumerate(inputs[0]["lengths"].tolist()):
        if not torch.equal(flat[row], want[row]):
            marked = [j for j in range(6) if bool(flat[row, j])]
            if length == 0:
                return tr("for lengths = [3, 6, 1, 0] and max_len = 6, your row for the empty sentence (length 0) "
                          "is True at positions {marked}; it has no real token, so its row is all False",
                          marked=marked)
            return tr("for lengths = [3, 6, 1, 0] and max_len = 6, your row for the sentence of length {length} "
                      "is True at positions {marked}; a sentence of length {length} has its real tokens at "
                      "positions 0 … {last} (j < length)", length=length, marked=marked, last=length - 1)
    return None


CAUSAL_PROBES = (Probe("mask_regions", _causal_mask_inputs, _causal_mask_explain), contrasts.CAUSAL_MASK_CONTRAST)
PADDING_PROBES = (Probe("real_positions", _padding_inputs, _padding_explain), contrasts.PADDING_MASK_CONTRAST)
