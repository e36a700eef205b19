"""Chapter 7's probes for grouped-query attention and the attention-sink mask.

* ``grouped_query_attention``: (1) zero queries and values that are constant per key/value head (1, 2): each
  output head shows which key/value head's values it read, compared with h // G, and, with values that are the
  identity in every head, whose keys its weights were taken with; (2) values that are the identity
  (Dv = S), so that the output *is* the attention weights: do they sum to 1 over the keys, do the query heads
  of one group differ, by what factor are the scores q·kᵀ scaled (read back by fitting the log-weights), and,
  with is_causal=True, which keys each query may see, whether its weights still sum to 1, and whether they are
  those of a 0/1 mask multiplied into the scores or of a mask that hides the past (and, with is_causal=False,
  whether they are the causal ones). (1) also runs five
  (H, H_kv), two with H = H_kv²: right on those two only is a group size of H_kv, not H // H_kv. (3) five
  (H, H_kv), among them H = H_kv and H_kv = 1: right on both only, raising elsewhere, is V left unrepeated;
  right on H = H_kv only is a group size (or repeat) that fails for any real group.
* ``sink_window_mask``: L = 12, window = 3, sinks = 2: a float mask that is 0 / very negative (additive), future
  keys, then for query 8 the sinks it keeps and the number of recent keys it sees (and whether it sees itself),
  each compared with what the arguments say; where that mask is right, L = 6, window = 1, sinks = 4 shows a sink
  seen before its time. Six sizes: right on some only, the first query whose keys differ.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import math

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing.kit import contrast, numbers, probe_output, reference_output, same
from utils.i18n.messages import tr


def _see_gqa() -> str:
    return tr("see 'Grouped-query attention'")


def _see_sinks() -> str:
    return tr("see 'Attention sinks and StreamingLLM'")

# --------------------------------------------------------------------------------------------------
# grouped_query_attention
# --------------------------------------------------------------------------------------------------

_H, _H_KV, _L, _D = 6, 2, 5, 4


_GROUPS = ((4, 2), (9, 3), (6, 2), (6, 3), (8, 2))  # (H, H_kv): H = H_kv² in the first two only


def _group_inputs(gen: torch.Generator) -> list:
    return [{"query": torch.randn(1, H, 2, 4, generator=gen), "key": torch.randn(1, H_kv, 2, 4, generator=gen),
             "value": torch.randn(1, H_kv, 2, 3, generator=gen), "is_causal": False} for H, H_kv in _GROUPS]


def _right_per_case(reference, inputs, outcomes) -> list[bool]:
    """For each probe case, whether the learner's output has the reference's shape and values (atol 1e-4)."""
    right = []
    for case, outcome in zip(inputs, outcomes):
        got, want = probe_output([outcome], 0), reference_output(reference, case)
        right.append(got is not None and got.shape == want.shape and same(got.double(), want.double(), atol=1e-4))
    return right

def _group_explain(reference, inputs, outcomes) -> str | None:
    """Right exactly where H = H_kv²: a group size of H_kv. ``inputs`` and ``outcomes``: those of _group_inputs."""
    if len(outcomes) < len(inputs):
        return None
    right = _right_per_case(reference, inputs, outcomes)
    if right != [H == H_kv ** 2 for H, H_kv in _GROUPS]:
        return None
    return tr("your function is right only where H = H_kv², on (H, H_kv) = {good}, and not on {bad}: the group size "
              "is G = H // H_kv, the number of query heads that share one key/value head, not H_kv ({where})",
              good=", ".join(map(str, _GROUPS[:2])), bad=", ".join(map(str, _GROUPS[2:])), where=_see_gqa())


def _heads_inputs(gen: torch.Generator) -> list:
    value = torch.arange(1.0, _H_KV + 1)[None, :, None, None].expand(1, _H_KV, 3, 2).contiguous()  # head g: g + 1
    identity = torch.eye(_L).expand(1, _H_KV, _L, _L).contiguous()  # the same values in every head: the weights
    return [{"query": torch.zeros(1, _H, 3, _D), "key": torch.randn(1, _H_KV, 3, _D, generator=gen), "value": value,
             "is_causal": False},
            {"query": torch.randn(1, _H, _L, _D, generator=gen), "key": torch.randn(1, _H_KV, _L, _D, generator=gen),
             "value": identity, "is_causal": False}] + _group_inputs(gen)


def _value_heads(got: torch.Tensor | None) -> list[int] | None:
    """The key/value head whose values each query head read (values of head g are all g + 1), or None."""
    if got is None or got.shape != (1, _H, 3, 2) or not got.is_floating_point():
        return None
    read = got.double().mean(dim=(0, 2, 3)) - 1  # (H,)
    heads = [round(float(r)) for r in read]
    if not same(got.double(), (read + 1)[None, :, None, None].expand_as(got), atol=1e-4) or not same(
            read, torch.tensor(heads, dtype=torch.float64), atol=1e-4) or not all(0 <= h < _H_KV for h in heads):
        return None
    return heads


def _key_heads(got: torch.Tensor | None, case: dict) -> list[int] | None:
    """The key/value head whose keys each query head's weights were taken with, or None where none fits."""
    if got is None or got.shape != (1, _H, _L, _L) or not got.is_floating_point():
        return None
    query, key = case["query"].double(), case["key"].double()
    heads = []
    for h in range(_H):
        fits = [g for g in range(_H_KV) if same(got[0, h].double(), torch.softmax(
            query[0, h] @ key[0, g].T / math.sqrt(_D), dim=-1), atol=1e-4)]
        if not fits:
            return None
        heads.append(fits[0])
    return heads


def _heads_explain(reference, inputs, outcomes) -> str | None:
    got = probe_output(outcomes, 0)
    if got is not None and got.shape == (1, _H_KV, 3, 2):
        return tr("with {H} query heads and {H_kv} key/value heads your output has {H_kv} heads, one per key/value "
                  "head: GQA shares the keys and values, not the queries; every query head keeps its own query and "
                  "its own output, (N, H, L, Dv) ({where})", H=_H, H_kv=_H_KV, where=_see_gqa())
    groups = _group_explain(reference, inputs[2:], outcomes[2:]) if len(outcomes) == len(inputs) else None
    if groups is not None:
        return groups
    G = _H // _H_KV
    want = [h // G for h in range(_H)]
    values, keys = _value_heads(got), _key_heads(probe_output(outcomes, 1), inputs[1])
    if values is None or (values == want and keys in (None, want)):
        return None
    if keys == values or keys is None:
        heads, what = values, tr("your keys and values") if keys == values else tr("your values")
    elif values == want:
        heads, what = keys, tr("your keys; the values are right")
    else:
        heads, what = values, tr("your values; the keys are right") if keys == want else tr("your values")
    tiled = tr(": tiled (kv0, kv1, kv0, kv1, …), as .repeat(1, G, 1, 1) gives, or expanding a new dim before H_kv "
               "(key[:, None]); expand after it instead, key[:, :, None]") if heads == [h % _H_KV for h in range(_H)] \
        else ""
    return tr("with {H} query heads and {H_kv} key/value heads, your query heads 0 … {last} read key/value heads "
              "{got} ({what}){note}; query head h reads head h // G = {want} (G = {G} consecutive query heads share "
              "one): repeat_interleave(G, dim=1), or expand and reshape ({where})", H=_H, H_kv=_H_KV,
              what=what, last=_H - 1, got=heads, note=tiled, want=want, G=G, where=_see_gqa())


def _weights_inputs(gen: torch.Generator) -> list:
    query, key = torch.randn(1, _H, _L, _D, generator=gen), torch.randn(1, _H_KV, _L, _D, generator=gen)
    value = torch.eye(_L).expand(1, _H_KV, _L, _L).contiguous()  # Dv = S: the output is the weights
    return [{"query": query, "key": key, "value": value, "is_causal": causal} for causal in (False, True)]


def _weights_explain(reference, inputs, outcomes) -> str | None:
    weights, want = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if weights is None or weights.shape != want.shape or not weights.is_floating_point():
        return None
    weights = weights.double()
    if not same(weights, want) and same(weights, reference_output(reference, inputs[1])):
        return tr("with is_causal=False your weights are the causal ones (query 0 gives all its weight to key 0): "
                  "with is_causal=False every query sees every key; apply the causal mask only when is_causal is "
                  "True ({where})", where=_see_gqa())
    if not same(weights, want):
        return _open_weights(weights, want, inputs[0])
    causal, want = probe_output(outcomes, 1), reference_output(reference, inputs[1])
    if causal is None or causal.shape != want.shape or same(causal, want):
        return None
    causal = causal.double().nan_to_num(nan=0.0)
    if same(causal, reference_output(reference, inputs[0])):
        return tr("with is_causal=True your weights are those without a mask: apply the causal mask when "
                  "is_causal is True, query i sees keys 0 … i ({where})", where=_see_gqa())
    rows, cols = torch.meshgrid(torch.arange(_L), torch.arange(_L), indexing="ij")
    masking = _masking_explain(causal, inputs[1])
    if masking is not None:
        return masking
    future = (causal[0, 0] > 1e-6) & (cols > rows)
    if future.any():
        i, j = (int(t) for t in future.nonzero()[0])
        return tr("with is_causal=True your query {i} gives weight to key {j}, a later position: query i sees keys "
                  "0 … i, the diagonal included (tril with diagonal=0) ({where})", i=i, j=j, where=_see_gqa())
    sums = causal.sum(-1)
    if not same(sums, torch.ones_like(sums), atol=1e-4):
        return tr("with is_causal=True the rows of your weights do not sum to 1 (query 0's row sums to {s:.3g}): "
                  "zeroing weights after the softmax leaves the others as they were; mask the scores with -inf "
                  "before the softmax, which then shares 1 among the keys left ({where})", s=float(sums[0, 0, 0]),
                  where=_see_gqa())
    if bool((causal[0, 0].diagonal() < 1e-9).any()):
        return tr("with is_causal=True your queries give no weight to their own position (query 0 then sees no "
                  "key at all): the causal mask keeps the diagonal, j <= i ({where})", where=_see_gqa())
    return None


def _masking_explain(causal: torch.Tensor, case: dict) -> str | None:
    """Causal weights (NaN read as 0) from a mask multiplied into the scores, or one that hides the past."""
    query = case["query"].double()
    key = case["key"].double().repeat_interleave(_H // _H_KV, dim=1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(_D)
    past = torch.ones(_L, _L, dtype=torch.bool).tril()
    if same(causal, torch.softmax(scores * past, dim=-1), atol=1e-4):
        return tr("with is_causal=True your weights are those of the scores multiplied by a 0/1 mask: a future key "
                  "then scores 0, and exp(0) = 1 still gives it weight; fill the future scores with -inf before "
                  "the softmax, scores.masked_fill(future, float('-inf')) ({where})", where=_see_gqa())
    early = causal[..., :-1, :]  # the last query has no future key to keep
    if bool((early[..., past[:-1]].abs() < 1e-9).all()) and same(early.sum(-1), torch.ones_like(early.sum(-1)),
                                                                  atol=1e-4):
        return tr("with is_causal=True your queries give weight only to later keys, none to the past or to "
                  "themselves: masked_fill fills where the mask is True, so filling the tril hides the past and "
                  "keeps the future; fill the future, triu(diagonal=1), or the negation of the tril ({where})",
                  where=_see_gqa())
    return None


def _open_weights(weights: torch.Tensor, want: torch.Tensor, case: dict) -> str | None:
    """What is wrong with the weights read without a mask (the output with identity values)."""
    sums = weights.sum(-1)
    if not same(sums, torch.ones_like(sums), atol=1e-4):
        if same(weights.sum(-2), torch.ones_like(sums), atol=1e-4):
            return tr("your attention weights sum to 1 over the queries (dim -2), not over the keys: take the "
                      "softmax with dim=-1 ({where})", where=_see_gqa())
        return tr("your attention weights do not sum to 1 over the keys (row sums {sums}): the softmax runs over "
                  "the last dim, the keys ({where})", sums=numbers(sums[0, 0]), where=_see_gqa())
    G = _H // _H_KV
    query = case["query"].double()
    key = case["key"].double().repeat_interleave(G, dim=1)  # (1, H, L, D)
    if same(weights[:, 0], weights[:, 1], atol=1e-4) and not same(query[:, 0], query[:, 1]):
        return tr("query heads 0 and 1 share a key/value head but have different queries, and your weights for "
                  "them are the same: GQA shares the keys and values, not the queries; each query head attends "
                  "with its own query ({where})", where=_see_gqa())
    scores = query @ key.transpose(-2, -1)  # (1, H, L, L), unscaled
    logs = weights.clamp_min(1e-300).log()
    x, y = scores - scores.mean(-1, keepdim=True), logs - logs.mean(-1, keepdim=True)
    c = float((x * y).sum() / (x * x).sum())
    if not same(y, c * x, atol=1e-3) or c <= 0:
        return None
    names = ((1.0, tr("no scale at all")), (1 / _D, tr("1/D")),
             (1 / math.sqrt(_L), tr("1/sqrt(S), S the number of keys (or 1/sqrt(Dv): both are {S} here)", S=_L)),
             (math.sqrt(_D), tr("sqrt(D), multiplied")),
             (1 / math.sqrt(_H), tr("1/sqrt(H), H the number of query heads")))
    note = next((tr(": {name}", name=name) for value, name in names if abs(c - value) < 1e-3 * value), "")
    return tr("on a probe input with D = {D} and S = {S} keys, your weights are softmax(c · q kᵀ) with c = {c:.4g}"
              "{note}; the scale is 1/sqrt(D) = {want:.4g}, D = query.shape[-1], the head dim of the queries and keys "
              "({where})", c=c, note=note, D=_D, S=_L, want=1 / math.sqrt(_D), where=_see_gqa())


def _gqa_shapes(gen: torch.Generator) -> list:
    def case(H: int, H_kv: int, L: int, S: int) -> dict:
        return {"query": torch.randn(2, H, L, 4, generator=gen), "key": torch.randn(2, H_kv, S, 4, generator=gen),
                "value": torch.randn(2, H_kv, S, 3, generator=gen), "is_causal": False}
    return [case(2, 2, 3, 3), case(4, 1, 3, 3), case(4, 2, 3, 3), case(4, 2, 2, 5), case(6, 3, 1, 4)]


def _repeat_explain(reference, inputs, outcomes) -> str | None:
    """Right where no head is repeated (H = H_kv) or one broadcasts (H_kv = 1), raising on the others: V not
    repeated; right where H = H_kv only: the group size (or both repeats) wrong."""
    if len(outcomes) < len(inputs):
        return None
    right = _right_per_case(reference, inputs, outcomes)
    wrong = [i for i, ok in enumerate(right) if not ok]
    if not wrong or any(outcomes[i].error is None for i in wrong):
        return None
    heads = [(case["query"].shape[1], case["key"].shape[1]) for case in inputs]
    error = tr("{kind}: {message}", kind=outcomes[wrong[0]].error[0], message=outcomes[wrong[0]].error[1])
    if right == [H == H_kv or H_kv == 1 for H, H_kv in heads]:
        return tr("your function is right where no key/value head needs repeating (H = H_kv) or a single one "
                  "broadcasts (H_kv = 1), and raises on the others ({error}): repeat the values as well as the "
                  "keys, G times each along dim 1, value.repeat_interleave(G, dim=1) ({where})", error=error,
                  where=_see_gqa())
    if right == [H == H_kv for H, H_kv in heads]:
        return tr("your function is right only where H = H_kv (a group of one) and raises on the others "
                  "({error}): the group size is G = H // H_kv, query.shape[1] // key.shape[1], and the keys and "
                  "the values are both repeated G times along dim 1 ({where})", error=error, where=_see_gqa())
    return None


GQA_PROBES = (Probe("heads_read_back", _heads_inputs, _heads_explain),
              Probe("weights_read_back", _weights_inputs, _weights_explain),
              Probe("repeats", _gqa_shapes, _repeat_explain), contrast("shapes", _gqa_shapes))


# --------------------------------------------------------------------------------------------------
# sink_window_mask
# --------------------------------------------------------------------------------------------------

_SINK_L, _WINDOW, _SINK_COUNT, _QUERY = 12, 3, 2, 8


def _sink_inputs(gen: torch.Generator) -> list:
    return [{"L": _SINK_L, "window": _WINDOW, "sinks": _SINK_COUNT}, {"L": 6, "window": 1, "sinks": 4}]


def _future_sink_explain(reference, inputs, outcomes) -> str | None:
    """More sinks than the window holds (L = 6, window = 1, sinks = 4): a query that sees a later sink."""
    got, want = probe_output(outcomes, 1), reference_output(reference, inputs[1])
    if got is None or got.shape != want.shape or got.dtype != torch.bool:
        return None
    ahead = got & torch.ones_like(got).triu(1)
    if not ahead.any() or not bool((ahead[:, inputs[1]["sinks"]:] == 0).all()):
        return None
    i, j = (int(t) for t in ahead.nonzero()[0])
    return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} may attend to key {j}, a sink that comes "
              "after it: a sink is a past key like any other, so the whole mask stays causal (j <= i); AND the sink "
              "columns with the causal mask ({where})", L=inputs[1]["L"], W=inputs[1]["window"],
              s=inputs[1]["sinks"], i=i, j=j, where=_see_sinks())


def _keys(row: torch.Tensor) -> list[int]:
    return [j for j in range(row.shape[0]) if bool(row[j])]


def _sink_explain(reference, inputs, outcomes) -> str | None:
    got, want = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is not None and got.shape == want.shape and got.is_floating_point():
        return _additive_explain(got, want)
    if got is None or got.shape != want.shape or got.dtype != torch.bool:
        return None
    if torch.equal(got, want):
        return _future_sink_explain(reference, inputs, outcomes)
    if torch.equal(got, ~want):
        return tr("your mask is True where a query may not attend and False where it may: here True means may "
                  "attend ({where})", where=_see_sinks())
    ahead = got & torch.ones_like(got).triu(1)
    if ahead.any():
        i, j = (int(t) for t in ahead.nonzero()[0])
        if bool((ahead[:, _SINK_COUNT:] == 0).all()):
            return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} may attend to key {j}, a sink that "
                      "comes after it: a sink is a past key like any other, so the whole mask stays causal (j <= i); "
                      "AND the sink columns with the causal mask ({where})", L=_SINK_L, W=_WINDOW, s=_SINK_COUNT,
                      i=i, j=j, where=_see_sinks())
        return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} may attend to key {j}, a later position: "
                  "the mask is causal, j <= i, like the ring buffer it stands for ({where})", L=_SINK_L, W=_WINDOW,
                  s=_SINK_COUNT, i=i, j=j, where=_see_sinks())
    i, j = torch.arange(_SINK_L)[:, None], torch.arange(_SINK_L)[None, :]
    if torch.equal(got, (j <= i) & (i - j < _WINDOW) & (j < _SINK_COUNT)):
        return tr("for L = {L}, window = {W} and sinks = {s}, your mask keeps only keys that are both in the window "
                  "and sinks (query {i} sees {keys}): a query sees its window or the sinks, join the two with | (or), "
                  "not & (and) ({where})", L=_SINK_L, W=_WINDOW, s=_SINK_COUNT, i=_QUERY, keys=_keys(got[_QUERY]),
                  where=_see_sinks())
    row = got[_QUERY]
    if not bool(row[_QUERY]) and bool(row[_QUERY - 1]):
        before = _QUERY
        while before > 0 and bool(row[before - 1]):
            before -= 1
        return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} sees {keys} but not itself ({i}): keep "
                  "j <= i, a query's own position included; window = {W} means keys {want}: 0 <= i − j < window "
                  "({where})", L=_SINK_L, W=_WINDOW, s=_SINK_COUNT, i=_QUERY, keys=list(range(before, _QUERY)),
                  want=list(range(_QUERY - _WINDOW + 1, _QUERY + 1)), where=_see_sinks())
    recent = 0
    while recent <= _QUERY and bool(row[_QUERY - recent]):
        recent += 1
    sinks = [j for j in _keys(row) if j <= _QUERY - recent]
    if recent != _WINDOW:
        note = tr(" (window − sinks: the sinks come on top of the window, they are not counted in it)") if (
            recent == _WINDOW - _SINK_COUNT) else tr(" — it does not see itself") if recent == 0 else ""
        return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} sees the {n} most recent keys, itself "
                  "included ({keys}){note}; window = {W} means keys {want}: i − j < window ({where})", L=_SINK_L,
                  W=_WINDOW, s=_SINK_COUNT, i=_QUERY, n=recent, keys=_keys(row)[-recent:],
                  note=note, want=list(range(_QUERY - _WINDOW + 1, _QUERY + 1)), where=_see_sinks())
    if sinks != list(range(_SINK_COUNT)):
        what = tr("no sink") if not sinks else tr("keys {keys}", keys=sinks)
        return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} keeps {what} before its window; the sinks "
                  "are the first sinks positions, keys {want} (j < sinks), seen by every later query ({where})",
                  L=_SINK_L, W=_WINDOW, s=_SINK_COUNT, i=_QUERY, what=what, want=list(range(_SINK_COUNT)),
                  where=_see_sinks())
    i = next(i for i in range(_SINK_L) if not torch.equal(got[i], want[i]))
    return tr("for L = {L}, window = {W} and sinks = {s}, your query {i} may attend to keys {got}; it should see "
              "keys {want}: the sinks, then the window of the {W} most recent positions ({where})", L=_SINK_L,
              W=_WINDOW, s=_SINK_COUNT, i=i, got=_keys(got[i]), want=_keys(want[i]), where=_see_sinks())


def _additive_explain(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """A float mask that is 0 where the query may attend and very negative (or -inf) elsewhere: additive."""
    got = got.double()
    if bool(want.all()) or not (bool((got[want] == 0).all()) and bool((got[~want] <= -1e4).all())):
        return None
    return tr("your mask is a float one, 0 where a query may attend and {low:g} elsewhere: the additive form, "
              "added to the scores; this function returns the bool mask itself, True = may attend: return the "
              "condition, without torch.where or masked_fill ({where})", low=float(got[~want].max()),
              where=_see_sinks())


def _sink_sizes(gen: torch.Generator) -> list:
    return [{"L": L, "window": window, "sinks": sinks} for L, window, sinks in
            ((8, 3, 0), (8, 3, 1), (8, 3, 2), (8, 8, 2), (4, 1, 4), (1, 1, 1))]


def _sizes_explain(reference, inputs, outcomes) -> str | None:
    """Right on some sizes, wrong on others: for a bool mask of the right shape, the first query whose keys differ
    (an error "off by up to 1" means nothing for a mask); anything else as the shared contrast says it."""
    if len(outcomes) < len(inputs):
        return None
    good, bad = [], []
    for case, outcome in zip(inputs, outcomes):
        got, want = probe_output([outcome], 0), reference_output(reference, case)
        (good if same(got, want) else bad).append((case, got, want))
    if not good or not bad:
        return None
    case, got, want = bad[0]
    if got is None or got.shape != want.shape or got.dtype != torch.bool:
        return _SIZES.explain(reference, inputs, outcomes)
    i = next(i for i in range(want.shape[0]) if not torch.equal(got[i], want[i]))

    def name(case: dict) -> str:
        return f"L={case['L']}, window={case['window']}, sinks={case['sinks']}"

    return tr("your function is right on {good}, but not on {bad}: on {first}, your query {i} sees keys {got}; it "
              "should see keys {want} ({where})", good="; ".join(name(c) for c, _, _ in good),
              bad="; ".join(name(c) for c, _, _ in bad), first=name(case), i=i, got=_keys(got[i]),
              want=_keys(want[i]), where=_see_sinks())


_SIZES = contrast("sizes", _sink_sizes)
SINK_PROBES = (Probe("keys_read_back", _sink_inputs, _sink_explain), Probe("sizes", _sink_sizes, _sizes_explain))
