"""Tests of chapter 5's own modules: exercises, training helpers, figures, explorer and quiz."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils.attention import padding_mask
from utils.exercises import transformer as ex
from utils.exercises.check_cell import run_public_check
from utils.exercises.judging import compare
from utils.exercises.mistakes.transformer import _wrong_layer
from utils.explorers.transformer import attention_view
from utils.heads import head_similarity
from utils.layers import FeedForward, TinyEncoderClassifier, TransformerEncoderLayer
from utils.plotting import transformer as plots
from utils.tasks import NOUNS, VOCAB, class_guess_accuracy, pronoun_task
from utils.training import (
    ablation_configurations,
    ablation_study,
    accuracy,
    accuracy_by_pronoun,
    all_heads,
    grad_norms_per_layer,
    head_ablation,
    heads_switched_off,
    largest_rise,
    referent_attention,
    train,
)
from utils.widgets.transformer import attention_explorer, ch5_quiz


def _tiny_model(num_layers=2, norm_first=True, seed=0):
    torch.manual_seed(seed)
    return TinyEncoderClassifier(len(VOCAB), 16, 2, num_layers, 32, len(NOUNS), norm_first=norm_first)


# ------------------------------------------------------------------ exercises


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feed_forward_reference_matches_the_reference_module(seed):
    for case in ex.FEED_FORWARD.cases(seed):
        E, hidden = case["w1"].shape
        module = FeedForward(E, hidden)
        with torch.no_grad():
            module.linear1.weight.copy_(case["w1"].T)
            module.linear1.bias.copy_(case["b1"])
            module.linear2.weight.copy_(case["w2"].T)
            module.linear2.bias.copy_(case["b2"])
            x = case["x"] if case["x"].dim() == 3 else case["x"].reshape(1, -1, E)
            assert_close(ex.FEED_FORWARD.reference(**case).reshape(x.shape), module(x))


def _torch_layer(case, norm_first):
    """nn.TransformerEncoderLayer holding the case's tensors (eval mode, zero attention biases)."""
    E, hidden = case["w1"].shape
    layer = nn.TransformerEncoderLayer(E, case["num_heads"], hidden, dropout=0.0, batch_first=True,
                                       norm_first=norm_first).eval()
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([case["w_q"].T, case["w_k"].T, case["w_v"].T]))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(case["w_o"].T)
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(case["w1"].T)
        layer.linear1.bias.copy_(case["b1"])
        layer.linear2.weight.copy_(case["w2"].T)
        layer.linear2.bias.copy_(case["b2"])
        for norm, i in ((layer.norm1, 1), (layer.norm2, 2)):
            norm.weight.copy_(case[f"ln{i}_weight"])
            norm.bias.copy_(case[f"ln{i}_bias"])
    return layer


@pytest.mark.parametrize("exercise,norm_first", [(ex.ENCODER_POST_LN, False), (ex.ENCODER_PRE_LN, True)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_encoder_references_match_torch_and_the_written_out_layer(exercise, norm_first, seed):
    written_out = _wrong_layer(norm_first)
    for case in exercise.cases(seed):
        expected = exercise.reference(**case)
        with torch.no_grad():
            assert_close(expected, _torch_layer(case, norm_first)(case["x"]), atol=1e-5, rtol=1e-5)
        assert_close(written_out(**case), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.slow  # seconds of CPU: `make unit` runs it, `make quick` leaves it out
@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_every_mistake_differs_from_the_reference_and_is_diagnosed(exercise):
    cases = exercise.cases(0)
    def differs(mistake, case):
        try:
            wrong = mistake.fn(**case)
        except (RuntimeError, TypeError):  # e.g. F.linear without the transpose, D = E / H: an error differs
            return True
        return compare(wrong, exercise.reference(**case), exercise.atol, exercise.rtol) is not None

    for mistake in exercise.mistakes:
        assert any(differs(mistake, c) for c in cases), mistake.name
        verdict = run_public_check(exercise, mistake.fn, quiet=True)
        assert not verdict.passed and mistake.diagnosis in verdict.message


@pytest.mark.parametrize("exercise", ex.EXERCISES, ids=lambda e: e.id)
def test_reference_passes_and_cases_are_varied(exercise):
    assert run_public_check(exercise, exercise.reference, quiet=True).passed
    cases = exercise.cases(0)
    assert 4 <= len(cases) <= 7  # 7: the single vector x (E,) of feed_forward
    shapes = {tuple(c["x"].shape) for c in cases}
    assert len(shapes) == len(cases)
    assert any(len(s) >= 2 and s[-2] == 1 for s in shapes)  # a single token
    assert ex.ENCODER_POST_LN.points == ex.ENCODER_PRE_LN.points == 3 and ex.FEED_FORWARD.points == 1


def test_encoder_exercises_forbid_the_ready_made_layers():
    for exercise in (ex.ENCODER_POST_LN, ex.ENCODER_PRE_LN):
        assert "torch.nn.functional.scaled_dot_product_attention" in exercise.forbidden
        assert "torch.nn.TransformerEncoderLayer" in exercise.forbidden

        def cheat(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
            q = k = v = x.unsqueeze(1)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v).squeeze(1)

        assert run_public_check(exercise, cheat, quiet=True).status == "forbidden"


def _learner_feed_forward(bug=None):
    """Feed-forward code as a learner writes it, with one named bug."""

    def feed_forward(x, w1, b1, w2, b2):
        if bug == "einsum":
            hidden = F.relu(torch.einsum("ble,ef->blf", x, w1) + b1)
            return torch.einsum("blf,fe->ble", hidden, w2) + b2
        activation = {"silu": F.silu, "tanh": torch.tanh, "gelu_tanh": lambda h: F.gelu(h, approximate="tanh")}
        if bug == "relu_x":  # the ReLU moved onto the input
            activation["relu_x"], x = (lambda h: h), torch.relu(x)
        hidden = activation.get(bug, torch.relu)(x @ w1 + b1)
        return hidden @ w2 if bug == "no_b2" else hidden @ w2 + b2

    return feed_forward


def _learner_layer(norm_first, bug=None):
    """An encoder layer as a learner writes it (not the exercise module's code), with one named bug."""

    def layer(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
        N, L, E = x.shape
        D = E // num_heads

        def attention(h):
            project = (lambda t, w: F.linear(t, w)) if bug == "F.linear" else torch.matmul
            if bug == "view_no_transpose":
                q, k, v = (project(h, w).view(N, L, num_heads, D) for w in (w_q, w_k, w_v))
            else:
                q, k, v = (project(h, w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k, w_v))
            scale = {"sqrt_E": math.sqrt(E), "sqrt_H": math.sqrt(num_heads),
                     "sqrt_L": math.sqrt(k.size(-2))}.get(bug, math.sqrt(D))
            if bug == "k_q":
                scores = k @ q.transpose(-2, -1)
            else:
                scores = q @ (k.transpose(1, 2) if bug == "transpose_1_2" else k.transpose(-2, -1))
            out = torch.softmax(scores / scale, dim=1 if bug == "softmax_dim_1" else -1) @ v
            merged = out.reshape(N, L, E) if bug == "view_no_transpose" else out.transpose(1, 2).reshape(N, L, E)
            return merged if bug == "no_w_o" else project(merged, w_o)

        def norm(h, weight, bias):
            if bug == "std_plus_eps":
                mean, std = h.mean(-1, keepdim=True), h.std(-1, keepdim=True, unbiased=False)
                return (h - mean) / (std + 1e-5) * weight + bias
            if bug == "norm_dim_1":
                mean, var = h.mean(1, keepdim=True), h.var(1, keepdim=True, unbiased=False)
                return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias
            return F.layer_norm(h, (E,), weight, bias, eps={"eps_1e-12": 1e-12, "eps_1e-6": 1e-6}.get(bug, 1e-5))

        def ffn(h):
            hidden = torch.relu(h @ w1 + b1)
            return hidden @ w2 if bug == "no_b2" else hidden @ w2 + b2

        if not norm_first:
            total = x + attention(x)
            x = norm(total, ln1_weight, ln1_bias)
            return norm((total if bug == "residual_from_sum" else x) + ffn(x), ln2_weight, ln2_bias)
        h = x if bug == "no_norm1" else norm(x, ln1_weight, ln1_bias)
        x = (h if bug == "residual_from_norm_attn" else 0 if bug == "no_attn_residual" else x) + attention(h)
        h = x if bug == "no_norm2" else norm(x, ln2_weight, ln2_bias)
        out = (h if bug == "residual_from_norm_ffn" else x) + ffn(h)
        return F.layer_norm(out, (E,)) if bug == "final_norm" else out

    return layer


def test_learner_style_layers_pass():
    for exercise, norm_first in ((ex.ENCODER_POST_LN, False), (ex.ENCODER_PRE_LN, True)):
        assert run_public_check(exercise, _learner_layer(norm_first), quiet=True).passed
    assert run_public_check(ex.FEED_FORWARD, _learner_feed_forward(), quiet=True).passed


def test_feed_forward_without_b2_is_named():
    verdict = run_public_check(ex.FEED_FORWARD, _learner_feed_forward("no_b2"), quiet=True)
    assert not verdict.passed and "left out b2" in verdict.message


@pytest.mark.parametrize("bug,words", [("relu_x", "applied the ReLU to x"), ("einsum", "only for a 3-D x"),
                                       ("silu", "SiLU"), ("tanh", "used tanh"), ("gelu_tanh", "its tanh form")])
def test_feed_forward_learner_bugs_found_in_review_are_named(bug, words):
    verdict = run_public_check(ex.FEED_FORWARD, _learner_feed_forward(bug), quiet=True)
    assert not verdict.passed and words in verdict.message and "Hint:" not in verdict.message, verdict.message


# (bug, exercises it applies to, words the diagnosis must contain): issue 14's named ch5 bugs
_NAMED_BUGS = [
    ("no_b2", (False, True), "leaves out b2"),
    ("no_w_o", (False, True), "multiply by w_o"),
    ("view_no_transpose", (False, True), "transpose(1, 2)"),
    ("sqrt_E", (False, True), "divided the scores by sqrt(E)"),
    ("sqrt_H", (False, True), "divided the scores by sqrt(num_heads)"),
    ("std_plus_eps", (False, True), "std + eps"),
    ("eps_1e-12", (False, True), "leaves out eps"),
    ("final_norm", (True,), "no LayerNorm after the last residual"),
    ("residual_from_norm_attn", (True,), "around the attention sublayer your residual starts from norm1(x)"),
    ("residual_from_norm_ffn", (True,), "around the feed-forward sublayer your residual starts from norm2(x)"),
    # found in the learner review of chapter 5: each fell back to the generic hint before
    ("F.linear", (False, True), "multiplied by the transposed weights"),
    ("k_q", (False, True), "queries and keys swapped"),
    ("transpose_1_2", (False, True), "k.transpose(1, 2) swaps the heads and the tokens"),
    ("sqrt_L", (False, True), "divided the scores by sqrt(L)"),
    ("softmax_dim_1", (False, True), "softmax runs over the heads"),
    ("norm_dim_1", (False, True), "mean and variance over the tokens"),
    ("eps_1e-6", (False, True), "uses eps = 1e-6"),
    ("residual_from_sum", (False,), "second residual adds the un-normalised sum"),
    ("no_norm1", (True,), "attention reads the un-normalised x"),
    ("no_norm2", (True,), "feed-forward reads the un-normalised stream"),
    ("no_attn_residual", (True,), "attention sublayer has no residual"),
]


_NAMED_CASES = [(bug, norm_first, words) for bug, applies, words in _NAMED_BUGS for norm_first in applies]


@pytest.mark.parametrize("bug,norm_first,words", _NAMED_CASES,
                         ids=[f"{b}-{'pre' if n else 'post'}_ln" for b, n, _ in _NAMED_CASES])
def test_named_layer_bugs_get_their_diagnosis(bug, norm_first, words):
    exercise = ex.ENCODER_PRE_LN if norm_first else ex.ENCODER_POST_LN
    verdict = run_public_check(exercise, _learner_layer(norm_first, bug), quiet=True)
    assert not verdict.passed and words in verdict.message, verdict.message
    assert "Hint:" not in verdict.message  # a specific diagnosis, not the generic fallback


def test_sqrt_h_scale_is_not_called_unscaled_and_is_shown_on_a_case_with_several_heads():
    first = ex.ENCODER_POST_LN.cases(0)[0]
    assert first["num_heads"] > 1 and first["x"].shape[1] > 1  # H > 1 and L > 1 come first
    for exercise, norm_first in ((ex.ENCODER_POST_LN, False), (ex.ENCODER_PRE_LN, True)):
        verdict = run_public_check(exercise, _learner_layer(norm_first, "sqrt_H"), quiet=True)
        assert "not scaled" not in verdict.message and "case 1 of" in verdict.message


def test_every_layer_mistake_is_diagnosed_in_both_exercises_unless_it_is_specific():
    post = {m.name for m in ex.ENCODER_POST_LN.mistakes}
    pre = {m.name for m in ex.ENCODER_PRE_LN.mistakes}
    for name in ("ffn_no_b2", "no_w_o", "split_without_transpose", "scale_sqrt_E", "scale_sqrt_H",
                 "norm_eps_outside_sqrt", "norm_no_eps"):
        assert name in post and name in pre
    assert {"final_norm", "residual_from_norm_attn", "residual_from_norm_ffn"} <= pre


# ------------------------------------------------------------------ training helpers


def test_training_is_deterministic_and_learns():
    data, held_out = pronoun_task(800, seed=1, split="train"), pronoun_task(200, seed=2, split="test")
    results = []
    for _ in range(2):
        model = _tiny_model()
        history = train(model, data, steps=30, batch_size=32, lr=3e-3, eval_data=held_out, eval_every=10,
                        progress=False)
        results.append((history.loss, history.eval_accuracy, accuracy(model, held_out)))
    assert results[0] == results[1]
    loss, eval_acc, _ = results[0]
    assert len(loss) == 30 and len(eval_acc) == 3
    assert loss[-1] < loss[0]


def test_train_stops_on_a_non_finite_loss():
    model = _tiny_model()
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    history = train(model, pronoun_task(64), steps=10, progress=False)
    assert len(history.loss) == 1 and math.isnan(history.loss[0])


def test_grad_norms_per_layer_match_a_manual_computation():
    model, data = _tiny_model(num_layers=3, norm_first=False), pronoun_task(32)
    norms = grad_norms_per_layer(model, data)
    assert norms.shape == (3,)
    assert all(p.grad is None for p in model.parameters())  # the helper leaves no gradients behind
    model.eval()
    from utils.training import batch_loss

    batch_loss(model, data).backward()
    manual = torch.stack([torch.cat([p.grad.flatten() for p in layer.parameters()]).norm() for layer in model.layers])
    assert_close(norms, manual)


def test_head_ablation_restores_the_model_and_measures_each_head():
    model, data = _tiny_model(), pronoun_task(64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ablated = head_ablation(model, data)
    assert ablated.shape == (2, 2)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


def test_heads_switched_off_zeroes_only_those_heads_and_restores_them():
    model, data = _tiny_model(), pronoun_task(32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with heads_switched_off(model, [(1, 0)]):
        weight = model.layers[1].self_attn.out_proj.weight
        D = model.layers[1].self_attn.head_dim
        assert weight[:, :D].eq(0).all() and not weight[:, D:].eq(0).all()
        assert model.layers[0].self_attn.out_proj.weight.ne(0).any()
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    with pytest.raises(RuntimeError), heads_switched_off(model, all_heads(model)):
        raise RuntimeError("restored even on an error")
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert all_heads(model) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    with heads_switched_off(model, all_heads(model)):
        expected = accuracy(model, data)
    assert ablation_study(model, data, {"all off": all_heads(model)})[0][0, 0].item() == expected


def test_ablation_study_rows_match_the_configurations_and_pronoun_columns():
    model, data = _tiny_model(), pronoun_task(80, seed=4)
    configurations = ablation_configurations(model)
    assert list(configurations)[:2] == ["all on", "L1H1 off"] and configurations["only L2H2 on"] == [
        (0, 0), (0, 1), (1, 0)]
    table, columns = ablation_study(model, data, configurations)
    assert table.shape == (len(configurations), 5) and columns == ["all", "he", "she", "it", "they"]
    assert table[0, 0].item() == accuracy(model, data)
    assert_close(table[:, 0], torch.tensor(list(head_ablation_rows(model, data, configurations))))
    by_pronoun = accuracy_by_pronoun(model, data)
    assert list(by_pronoun) == columns[1:] and table[0, 1:].tolist() == list(by_pronoun.values())


def head_ablation_rows(model, data, configurations):
    for off in configurations.values():
        with heads_switched_off(model, off):
            yield accuracy(model, data)


def test_referent_attention_matches_the_maps():
    model, data = _tiny_model().eval(), pronoun_task(30, seed=6)
    to_referent, to_other = referent_attention(model, data)
    assert to_referent.shape == to_other.shape == (2, 2)
    with torch.no_grad():
        _, maps = model(data.tokens, mask=padding_mask(data.lengths, data.tokens.shape[1]), need_weights=True)
    layer, head = 1, 0
    expected = torch.stack([maps[layer][i, head, data.pronoun_pos[i], data.referent_pos[i]] for i in range(len(data))])
    assert_close(to_referent[layer, head], expected.mean())
    assert 0 < float(to_other[layer, head]) < 1


def test_largest_rise_and_class_guess():
    assert largest_rise([3.0, 2.0, 2.5, 1.0, 1.8, 1.7]) == 0.8
    assert largest_rise([3.0, 2.0, 1.0]) == 0.0 and largest_rise([1.0, 5.0, 0.5, 0.9], after=2) == pytest.approx(0.4)
    data = pronoun_task(40, seed=3)
    assert class_guess_accuracy(data) == pytest.approx(0.25)  # four nouns per agreement class


def test_classifier_embedding_is_as_large_as_the_positions():
    """Chapter 4: with nn.Embedding's default std 1 and x sqrt(E), positions would be almost invisible."""
    model = _tiny_model()
    E = model.d_model
    with torch.no_grad():
        token_norm = (model.embedding(torch.arange(len(VOCAB))) * math.sqrt(E)).norm(dim=-1).mean()
    position_norm = model.positional.pe[:10].norm(dim=-1).mean()  # sqrt(E / 2)
    assert_close(position_norm, torch.tensor(math.sqrt(E / 2)))
    assert 0.7 < float(token_norm / math.sqrt(E)) < 1.3  # about sqrt(E), the same order as sqrt(E / 2)


def test_head_similarity_of_a_trained_model_skips_padding_rows():
    """Chapter 5 applies chapter 3's head_similarity to padded held-out data, zeroing the padding query
    rows (as the notebook does) so that only real words count."""
    model, data = _tiny_model().eval(), pronoun_task(40, seed=5)
    L = data.tokens.shape[1]
    assert (data.lengths < L).any()  # some sentences are padded
    mask = padding_mask(data.lengths, L)  # (N, 1, 1, L)
    with torch.no_grad():
        _, maps = model(data.tokens, mask=mask, need_weights=True)
    real = mask.transpose(-1, -2)  # (N, 1, L, 1): True at real query rows
    sim = head_similarity(maps[0] * real)  # (H, H)
    assert sim.shape == (2, 2)
    assert_close(sim, sim.T)
    assert_close(sim.diagonal(), torch.ones(2))
    assert 0.0 <= float(sim[0, 1]) < 1.0
    # the same number, computed sentence by sentence on the real rows only
    expected = []
    for n in range(len(data)):
        p, q = maps[0][n, 0, :data.lengths[n], :].double(), maps[0][n, 1, :data.lengths[n], :].double()
        m = (p + q) / 2
        kl_p = torch.where(p > 0, p * (p.log() - m.log()), 0.0).sum(-1)  # (length,)
        kl_q = torch.where(q > 0, q * (q.log() - m.log()), 0.0).sum(-1)
        expected.append(1 - (kl_p + kl_q) / (2 * math.log(2)))  # 1 - JS in bits, per real row
    assert_close(sim[0, 1].double(), torch.cat(expected).mean(), atol=1e-6, rtol=1e-6)
    # padding rows do change the value when they are not zeroed
    assert not torch.allclose(head_similarity(maps[0]), sim)


# ------------------------------------------------------------------ figures


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_diagram_steps_follow_the_reference_layer(norm_first):
    steps, residuals = plots.layer_diagram_steps(norm_first)
    labels = [label for _, label in steps]
    norms = [i for i, (kind, _) in enumerate(steps) if kind == "norm"]
    adds = [i for i, (kind, _) in enumerate(steps) if kind == "add"]
    assert [end for _, end in residuals] == adds
    if norm_first:  # norm before each sublayer, the residual bypasses it
        assert all(steps[i + 1][0] in ("attn", "ffn") for i in norms)
        assert residuals[0][0] < norms[0]
    else:  # norm right after each +
        assert [i - 1 for i in norms] == adds
    assert labels[0] == "x (input)" and labels[-1] == "output"


def test_layer_diagrams_figure():
    fig = plots.layer_diagrams()
    assert len(fig.axes) == 2
    assert "Post-LN" in fig.axes[0].get_title() and "Pre-LN" in fig.axes[1].get_title()
    for ax in fig.axes:
        texts = [t.get_text() for t in ax.texts]
        steps, residuals = plots.layer_diagram_steps("Pre" in ax.get_title())
        assert sum("(N, L, E)" in t for t in texts) == len(steps) - 1 + len(residuals)  # every arrow
        assert sum(t.startswith("LayerNorm") for t in texts) == 2
        assert ax.get_ylabel()


def test_sentence_attention_grid_labels_queries_keys_and_the_pronoun():
    tokens = ["the", "king", "left", "he"]
    fig = plots.sentence_attention_grid(torch.rand(2, 2, 4, 4).softmax(-1), tokens, 3, title="t")
    panels, bar = fig.axes[:4], fig.axes[4]
    assert bar.get_ylabel() == "attention weight"
    assert [ax.get_title() for ax in panels] == ["Layer 1, Head 1", "Layer 1, Head 2", "Layer 2, Head 1",
                                                 "Layer 2, Head 2"]
    assert all(ax.get_xlabel() == "key (attended to)" for ax in panels[2:])
    assert all(ax.get_ylabel() == "query (attending)" for ax in panels[::2])
    for ax in panels:
        assert [t.get_text() for t in ax.get_yticklabels()] == tokens
        assert ax.get_yticklabels()[3].get_color() == "red" and len(ax.patches) == 1
    with pytest.raises(ValueError):
        plots.sentence_attention_grid(torch.rand(2, 4, 4), tokens, 3)


def test_loss_curves_and_grad_norms_figures():
    fig = plots.loss_curves({"post-LN": [3.0, 2.9, 2.8], "pre-LN": [3.0, 1.0]}, title="t")
    ax = fig.axes[0]
    assert ax.get_title() == "t" and ax.get_xlabel() and ax.get_ylabel()
    assert [list(line.get_ydata()) for line in ax.lines] == [[3.0, 2.9, 2.8], [3.0, 1.0]]
    fig = plots.loss_curves({"post-LN": [3.0, 2.9]}, title="t", chance=2.77)
    assert list(fig.axes[0].lines[-1].get_ydata()) == [2.77, 2.77]
    fig = plots.grad_norms_figure({"post-LN": torch.tensor([1.0, 2.0]), "pre-LN": torch.tensor([0.5, 0.5])})
    ax = fig.axes[0]
    assert len(ax.patches) == 4 and [t.get_text() for t in ax.get_xticklabels()] == ["layer 1", "layer 2"]
    assert sorted(p.get_height() for p in ax.patches) == [0.5, 0.5, 1.0, 2.0]


def test_training_curves_ablation_and_similarity_figures():
    from utils.training import History

    history = History(loss=[3.0, 2.0, 1.0], eval_steps=[2, 3], eval_accuracy=[0.5, 0.9])
    fig = plots.training_curves(history, chance=0.25)
    assert len(fig.axes) == 2
    assert list(fig.axes[1].lines[0].get_ydata()) == [0.5, 0.9]
    assert all(ax.get_xlabel() and ax.get_ylabel() and ax.get_title() for ax in fig.axes)
    fig = plots.head_ablation_figure({"all on": 1.0, "L1H1 off": 0.946, "all off": 0.25}, chance=0.25)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["1.000", "0.946", "0.250"]  # 0.95 vs 1.00 is written out
    assert [t.get_text() for t in ax.get_yticklabels()] == ["all on", "L1H1 off", "all off"]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    fig = plots.pronoun_heads_figure(torch.tensor([[1.0, 0.5], [0.3, 0.9]]), ["all on", "L1H1 off"], ["he", "it"],
                                     chance=0.25)
    assert [t.get_text() for t in fig.axes[0].texts] == ["1.00", "0.50", "0.30", "0.90"]
    assert fig.axes[1].get_ylabel() == "accuracy" and fig.axes[0].images[0].get_clim() == (0.25, 1.0)
    with pytest.raises(ValueError):
        plots.pronoun_heads_figure(torch.ones(2, 2), ["a"], ["he", "it"], chance=0.25)
    fig = plots.layer_head_similarity_figure(torch.eye(2).expand(3, 2, 2))
    assert len(fig.axes) == 4 and fig.axes[2].get_title() == "Layer 3" and fig.axes[3].get_ylabel() == "similarity"
    assert "1 - JS divergence" in fig._suptitle.get_text()
    with pytest.raises(ValueError):
        plots.layer_head_similarity_figure(torch.eye(2))


# ------------------------------------------------------------------ explorer and quiz


def test_attention_view_picks_the_right_map():
    model, data = _tiny_model().eval(), pronoun_task(5, seed=3)
    view = attention_view(model, data, 2, 1, 0)
    L = int(data.lengths[2])
    _, maps = model(data.tokens[2:3, :L], need_weights=True)
    assert_close(view.weights, maps[1][0, 0])  # padding only ever follows the sentence, so trimming is exact
    assert view.tokens == data.words(2) and view.pronoun_pos == int(data.pronoun_pos[2])
    assert_close(view.weights.sum(-1), torch.ones(L))
    with pytest.raises(ValueError):
        attention_view(model, data, 0, 5, 0)


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_attention_explorer_redraws_when_a_control_changes():
    model, data = _tiny_model().eval(), pronoun_task(10, seed=3)
    box = attention_explorer(model, data, num_examples=5)
    sentence, layer, head = (box.controls[name] for name in ("sentence", "layer", "head"))
    caption = box.children[1]
    assert sentence.description and layer.description and head.description
    assert sentence.max == 4
    assert_same_state(box.state, attention_view(model, data, 0, 1, 0))  # starts on the last layer
    before_caption, before = caption.value, png(box)
    sentence.value = 3
    assert_same_state(box.state, attention_view(model, data, 3, 1, 0))
    assert caption.value != before_caption and png(box) != before
    head.value = 1
    assert_same_state(box.state, attention_view(model, data, 3, 1, 1))
    layer.value = 0
    assert_same_state(box.state, attention_view(model, data, 3, 0, 1))


def test_quiz_has_feedback_for_every_option():
    quiz = ch5_quiz()
    assert len(quiz.questions) >= 3
    for q in quiz.questions:
        assert len(q.feedback) == len(q.options)
        assert q.grade(q.answer)[0]
        assert not any(q.grade(i)[0] for i in range(len(q.options)) if i != q.answer)
    assert quiz.score([q.answer for q in quiz.questions]) == len(quiz.questions)


def test_quiz_docstring_counts_its_questions():
    words = {3: "Three", 4: "Four", 5: "Five", 6: "Six"}
    assert ch5_quiz.__doc__.startswith(words[len(ch5_quiz().questions)] + " questions")


def test_quiz_parameter_share_matches_the_layer():
    layer = TransformerEncoderLayer(512, 8, 2048)
    share = sum(p.numel() for p in layer.feed_forward.parameters()) / sum(p.numel() for p in layer.parameters())
    assert abs(share - 2 / 3) < 0.01  # the quiz's "about 2/3"
