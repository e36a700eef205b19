"""Chapter 7's explorers, figures, quiz and budgets: the pure state functions (:mod:`utils.explorers.llm`),
checked against the model code they describe (the sink-window cache's slots against
:class:`~utils.llm.cache.SinkKVCache` itself), the figures and the wiring on a tiny random Llama decoder,
and :mod:`utils.llm.reference`'s guard where transformers is missing."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from i18n_support import english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils._text import display_width
from utils.explorers.llm import (
    SCORES,
    heads_state,
    held_positions,
    merge_map,
    piece_label,
    run_label,
    sink_cache_state,
    streaming_table,
    text_attention,
)
from utils.i18n.messages import set_language
from utils.llm.cache import SinkKVCache
from utils.llm.model import LlamaConfig, LlamaDecoder


class ByteTokenizer:
    """A stand-in for SmolLM2's byte-level tokenizer: one token per UTF-8 byte (ids 0..255), so a Chinese
    character is three tokens that decode to a replacement mark until all three are there."""

    def encode(self, text):
        return SimpleNamespace(ids=list(text.encode("utf-8")))

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, d_model=32, num_layers=3, num_heads=4, num_kv_heads=2, d_ff=48)
    return LlamaDecoder(config).eval(), ByteTokenizer()


# --- pure state -------------------------------------------------------------------------------------------

def test_piece_labels_show_spaces_and_line_breaks():
    assert [piece_label(t) for t in (" the", "a\nb", "\t", "")] == ["·the", "a\\nb", "\\t", "∅"]


def test_merge_map_sums_a_pieces_columns_and_averages_its_rows():
    weights = torch.tensor([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.2, 0.3, 0.5, 0], [0.1, 0.2, 0.3, 0.4]])
    merged = merge_map(weights, [[0], [1, 2], [3]])
    assert merged.shape == (3, 3)
    torch.testing.assert_close(merged.sum(-1), torch.ones(3))
    torch.testing.assert_close(merged[1], torch.tensor([0.35, 0.65, 0.0]))  # rows 1 and 2, averaged
    torch.testing.assert_close(merged[2], torch.tensor([0.1, 0.5, 0.4]))  # columns 1 and 2, summed
    torch.testing.assert_close(merge_map(weights, [[0], [1], [2], [3]]), weights)
    with pytest.raises(ValueError, match="groups"):
        merge_map(weights, [[0], [2], [1, 3]])


@pytest.mark.parametrize("window,sinks", [(1, 0), (3, 0), (4, 2), (2, 4), (5, 1)])
def test_held_positions_are_the_sink_caches_own(window, sinks):
    cache = SinkKVCache(window=window, sinks=sinks)
    for step in range(20):
        cache.attend(torch.randn(1, 2, 1, 4), torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 4))
        assert held_positions(step, window, sinks) == cache.positions.tolist(), step


def test_held_positions_refuses_bad_input():
    with pytest.raises(ValueError, match="window"):
        held_positions(3, 0, 1)


def _losses(T=30, window=4, sinks=2):
    return {(None, 0): torch.full((T - 1,), 1.0), (window, 0): torch.full((T - 1,), 3.0),
            (window, sinks): torch.full((T - 1,), 1.5)}


def test_sink_cache_state_counts_what_is_held_and_dropped():
    state = sink_cache_state(20, 4, 2, _losses(), bytes_per_token=10)
    assert state.visible == [0, 1, 17, 18, 19, 20] and state.evicted == 15
    assert state.slots[state.written] == 20
    assert (state.cache_bytes, state.full_bytes) == (60, 210)
    assert list(state.losses) == [run_label(None), run_label(4), run_label(4, 2)]
    early = sink_cache_state(1, 4, 2, _losses())
    assert early.visible == [0, 1] and early.evicted == 0


def _three_runs():
    return {(None, 0): torch.tensor([2.0, 3.0, 3.0, 3.0]), (2, 0): torch.tensor([2.0, 3.0, 6.0, 6.0]),
            (2, 1): torch.tensor([2.0, 3.0, 4.0, 3.5])}


def test_streaming_table_computes_each_runs_means_and_the_share_recovered():
    lines = streaming_table(_three_runs(), after=2).splitlines()
    assert lines[0].split() == ["cache", "mean", "loss", "after", "position", "2", "perplexity", "there"]
    # mean over all, mean from position 2 on, and exp of the latter
    assert lines[1].split()[-3:] == ["2.750", "3.000", f"{torch.tensor(3.0).exp():.1f}"]
    assert lines[2].split()[-3:] == ["4.250", "6.000", f"{torch.tensor(6.0).exp():.1f}"]
    assert lines[3].split()[-3:] == ["3.125", "3.750", f"{torch.tensor(3.75).exp():.1f}"]
    assert lines[4] == "the sinks recover 75% of what the window alone lost"  # (6 - 3.75) / (6 - 3)
    assert len(streaming_table({(None, 0): _three_runs()[None, 0]}, after=1).splitlines()) == 2  # no share


def test_streaming_table_lines_up_in_chinese():
    set_language("zh")
    lines = streaming_table(_three_runs(), after=2).splitlines()
    assert lines[1].startswith("完整缓存") and "汇点挽回" in lines[4]
    ends = {display_width(line) for line in lines[:4]}
    assert len(ends) == 1, f"rows end at different columns: {lines[:4]}"  # numbers right-aligned


def test_streaming_table_refuses_bad_input():
    with pytest.raises(ValueError, match="after must be a position in 0..3"):
        streaming_table(_three_runs(), after=4)
    with pytest.raises(ValueError, match=r"losses must be 1-D.*\(3,\).*\(4,\)"):
        streaming_table({**_three_runs(), (3, 0): torch.zeros(3)}, after=1)
    with pytest.raises(ValueError, match="at least one run"):
        streaming_table({}, after=0)


def test_sink_cache_state_refuses_a_step_outside_the_text_or_an_unmeasured_run():
    with pytest.raises(ValueError, match="step"):
        sink_cache_state(30, 4, 2, _losses())
    with pytest.raises(ValueError, match="losses"):
        sink_cache_state(3, 8, 2, _losses())


def test_text_attention_merges_byte_tokens_and_scores_every_head(tiny):
    model, tokenizer = tiny
    run = text_attention(model, tokenizer, "注意a注意")  # 3 bytes per character
    assert len(run.ids) == 13 and run.labels == ["注", "意", "a", "注", "意"]
    assert run.maps.shape == (3, 4, 13, 13)
    for score in SCORES:
        assert run.scores[score].shape == (3, 4)
    state = heads_state(run, 2, 3, "induction", groups_of=2)
    assert state.head_map.shape == (5, 5) and state.kv_head == 1
    torch.testing.assert_close(state.head_map.sum(-1), torch.ones(5))
    assert state.value == pytest.approx(float(run.scores["induction"][2, 3]))


def test_text_attention_says_why_a_score_or_a_run_is_missing(tiny):
    model, tokenizer = tiny
    once = text_attention(model, tokenizer, "abc")
    assert once.scores["induction"] is None and "No token occurs twice" in once.message
    assert heads_state(once, 0, 0, "induction").grid is None
    short = text_attention(model, tokenizer, "a")
    assert short.maps is None and "at least two tokens" in short.message
    assert heads_state(short, 0, 0).head_map is None
    long = text_attention(model, tokenizer, "ab" * 40, max_tokens=16)
    assert len(long.ids) == 16 and "first 16" in long.message


def test_a_cut_inside_a_character_drops_its_bytes_and_shows_no_replacement_mark(tiny):
    """A Chinese character is three byte tokens here: a cut after 16 tokens falls inside the sixth one,
    whose first byte alone would show as "\ufffd" (a fresh Chinese reader saw it on a long typed text)."""
    model, tokenizer = tiny
    cut = text_attention(model, tokenizer, "灯塔看守人每天晚上点亮灯。", max_tokens=16)
    assert cut.labels == list("灯塔看守人") and len(cut.ids) == 15
    assert not any("\ufffd" in label for label in cut.labels)
    assert len(cut.maps[0, 0]) == 15  # the model ran on the whole characters only


def test_heads_state_refuses_a_head_the_model_lacks(tiny):
    model, tokenizer = tiny
    run = text_attention(model, tokenizer, "abab")
    with pytest.raises(ValueError, match="layer, head"):
        heads_state(run, 3, 0)
    with pytest.raises(ValueError, match="score"):
        heads_state(run, 0, 0, "sinks")


# --- figures and wiring (draws figures) ----------------------------------------------------------------------

@pytest.mark.slow
def test_figures_have_titles_labels_and_token_ticks(tiny):
    from utils.plotting.llm import (
        head_scores_figure,
        heads_explorer_figure,
        kv_group_figure,
        sink_cache_figure,
        streaming_loss_figure,
    )

    model, tokenizer = tiny
    run = text_attention(model, tokenizer, "the cat. the cat.")
    fig = head_scores_figure({"sink": run.scores["sink"]})
    assert "first token" in fig._suptitle.get_text() and fig.axes[0].get_ylabel() == "layer"
    fig = kv_group_figure(run.maps[1], run.labels, layer=1, groups_of=2)
    assert fig.axes[3].get_title() == "query head 4 (KV head 2)"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == run.labels
    fig = heads_explorer_figure(heads_state(run, 1, 2, "previous", groups_of=2))
    assert fig.axes[1].get_title().startswith("Layer 2, Head 3 (KV head 2): ")
    fig = streaming_loss_figure({run_label(None): torch.rand(100), run_label(8): torch.rand(100)},
                                evict_at={run_label(8): 8})
    assert fig.axes[0].get_xlabel() == "position in the text (tokens)"
    assert "window 8 alone" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()][1]
    fig = sink_cache_figure(sink_cache_state(20, 4, 2, _losses()))
    assert fig.axes[0].get_title().startswith("Step 20: 6 positions held")
    with pytest.raises(ValueError, match="maps"):
        kv_group_figure(run.maps[1], run.labels, layer=1, groups_of=3)



def test_head_score_panels_name_the_text_they_were_measured_on():
    from utils.plotting.llm import head_scores_figure

    grids = {"previous": torch.rand(4, 3), "induction": torch.rand(4, 3)}
    texts = {"previous": "sentence", "induction": "repeated random tokens"}
    fig = head_scores_figure(grids, texts=texts)
    assert [fig.axes[i].get_title() for i in (0, 1)] == [
        "share on the previous token\n(sentence)", "induction (prefix-matching) score\n(repeated random tokens)"]
    assert head_scores_figure({"sink": grids["previous"]}).axes[0].get_title() == "share on the first token (sink)"
    set_language("zh")
    titles = [head_scores_figure(grids, texts=texts).axes[i].get_title() for i in (0, 1)]
    assert titles[0].endswith("\n（句子）") and titles[1].endswith("\n（重复的随机词元）")
    for bad in ({"sink": "sentence"}, {"previous": "story"}):
        with pytest.raises(ValueError, match="texts: expected score -> one of 'sentence'"):
            head_scores_figure(grids, texts=bad)


def _dotted_lines(ax):
    """The x of each dotted vertical line and the annotations of a loss figure's axes."""
    lines = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
    return lines, [text.get_text() for text in ax.texts]


def test_the_loss_figure_marks_where_each_cache_starts_evicting():
    from utils.plotting.llm import sink_cache_figure, streaming_loss_figure

    curves = {run_label(*key): loss for key, loss in _losses(T=100, window=8, sinks=2).items()}
    fig = streaming_loss_figure(curves, evict_at={run_label(8): 8, run_label(8, 2): 10})
    lines, notes = _dotted_lines(fig.axes[0])
    assert lines == [8, 10]  # the window alone drops its first position at 8, the window + 2 sinks at 10
    assert [run_label(8) in n and "8" in n for n in notes] == [True, False]
    assert run_label(8, 2) in notes[1] and "10" in notes[1]
    assert "running mean over 32 tokens" in fig.axes[0].get_ylabel()
    with pytest.raises(ValueError, match="evict_at"):
        streaming_loss_figure(curves, evict_at={"window 9 alone": 9})
    with pytest.raises(TypeError, match="evict_at"):
        streaming_loss_figure(curves, evict_at=8)  # which run's cache? say it
    state = sink_cache_state(20, 4, 2, _losses(), bytes_per_token=3 * 2**20)
    fig = sink_cache_figure(state)
    assert _dotted_lines(fig.axes[1])[0] == [4, 6]
    assert "(18.00 MiB)" in fig.axes[0].get_title() and "(63.00 MiB)" in fig.axes[0].get_title()  # 6 and 21 held
    fig = sink_cache_figure(sink_cache_state(20, 4, 0, {**_losses(), (4, 0): torch.ones(29)}))
    assert _dotted_lines(fig.axes[1])[0] == [4]  # no sinks: one cache, one line


def _offered(box):
    """Each control's values as the static edition's page offers them."""
    from utils.htmlbook.explorers import explorer_html
    from utils.widgets.grid import grid_controls, grid_size

    grid = grid_controls(box.controls, box.declared_grid)
    manifest = {"controls": [c.to_json() for c in grid], "states": [[0, 0, None, []]] * grid_size(grid),
                "images": ["state.webp"], "captions": [[]], "renders": 1, "render_s": 0.0, "note": None}
    block = explorer_html(manifest, "explorers", "explorer-1")
    return grid, grid_size(grid), block


@pytest.mark.slow
def test_heads_explorer_redraws_and_declares_a_small_grid_of_fixed_texts(tiny):
    from utils.widgets.llm import heads_explorer

    model, tokenizer = tiny
    examples = ["the cat. the cat.", "注意注意", "abc"]
    box = heads_explorer(model, tokenizer, examples, groups_of=2)
    try:
        assert box.state.labels == [piece_label(c) for c in examples[0]]  # one byte, one piece
        assert box.state.score == "sink" and box.state.grid.shape == (3, 4)
        box.controls["score"].value = "induction"
        box.controls["text"].value = "abc"
        assert box.state.grid is None and "No token occurs twice" in box.children[3].value
        box.controls["text"].value = "注意注意"
        assert box.state.labels == ["注", "意", "注", "意"]
        box.controls["layer"].value, box.controls["head"].value = 3, 4
        assert (box.state.layer, box.state.head, box.state.kv_head) == (2, 3, 1)
        grid, size, block = _offered(box)
        assert [c.values for c in grid if c.name == "text"][0] == tuple(examples)  # the fixed texts, no other
        assert size <= 128, size  # the static edition renders every state: keep it small
        assert html.escape("注意注意") in block
    finally:
        box.close()


@pytest.mark.slow
def test_sink_cache_explorer_steps_and_switches_sinks():
    from utils.widgets.llm import sink_cache_explorer

    box = sink_cache_explorer(_losses(T=200, window=8, sinks=4), bytes_per_token=3)
    try:
        assert box.state.sinks == 4 and box.state.window == 8
        box.controls["step"].value = 100
        assert box.state.visible[:4] == [0, 1, 2, 3] and box.state.cache_bytes == 12 * 3
        box.controls["sinks"].value = 0
        assert box.state.visible == list(range(93, 101))
        box.play.value = 150
        assert box.state.step == 150
        grid, size, block = _offered(box)
        steps = [c for c in grid if c.name == "step"][0]
        assert len(steps.values) <= 10 and size <= 20
        assert re.search(r'type="range"', block)
    finally:
        box.close()
    with pytest.raises(ValueError, match="losses"):
        sink_cache_explorer({(None, 0): torch.ones(9), (4, 0): torch.ones(9), (8, 1): torch.ones(9)})


def test_the_quiz_answers_what_the_chapter_measures():
    from utils.llm.cache import kv_cache_bytes_per_token
    from utils.widgets.llm import ch7_quiz

    quiz = ch7_quiz()
    assert len(quiz.questions) >= 3
    config = LlamaConfig(vocab_size=49152, d_model=576, num_layers=30, num_heads=9, num_kv_heads=3, d_ff=1536)
    ratio = kv_cache_bytes_per_token(config, num_kv_heads=9) / kv_cache_bytes_per_token(config)
    numeric = [q for q in quiz.questions if not hasattr(q, "options")][0]
    assert numeric.grade(str(ratio))[0] and not numeric.grade("9")[0]
    texts = [q.question for q in quiz.questions]
    assert any("first token" in t for t in texts)  # the sink is not a bug
    assert any("share" in t and "query heads" in t for t in texts)  # GQA shares K and V, not Q
    assert any("stream" in t for t in texts)  # a window without sinks is not what production runs
    assert "64 and 68 slots" in quiz.questions[-1].feedback[-1]  # not "the same size": the sinks add 4 slots
    for question in quiz.questions:
        if hasattr(question, "options"):
            assert question.grade(question.answer)[0]
            assert not any(question.grade(i)[0] for i in range(len(question.options)) if i != question.answer)


# --- the chapter's budgets and its independent reference ------------------------------------------------------

def test_chapter_7_has_the_issues_budgets():
    from nbval_budgets import judge, rss_budget, time_budget

    assert time_budget("solutions/07_attention_in_a_real_model.ipynb") == 120
    assert rss_budget("solutions/zh/07_attention_in_a_real_model.ipynb") == int(1.5 * 2**30)
    assert rss_budget("solutions/06_attention_at_scale.ipynb") == 2**30
    row = {"wall_s": 10.0, "peak_rss_bytes": 1400 * 2**20, "kernel_cpu_s": 100.0, "cells": 3}
    assert judge({"solutions/07_x.ipynb": row})["solutions/07_x.ipynb"]["problems"] == []
    assert judge({"solutions/06_x.ipynb": row})["solutions/06_x.ipynb"]["problems"]


def test_reference_is_skipped_without_transformers_and_refuses_bad_prompts(monkeypatch):
    import utils.llm.reference as reference

    monkeypatch.setattr(reference.importlib.util, "find_spec", lambda name: None)
    assert reference.transformers_reference(["hello"]) is None
    monkeypatch.setattr(reference.importlib.util, "find_spec", lambda name: object())
    with pytest.raises(ValueError, match="prompts"):
        reference.transformers_reference("hello")
    with pytest.raises(ValueError, match="new_tokens"):
        reference.transformers_reference(["hello"], new_tokens=0)



def test_the_test_suite_s_reference_cache_computes_each_prompt_once_and_knows_what_it_depends_on(
        monkeypatch, tmp_path):
    """COURSE_REFERENCE_CACHE (set by make test): a prompt computed once is read back, only the missing ones
    go to the separate process, and another new_tokens, model file or library version is another entry."""
    import utils.llm.reference as reference

    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    monkeypatch.setattr("utils.llm.loader.smollm2_gguf_path", lambda: model)
    monkeypatch.setattr(reference.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(reference.importlib.metadata, "version", lambda name: "9.9")
    asked = []

    def child(command, **kwargs):  # what the real child does, with made-up numbers: one result per prompt
        request = json.loads((Path(command[-1]) / "request.json").read_text())
        asked.append(request["prompts"])
        torch.save([{"ids": [len(p)], "logits": torch.full((1, 2), float(len(p))),
                     "generated": [len(p)] * request["new_tokens"]} for p in request["prompts"]],
                   Path(command[-1]) / "result.pt")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(reference.subprocess, "run", child)
    monkeypatch.delenv(reference.CACHE_VARIABLE, raising=False)
    reference.transformers_reference(["ab"], new_tokens=2)
    reference.transformers_reference(["ab"], new_tokens=2)
    assert asked == [["ab"], ["ab"]]  # without the variable: a fresh process every time, nothing kept
    assert not list(tmp_path.glob("cache*"))

    asked.clear()
    monkeypatch.setenv(reference.CACHE_VARIABLE, str(tmp_path / "cache"))
    first = reference.transformers_reference(["ab", "cde"], new_tokens=2)
    again = reference.transformers_reference(["cde", "fghi", "ab", "fghi"], new_tokens=2)
    assert asked == [["ab", "cde"], ["fghi"]]  # only the prompt not seen before, once
    assert [r["ids"] for r in again] == [[3], [4], [2], [4]] and again[2]["generated"] == first[0]["generated"]
    torch.testing.assert_close(again[0]["logits"], first[1]["logits"])
    assert len(list((tmp_path / "cache").glob("*.pt"))) == 3 and not list((tmp_path / "cache").glob("*.part"))

    reference.transformers_reference(["ab"], new_tokens=3)  # another request
    model.write_bytes(b"other weights")  # another model file
    reference.transformers_reference(["ab"], new_tokens=2)
    monkeypatch.setattr(reference.importlib.metadata, "version", lambda name: "10.0")  # another transformers
    reference.transformers_reference(["ab"], new_tokens=2)
    assert asked[2:] == [["ab"], ["ab"], ["ab"]]


# The separate process's results (utils.llm.reference.transformers_reference) are compared with the course's
# model by the chapter itself: cell ch7-29 prints, for two prompts, whether the ids, the logits (within 5e-4)
# and 12 greedy tokens are the same, and nbval runs it strictly in both languages (make nbval-solutions).
# tests/test_llm.py compares the two models in one process, on more prompts.


def test_make_test_shares_one_reference_run_per_prompt_and_starts_it_empty():
    """make test exports COURSE_REFERENCE_CACHE to every stage and empties that folder before the first one."""
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    assert re.findall(r"^test: export COURSE_REFERENCE_CACHE = (\S+)$", makefile, re.M) == [
        "$(CURDIR)/build/test-cache/reference"]
    prerequisites = re.search(r"^test: (?!export)(.*)$", makefile, re.M).group(1).split()
    assert prerequisites.index("fresh-test-cache") < prerequisites.index("unit")
    assert re.search(r"^fresh-test-cache:\n\trm -rf build/test-cache$", makefile, re.M)
