"""The chapters' own probes (every chapter; ``utils/exercises/probing/<slug>.py`` and the contrast probes of
``utils/exercises/probing/contrasts.py``).

Each probe must stay silent on the reference and on correct answers written in other styles (einsum,
loops, a hand-written softmax or LayerNorm: ``tests/learner_answers/alternatives``), must speak on the
wrong answers it is meant for, saying what it observed, and must never raise, whatever the learner's
function returned. The probes run here exactly as the check cell runs them: the runner calls the
function on the probe's inputs, and ``explain`` reads the outcomes on the trusted side.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import pytest
import torch

from utils.exercises import at_scale, llm, multihead, positional, qkv, sdpa, transformer
from utils.exercises.runner import run_cases

MODULES = (qkv, sdpa, multihead, positional, transformer, at_scale, llm)
EXERCISES = {exercise.func_name: exercise for module in MODULES for exercise in module.EXERCISES if exercise.probes}
SLUG = {exercise.func_name: module.__name__.rpartition(".")[2] for module in MODULES for exercise in module.EXERCISES}


def observations(exercise, fn) -> dict[str, str]:
    """Probe name -> what it says about ``fn`` (only the probes that speak)."""
    found = {}
    for probe in exercise.probes:
        inputs = probe.make_inputs(torch.Generator().manual_seed(34))
        said = probe.explain(exercise.reference, inputs, run_cases(fn, inputs))
        if said is not None:
            assert isinstance(said, str) and said.strip(), (exercise.id, probe.name)
            found[probe.name] = said
    return found


def alternatives():
    from tests.learner_answers.measure import CORRECT_SPLITS

    for split, slug in ((split, slug) for split in CORRECT_SPLITS for slug in sorted(set(SLUG.values()))):
        if importlib.util.find_spec(f"tests.learner_answers.{split}.{slug}") is None:
            continue  # a chapter whose correct alternatives live in its own test (ch7: test_ch7_llm_exercises.py)
        module = importlib.import_module(f"tests.learner_answers.{split}.{slug}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            func_name = name.split("__")[0]
            if func_name in EXERCISES and fn.__module__ == module.__name__:
                yield pytest.param(func_name, fn, id=name)


def test_the_chapters_declare_probes():
    from utils.exercises import all_exercises, get

    assert set(EXERCISES) == {get(exercise_id).func_name for exercise_id in all_exercises()}  # all 22


@pytest.mark.parametrize("func_name", sorted(EXERCISES))
def test_silent_on_the_reference(func_name):
    exercise = EXERCISES[func_name]
    assert observations(exercise, exercise.reference) == {}


@pytest.mark.parametrize(("func_name", "fn"), list(alternatives()))
def test_silent_on_a_correct_answer_in_another_style(func_name, fn):
    assert observations(EXERCISES[func_name], fn) == {}


# (exercise, listed mistake, probe that must speak, words its observation must contain)
FIRES = [
    ("scaled_dot_product_attention", "softmax_over_queries", "weights_over_keys", "over the queries"),
    ("scaled_dot_product_attention", "scale_after_softmax", "weights_over_keys", "sums to 0.5"),
    ("scaled_dot_product_attention", "sqrt_num_keys", "scale_read_back", "(1/2.646): that is 1/sqrt(S)"),
    ("scaled_dot_product_attention", "no_scale", "scale_read_back", "times 1 (1/1)"),
    ("scaled_dot_product_attention", "inverted_mask", "mask_zero_and_polarity", "wrong way round"),
    ("scaled_dot_product_attention", "ignores_mask", "mask_zero_and_polarity", "do not change when a mask"),
    ("scaled_dot_product_attention", "fill_zero", "mask_zero_and_polarity", "not exactly 0"),
    ("scaled_dot_product_attention", "mask_after_softmax", "mask_zero_and_polarity", "allowed weights sum to"),
    ("scaled_dot_product_attention", "guard_all", "mask_zero_and_polarity", "has allowed keys gets all-zero"),
    ("scaled_dot_product_attention", "finite_fill", "fully_masked_row", "equal weights 1/S"),
    ("scaled_dot_product_attention", "nan_rows", "fully_masked_row", "NaN"),
    ("scaled_dot_product_attention", "reshape_k", "causal_future_token", "changed your output for earlier"),
    ("causal_mask", "future", "mask_regions", "above the diagonal"),
    ("causal_mask", "no_self", "mask_regions", "on the diagonal"),
    ("causal_mask", "blocked_convention", "mask_regions", "True exactly where a key is blocked"),
    ("padding_mask", "off_by_one", "real_positions", "True at positions [0, 1, 2, 3]"),
    ("padding_mask", "inverted", "real_positions", "True at the padding"),
    ("split_heads", "strided_heads", "where_entries_go", "holds x[0, 0, 2]; it must hold x[0, 0, 1]"),
    ("merge_heads", "no_transpose", "where_entries_go", "holds x[0, 0, 1, 0]; it must hold x[0, 1, 0, 0]"),
    ("multi_head_attention", "w_o_transposed", "ablation", "with w_o transposed"),
    ("multi_head_attention", "missing_w_o", "ablation", "with only w_o random it differs"),
    ("multi_head_attention", "one_head", "ablation", "one head over all E features"),
    ("multi_head_attention", "scale_by_model_dim", "ablation", "multiplied by 0.4082"),
    ("multi_head_attention", "split_interleaved", "ablation", "the split into heads"),
    ("multi_head_attention", "extra_causal", "ablation", "with a causal mask"),
    ("multi_head_attention", "no_fully_masked_guard", "ablation", "only on the query row whose keys are all"),
    ("multi_head_attention", "mask_ignored", "ablation", "on rows that have allowed keys"),
    ("multi_head_attention", "split_no_transpose", "token_permutation", "something mixes tokens"),
    ("feed_forward", "gelu", "activation_and_biases", "that is GELU"),
    ("feed_forward", "no_activation", "activation_and_biases", "that is no activation at all"),
    ("feed_forward", "no_b2", "activation_and_biases", "must be b2"),
    ("feed_forward", "activation_twice", "activation_and_biases", "yours is relu(b2)"),
    ("encoder_layer_post_ln", "ffn_gelu", "sublayer_ablation", "attention sublayer matches"),
    ("encoder_layer_post_ln", "w_o_transposed", "sublayer_ablation", "feed-forward sublayer matches"),
    ("encoder_layer_post_ln", "wrote_pre_ln", "sublayer_ablation", "other LayerNorm placement"),
    ("encoder_layer_post_ln", "no_residual", "sublayer_ablation", "both sublayers switched off"),
    ("encoder_layer_post_ln", "norm_without_affine", "sublayer_ablation", "weight 1 and bias 0"),
    ("encoder_layer_pre_ln", "skip_ffn", "sublayer_ablation", "the feed-forward sublayer differs"),
    ("encoder_layer_pre_ln", "no_norm1", "sublayer_ablation", "the attention sublayer differs"),
    ("encoder_layer_pre_ln", "ffn_from_x", "sublayer_ablation", "together they differ"),
    ("encoder_layer_pre_ln", "final_norm", "sublayer_ablation", "both sublayers switched off"),
    ("online_softmax_update", "no_rescale", "max_then_sum", "the max rises"),
    ("online_softmax_update", "block_max", "max_then_sum", "your new max is wrong"),
    ("online_softmax_update", "no_inf_guard", "max_then_sum", "all -inf block"),
    ("online_softmax_update", "no_shift", "max_then_sum", "on the first block"),
    ("sliding_window_mask", "strict", "reach_read_back", "query 6 may attend to keys 4 … 8"),
    ("sliding_window_mask", "plus_one", "reach_read_back", "keys 2 … 10"),
    ("sliding_window_mask", "loop_negative_start", "reach_read_back", "query 0"),
    ("sliding_window_mask", "inverted", "reach_read_back", "True outside the window"),
    ("attend_with_cache", "not_updated", "cache_and_empty_cache", "must have T + 1 = 6"),
    ("attend_with_cache", "prepend", "cache_and_empty_cache", "not the old cache followed by k_new"),
    ("attend_with_cache", "swapped", "cache_and_empty_cache", "holds the v cache"),
    ("attend_with_cache", "before_append", "cache_and_empty_cache", "must be v_new"),
    ("attend_with_cache", "no_scale", "cache_and_empty_cache", "your updated caches are right"),
    ("attend_with_cache", "scale_by_cache_length", "cache_and_empty_cache", "with an empty cache (T = 0"),
    # contrast probes: right at some sizes or settings, wrong at others
    ("project_qkv", "mm", "shapes", "right on x(5, 6), but not on x(1, 5, 6)"),
    ("attention_scores", "squeezed", "shapes", "but not on q(1, 4, 3), k(1, 4, 3)"),
    ("scaled_dot_product_attention", "sqrt_dim_1", "shapes", "right on q(4, 3), k(4, 3), v(4, 2), but not"),
    ("causal_mask", "future", "sizes", "right on size=1, but not on size=2"),
    ("padding_mask", "off_by_one", "sizes", "but not on lengths(3,), max_len=4"),
    ("split_heads", "view_straight_to_NHLD", "shapes", "right on x(2, 4, 6), num_heads=1, but not"),
    ("merge_heads", "view_after_transpose", "shapes", "right on x(2, 1, 4, 6), but not"),
    ("multi_head_attention", "merge_no_transpose", "shapes", "num_heads=1, but not on x(1, 4, 6), num_heads=2"),
    ("add_positional_encoding", "batch_axis", "shapes", "but not on x(1, 5, 4), pe(9, 4)"),
    ("relative_shift_matrix", "absolute_k", "shifts", "right on k=0; k=1; k=2; k=3, but not on k=-1; k=-2"),
    ("relative_shift_matrix", "block_sin_cos_swapped", "shift_algebra", "for k = 0 your matrix is not the identity"),
    ("relative_shift_matrix", "missing_minus", "shift_algebra", "your M_1 @ M_1 is not your M_2"),
    ("relative_shift_matrix", "absolute_k", "shift_algebra", "your M_1 @ M_-1 is not the identity"),
    ("sinusoidal_encoding", "exponent_pair_index", "sizes", "right on length=1, d_model=2"),
    ("sinusoidal_encoding", "exponent_pair_index", "columns_and_frequencies", "w = [1, 0.316, 0.1, 0.0316]"),
    ("feed_forward", "three_dims_only", "shapes", "right on x(1, 3, 4); x(2, 3, 4), but not on x(4,)"),
    ("online_softmax_update", "block_max", "shapes", "but not on running_max(3,), running_sum(3,), block(3, 4)"),
    ("block_score_grad", "delta_matrix", "shapes", "right on grad_out(2, 2, 1, 5)"),
    ("block_score_grad", "block_delta", "delta_read_back", "rowsum(P ⊙ dP) over this block's keys only"),
    ("sliding_window_mask", "strict", "sizes", "right on L=3, window=5; L=1, window=2, but not on L=8"),
    ("attend_with_cache", "scale_by_length", "shapes", "but not on"),
    ("rms_norm", "eps_outside", "divisor_read_back", "eps added outside the square root"),
    ("rms_norm", "layer_norm", "divisor_read_back", "which is LayerNorm"),
    ("rms_norm", "no_weight", "divisor_read_back", "the gain is ignored"),
    ("rms_norm", "no_keepdim", "shapes", "right on x(6,); x(1, 6), but not on x(4, 6)"),
    ("rotate_half_rope", "interleaved", "pairs_and_angles", "chapter 4's interleaved layout"),
    ("rotate_half_rope", "angles_repeat_interleaved", "pairs_and_angles", "repeat_interleave'd"),
    ("rotate_half_rope", "base_ignored", "pairs_and_angles", "those of base 10000"),
    ("rotate_half_rope", "exponent_pair_index", "pairs_and_angles", "your exponents are [0, 0.125, 0.25, 0.375]"),
    ("rotate_half_rope", "interleaved", "shapes", "right on x(1, 2, 3, 2), but not on x(3, 8)"),
    ("grouped_query_attention", "tiled", "heads_read_back", "read key/value heads [0, 1, 0, 1, 0, 1]"),
    ("grouped_query_attention", "query_heads_dropped", "heads_read_back", "your output has 2 heads"),
    ("grouped_query_attention", "no_scale", "weights_read_back", "c = 1: no scale at all"),
    ("grouped_query_attention", "causal_one_ahead", "weights_read_back", "query 0 gives weight to key 1"),
    ("grouped_query_attention", "tiled", "shapes", "right on query(2, 2, 3, 4)"),
    ("grouped_query_attention", "values_not_repeated", "repeats", "repeat the values as well as the keys"),
    ("sink_window_mask", "sinks_see_future", "keys_read_back", "a sink that comes after it"),
    ("sink_window_mask", "sinks_inside_window", "keys_read_back", "window − sinks"),
    ("sink_window_mask", "sinks_ignored", "sizes", "right on L=8, window=3, sinks=0"),
]

# (exercise, realistic wrong answer of tests/learner_answers that no Mistake lists, probe, words)
FIRES_ON_ANSWERS = [
    ("multi_head_attention", "tune2.multihead.multi_head_attention__residual_added", "ablation",
     "your output is the reference's plus x: a residual connection"),
    ("encoder_layer_post_ln", "tune2.transformer.encoder_layer_post_ln__values_from_w_o", "sublayer_ablation",
     "your attention reads a weight where w_v belongs"),
    ("sinusoidal_encoding", "heldout2.positional.sinusoidal_encoding__sine_twice", "columns_and_frequencies",
     "hold the same sines again"),
    ("block_score_grad", "heldout2.at_scale.block_score_grad__delta_from_grad_out_twice", "delta_read_back",
     "that is rowsum(dO ⊙ dO)"),
    ("relative_shift_matrix", "tune2.positional.relative_shift_matrix__elementwise_power", "shifts",
     "right on k=1, but not on k=0"),
    ("rotate_half_rope", "tune_ch7.llm.rotate_half_rope__no_outer_product", "pairs_and_angles",
     "the same at every position"),
    ("rms_norm", "tune_ch7.llm.rms_norm__mean_abs", "divisor_read_back", "the mean of |x| plus eps"),
]


@pytest.mark.parametrize(("func_name", "answer_id", "probe", "words"), FIRES_ON_ANSWERS,
                         ids=[a.rpartition(".")[2] for _, a, *_ in FIRES_ON_ANSWERS])
def test_speaks_on_a_realistic_answer_no_mistake_lists(func_name, answer_id, probe, words):
    split, slug, name = answer_id.split(".")
    module = importlib.import_module(f"tests.learner_answers.{split}.{slug}")
    said = observations(EXERCISES[func_name], getattr(module, name))
    assert probe in said, said
    assert words in said[probe]


@pytest.mark.parametrize(("func_name", "mistake", "probe", "words"), FIRES, ids=[f"{f}-{m}" for f, m, *_ in FIRES])
def test_speaks_on_the_wrong_answer_it_is_for(func_name, mistake, probe, words):
    exercise = EXERCISES[func_name]
    wrong = next(m for m in exercise.mistakes if m.name == mistake)
    said = observations(exercise, wrong.fn)
    assert probe in said, said
    assert words in said[probe]


def _sdpa_relu_after_mix(q, k, v, mask=None):  # a wrong answer no Mistake lists: not linear in v
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return torch.relu(weights @ v), weights


def test_linear_in_v_speaks_on_an_output_that_is_not():
    said = observations(EXERCISES["scaled_dot_product_attention"], _sdpa_relu_after_mix)
    assert "linear_in_v" in said and "not linear in v" in said["linear_in_v"]
    assert list(said) == ["linear_in_v"]  # the weights are right: no other probe speaks


def test_every_probe_speaks_on_some_wrong_answer():
    fired = {(f, p) for f, _, p, _ in FIRES} | {("scaled_dot_product_attention", "linear_in_v")}
    assert {(name, probe.name) for name, exercise in EXERCISES.items() for probe in exercise.probes} <= fired


def _garbage(kind):
    def fn(*args, **kwargs):
        if kind == "raises":
            raise ValueError("nope")
        if kind == "none":
            return None
        if kind == "int":
            return 3
        if kind == "tuple":
            return (torch.zeros(1), torch.zeros(2), torch.zeros(3))
        return torch.full((2, 2), float("nan"))
    return fn


@pytest.mark.parametrize("kind", ["raises", "none", "int", "tuple", "nan"])
@pytest.mark.parametrize("func_name", sorted(EXERCISES))
def test_never_raises_whatever_the_function_returns(func_name, kind):
    observations(EXERCISES[func_name], _garbage(kind))  # any observation, or none, but no exception


def test_tune_answers_get_no_error_from_a_probe():
    """The realistic wrong answers of the tune half run through every probe without an exception."""
    for split, slug in [("tune", slug) for slug in sorted(set(SLUG.values())) if slug != "llm"] + [("tune_ch7", "llm")]:
        module = importlib.import_module(f"tests.learner_answers.{split}.{slug}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            func_name = name.split("__")[0]
            if func_name in EXERCISES and fn.__module__ == module.__name__:
                observations(EXERCISES[func_name], fn)
