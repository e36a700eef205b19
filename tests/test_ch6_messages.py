"""Chapter 6's explorers, quiz, figures and memory table speak the learner's language: English unchanged
(the stored outputs of the English notebook), Chinese from the message catalogues."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from i18n_support import HAN

from utils.benchmark.memory import format_memory_table
from utils.explorers.at_scale import kv_cache_explorer_state, window_explorer_state
from utils.i18n.messages import using_language
from utils.plotting.at_scale import (
    cache_memory_figure,
    kv_cache_explorer_figure,
    memory_scaling_figure,
    online_softmax_figure,
    window_explorer_figure,
    window_mask_figure,
)
from utils.widgets.at_scale import ch6_quiz, window_explorer

ROWS = [{"impl": "sdpa", "length": 1024, "peak_mib": 2.0, "seconds": 0.01, "mem_ratio": 1.0, "time_ratio": 1.0,
         "skipped": False, "backend": "FLASH_ATTENTION"},
        {"impl": "naive", "length": 16384, "peak_mib": None, "predicted_mib": 16384.0, "skipped": True}]


def _texts(fig) -> list[str]:
    found = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.get_yticklabels())]
        legend = ax.get_legend()
        found += [t.get_text() for t in legend.get_texts()] if legend else []
    plt.close(fig)
    return [t for t in found if t]


def _kv_state():
    from utils.decoder import TinyDecoder, decode_trace

    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=17, d_model=8, num_heads=2, num_layers=1, max_len=16).eval()
    prompt = torch.tensor([[0, 1, 2, 16]])
    traces = {None: decode_trace(model, prompt, 6), 3: decode_trace(model, prompt, 6, window=3)}
    return kv_cache_explorer_state([0, 1, 2, 16], traces, 4, window=3)


def test_english_table_and_titles_are_unchanged():
    with using_language("en"):
        table = format_memory_table(ROWS).splitlines()
        assert table[0].split("  ")[0] == "implementation" and "skipped (needs ~16.0 GiB)" in table[2]
        titles = _texts(window_explorer_figure(window_explorer_state(2, 1, 3, length=16)))
        assert "t15 sees 16 of 16 inputs after 3 layers; all of them from layer 2" in titles
        assert ch6_quiz().title == "Chapter 6 quiz: attention at scale"


@pytest.mark.parametrize("figure", ["memory", "window", "online", "kv"])
def test_chinese_figures_have_chinese_titles_and_labels(figure):
    with using_language("zh"):
        fig = {"memory": lambda: memory_scaling_figure(ROWS[:1]),
               "window": lambda: window_explorer_figure(window_explorer_state(2, 1, 3, length=16)),
               "online": lambda: online_softmax_figure(torch.tensor([1.0, 3.0, 0.5, 2.0]), 2),
               "kv": lambda: kv_cache_explorer_figure(_kv_state())}[figure]()
        texts = _texts(fig)
    words = [t for t in texts if not t.startswith("$") and any(c.isalpha() for c in t)]  # not numeric ticks
    english = [t for t in words if not HAN.search(t) and t != "F.scaled_dot_product_attention"]
    assert all(t.startswith("t") and t[1:].isdigit() for t in english), english  # only position ticks stay


def test_chinese_quiz_explorer_and_table():
    with using_language("zh"):
        quiz = ch6_quiz()
        box = window_explorer(length=16)
        table = format_memory_table(ROWS)
    assert HAN.search(quiz.title) and all(HAN.search(q.question) for q in quiz.questions)
    assert all(HAN.search(o) for q in quiz.questions for o in q.options if o != "O(1)")
    assert all(HAN.search(f) for q in quiz.questions for f in q.feedback)
    assert [c.description for c in box.controls.values()] == ["窗口", "全局词元", "层数"]
    assert table.splitlines()[0].startswith("实现") and "已跳过（约需 16.0 GiB）" in table


def test_mask_title_cache_legend_and_table_rows_in_the_learners_language():
    from utils.at_scale import global_tokens_mask

    mask = global_tokens_mask(16, window=2, num_global=1)
    cache = {"full cache": [10, 20], "ring buffer, W = 16": [10, 10], "my cache": [1, 2]}

    def shown():
        legend = cache_memory_figure([1, 2], cache).axes[0].get_legend().get_texts()
        titles = [window_mask_figure(mask, window=2, num_global=n).axes[0].get_title() for n in (1, 0, 3)]
        return titles, [t.get_text() for t in legend], [line.split("  ")[0] for line in
                                                         format_memory_table(ROWS).splitlines()[1:]]

    assert shown() == (["Window 2 plus a global token t0", "Window 2", "Window 2 plus 3 global tokens t0–t2"],
                       ["full cache", "ring buffer, W = 16", "my cache"], ["sdpa", "naive"])  # the stored English
    with using_language("zh"):
        assert shown() == (["窗口 2，外加一个全局词元 t0", "窗口 2", "窗口 2，外加 3 个全局词元 t0–t2"],
                           ["完整缓存", "环形缓冲区，W = 16", "my cache"], ["sdpa", "朴素"])
    assert window_mask_figure(mask, window=2, title="t").axes[0].get_title() == "t"
    plt.close("all")
