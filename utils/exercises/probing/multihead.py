"""Chapter 3's probes: where each number goes in the head split and merge, and which step of multi-head
attention differs.

* ``split_heads`` / ``merge_heads``: inputs whose entries encode their own index (``x[n, l, e] = 100 n +
  10 l + e``), so the output says where each number came from: the first entry out of place, and a
  permutation of whole heads.
* ``multi_head_attention``: ablation. One head with every projection the identity leaves only the
  attention itself; then one projection at a time is made random (w_q, w_k, w_v, w_o); then two heads with
  identity projections (the split, the per-head scale and the merge); then a mask. The first step that
  differs is named, with what matched before it. And permuting the tokens (no mask) must permute the
  output's rows the same way.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import itertools
import math

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing import contrasts
from utils.exercises.probing.kit import max_error, plus_input, probe_output, reference_output, same
from utils.i18n.messages import tr

# --------------------------------------------------------------------------------------------------
# split_heads, merge_heads: index-coded inputs
# --------------------------------------------------------------------------------------------------

_N, _L, _H, _D = 2, 3, 2, 3  # D != H, so a (D, H) split shows


def _split_inputs(gen: torch.Generator) -> list:
    n, t, e = torch.meshgrid(torch.arange(_N), torch.arange(_L), torch.arange(_H * _D), indexing="ij")
    return [{"x": (100 * n + 10 * t + e).float(), "num_heads": _H}]


def _head_order(got: torch.Tensor, expected: torch.Tensor, axis: int) -> list[int] | None:
    """The order of whole heads (along ``axis``, in blocks of D when ``axis`` is the feature axis) that turns
    ``expected`` into ``got``, or None when no permutation of heads does."""
    for order in itertools.permutations(range(_H)):
        if list(order) == list(range(_H)):
            continue
        if axis == -1:
            index = torch.tensor([h * _D + d for h in order for d in range(_D)])
        else:
            index = torch.tensor(order)
        if torch.equal(got, expected.index_select(axis, index)):
            return list(order)
    return None


def _split_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or torch.equal(got, expected):
        return None
    order = _head_order(got, expected, 1)
    if order is not None:
        return tr("your heads are all there but in another order: for x of shape (N, L, E) = (2, 3, 6) and "
                  "num_heads = 2, your heads 0, 1 hold the reference's heads {order}; head h owns the features "
                  "h·D … (h+1)·D - 1 of each token", order=order)
    for n, h, t, d in itertools.product(range(_N), range(_H), range(_L), range(_D)):
        value = float(got[n, h, t, d])
        if value == float(expected[n, h, t, d]):
            continue
        if value != int(value) or not 0 <= value < 100 * _N:
            return tr("your output holds numbers that are not entries of x (for x[n, t, e] = 100·n + 10·t + e, "
                      "out[{n}, {h}, {t}, {d}] is {value:.4g}): split_heads only moves entries, it computes "
                      "nothing", n=n, h=h, t=t, d=d, value=value)
        v = int(value)
        return tr("for x of shape (N, L, E) = (2, 3, 6) and num_heads = 2 (D = 3), your out[{n}, {h}, {t}, {d}] "
                  "holds x[{n2}, {l2}, {e2}]; it must hold x[{n}, {t}, {e}]: head h, token t, feature d is input "
                  "feature h·D + d of the same token", n=n, h=h, t=t, d=d, n2=v // 100, l2=v % 100 // 10,
                  e2=v % 10, e=h * _D + d)
    return None


def _merge_inputs(gen: torch.Generator) -> list:
    n, h, t, d = torch.meshgrid(torch.arange(_N), torch.arange(_H), torch.arange(_L), torch.arange(_D),
                                indexing="ij")
    return [{"x": (1000 * n + 100 * h + 10 * t + d).float()}]


def _merge_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or torch.equal(got, expected):
        return None
    order = _head_order(got, expected, -1)
    if order is not None:
        return tr("your heads are all there but side by side in another order: for x of shape (N, H, L, D) = "
                  "(2, 2, 3, 3), your blocks of D features hold heads {order}; head 0's D features come first, "
                  "then head 1's", order=order)
    for n, t, e in itertools.product(range(_N), range(_L), range(_H * _D)):
        value = float(got[n, t, e])
        if value == float(expected[n, t, e]):
            continue
        if value != int(value) or not 0 <= value < 1000 * _N:
            return tr("your output holds numbers that are not entries of x (for x[n, h, t, d] = 1000·n + 100·h + "
                      "10·t + d, out[{n}, {t}, {e}] is {value:.4g}): merge_heads only moves entries, it computes "
                      "nothing", n=n, t=t, e=e, value=value)
        v = int(value)
        return tr("for x of shape (N, H, L, D) = (2, 2, 3, 3), your out[{n}, {t}, {e}] holds x[{n2}, {h2}, {l2}, "
                  "{d2}]; it must hold x[{n}, {h}, {t}, {d}]: feature e of token t is feature e % D of head e // D, "
                  "same token", n=n, t=t, e=e, n2=v // 1000, h2=v % 1000 // 100, l2=v % 100 // 10, d2=v % 10,
                  h=e // _D, d=e % _D)
    return None


SPLIT_PROBES = (Probe("where_entries_go", _split_inputs, _split_explain), contrasts.SPLIT_HEADS_CONTRAST)
MERGE_PROBES = (Probe("where_entries_go", _merge_inputs, _merge_explain), contrasts.MERGE_HEADS_CONTRAST)


# --------------------------------------------------------------------------------------------------
# multi_head_attention: ablation
# --------------------------------------------------------------------------------------------------

_E = 6
_WEIGHTS = ("w_q", "w_k", "w_v", "w_o")


def _ablation_inputs(gen: torch.Generator) -> list:
    x = torch.randn(2, 4, _E, generator=gen)
    eye = torch.eye(_E)
    random = {name: torch.randn(_E, _E, generator=gen) / _E ** 0.5 for name in _WEIGHTS}
    identity = dict.fromkeys(_WEIGHTS, eye)
    inputs = [{"x": x, **identity, "num_heads": 1, "mask": None}]  # 0: the attention alone
    for name in _WEIGHTS:  # 1-4: one projection at a time
        inputs.append({"x": x, **identity, name: random[name], "num_heads": 1, "mask": None})
    inputs.append({"x": x, **identity, "num_heads": 2, "mask": None})  # 5: split, per-head scale, merge
    inputs.append({"x": x, **random, "num_heads": 2, "mask": None})  # 6: everything at once
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    mask[0] = False  # query 0 has no allowed key: a zero row
    inputs.append({"x": x, **random, "num_heads": 2, "mask": mask})  # 7: with a mask
    return inputs


def _attention_with_scale(x: torch.Tensor, num_heads: int, scale: float) -> torch.Tensor:
    """Multi-head self-attention with identity weights and the scores multiplied by ``scale``."""
    N, L, E = x.shape
    heads = x.double().view(N, L, num_heads, E // num_heads).transpose(1, 2)
    weights = torch.softmax(scale * heads @ heads.transpose(-2, -1), dim=-1)
    return (weights @ heads).transpose(1, 2).reshape(N, L, E)


def _fitted_scale(x: torch.Tensor, num_heads: int, got: torch.Tensor) -> float | None:
    """The factor ``c`` such that ``got`` is identity-weight attention with scores times ``c``, if one is."""
    def error(log_scale: float) -> float:
        return float((_attention_with_scale(x, num_heads, math.exp(log_scale)) - got.double()).abs().max())

    grid = [math.log(1e-3) + i * math.log(1e6) / 600 for i in range(601)]
    low = min(grid, key=error) - math.log(1e6) / 600
    high = low + 2 * math.log(1e6) / 600
    for _ in range(60):  # ternary search in the best grid cell's neighbourhood
        a, b = low + (high - low) / 3, high - (high - low) / 3
        low, high = (low, b) if error(a) < error(b) else (a, high)
    return math.exp(low) if error(low) < 1e-4 else None


def _scale_message(x: torch.Tensor, num_heads: int, got: torch.Tensor) -> str | None:
    scale = _fitted_scale(x, num_heads, got)
    if scale is None:
        return None
    D = _E // num_heads
    return tr("with every weight the identity and num_heads = {H}, your output is attention with the scores "
              "multiplied by {scale:.4g} (1/{inverse:.4g}); the scale is 1/sqrt(D) = {expected:.4g}, with D = E // "
              "num_heads = {D} the features of one head", H=num_heads, scale=scale, inverse=1 / scale,
              expected=1 / math.sqrt(D), D=D)


def _ablation_explain(reference, inputs, outcomes) -> str | None:
    got = [probe_output(outcomes, i) for i in range(len(inputs))]
    expected = [reference_output(reference, case) for case in inputs]
    ok = [same(g, e, atol=1e-4) for g, e in zip(got, expected)]
    if all(ok) or any(g is None or g.shape != e.shape for g, e in zip(got, expected)):
        return None
    if not ok[0]:
        causal = {**inputs[0], "mask": torch.ones(4, 4, dtype=torch.bool).tril()}
        if same(got[0], reference_output(reference, causal), atol=1e-4):
            return tr("with no mask your output equals the reference's with a causal mask: this function attends "
                      "to every key unless `mask` says otherwise; apply no mask of your own")
        found = _scale_message(inputs[0]["x"], 1, got[0])
        if found:
            return found
        if plus_input(got[0], expected[0], inputs[0]) == "x":
            return tr("your output is the reference's plus x: a residual connection. It belongs to the encoder "
                      "layer (chapter 5), around this function; multi-head attention returns merged @ w_o alone")
        return tr("with one head and every weight the identity (w_q = w_k = w_v = w_o = I), multi-head attention "
                  "is plain attention, softmax(x xᵀ / sqrt(E)) x; yours differs there (max abs error {error:.3g}): "
                  "look at the scores, the scale, the softmax over the keys and weights @ v",
                  error=max_error(got[0], expected[0]))
    wrong = [name for name, good in zip(_WEIGHTS, ok[1:5]) if not good]
    if wrong:
        name = wrong[0]
        case = inputs[1 + _WEIGHTS.index(name)]
        transposed = reference_output(reference, {**case, name: case[name].T})
        if same(got[1 + _WEIGHTS.index(name)], transposed, atol=1e-4):
            return tr("your attention with one head matches when every weight is the identity; with only {name} "
                      "random your output equals the reference's with {name} transposed: use x @ {name} (the "
                      "weights here are (in, out)), not x @ {name}.T", name=name)
        return tr("your attention with one head matches when every weight is the identity; with only {name} "
                  "random it differs (the projections that differ: {names}): look at how you use {name}, "
                  "x @ {name} for the projections and merged @ w_o at the end", name=name, names=", ".join(wrong))
    if not ok[5]:
        found = _scale_message(inputs[5]["x"], 2, got[5])
        if found:
            return found
        one_head = reference_output(reference, {**inputs[5], "num_heads": 1})
        if same(got[5], one_head, atol=1e-4):
            return tr("your attention and all four projections match with one head; with num_heads = 2 your "
                      "output equals one head over all E features: split into num_heads heads of D = E // "
                      "num_heads features, and scale each head's scores by 1/sqrt(D)")
        return tr("your attention and all four projections match with one head; with num_heads = 2 and identity "
                  "weights your output differs (max abs error {error:.3g}): the split into heads, the scale "
                  "1/sqrt(D) with D = E // num_heads, or the merge back to (N, L, E) is wrong",
                  error=max_error(got[5], expected[5]))
    if not ok[6]:
        return tr("each step matches on its own (the attention, each projection, two heads with identity weights); "
                  "with all four weights random and two heads at once your output differs: the projections must "
                  "be applied before the split, and w_o after the merge")
    if not ok[7]:
        differs = (got[7].double() - expected[7].double()).abs().nan_to_num(nan=float("inf")).amax((0, 2)) > 1e-4
        if differs[0] and not differs[1:].any():
            return tr("without a mask your output matches; with a mask it differs only on the query row whose keys "
                      "are all blocked: that row must be zero (set such rows of the weights to 0 after the "
                      "softmax)")
        return tr("without a mask your output matches; with a causal mask it differs on rows that have allowed "
                  "keys: fill the scores with float('-inf') where the mask is False (True = may attend), before "
                  "the softmax")
    return None


def _permutation_inputs(gen: torch.Generator) -> list:
    x = torch.randn(1, 5, _E, generator=gen)
    weights = {name: torch.randn(_E, _E, generator=gen) / _E ** 0.5 for name in _WEIGHTS}
    order = torch.tensor([3, 0, 4, 1, 2])
    return [{"x": x, **weights, "num_heads": 2, "mask": None},
            {"x": x[:, order], **weights, "num_heads": 2, "mask": None}]


def _permutation_explain(reference, inputs, outcomes) -> str | None:
    first, second = probe_output(outcomes, 0), probe_output(outcomes, 1)
    if first is None or second is None or first.shape != (1, 5, _E) or second.shape != first.shape:
        return None
    if same(second, first[:, torch.tensor([3, 0, 4, 1, 2])], atol=1e-4):
        return None
    return tr("without a mask, permuting the tokens of x should permute the rows of your output the same way, "
              "and nothing else; yours changes otherwise, so something mixes tokens: a reshape straight across "
              "the token and head axes, or a softmax or sum over the wrong axis")


MHA_PROBES = (
    Probe("ablation", _ablation_inputs, _ablation_explain),
    Probe("token_permutation", _permutation_inputs, _permutation_explain),
    contrasts.MULTI_HEAD_CONTRAST,
)
