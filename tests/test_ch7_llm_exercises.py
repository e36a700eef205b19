"""Chapter 7's exercises (``utils/exercises/llm.py``): RMSNorm, rotate-half RoPE, grouped-query attention and the
attention-sink window mask.

- Every listed mistake gets ❌ and its own diagnosis, which names the chapter's section.
- The reference and correct answers written in other styles (einsum, complex numbers, chapter 4's RoPE behind a
  permutation, loops, grouped reshapes) get ✅ on the public and the hidden cases, and no probe speaks about them.
- The dtype is kept, and the public cases say so (a float64 case in each floating exercise).
- Bad input to the references raises an error naming the argument.
- The tune batch of realistic wrong answers (``tests/learner_answers/tune_ch7``): none passes, and each public line
  names the mistake or the faulty part (the words below), and never a listed slip that does not reproduce it.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from tests.learner_answers.tune_ch7 import llm as tune
from utils.exercises import check, llm
from utils.exercises.common import clone_case
from utils.exercises.credit import credit_for
from utils.exercises.definition import Exercise
from utils.exercises.judging import compare
from utils.exercises.mistake_search import reproduces
from utils.exercises.runner import run_cases
from utils.i18n.messages import translate, using_language

EXERCISES = {exercise.func_name: exercise for exercise in llm.EXERCISES}
MISTAKES = [(exercise, mistake) for exercise in llm.EXERCISES for mistake in exercise.mistakes]
SECTIONS = ("'RMSNorm'", "'Rotate-half RoPE'", "'Grouped-query attention'", "'Attention sinks and StreamingLLM'")


def _verdict(name: str, fn, cases: str = "public"):
    with contextlib.redirect_stdout(io.StringIO()):
        return getattr(check, name)(fn, cases=cases, quiet=True)


def _observations(exercise, fn) -> dict[str, str]:
    found = {}
    for probe in exercise.probes:
        inputs = probe.make_inputs(torch.Generator().manual_seed(34))
        said = probe.explain(exercise.reference, inputs, run_cases(fn, inputs))
        if said is not None:
            found[probe.name] = said
    return found


def test_the_four_exercises_are_registered_in_notebook_order_with_their_points():
    from utils.exercises import all_exercises

    ch7 = {i: e.points for i, e in all_exercises().items() if i.startswith("ch7.")}
    assert ch7 == {"ch7.rms_norm": 1, "ch7.rotate_half_rope": 2, "ch7.grouped_query_attention": 2,
                   "ch7.sink_window_mask": 1}
    assert [e.id for e in llm.EXERCISES] == list(ch7)


# --------------------------------------------------------------------------------------------------
# Listed mistakes
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES, ids=[f"{e.func_name}-{m.name}" for e, m in MISTAKES])
def test_a_listed_mistake_fails_with_its_own_diagnosis(exercise, mistake):
    with using_language("en"):
        verdict = _verdict(exercise.func_name, mistake.fn)
    assert not verdict.passed
    assert mistake.diagnosis in verdict.message, verdict.message


def test_every_exercise_points_its_diagnoses_to_the_chapters_sections():
    for exercise, section in zip(llm.EXERCISES, SECTIONS):
        pointing = [m.name for m in exercise.mistakes if section in m.diagnosis]
        assert len(pointing) >= len(exercise.mistakes) // 2, (exercise.id, pointing)


@pytest.mark.parametrize("exercise", llm.EXERCISES, ids=lambda e: e.func_name)
def test_a_listed_mistake_is_diagnosed_in_chinese(exercise):
    mistake = exercise.mistakes[0]
    with using_language("zh"):
        verdict = _verdict(exercise.func_name, mistake.fn)
        chinese = translate(mistake.diagnosis)
    assert chinese != mistake.diagnosis and chinese in verdict.message, verdict.message


def test_no_listed_mistake_keeps_full_marks_on_the_public_and_hidden_cases():
    for exercise in llm.EXERCISES:
        cases = exercise.public_cases() + exercise.hidden_cases(11)
        for mistake in exercise.mistakes:
            graded = credit_for(exercise, cases, run_cases(mistake.fn, cases, exercise.forbidden, exercise.gradients),
                                len(exercise.public_cases()), diagnose_hidden=False)
            assert graded.points < exercise.points, (exercise.id, mistake.name)


# --------------------------------------------------------------------------------------------------
# Correct answers in other styles
# --------------------------------------------------------------------------------------------------


def rms_norm__rsqrt(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def rms_norm__einsum(x, weight, eps=1e-6):
    mean_square = torch.einsum("...e,...e->...", x, x)[..., None] / x.shape[-1]
    return torch.einsum("...e,e->...e", x / torch.sqrt(mean_square + eps), weight)


def rms_norm__llama_float32(x, weight, eps=1e-6):  # Llama's module: float32 inside, cast back
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rms_norm__vector_norm(x, weight, eps=1e-6):
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / torch.sqrt(norm ** 2 / x.shape[-1] + eps) * weight


def _inv_freq(D, base, dtype=torch.float64):
    return 1.0 / base ** (torch.arange(0, D, 2, dtype=dtype) / D)


def rotate_half_rope__plain(x, positions, base=10000.0):
    angle = positions.double()[:, None] * _inv_freq(x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * angle.sin().to(x.dtype)


def rotate_half_rope__complex(x, positions, base=10000.0):
    work = torch.promote_types(x.dtype, torch.float32)
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half].to(work), x[..., half:].to(work))
    angle = positions.double()[:, None] * _inv_freq(x.shape[-1], base)
    turn = torch.polar(torch.ones_like(angle), angle).to(z.dtype)
    z = z * turn
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


def rotate_half_rope__chapter4_permuted(x, positions, base=10000.0):
    D = x.shape[-1]
    perm = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))  # interleaved order -> halves order
    y = x[..., torch.argsort(perm)]  # x's halves written as chapter 4's neighbouring pairs
    angle = positions.double()[:, None] * _inv_freq(D, base)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = y[..., 0::2], y[..., 1::2]
    y = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    return y[..., perm]


def grouped_query_attention__repeat(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.mT / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    scores = scores - scores.amax(-1, keepdim=True)
    weights = scores.exp() / scores.exp().sum(-1, keepdim=True)
    return weights @ v


def grouped_query_attention__grouped_reshape(query, key, value, is_causal=False):
    N, H, L, D = query.shape
    H_kv, S = key.shape[1], key.shape[2]
    q = query.reshape(N, H_kv, H // H_kv, L, D)  # (N, H_kv, G, L, D): the G query heads of each group
    scores = q @ key.unsqueeze(2).transpose(-2, -1) / D ** 0.5  # (N, H_kv, G, L, S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ value.unsqueeze(2)  # (N, H_kv, G, L, Dv)
    return out.reshape(N, H, L, value.shape[-1])


def grouped_query_attention__loop(query, key, value, is_causal=False):
    H, H_kv = query.shape[1], key.shape[1]
    outputs = []
    for h in range(H):
        k, v = key[:, h // (H // H_kv)], value[:, h // (H // H_kv)]
        scores = torch.einsum("nld,nsd->nls", query[:, h], k) / math.sqrt(query.shape[-1])
        if is_causal:
            i = torch.arange(scores.shape[-2])[:, None]
            j = torch.arange(scores.shape[-1])[None, :]
            scores = torch.where(j <= i, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        outputs.append(torch.softmax(scores, dim=-1) @ v)
    return torch.stack(outputs, dim=1)


def sink_window_mask__broadcast(L, window, sinks):
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window) | (j < sinks))


def sink_window_mask__loops(L, window, sinks):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(i + 1):
            mask[i, j] = i - j < window or j < sinks
    return mask


def sink_window_mask__tril_triu(L, window, sinks):
    ones = torch.ones(L, L, dtype=torch.bool)
    band = ones.tril() & ones.triu(-(window - 1))
    columns = torch.zeros(L, L, dtype=torch.bool)
    columns[:, :sinks] = True
    return band | (columns & ones.tril())


ALTERNATIVES = [
    ("rms_norm", rms_norm__rsqrt), ("rms_norm", rms_norm__einsum), ("rms_norm", rms_norm__llama_float32),
    ("rms_norm", rms_norm__vector_norm),
    ("rotate_half_rope", rotate_half_rope__plain), ("rotate_half_rope", rotate_half_rope__complex),
    ("rotate_half_rope", rotate_half_rope__chapter4_permuted),
    ("grouped_query_attention", grouped_query_attention__repeat),
    ("grouped_query_attention", grouped_query_attention__grouped_reshape),
    ("grouped_query_attention", grouped_query_attention__loop),
    ("sink_window_mask", sink_window_mask__broadcast), ("sink_window_mask", sink_window_mask__loops),
    ("sink_window_mask", sink_window_mask__tril_triu),
]


@pytest.mark.parametrize(("name", "fn"), [(e.func_name, e.reference) for e in llm.EXERCISES] + ALTERNATIVES,
                         ids=lambda value: value if isinstance(value, str) else value.__name__)
def test_a_right_answer_passes_public_and_hidden_cases_and_no_probe_speaks(name, fn):
    public, hidden = _verdict(name, fn), _verdict(name, fn, "hidden")
    assert public.passed, public.line
    assert hidden.passed, hidden.line
    assert _observations(EXERCISES[name], fn) == {}


# --------------------------------------------------------------------------------------------------
# dtype and bad input
# --------------------------------------------------------------------------------------------------


def rms_norm__cast(x, weight, eps=1e-6):
    return rms_norm__rsqrt(x, weight, eps).float()


def rotate_half_rope__cast(x, positions, base=10000.0):
    return rotate_half_rope__plain(x, positions, base).float()


def grouped_query_attention__cast(query, key, value, is_causal=False):
    return grouped_query_attention__repeat(query, key, value, is_causal).float()


@pytest.mark.parametrize(("name", "cast"), [("rms_norm", rms_norm__cast), ("rotate_half_rope", rotate_half_rope__cast),
                                            ("grouped_query_attention", grouped_query_attention__cast)])
def test_a_public_case_is_float64_and_the_output_keeps_it(name, cast):
    exercise = EXERCISES[name]
    doubles = [case for case in exercise.public_cases()
               if any(isinstance(v, torch.Tensor) and v.dtype == torch.float64 for v in case.values())]
    assert doubles, f"{exercise.id}: no public float64 case"
    assert all(exercise.reference(**clone_case(case)).dtype == torch.float64 for case in doubles)
    verdict = _verdict(name, cast)
    assert not verdict.passed and "float32" in verdict.message and "float64" in verdict.message, verdict.message


def test_the_mask_must_be_bool():
    verdict = _verdict("sink_window_mask", lambda L, window, sinks: sink_window_mask__broadcast(L, window, sinks).int())
    assert not verdict.passed and "torch.bool" in verdict.message, verdict.message


BAD = [
    (llm.rms_norm_reference, {"x": torch.ones(2, 4), "weight": torch.ones(3)}, ValueError, "weight"),
    (llm.rms_norm_reference, {"x": torch.ones(2, 4), "weight": torch.ones(1, 4)}, ValueError, "weight"),
    (llm.rms_norm_reference, {"x": torch.ones(2, 4), "weight": torch.ones(4), "eps": -1.0}, ValueError, "eps"),
    (llm.rms_norm_reference, {"x": [1.0, 2.0], "weight": torch.ones(2)}, TypeError, "x"),
    (llm.rotate_half_rope_reference, {"x": torch.ones(3, 5), "positions": torch.arange(3)}, ValueError, "even"),
    (llm.rotate_half_rope_reference, {"x": torch.ones(3, 4), "positions": torch.arange(4)}, ValueError, "positions"),
    (llm.rotate_half_rope_reference, {"x": torch.ones(3, 4), "positions": torch.zeros(3)}, TypeError, "positions"),
    (llm.rotate_half_rope_reference, {"x": torch.ones(3, 4), "positions": torch.arange(3), "base": 0.0},
     ValueError, "base"),
    (llm.grouped_query_attention_reference, {"query": torch.ones(1, 4, 2, 3), "key": torch.ones(1, 3, 2, 3),
                                             "value": torch.ones(1, 3, 2, 3)}, ValueError, "H_kv dividing H"),
    (llm.grouped_query_attention_reference, {"query": torch.ones(1, 4, 2, 3), "key": torch.ones(1, 2, 2, 3),
                                             "value": torch.ones(1, 2, 5, 3)}, ValueError, "key, value"),
    (llm.grouped_query_attention_reference, {"query": torch.ones(1, 4, 2, 3), "key": torch.ones(1, 2, 2, 3),
                                             "value": torch.ones(1, 2, 2, 3), "is_causal": "yes"},
     TypeError, "is_causal"),
    (llm.grouped_query_attention_reference, {"query": torch.ones(4, 2, 3), "key": torch.ones(1, 2, 2, 3),
                                             "value": torch.ones(1, 2, 2, 3)}, ValueError, "query"),
    (llm.sink_window_mask_reference, {"L": 4, "window": 0, "sinks": 1}, ValueError, "window"),
    (llm.sink_window_mask_reference, {"L": 4, "window": 2, "sinks": -1}, ValueError, "sinks"),
    (llm.sink_window_mask_reference, {"L": 0, "window": 2, "sinks": 1}, ValueError, "L"),
    (llm.sink_window_mask_reference, {"L": 4.0, "window": 2, "sinks": 1}, TypeError, "L"),
]


@pytest.mark.parametrize(("fn", "kwargs", "error", "words"), BAD, ids=[f"{f.__name__}-{w}-{i}" for i, (f, _, _, w)
                                                                        in enumerate(BAD)])
def test_bad_input_to_a_reference_names_the_argument(fn, kwargs, error, words):
    with pytest.raises(error, match=words):
        fn(**kwargs)


def test_a_check_of_something_that_is_not_a_function_says_so():
    verdict = _verdict("rms_norm", 3)
    assert not verdict.passed and "expected your function rms_norm" in verdict.message


# --------------------------------------------------------------------------------------------------
# The tune batch of realistic wrong answers
# --------------------------------------------------------------------------------------------------

NAMED = {  # answer -> words its public line must hold (the mistake, or the faulty part and what was observed)
    "rms_norm__mean_abs": "the mean of |x| plus eps",
    "rms_norm__vector_norm": "the length of the vector plus eps",
    "rms_norm__eps_squared": "eps squared",
    "rms_norm__float32": "has dtype torch.float32, expected torch.float64",
    "rms_norm__weight_inside": "wrong with another weight",
    "rms_norm__in_place": "changed its input x in place",
    "rms_norm__mean_of_everything": "one number for every vector",
    "rotate_half_rope__gptj_rotate": "chapter 4's interleaved layout",
    "rotate_half_rope__positions_from_one": "those of positions [1, 2, 5, 10]",
    "rotate_half_rope__integer_exponent": "your exponents are [0, 0, 0, 0]",
    "rotate_half_rope__exponent_over_d_minus_2": "your exponents are [0, 0.333, 0.667, 1]",
    "rotate_half_rope__first_half_only": "never mixes features 0, 1, 2, 3",
    "rotate_half_rope__float32": "has dtype torch.float32, expected torch.float64",
    "rotate_half_rope__no_outer_product": "the outer product positions[:, None] * θ[None, :]",
    "grouped_query_attention__expand_groups_first": "expanding a new dim before H_kv",
    "grouped_query_attention__scale_by_heads": "1/sqrt(H), H the number of query heads",
    "grouped_query_attention__triu_kept": "gives weight to key 1, a later position",
    "grouped_query_attention__masked_with_zero": "a future key then scores 0, and exp(0) = 1 still gives it weight",
    "grouped_query_attention__scale_after_softmax": "do not sum to 1 over the keys",
    "grouped_query_attention__repeat_on_batch": "right only where H = H_kv (a group of one)",
    "grouped_query_attention__float32": "has dtype torch.float32, expected torch.float64",
    "sink_window_mask__loop": "a sink that comes after it",
    "sink_window_mask__band_tril_triu": "your window keeps one key too many",
    "sink_window_mask__sinks_at_the_end": "keeps no sink before its window",
    "sink_window_mask__float": "has dtype torch.float32, expected torch.bool",
    "sink_window_mask__window_before_the_query": "your query 8 sees [5, 6, 7] but not itself (8)",
    "sink_window_mask__sink_rows": "keeps no sink before its window",
    "sink_window_mask__sinks_widen_the_window": "sees the 5 most recent keys",
    # issue 38 (review V7b): a fresh learner's wrong answers
    "rms_norm__detached_factor": "the gradient reaching `x` is not the reference's",
    "rms_norm__factor_under_no_grad": "the gradient reaching `x` is not the reference's",
    "rms_norm__eps_written_in": "you ignore the eps argument",
    "rms_norm__own_eps_1e5": "or a tiny eps of your own in place of the eps argument",
    "rotate_half_rope__halves_swapped_no_minus": "your rotate_half has no minus sign",
    "rotate_half_rope__chunk_without_dim": "x.chunk(2) splits dim 0",
    "rotate_half_rope__angles_cat_without_dim": "torch.cat((angle, angle)) stacks the two copies along dim 0",
    "grouped_query_attention__mask_multiplied": "a future key then scores 0, and exp(0) = 1 still gives it weight",
    "grouped_query_attention__tril_filled": "masked_fill fills where the mask is True",
    "grouped_query_attention__values_not_repeated": "repeat the values as well as the keys",
    "grouped_query_attention__group_upside_down": "your group size is H_kv // H",
    "sink_window_mask__additive": "you returned an additive mask",
    "sink_window_mask__additive_large_negative": "0 where a query may attend and -1e+09 elsewhere",
    "sink_window_mask__python_and_or": "combine bool tensors entry by entry with & (and) and | (or)",
    # issue 38 (review V7c): answers that were told a different mistake, or none
    "rms_norm__eps_as_floor": "eps is used as a floor",
    "rms_norm__normalize_times_root_e": "eps is used as a floor",
    "rms_norm__mean_square_floor": "above a floor of 0.5 (sqrt(eps): the mean square clamped at eps)",
    "grouped_query_attention__always_causal": "apply the causal mask only when is_causal is True",
    "grouped_query_attention__always_causal_bottom_right": "with is_causal=False your weights are the causal ones",
    "grouped_query_attention__scale_by_keys": "you divided by sqrt(S), the number of keys",
    "sink_window_mask__precedence": "a sink that comes after it",
}


def test_the_tune_batch_is_what_the_table_lists():
    assert sorted(a["fn"].__name__ for a in tune.ANSWERS) == sorted(NAMED)
    assert len(tune.ANSWERS) >= 20 and {a["exercise"] for a in tune.ANSWERS} == {e.id for e in llm.EXERCISES}


@pytest.mark.parametrize("answer", tune.ANSWERS, ids=lambda a: a["fn"].__name__)
def test_a_realistic_wrong_answer_fails_and_its_line_names_the_fault(answer):
    name = answer["exercise"].partition(".")[2]
    with using_language("en"):
        public, hidden = _verdict(name, answer["fn"]), _verdict(name, answer["fn"], "hidden")
    assert not public.passed and not hidden.passed, (public.line, hidden.line)
    assert NAMED[answer["fn"].__name__] in public.message, public.message
    exercise = EXERCISES[name]
    cases = exercise.public_cases()
    outcomes = run_cases(answer["fn"], cases)
    for mistake in exercise.mistakes:  # a listed diagnosis leading the line must reproduce the answer everywhere
        if public.message.startswith(mistake.diagnosis):  # its output, or the error it raises
            for case, outcome in zip(cases, outcomes):
                assert reproduces(exercise, mistake, case, outcome, compare), (mistake.name, case, outcome.error)


# --------------------------------------------------------------------------------------------------
# A fresh learner's wrong answers (round 2): each line names what was written, and not a slip that was not
# --------------------------------------------------------------------------------------------------


def _attend_with(query, key, value, is_causal, k_heads, v_heads):
    G = query.shape[1] // key.shape[1]
    k, v = k_heads(key, G), v_heads(value, G)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


def _interleaved(t, G):
    return t.repeat_interleave(G, 1)


def _tiled(t, G):
    return t.repeat(1, G, 1, 1)


def gqa__masked_after_softmax(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    w = (query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])).softmax(-1)
    if is_causal:
        w = w * torch.ones(w.shape[-2:]).tril()
    return w @ v


def gqa__expand_before_h_kv(query, key, value, is_causal=False):
    N, H_kv, S, D = key.shape
    G = query.shape[1] // H_kv
    k = key[:, None].expand(N, G, H_kv, S, D).reshape(N, G * H_kv, S, D)
    v = value[:, None].expand(N, G, H_kv, S, value.shape[-1]).reshape(N, G * H_kv, S, value.shape[-1])
    return _attend_with(query, k, v, is_causal, lambda t, G: t, lambda t, G: t)


def gqa__values_tiled(query, key, value, is_causal=False):
    return _attend_with(query, key, value, is_causal, _interleaved, _tiled)


def gqa__keys_tiled(query, key, value, is_causal=False):
    return _attend_with(query, key, value, is_causal, _tiled, _interleaved)


def gqa__group_size_h_kv(query, key, value, is_causal=False):
    G = key.shape[1]  # H_kv, not H // H_kv
    return _attend_with(query, key.repeat_interleave(G, 1), value.repeat_interleave(G, 1), is_causal,
                        lambda t, G: t, lambda t, G: t)


def rope__negated_positions(x, positions, base=10000.0):
    return rotate_half_rope__plain(x, -positions, base)


def rope__chunk_positions(x, positions, base=10000.0):
    angle = positions.double()[:, None] * _inv_freq(x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-2)
    return x * angle.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-2) * angle.sin().to(x.dtype)


def sink_window_mask__strictly_before(L, window, sinks):
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j < i) & ((i - j < window) | (j < sinks))


ROUND_2 = [  # (exercise, answer, words the line must hold, words it must not hold)
    ("grouped_query_attention", gqa__masked_after_softmax, ["do not sum to 1", "-inf before the softmax"],
     ["output differs"]),
    ("grouped_query_attention", gqa__expand_before_h_kv, [".repeat(1, G, 1, 1)", "a new dim before H_kv",
                                                          "key[:, :, None]"], []),
    ("grouped_query_attention", gqa__values_tiled, ["your values", "[0, 1, 0, 1, 0, 1]"], ["your keys"]),
    ("grouped_query_attention", gqa__keys_tiled, ["your keys", "[0, 1, 0, 1, 0, 1]"], ["your values"]),
    ("grouped_query_attention", gqa__group_size_h_kv, ["G = H // H_kv"], []),
    ("rotate_half_rope", rope__negated_positions, ["the sign in rotate_half", "the sign of the angle"],
     ["your rotate_half has its minus sign on the wrong half"]),
    ("rotate_half_rope", rope__chunk_positions, ["the last dim", "chunk(2, dim=-1)"], ["never mixes"]),
    ("sink_window_mask", sink_window_mask__strictly_before, ["your query 8 sees [6, 7] but not itself (8)",
                                                             "keep j <= i"], ["0 most recent"]),
]


@pytest.mark.parametrize(("name", "fn", "says", "never"), ROUND_2, ids=[a[1].__name__ for a in ROUND_2])
def test_a_fresh_learners_wrong_answer_is_told_what_it_wrote(name, fn, says, never):
    with using_language("en"):
        verdict = _verdict(name, fn)
    assert not verdict.passed
    for words in says:
        assert words in verdict.message, (words, verdict.message)
    for words in never:
        assert words not in verdict.message, (words, verdict.message)


def sink_window_mask__window_and_sinks(L, window, sinks):
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i) & (i - j < window) & (j < sinks)


def test_a_mask_that_ands_the_window_with_the_sinks_is_told_so_and_not_that_a_query_misses_itself():
    with using_language("en"):
        verdict = _verdict("sink_window_mask", sink_window_mask__window_and_sinks)
    assert not verdict.passed
    assert "join the two with | (or), not & (and)" in verdict.message, verdict.message
    assert "not itself" not in verdict.message, verdict.message


@pytest.mark.parametrize("source", [
    "from torch.nn.attention.flex_attention import flex_attention\n"
    "def grouped_query_attention(q, k, v, is_causal=False):\n    return flex_attention(q, k, v, enable_gqa=True)\n",
    "import torch.nn.attention.flex_attention as fa\n"
    "def grouped_query_attention(q, k, v, is_causal=False):\n    return fa.flex_attention(q, k, v, enable_gqa=True)\n",
    "def grouped_query_attention(q, k, v, is_causal=False):\n"
    "    return torch.nn.attention.flex_attention.flex_attention(q, k, v, enable_gqa=True)\n",
])
def test_flex_attention_with_enable_gqa_is_forbidden_for_grouped_query_attention(source):
    """Issue 35 (R5): flex_attention(..., enable_gqa=True) does the whole exercise, as F.sdpa would."""
    from torch.nn.attention import flex_attention as module

    from utils.exercises.forbidden import forbidden_in_source

    name = "torch.nn.attention.flex_attention.flex_attention"
    assert forbidden_in_source(source, llm.GQA.forbidden) == name
    cases = llm.GQA.public_cases()[:1]
    outcome = run_cases(lambda query, key, value, is_causal=False: module.flex_attention(query, key, value,
                                                                                          enable_gqa=True),
                        cases, llm.GQA.forbidden)[0]
    assert outcome.forbidden == name  # and a call at run time is caught too


def test_the_overflow_probe_says_nothing_about_a_mask_whose_reference_is_bool():
    """Issue 38: an additive float mask (0 / -inf) was told 'with inputs 1000 times larger … subtract the row
    maximum first'; a bool output cannot overflow, and the sink mask has no float input to scale."""
    from utils.exercises import probes

    exercise = EXERCISES["sink_window_mask"]
    inputs = [dict(exercise.public_cases()[0])]
    outcomes = run_cases(tune.sink_window_mask__additive, inputs)
    assert probes._finite(exercise, inputs, outcomes) is None
    softmax = Exercise(id="ch0.softmax", reference=lambda x: x.softmax(-1),
                       make_cases=lambda rng, gen: [{"x": torch.randn(2, 3, generator=gen)}])
    overflowing = run_cases(lambda x: x.exp() / x.exp().sum(-1, keepdim=True), [{"x": torch.full((2, 3), 1000.0)}])
    assert "subtract the row maximum" in probes._finite(softmax, [{"x": torch.full((2, 3), 1000.0)}], overflowing)
