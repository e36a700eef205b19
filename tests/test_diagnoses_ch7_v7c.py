"""Chapter 7's diagnoses after the fresh review V7c (issue 38): four wrong answers that were told a different
mistake, or none. Each line must name what was written (a listed mistake only where it reproduces the answer on
every case; otherwise a probe's observation of the part that differs), in English and in Chinese, and never the
wrong words the review quoted."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from tests.learner_answers.tune_ch7 import llm as tune
from utils.exercises import check, llm
from utils.exercises.judging import compare
from utils.exercises.mistake_search import reproduces
from utils.exercises.runner import run_cases
from utils.i18n.messages import using_language

EXERCISES = {exercise.func_name: exercise for exercise in llm.EXERCISES}


def _line(name, fn, lang="en"):
    with using_language(lang), contextlib.redirect_stdout(io.StringIO()):
        return getattr(check, name)(fn, quiet=True).line


def _observation(name, probe, fn):
    exercise = EXERCISES[name]
    found = next(p for p in exercise.probes if p.name == probe)
    inputs = found.make_inputs(torch.Generator().manual_seed(34))
    with using_language("en"):
        return found.explain(exercise.reference, inputs, run_cases(fn, inputs))


REVIEWED = [  # (exercise, answer, words the English line holds, words it must not hold, words of the Chinese line)
    ("rms_norm", tune.rms_norm__eps_as_floor, ["eps is used as a floor", "sqrt(mean(x²) + eps)"],
     ["eps left out", "you left out eps", "some inputs only"], ["下限"]),
    ("rms_norm", tune.rms_norm__normalize_times_root_e, ["eps is used as a floor", "F.normalize"],
     ["eps left out", "you left out eps", "some inputs only"], ["下限"]),
    ("grouped_query_attention", tune.grouped_query_attention__always_causal,
     ["is_causal=False", "only when is_causal is True"], ["max abs error", "Hint:"], ["is_causal=False", "掩码"]),
    ("grouped_query_attention", tune.grouped_query_attention__scale_by_keys,
     ["sqrt(S), the number of keys", "key.shape[-2]"], ["Dv", "with D = 4"], ["sqrt(S)", "键的个数"]),
    ("sink_window_mask", tune.sink_window_mask__precedence, ["a sink that comes after it", "& binds tighter than |"],
     ["off by up to"], ["排在它后面的汇点"]),
]


@pytest.mark.parametrize(("name", "fn", "says", "never", "zh"), REVIEWED, ids=[a[1].__name__ for a in REVIEWED])
def test_a_reviewed_wrong_answer_is_told_what_it_wrote(name, fn, says, never, zh):
    line = _line(name, fn)
    assert line.startswith("❌"), line
    for words in says:
        assert words in line, (words, line)
    for words in never:
        assert words not in line, (words, line)
    chinese = _line(name, fn, "zh")
    for words in zh:
        assert words in chinese, (words, chinese)
    assert not any(words in chinese for words in says if " " in words and "(" not in words), chinese


@pytest.mark.parametrize(("name", "fn"), [(a[0], a[1]) for a in REVIEWED], ids=[a[1].__name__ for a in REVIEWED])
def test_the_listed_mistake_named_reproduces_the_reviewed_answer_on_every_public_case(name, fn):
    exercise = EXERCISES[name]
    line = _line(name, fn)
    named = [m for m in exercise.mistakes if line[2:].startswith(m.diagnosis)]
    assert len(named) == 1, line
    cases = exercise.public_cases()
    for case, outcome in zip(cases, run_cases(fn, cases)):
        assert reproduces(exercise, named[0], case, outcome, compare), (named[0].name, case)


def test_eps_as_a_floor_on_the_mean_square_is_read_back_by_the_probe():
    """rsqrt(mean(x²).clamp_min(eps)): no listed mistake gives it, the divisor probe reads the floor, sqrt(eps)."""
    said = _observation("rms_norm", "divisor_read_back", tune.rms_norm__mean_square_floor)
    assert said is not None and "used as a floor" in said and "0.5" in said, said
    line = _line("rms_norm", tune.rms_norm__mean_square_floor)
    assert "used as a floor" in line and "you left out eps" not in line, line


def test_a_mask_applied_whatever_is_causal_says_is_read_back_by_the_probe():
    said = _observation("grouped_query_attention", "weights_read_back",
                        tune.grouped_query_attention__always_causal_bottom_right)
    assert said is not None and "with is_causal=False" in said and "only when is_causal is True" in said, said
    line = _line("grouped_query_attention", tune.grouped_query_attention__always_causal_bottom_right)
    assert "only when is_causal is True" in line and "max abs error" not in line, line


def test_the_scale_probe_names_its_own_input_and_the_number_of_keys():
    said = _observation("grouped_query_attention", "weights_read_back", tune.grouped_query_attention__scale_by_keys)
    assert said is not None and "1/sqrt(S)" in said and "the number of keys" in said, said
    assert "on a probe input with D = 4" in said and "here Dv = S" not in said, said


def test_sinks_seen_from_the_future_past_the_window_are_read_back_by_the_probe():
    said = _observation("sink_window_mask", "keys_read_back", tune.sink_window_mask__precedence)
    assert said is not None and "a sink that comes after it" in said, said


def sink_window_mask__one_sink_dropped(L, window, sinks):  # wrong only where there is a single sink
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window) | (j < sinks) & (sinks > 1))


def test_the_sizes_probe_of_a_bool_mask_names_a_query_and_its_keys_not_an_error_of_1():
    said = _observation("sink_window_mask", "sizes", sink_window_mask__one_sink_dropped)
    assert said is not None and "off by up to" not in said, said
    assert "on L=8, window=3, sinks=1, your query 3 sees keys [1, 2, 3]; it should see keys [0, 1, 2, 3]" in said, said
