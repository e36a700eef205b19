"""Chapter 6's probes: the running max and sum taken apart, the window's reach read back, the KV cache
with nothing in it and the cache's growth.

* ``online_softmax_update``: the first block (running max -inf, sum 0), a block below the running max, a
  block above it, and a row that is -inf so far and gets an all -inf block; the max and the sum are
  judged apart, and the first situation where one differs is named.
* ``sliding_window_mask``: L = 13, window = 3: the keys a middle query and the first query may see.
* ``attend_with_cache``: an empty cache (T = 0: the output is v_new), and whether the returned caches are
  the old ones with the new key and value appended at the end.
* ``block_score_grad``: the learner's Δ per query row read back from dS = P ⊙ (dP − Δ) (when dS has that
  form), and compared with rowsum(dO ⊙ O), rowsum(dO ⊙ dO) and this block's rowsum(P ⊙ dP).

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing import contrasts
from utils.exercises.probing.kit import numbers, probe_output, reference_output, same
from utils.i18n.messages import tr

_NEG_INF = float("-inf")

# --------------------------------------------------------------------------------------------------
# online_softmax_update
# --------------------------------------------------------------------------------------------------


def _online_inputs(gen: torch.Generator) -> list:
    # square blocks (4 rows of 4 scores): a reduction over the wrong dim runs, and shows in the values
    running_max, running_sum = torch.tensor([1.0, -0.5, 2.0, 0.25]), torch.tensor([1.5, 2.0, 3.0, 1.0])
    return [
        {"running_max": torch.full((4,), _NEG_INF), "running_sum": torch.zeros(4),
         "block": torch.randn(4, 4, generator=gen)},  # the first block
        {"running_max": running_max, "running_sum": running_sum,
         "block": running_max[:, None] - 1 - torch.rand(4, 4, generator=gen)},  # below the max: no rescale
        {"running_max": running_max, "running_sum": running_sum,
         "block": running_max[:, None] + 1 + torch.rand(4, 4, generator=gen)},  # above: the max rises
        {"running_max": torch.tensor([_NEG_INF, 0.5]), "running_sum": torch.tensor([0.0, 2.0]),
         "block": torch.full((2, 3), _NEG_INF)},  # nothing but -inf so far, and an all -inf block
    ]


def _online_explain(reference, inputs, outcomes) -> str | None:
    situations = (tr("on the first block (running_max = -inf, running_sum = 0)"),
                  tr("on a block whose scores all stay below the running max (the max does not change)"),
                  tr("on a block whose scores are above the running max (the max rises)"),
                  tr("on an all -inf block (a masked row: a row that has seen only -inf must stay max -inf, sum 0)"))
    results = []
    for index, case in enumerate(inputs):
        new_max, new_sum = probe_output(outcomes, index, 0), probe_output(outcomes, index, 1)
        want_max, want_sum = reference_output(reference, case)
        if new_max is None or new_sum is None:
            break  # it raised here: judge the situations before this one
        for name, got, want in (("max", new_max, want_max), ("sum", new_sum, want_sum)):
            if got.shape != want.shape:
                return tr("for running_max {rows} and a block {block}, your new {name} has shape {got}, not {want}: "
                          "one value per row, like running_max, so reduce the block over its last dim only "
                          "(block.amax(dim=-1), .sum(dim=-1))", rows=tuple(case["running_max"].shape),
                          block=tuple(case["block"].shape), name=name, got=tuple(got.shape), want=tuple(want.shape))
        results.append((same(new_max, want_max), same(new_sum, want_sum), new_max, new_sum, want_max, want_sum))
    for situation, (max_ok, _, new_max, _, want_max, _) in zip(situations, results):
        stays = torch.isneginf(want_max) & torch.isfinite(new_max)  # -inf expected, a finite number given
        if not max_ok and bool(stays.any()) and bool((new_max[stays] < -1e3).all()):
            return tr("your new max is {got} {situation}, where it must stay -inf, expected {want}: a large "
                      "negative number such as -1e9 is not -inf (it does not survive exp(running_max - new_max) "
                      "and breaks in float16); keep -inf and guard the shift instead",
                      situation=situation, got=numbers(new_max), want=numbers(want_max))
        if not max_ok:
            return tr("your new max is wrong {situation}: {got}, expected {want}; it is the elementwise larger of "
                      "running_max and each row's block max, torch.maximum(running_max, block.amax(dim=-1))",
                      situation=situation, got=numbers(new_max), want=numbers(want_max))
    for situation, (_, sum_ok, _, new_sum, _, want_sum) in zip(situations, results):
        if not sum_ok:
            return tr("your new max is right everywhere; your new sum is wrong {situation}: {got}, expected {want}. "
                      "The new sum is running_sum · exp(running_max - new_max) + sum(exp(block - new_max)), with "
                      "the shift taken as 0 where new_max is -inf", situation=situation, got=numbers(new_sum),
                      want=numbers(want_sum))
    return None


ONLINE_PROBES = (Probe("max_then_sum", _online_inputs, _online_explain), contrasts.ONLINE_SOFTMAX_CONTRAST)


# --------------------------------------------------------------------------------------------------
# sliding_window_mask
# --------------------------------------------------------------------------------------------------


def _window_inputs(gen: torch.Generator) -> list:
    return [{"L": 13, "window": 3}]


def _keys_text(row: torch.Tensor) -> str:
    keys = [j for j in range(row.shape[0]) if bool(row[j])]
    if not keys:
        return tr("no key")
    if keys == list(range(keys[0], keys[-1] + 1)):
        return tr("keys {first} … {last}", first=keys[0], last=keys[-1])
    return tr("keys {keys}", keys=keys)


def _window_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or got.dtype != torch.bool or torch.equal(got, expected):
        return None
    if torch.equal(got, ~expected):
        return tr("your mask is True outside the window and False inside: here True means may attend")
    for query in (6, 0, 12):
        if not torch.equal(got[query], expected[query]):
            return tr("for L = 13 and window = 3, your query {i} may attend to {got}; the window is {want} "
                      "(|i - j| <= window, on both sides, clipped at the ends of the sequence)", i=query,
                      got=_keys_text(got[query]), want=_keys_text(expected[query]))
    row = next(i for i in range(13) if not torch.equal(got[i], expected[i]))
    return tr("for L = 13 and window = 3, your query {i} may attend to {got}; the window is {want} (|i - j| <= "
              "window, on both sides, clipped at the ends of the sequence)", i=row, got=_keys_text(got[row]),
              want=_keys_text(expected[row]))


WINDOW_PROBES = (Probe("reach_read_back", _window_inputs, _window_explain), contrasts.WINDOW_CONTRAST)


# --------------------------------------------------------------------------------------------------
# attend_with_cache
# --------------------------------------------------------------------------------------------------


def _cache_inputs(gen: torch.Generator) -> list:
    def new(T: int) -> dict:
        return {"q_new": torch.randn(1, 2, 1, 4, generator=gen), "k_new": torch.randn(1, 2, 1, 4, generator=gen),
                "v_new": torch.randn(1, 2, 1, 4, generator=gen), "k_cache": torch.randn(1, 2, T, 4, generator=gen),
                "v_cache": torch.randn(1, 2, T, 4, generator=gen)}
    return [new(5), new(0)]  # T + 1 = 6 is not D = 4: a missing transpose shows


def _cache_explain(reference, inputs, outcomes) -> str | None:
    case = inputs[0]
    if 0 < len(outcomes) and outcomes[0].error is None:
        for item, name, new in ((1, "k", "k_new"), (2, "v", "v_new")):
            got = probe_output(outcomes, 0, item)
            if got is None or got.dim() != 4:
                return None
            if got.shape[-2] != 6:
                return tr("your returned {name} cache has {n} positions along dim -2; with T = 5 cached tokens it "
                          "must have T + 1 = 6: the old cache with {new} appended at the end", name=name,
                          n=got.shape[-2], new=new)
            cache = case[f"{name}_cache"]
            other = "v" if name == "k" else "k"
            if got.shape == (1, 2, 6, 4) and same(got[..., :5, :], case[f"{other}_cache"]):
                return tr("your returned {name} cache holds the {other} cache: return (output, k_cache, v_cache) in "
                          "that order", name=name, other=other)
            if got.shape != (1, 2, 6, 4) or not (same(got[..., :5, :], cache) and same(got[..., 5:, :], case[new])):
                return tr("your returned {name} cache is not the old cache followed by {new}: append {new} at the "
                          "end of the sequence dim, torch.cat([{name}_cache, {new}], dim=-2)", name=name, new=new)
    if len(outcomes) > 1 and outcomes[1].error is not None and outcomes[0].error is None:
        kind, message = outcomes[1].error
        return tr("with an empty cache (T = 0, caches of shape (N, H, 0, D), the first decoding step) your function "
                  "raises {kind}: {message}; the new query then attends to its own key alone", kind=kind,
                  message=message)
    got = probe_output(outcomes, 1, 0)
    v_new = inputs[1]["v_new"]
    if got is not None and got.shape == v_new.shape and not same(got, v_new):
        return tr("with an empty cache (T = 0) the new query has only its own key, whose weight is 1, so the output "
                  "must be v_new; yours differs: the query must attend to the updated cache, k_new and v_new "
                  "included")
    expected = reference_output(reference, case)[0]
    mine = probe_output(outcomes, 0, 0)
    if mine is not None and mine.shape == expected.shape and not same(mine, expected):
        return tr("your updated caches are right, and so is your output with an empty cache; with T = 5 cached "
                  "tokens your output differs: the new query attends to all T + 1 keys of the updated cache, "
                  "softmax(q_new kᵀ / sqrt(D)) @ v, with no mask")
    return None


CACHE_PROBES = (Probe("cache_and_empty_cache", _cache_inputs, _cache_explain), contrasts.CACHE_CONTRAST)


# --------------------------------------------------------------------------------------------------
# block_score_grad
# --------------------------------------------------------------------------------------------------


def _block_grad_inputs(gen: torch.Generator) -> list:
    L, B, Dv = 3, 4, 5
    weights = torch.softmax(torch.randn(L, 2 * B, generator=gen), dim=-1)[:, :B]  # one block of a longer row
    case = {"grad_out": torch.randn(L, Dv, generator=gen), "out": torch.randn(L, Dv, generator=gen),
            "weights": weights, "value": torch.randn(B, Dv, generator=gen)}
    return [case, {**case, "grad_out": torch.zeros(L, Dv)}]  # 1: no gradient flows in, so none may flow out


def _block_grad_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or same(got, expected):
        return None
    silent = probe_output(outcomes, 1)
    if silent is not None and silent.shape == expected.shape and not same(silent, torch.zeros_like(expected)):
        return tr("with grad_out = 0 your dS must be 0 (no gradient flows in, so none flows back), and yours is "
                  "not (up to {error:.3g}): part of your dS does not come from dO; dP = dO Vᵀ and Δ = rowsum(dO "
                  "⊙ O) both vanish with dO", error=float(silent.double().abs().max()))
    case = {k: v.double() for k, v in inputs[0].items()}
    P, dO, out = case["weights"], case["grad_out"], case["out"]
    dP = dO @ case["value"].T
    true_D = (dO * out).sum(-1)
    if same(got, dP - true_D[:, None], atol=1e-4):
        return tr("your dS is dP − Δ without the factor P: the softmax's backward multiplies by P, dS = P ⊙ (dP − Δ)")
    D = (dP - got.double() / P)  # (L, B): the D each entry implies, if dS = P ⊙ (dP − D)
    if float((D - D.mean(-1, keepdim=True)).abs().max()) > 1e-3:
        return None
    D = D.mean(-1)
    if same(D, true_D, atol=1e-4):
        return None
    named = ((dO * dO).sum(-1), tr(" (that is rowsum(dO ⊙ dO): grad_out where out belongs)")), \
        ((P * dP).sum(-1), tr(" (that is rowsum(P ⊙ dP) over this block's keys only: the row's Δ comes from dO and "
                              "O, which cover every key)")), \
        (torch.zeros_like(D), tr(" (no Δ at all)"))
    note = next((text for value, text in named if same(D, value, atol=1e-4)), "")
    return tr("your dS has the form P ⊙ (dP − Δ) with one Δ per query row, but your Δ is {got}{note}; Δ = rowsum(dO "
              "⊙ O) gives {want}", got=numbers(D), note=note, want=numbers(true_D))


BLOCK_GRAD_PROBES = (Probe("delta_read_back", _block_grad_inputs, _block_grad_explain), contrasts.BLOCK_GRAD_CONTRAST)
