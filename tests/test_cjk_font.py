"""The CJK font the package carries: it covers every catalogue, Chinese renders (no tofu, no missing-glyph
warning) in every course figure, and English figures are drawn exactly as without it."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import warnings
import zipfile

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tomllib
import torch
from fontTools.ttLib import TTFont
from matplotlib import font_manager

import utils.plotting  # noqa: F401  (importing the package registers the font)
from utils.explorers.multihead import head_explorer_state
from utils.paths import REPO_ROOT
from utils.plotting.fonts import CJK_FONT_FAMILY, CJK_FONT_PATH, cjk_characters, register_cjk_font
from utils.plotting.fonts.make_subset import CATALOGUE_GLOBS, catalogue_characters, subset_characters

# draws every figure in Chinese (plotting layer): `make unit` runs it, `make quick` leaves it out
pytestmark = pytest.mark.slow

RERUN = ("rerun `python -m utils.plotting.fonts.make_subset --source NotoSansCJK-Regular.ttc` "
         "(its docstring says where the source comes from) and commit the new font")
SENTENCE = "他打碎了那个杯子，然后把它捡起来。"
WORDS = ["他", "打碎", "了", "那个", "杯子", "，", "然后", "把", "它", "。"]  # 10 words, like chapter 5's sentences
ENGLISH = ["the", "old", "king", "met", "the", "girl", "because", "she", "left", "."]


def _font_cmap() -> dict[int, str]:
    return TTFont(CJK_FONT_PATH, lazy=True).getBestCmap()


def _missing_glyph_warnings(fig) -> list[str]:
    """Draw ``fig`` (as a notebook shows it: a PNG) and return the missing-glyph warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png", dpi=40)
    plt.close(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return pixels


# --- (a) the subset covers the catalogues, GB 2312 and full-width punctuation ----------------------

def test_every_cjk_character_of_every_catalogue_is_in_the_font():
    used = catalogue_characters()
    assert "查" in used and "键" in used, f"found no catalogue under {CATALOGUE_GLOBS}: the scan is broken"
    cmap = _font_cmap()
    missing = {char: files for char, files in used.items() if ord(char) not in cmap}
    assert not missing, (f"{len(missing)} CJK characters of the catalogues are not in {CJK_FONT_PATH.name}: "
                         + ", ".join(f"{c} (U+{ord(c):04X}, in {files[0]})" for c, files in sorted(missing.items()))
                         + f"; {RERUN}")


def test_the_subset_covers_gb2312_and_full_width_punctuation():
    cmap = _font_cmap()
    wanted = subset_characters()
    assert len(cjk_characters("".join(wanted)) & {chr(c) for c in range(0x4E00, 0xA000)}) >= 6763
    assert set("，。：；！？（）「」《》、…—") <= wanted
    missing = sorted(c for c in wanted if ord(c) not in cmap)
    assert not missing, f"the font lacks {''.join(missing[:40])}...; {RERUN}"
    assert ord("A") not in cmap and ord("0") not in cmap, "Latin and digits belong to DejaVu Sans, not the subset"


def test_the_font_is_small_licensed_and_shipped_with_the_package():
    assert CJK_FONT_PATH.stat().st_size < 5_000_000
    licence = (CJK_FONT_PATH.parent / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and CJK_FONT_PATH.name in licence
    names = TTFont(CJK_FONT_PATH, lazy=True)["name"]
    assert names.getDebugName(1) == CJK_FONT_FAMILY and "Open Font License" in names.getDebugName(13)
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = config["tool"]["setuptools"]["package-data"]["utils.plotting.fonts"]
    assert "*.otf" in shipped and "OFL.txt" in shipped


def test_cjk_characters_picks_hanzi_and_full_width_punctuation_only():
    assert cjk_characters("QKV 查询（键）, 值: …") == set("查询（键）值")


# --- (b) registration, no missing glyphs, no tofu, English unchanged -------------------------------

def test_importing_utils_plotting_registers_the_font_once_as_a_fallback():
    assert matplotlib.rcParams["font.family"][-1] == CJK_FONT_FAMILY
    assert matplotlib.rcParams["font.family"][0] == "sans-serif"
    register_cjk_font()
    entries = [e for e in font_manager.fontManager.ttflist if e.fname == str(CJK_FONT_PATH)]
    assert sorted(e.weight for e in entries) == list(range(100, 1000, 100))  # one face for every weight
    assert {e.name for e in entries} == {CJK_FONT_FAMILY}
    assert matplotlib.rcParams["font.family"].count(CJK_FONT_FAMILY) == 1
    found = font_manager.fontManager._find_fonts_by_props(font_manager.FontProperties())
    assert [str(p) for p in found][0].endswith("DejaVuSans.ttf") and str(found[-1]) == str(CJK_FONT_PATH)


def test_bold_text_in_any_language_logs_no_font_warning(caplog):
    # findfont logs "Failed to find font weight bold" for a family without that weight: a notebook shows it on stderr.
    with caplog.at_level("WARNING", logger="matplotlib.font_manager"):
        for weight in ("bold", "light", "heavy", 600):
            fig = plt.figure(figsize=(2, 1))
            fig.text(0.1, 0.5, "NaN 查询", fontweight=weight)
            assert _missing_glyph_warnings(fig) == []
    ours = [r.getMessage() for r in caplog.records if CJK_FONT_FAMILY in r.getMessage()]
    assert ours == []  # (DejaVu Sans itself has no 600 or heavy: matplotlib's own warning for those stays)


def _chinese_figure():
    fig, ax = plt.subplots(figsize=(4, 3.5))
    ax.imshow(torch.rand(len(WORDS), len(WORDS)).numpy())
    ax.set_xticks(range(len(WORDS)), WORDS, rotation=90)
    ax.set_yticks(range(len(WORDS)), WORDS)
    ax.set_title("「查询」「键」「值」：谁在关注谁？")
    ax.set_xlabel("键（被关注的词）")
    ax.set_ylabel("查询（发出关注的词）")
    fig.suptitle(SENTENCE)
    return fig


def test_chinese_title_labels_and_tokens_render_without_missing_glyphs():
    assert _missing_glyph_warnings(_chinese_figure()) == []


def _glyph(char: str) -> np.ndarray:
    fig = plt.figure(figsize=(0.6, 0.6), dpi=100)
    fig.text(0.5, 0.5, char, fontsize=30, ha="center", va="center")
    return _pixels(fig)


def test_hanzi_render_as_their_own_glyphs_not_tofu():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph fails here, before the pixels are compared
        query, key, value, blank = _glyph("查"), _glyph("键"), _glyph("值"), _glyph(" ")
    for ink in (query, key, value):
        assert (ink < 128).any(), "the hanzi drew nothing"
        assert not np.array_equal(ink, blank)
    # Tofu is one box for every missing character: three different hanzi must differ.
    assert (query != key).any() and (key != value).any() and (query != value).any()


def _english_figure():
    from utils.plotting.common import attention_heatmap
    from utils.plotting.transformer import layer_diagrams

    torch.manual_seed(0)
    return [attention_heatmap(torch.rand(4, 4).softmax(-1), ENGLISH[:4], title="Who attends to whom: 0.25 (QKV)"),
            layer_diagrams()]


def test_english_figures_are_pixel_for_pixel_what_they_were_without_the_font():
    with_font = [_pixels(fig) for fig in _english_figure()]
    with matplotlib.rc_context({"font.family": ["sans-serif"]}):
        without = [_pixels(fig) for fig in _english_figure()]
    for got, want in zip(with_font, without, strict=True):
        assert got.shape == want.shape and np.array_equal(got, want)


# --- (c) every course figure ------------------------------------------------------------------------

def _kv_state(words):
    from utils.decoder import TinyDecoder, decode_trace
    from utils.explorers.at_scale import kv_cache_explorer_state

    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=len(words), d_model=16, num_heads=2, num_layers=2, max_len=16).eval()
    prompt = torch.randint(0, len(words), (1, 4))
    traces = {None: decode_trace(model, prompt, 4), 2: decode_trace(model, prompt, 4, window=2)}
    return kv_cache_explorer_state(prompt[0].tolist(), traces, 2, window=2, vocab=words)


def _sentence_state(words):
    from utils.explorers.transformer import sentence_state
    from utils.layers import TinyEncoderClassifier
    from utils.tasks import NOUNS, VOCAB

    torch.manual_seed(0)
    model = TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS), norm_first=True).eval()
    return dataclasses.replace(sentence_state(model, " ".join(ENGLISH), 1, 1), words=list(words))


def _chinese_tokens(state, words):
    """``state`` with its tokens replaced by Chinese ``words`` (repeated to its length)."""
    return dataclasses.replace(state, tokens=[words[i % len(words)] for i in range(len(state.tokens))])


def _figures():
    """Each figure function of ``utils.plotting`` -> a builder from tokens, with small inputs as the chapters use."""
    from utils import at_scale, scaling
    from utils.plotting import at_scale as p6
    from utils.plotting import common
    from utils.plotting import multihead as p3
    from utils.plotting import positional as p4
    from utils.plotting import qkv as p1
    from utils.plotting import sdpa as p2
    from utils.plotting import transformer as p5
    from utils.positional import sinusoidal_encoding
    from utils.training import History
    from utils.widgets import at_scale as w6
    from utils.widgets import positional as w4
    from utils.widgets import sdpa as w2
    from utils.widgets import transformer as w5

    def weights(*shape):
        return torch.rand(*shape).softmax(-1)

    def linear(w):
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 2)
        return p1.linear_weight_figure(lin.weight.detach().T, lin)

    rows = [{"impl": impl, "length": n, "peak_mib": n / 64, "skipped": False, "predicted_mib": None, "mode": mode}
            for impl in ("naive", "sdpa", "tiled") for n in (256, 512) for mode in ("forward", "backward")]
    speed = [{"name": "ours", "mode": "forward", "ratio": 1.1, "ratio_min": 1.0, "ratio_max": 1.2}]
    return {
        "attention_heatmap": lambda w: common.attention_heatmap(weights(3, 3), w[:3], title=" ".join(w[:5])),
        "attention_grid": lambda w: common.attention_grid(weights(2, 2, 4, 4), w[:4]),
        "parameter_free_figure": lambda w: p1.parameter_free_figure(w[:3], torch.eye(3), weights(3, 3)),
        "linear_weight_figure": linear,
        "scores_figure": lambda w: p1.scores_figure(w[:3], torch.randn(3, 3), title=w[4]),
        "query_scores_figure": lambda w: p1.query_scores_figure(w[:3], torch.randn(3, 3), 1),
        "sdpa_steps_figure": lambda w: p2.sdpa_steps_figure(torch.randn(3, 3), torch.randn(3, 3), weights(3, 3), w[:3]),
        "variance_figure": lambda w: p2.variance_figure(scaling.dot_product_variance([4, 16], num_samples=100)),
        "saturation_figure": lambda w: p2.saturation_figure(scaling.softmax_saturation([4, 16], num_rows=8)),
        "training_figure": lambda w: p2.training_figure({"scaled": [[2.0, 1.0]], "unscaled": [[2.0, 1.9]]}, dim=64,
                                                        seeds=(0,)),
        "masks_figure": lambda w: p2.masks_figure(torch.tensor([[True, True, False], [True, True, True]]),
                                                  torch.ones(3, 3, dtype=torch.bool).tril(), [w[:2], w[2:5]], w[2:5]),
        "scale_explorer_figure": lambda w: p2.scale_explorer_figure(w2.scale_explorer_state(16)),
        "mask_polarity_figure": lambda w: p2.mask_polarity_figure(w2.mask_polarity_state("both", "mha", True, pad=2,
                                                                                          side="left")),
        "head_split_figure": lambda w: p3.head_split_figure(torch.arange(8.0), 4, token=w[4]),
        "head_maps_figure": lambda w: p3.head_maps_figure(weights(2, 4, 4), w[:4]),
        "head_token_figure": lambda w: p3.head_token_figure(weights(2, 4, 4), w[:4], head=1, token=0),
        "head_explorer_figure": lambda w: p3.head_explorer_figure(_chinese_tokens(head_explorer_state(3, 1, 0), w)),
        "head_similarity_figure": lambda w: p3.head_similarity_figure(torch.eye(3)),
        "speed_ratio_figure": lambda w: p3.speed_ratio_figure(speed),
        "encoding_heatmap": lambda w: p4.encoding_heatmap(sinusoidal_encoding(10, 8)),
        "encoding_curves": lambda w: p4.encoding_curves(sinusoidal_encoding(20, 8), [0, 1, 6]),
        "wavelength_plot": lambda w: p4.wavelength_plot(16),
        "similarity_figure": lambda w: p4.similarity_figure(sinusoidal_encoding(16, 8), position=5),
        "positional_explorer_figure": lambda w: p4.positional_explorer_figure(
            w4.positional_explorer_state(next(iter(w4.ENCODING_KINDS)), 4, 2, length=16, d_model=8)),
        "layer_diagrams": lambda w: p5.layer_diagrams(),
        "loss_curves": lambda w: p5.loss_curves({"post-LN": [3.0, 2.9], "pre-LN": [3.0, 1.0]}, chance=2.77),
        "grad_norms_figure": lambda w: p5.grad_norms_figure({"post-LN": torch.tensor([1.0, 2.0])}),
        "training_curves": lambda w: p5.training_curves(History(loss=[3.0, 2.0, 1.0], eval_steps=[2, 3],
                                                                eval_accuracy=[0.5, 0.9]), chance=0.25),
        "sentence_attention_grid": lambda w: p5.sentence_attention_grid(weights(2, 2, 5, 5), w[:5], 2),
        "head_ablation_figure": lambda w: p5.head_ablation_figure({"all heads on": 1.0, "L1H1 off": 0.9}, chance=0.25),
        "pronoun_heads_figure": lambda w: p5.pronoun_heads_figure(torch.tensor([[1.0, 0.5]]), ["all on"], [w[0], w[8]],
                                                                  chance=0.25),
        "layer_head_similarity_figure": lambda w: p5.layer_head_similarity_figure(torch.eye(2).expand(2, 2, 2)),
        "attention_view_figure": lambda w: p5.attention_view_figure(
            w5.AttentionView(weights(5, 5), w[:5], 0, 4, w[4], f"{w[8]} → {w[4]}")),
        "sentence_figure": lambda w: p5.sentence_figure(_sentence_state(w)),
        "memory_scaling_figure": lambda w: p6.memory_scaling_figure(rows, heads=2),
        "window_mask_figure": lambda w: p6.window_mask_figure(at_scale.global_tokens_mask(8, 1, 1)),
        "receptive_field_figure": lambda w: p6.receptive_field_figure(
            at_scale.receptive_field(at_scale.sliding_window_mask(8, 1), 3)[:, 7, :], query=7),
        "window_explorer_figure": lambda w: p6.window_explorer_figure(w6.window_explorer_state(2, 0, 3, length=16)),
        "online_softmax_figure": lambda w: p6.online_softmax_figure(torch.tensor([1.0, 3.0, 0.5, 2.0, 6.0]), 2),
        "cache_memory_figure": lambda w: p6.cache_memory_figure([1, 2, 3], {"full": [10, 20, 30], "W = 2": [20] * 3}),
        "kv_cache_explorer_figure": lambda w: p6.kv_cache_explorer_figure(_kv_state(w)),
    }


FIGURES = _figures()


def test_every_figure_function_of_utils_plotting_has_a_builder_here():
    found = set()
    for slug in ("common", "qkv", "sdpa", "multihead", "positional", "transformer", "at_scale"):
        module = importlib.import_module(f"utils.plotting.{slug}")
        found |= {name for name in module.__all__ if inspect.isfunction(getattr(module, name))
                  and inspect.signature(getattr(module, name)).return_annotation in ("Figure", "'Figure'")}
    assert found - set(FIGURES) == set(), "add a builder to FIGURES for each new figure function"
    assert set(FIGURES) - found == set()


def _messages():
    try:
        return importlib.import_module("utils.i18n.messages")
    except ModuleNotFoundError:
        return None


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_course_figure_draws_chinese_tokens_without_missing_glyphs(name):
    if _messages() is not None:
        pytest.skip("covered by test_every_course_figure_renders_chinese_without_missing_glyphs (tokens and titles)")
    torch.manual_seed(0)
    assert _missing_glyph_warnings(FIGURES[name](WORDS)) == []


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_course_figure_renders_chinese_without_missing_glyphs(name):
    messages = _messages()
    if messages is None:
        pytest.skip("utils.i18n.messages (the message catalogue, issue 20) is not on this branch yet")
    torch.manual_seed(0)
    with messages.using_language("zh"):
        assert _missing_glyph_warnings(FIGURES[name](WORDS)) == []


@pytest.mark.slow
def test_the_wheel_ships_the_font_and_its_licence(course_wheel):
    with zipfile.ZipFile(course_wheel) as archive:
        assert archive.read(f"utils/plotting/fonts/{CJK_FONT_PATH.name}") == CJK_FONT_PATH.read_bytes()
        assert "utils/plotting/fonts/OFL.txt" in archive.namelist()
