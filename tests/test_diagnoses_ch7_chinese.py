"""Chapter 7's diagnoses in Chinese (issue 38, review VZ7b part 3): the wordings the reviewer asked for, and the
judge's templates that wrapped a probe's observation in a second pair of parentheses and said 用例 twice
(「（见……一节）（第一个失败的用例：用例 1/6：…）」) or left a space in 「但得到的是 长度为 2 的元组」."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from tests.learner_answers.tune_ch7 import llm as tune
from utils.exercises import check, llm
from utils.exercises.judging import compare
from utils.i18n.messages import translate, using_language

MISTAKES = {(e.func_name, m.name): m for e in llm.EXERCISES for m in e.mistakes}


def _line(name, fn):
    with using_language("zh"), contextlib.redirect_stdout(io.StringIO()):
        return getattr(check, name)(fn, quiet=True).line


@pytest.mark.parametrize(("name", "fn"), [
    ("grouped_query_attention", tune.grouped_query_attention__values_not_repeated),
    ("sink_window_mask", tune.sink_window_mask__additive_large_negative),
])
def test_a_probes_observation_names_its_first_failing_case_once_without_a_second_pair_of_parentheses(name, fn):
    line = _line(name, fn)
    assert "；第一个失败的是用例 1/" in line, line
    assert "第一个失败的用例" not in line and "）（" not in line, line


def test_a_tuple_where_a_tensor_is_expected_reads_without_a_stray_space():
    with using_language("zh"):
        reason = compare((torch.ones(2), torch.ones(2)), torch.ones(2), 1e-5, 1e-4)
    assert "但得到的是长度为 2 的元组" in reason, reason


def test_returning_output_and_weights_is_told_to_return_the_output_only():
    def gqa(query, key, value, is_causal=False):  # chapter 2's habit: (output, weights)
        G = query.shape[1] // key.shape[1]
        scores = query @ key.repeat_interleave(G, 1).transpose(-2, -1) / query.shape[-1] ** 0.5
        if is_causal:
            scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(-1)
        return weights @ value.repeat_interleave(G, 1), weights

    assert "只返回输出，不要返回 (输出, 权重)" in _line("grouped_query_attention", gqa)


@pytest.mark.parametrize(("key", "starts", "holds"), [
    (("rms_norm", "layer_norm"), "你减去了均值：那是层规范化（LayerNorm）", "不减均值"),
    (("rms_norm", "eps_outside"), "eps 要放在平方根里面", "sqrt(mean(x²) + eps)"),
    (("grouped_query_attention", "tiled"), "查询头 h 应读取键/值头 h // G", "请改用 repeat_interleave(G, dim=1)"),
    (("grouped_query_attention", "no_scale"), "你没有缩放：请把分数除以 sqrt(D)", "见“分组查询注意力”一节"),
    (("sink_window_mask", "sinks_see_future"), "你的汇点列", "连位置在汇点之前的查询也能看到它们"),
])
def test_the_reviewed_chinese_wordings(key, starts, holds):
    with using_language("zh"):
        text = translate(MISTAKES[key].diagnosis)
    assert text.startswith(starts) and holds in text, text
