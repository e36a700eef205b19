"""Chapter 4, positional encoding: exercises, figures, explorer and quiz."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils.exercises.check_cell import run_public_check
from utils.exercises.common import clone_case
from utils.exercises.positional import (
    ADD,
    EXERCISES,
    SHIFT,
    SINUSOIDAL,
    add_positional_encoding_reference,
    relative_shift_matrix_reference,
    sinusoidal_encoding_reference,
)
from utils.explorers.positional import ENCODING_KINDS, align_right, positional_explorer_state
from utils.plotting.positional import (
    encoding_curves,
    encoding_heatmap,
    positional_explorer_figure,
    similarity_figure,
    wavelength_plot,
)
from utils.positional import LearnedPositionalEncoding, PositionalEncoding, apply_rotary, sinusoidal_encoding
from utils.widgets.positional import ch4_quiz, positional_explorer
from utils.widgets.quiz import Choice

# ---------------------------------------------------------------------------------------------- exercises


@pytest.mark.parametrize("length,d_model", [(1, 2), (7, 5), (30, 16), (12, 1)])
def test_sinusoidal_reference_matches_the_formula(length, d_model):
    # column j = 2i (sin) or 2i + 1 (cos), both at the angle p / 10000^(2i / E); computed with math, not torch
    expected = torch.tensor([[(math.sin if j % 2 == 0 else math.cos)(p / 10000 ** ((j - j % 2) / d_model))
                              for j in range(d_model)] for p in range(length)], dtype=torch.float64)
    got = sinusoidal_encoding_reference(length, d_model)
    assert got.shape == (length, d_model) and got.dtype == torch.float32
    assert_close(got.double(), expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_add_reference_matches_positional_encoding_module(seed):
    kinds = set()
    for case in ADD.cases(seed):
        x, pe = case["x"], case["pe"]
        if torch.equal(pe, sinusoidal_encoding(*pe.shape, dtype=pe.dtype)):
            kinds.add("sinusoidal")
            module = PositionalEncoding(x.size(-1), max_len=pe.size(0))
        else:  # a random, learned-style table
            kinds.add("learned")
            module = LearnedPositionalEncoding(max_len=pe.size(0), d_model=x.size(-1)).to(pe.dtype)
            with torch.no_grad():
                module.weight.copy_(pe)
        with torch.no_grad():
            assert_close(add_positional_encoding_reference(x, pe), module(x))
    assert kinds == {"sinusoidal", "learned"}


@pytest.mark.parametrize("d_model", [2, 8, 32])
@pytest.mark.parametrize("k", [0, 1, 5, -3, 40])
def test_shift_matrix_maps_every_position(k, d_model):
    table = sinusoidal_encoding(200, d_model, dtype=torch.float64)
    M = relative_shift_matrix_reference(k, d_model).double()
    start, stop = max(0, -k), 200 - max(0, k)
    assert_close(table[start:stop] @ M.T, table[start + k: stop + k], atol=1e-6, rtol=1e-5)
    assert_close(M @ M.T, torch.eye(d_model, dtype=torch.float64), atol=1e-6, rtol=0)  # a rotation


def test_shift_matrices_compose():
    assert_close(relative_shift_matrix_reference(3, 8) @ relative_shift_matrix_reference(4, 8),
                 relative_shift_matrix_reference(7, 8), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_reference_passes_and_cases_are_seeded(exercise):
    assert run_public_check(exercise, exercise.reference, quiet=True).passed
    a, b, c = exercise.cases(0), exercise.cases(0), exercise.cases(1)
    assert [sorted(x) for x in a] == [sorted(x) for x in b]
    assert all(torch.equal(x[k], y[k]) if isinstance(x[k], torch.Tensor) else x[k] == y[k]
               for x, y in zip(a, b) for k in x)
    assert repr(a) != repr(c)
    assert 4 <= len(a) <= 6


@pytest.mark.parametrize("exercise,mistake", [(e, m) for e in EXERCISES for m in e.mistakes],
                         ids=lambda v: getattr(v, "id", None) or getattr(v, "name", None))
def test_each_mistake_differs_and_is_diagnosed(exercise, mistake):
    verdict = run_public_check(exercise, mistake.fn, quiet=True)
    assert not verdict.passed
    assert mistake.diagnosis in verdict.message


def test_batch_axis_bug_with_a_2d_table():
    pe = sinusoidal_encoding(16, 8)
    square = torch.zeros(4, 4, 8)  # N == L: pe[:N] happens to be pe[:L], so the bug gives the right answer
    assert_close(square + pe[: square.size(0)], add_positional_encoding_reference(square, pe))
    single = torch.zeros(1, 5, 8)  # N == 1: PE(0) is added at every position, silently
    assert_close(single + pe[: single.size(0)], pe[0].expand(1, 5, 8))
    assert not torch.allclose(single + pe[:1], add_positional_encoding_reference(single, pe))
    with pytest.raises(RuntimeError):
        torch.zeros(3, 5, 8) + pe[:3]  # any other N raises
    assert any(c["x"].size(0) == 1 for c in ADD.cases(0))


def test_batch_axis_bug_with_a_sequence_first_table():
    table = sinusoidal_encoding(16, 8)[:, None, :]  # (max_len, 1, E): the layout of sequence-first recipes
    x = torch.zeros(3, 5, 8)  # (N, L, E)
    buggy = x + table[: x.size(0)]  # (3, 5, 8) + (3, 1, 8) runs for any N <= max_len
    assert buggy.shape == x.shape
    for n in range(3):
        assert_close(buggy[n], table[n].expand(5, 8))  # sample n got PE(n) at every position


def test_odd_d_model_cases_exist():
    assert any(c["d_model"] % 2 for c in SINUSOIDAL.cases(0))
    assert any(c["x"].size(-1) % 2 for c in ADD.cases(0))
    assert all(c["d_model"] % 2 == 0 for c in SHIFT.cases(0))
    assert any(c["k"] == 0 for c in SHIFT.cases(0)) and any(c["k"] < 0 for c in SHIFT.cases(0))


def test_points_and_ids():
    assert [(e.id, e.points) for e in EXERCISES] == [
        ("ch4.sinusoidal_encoding", 2), ("ch4.relative_shift_matrix", 3), ("ch4.add_positional_encoding", 1)]


def test_forbidden_reference_is_refused():
    def sinusoidal_encoding(length, d_model):
        import utils.positional

        return utils.positional.sinusoidal_encoding(length, d_model)

    assert run_public_check(SINUSOIDAL, sinusoidal_encoding, quiet=True).status == "forbidden"


def test_cases_are_not_mutated_by_reference():
    for case in ADD.cases(0):
        copy = clone_case(case)
        add_positional_encoding_reference(**case)
        assert all(torch.equal(case[k], copy[k]) for k in case)


# ---------------------------------------------------------------------------------------------- properties


def test_dot_product_depends_only_on_offset():
    E = 16
    table = sinusoidal_encoding(40, E, dtype=torch.float64)
    sim = table @ table.T
    offsets = torch.arange(40)[:, None] - torch.arange(40)[None, :]  # (L, L) p - q
    freq = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)
    expected = torch.cos(offsets[..., None].double() * freq).sum(-1)  # sum_i cos((p - q) w_i)
    assert_close(sim, expected)


def test_rope_scores_depend_only_on_offset():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 1, 8, generator=gen, dtype=torch.float64), torch.randn(1, 2, 1, 8, generator=gen,
                                                                                      dtype=torch.float64)
    def score(m, n):
        return (apply_rotary(q, torch.tensor([m])) * apply_rotary(k, torch.tensor([n]))).sum(-1)

    assert_close(score(3, 1), score(10, 8))
    assert_close(score(0, 0), (q * k).sum(-1))


# ---------------------------------------------------------------------------------------------- figures


def test_encoding_heatmap():
    pe = sinusoidal_encoding(12, 6)
    fig = encoding_heatmap(pe, highlight_position=2, highlight_dimension=3)
    ax = fig.axes[0]
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "value"  # the map and its labelled colour bar
    assert ax.get_title() and ax.get_xlabel() == "dimension j" and ax.get_ylabel() == "position p"
    assert_close(torch.as_tensor(ax.images[0].get_array()), pe)
    assert len(ax.get_lines()) == 4  # two outlines, two lines each


def test_encoding_curves():
    pe = sinusoidal_encoding(20, 8)
    fig = encoding_curves(pe, [0, 1, 6])
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["j = 0 (sin)", "j = 1 (cos)", "j = 6 (sin)"]
    assert_close(torch.as_tensor(ax.get_lines()[1].get_ydata()), pe[:, 1])
    assert ax.get_xlabel() == "position p" and ax.get_title()
    with pytest.raises(ValueError, match="outside"):
        encoding_curves(pe, [8])


def test_wavelength_plot():
    fig = wavelength_plot(16)
    ax = fig.axes[0]
    y = torch.as_tensor(ax.get_lines()[0].get_ydata(), dtype=torch.float64)
    assert len(y) == 8 and ax.get_yscale() == "log" and ax.get_title()
    assert y[0].item() == pytest.approx(2 * math.pi)
    ratios = y[1:] / y[:-1]
    assert_close(ratios, torch.full_like(ratios, 10000 ** (2 / 16)))  # geometric


def test_similarity_figure():
    pe = sinusoidal_encoding(16, 8)
    fig = similarity_figure(pe, position=5)
    left, right = fig.axes[0], fig.axes[1]  # then the colour bar
    assert len(fig.axes) == 3
    assert_close(torch.as_tensor(left.images[0].get_array()), pe @ pe.T)
    line = right.get_lines()[0]
    # the offset p - q, the explorer's m - n: positive means q comes before p
    assert list(line.get_xdata()) == list(range(-10, 6))
    assert_close(torch.as_tensor(line.get_ydata()), (pe @ pe[5]).flip(0))
    assert left.get_xlabel() == "position q" and right.get_xlabel() == "offset p - q"
    assert fig.axes[2].get_ylabel() == "PE(p)·PE(q)"  # the colour bar says what the colour is
    assert fig._suptitle.get_text()


@pytest.mark.parametrize("kind", list(ENCODING_KINDS))
def test_explorer_figure(kind):
    data = positional_explorer_state(kind, 4, 2, length=16, d_model=8)
    fig = positional_explorer_figure(data)
    titles = [ax.get_title() for ax in fig.axes]
    assert ENCODING_KINDS[kind] in titles[0] and "position 4" in titles[1] and titles[2] == data.similarity_title
    assert fig.axes[1].get_xlabel() == "dimension j" and len(fig.axes) == 4
    assert fig.axes[2].get_xlabel() == "signed offset m - n (m = p = 4)" and fig.axes[2].get_ylabel()
    line = fig.axes[2].get_lines()[0]
    assert list(line.get_xdata()) == list(range(-11, 5)) and list(line.get_ydata()) == data.similarity.flip(0).tolist()


# ---------------------------------------------------------------------------------------------- explorer


def test_explorer_data_shapes_and_kinds():
    for kind in ENCODING_KINDS:
        data = positional_explorer_state(kind, 3, 1, length=10, d_model=6)
        assert data.table.shape == (10, 6) and data.row.shape == (6,) and data.column.shape == (10,)
        assert_close(data.row, data.table[3])
        assert data.offsets.tolist() == [3 - n for n in range(10)]  # m - n, with the query at m = p = 3
        if kind != "rope":
            assert_close(data.similarity, data.table @ data.table[3])
    assert_close(positional_explorer_state("sinusoidal", 0, 0, length=10, d_model=6).table,
                 sinusoidal_encoding(10, 6))
    with pytest.raises(ValueError, match="kind"):
        positional_explorer_state("alibi", 0, 0)


def _curve(kind, position, length=32, d_model=16):
    data = positional_explorer_state(kind, position, 0, length=length, d_model=d_model)
    return data.similarity[position:position + 8]  # offsets 0..7


@pytest.mark.parametrize("kind", ["sinusoidal", "rope"])
def test_similarity_curve_does_not_move_with_position(kind):
    assert_close(_curve(kind, 3), _curve(kind, 17), atol=1e-5, rtol=1e-5)


def test_rope_scores_a_query_against_keys_as_rotary_attention_does():
    """RoPE's curve is the score of the query at p with the key at every n: (R_p q)·(R_n k), k = R_4 q."""
    data = positional_explorer_state("rope", 9, 0, length=16, d_model=8)
    q = data.table[0]  # R_0 q = q
    k = apply_rotary(q[None], torch.tensor([4]))[0]
    keys = apply_rotary(k.expand(16, 8))  # (L, E): the key at every position n
    assert_close(data.similarity, keys @ apply_rotary(q[None], torch.tensor([9]))[0])


def test_rope_curve_shows_the_sign_of_the_offset_and_the_sinusoidal_one_does_not():
    """The explorer's RoPE curve peaks at m - n = +4 and differs at +3 and -3; the sinusoidal curve is even."""
    def at(data, offset):
        return data.similarity[data.offsets.tolist().index(offset)].item()

    rope = positional_explorer_state("rope", 16, 0)
    assert rope.offsets[rope.similarity.argmax()].item() == 4
    assert abs(at(rope, 3) - at(rope, -3)) > 0.1 * rope.similarity.abs().max().item()  # 31.0 vs 25.8 of 32.4
    sinusoidal = positional_explorer_state("sinusoidal", 16, 0)
    assert all(math.isclose(at(sinusoidal, d), at(sinusoidal, -d), abs_tol=1e-4) for d in range(1, 16))


def test_state_reads_its_curve_at_a_signed_offset():
    data = positional_explorer_state("rope", 5, 0, length=12, d_model=8)
    assert data.at(3) == data.similarity[2].item() and data.at(-6) == data.similarity[11].item()  # n = p - offset
    with pytest.raises(ValueError, match=r"offset 6 is outside -6\.\.5 \(m - n for p = 5, L = 12\)"):
        data.at(6)


def test_align_right_counts_a_wide_character_as_two_columns():
    assert align_right("RoPE", 8) == "    RoPE" and align_right("正弦", 8) == "    正弦"
    assert align_right("可学习（随机初始化）", 21) == " 可学习（随机初始化）"
    assert align_right("too long", 3) == "too long"  # never cut


def test_learned_similarity_curve_moves_with_position():
    assert not torch.allclose(_curve("learned", 3), _curve("learned", 17))


def test_explorer_data_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    positional_explorer_state("learned", 0, 0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    box = positional_explorer(length=16, d_model=8)
    kind, position, dimension = (box.controls[name] for name in ("kind", "position", "dimension"))
    assert kind.description and position.description == "position p" and dimension.description == "dimension j"
    assert_same_state(box.state, positional_explorer_state("sinusoidal", 5, 0, length=16, d_model=8))
    first = png(box)
    position.value = 9
    assert_same_state(box.state, positional_explorer_state("sinusoidal", 9, 0, length=16, d_model=8))
    assert png(box) != first
    second = png(box)
    kind.value = "rope"
    assert_same_state(box.state, positional_explorer_state("rope", 9, 0, length=16, d_model=8))
    assert png(box) != second
    dimension.value = 3
    assert_same_state(box.state, positional_explorer_state("rope", 9, 3, length=16, d_model=8))
    assert plt.get_fignums() == []  # every figure drawn into the Output was closed


# ---------------------------------------------------------------------------------------------- quiz


def test_quiz():
    quiz = ch4_quiz()
    assert len(quiz.questions) >= 3
    for question in quiz.questions:
        if isinstance(question, Choice):
            assert len(question.feedback) == len(question.options)
            assert question.grade(question.answer)[0]
            assert not any(question.grade(i)[0] for i in range(len(question.options)) if i != question.answer)
        else:
            assert question.grade(9647)[0] and not question.grade(10000)[0]
    assert quiz.widget is not None
    answers = [q.answer for q in quiz.questions if isinstance(q, Choice)]
    assert max(answers.count(a) for a in set(answers)) <= 2  # the right answer is not always in one place


# ---------------------------------------------------------------------------------------------- named bugs
# Each is written as a learner would write it (not reusing the Mistake functions), so a regression in the
# cases or the diagnoses fails here.


def _common_recipe(length, d_model):
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def _good_table(length, d_model, dtype=torch.float32):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe.to(dtype)


def test_common_recipe_fails_on_odd_d_model_and_points_to_the_myth_check():
    verdict = run_public_check(SINUSOIDAL, _common_recipe, quiet=True)
    assert not verdict.passed and "odd d_model" in verdict.message and "myth check" in verdict.message


def test_float64_table_fails_and_says_float32():
    assert run_public_check(SINUSOIDAL, _good_table, quiet=True).passed
    verdict = run_public_check(SINUSOIDAL, lambda length, d_model: _good_table(length, d_model, torch.float64),
                               quiet=True)
    assert not verdict.passed and "float32" in verdict.message


def _shift(k, d_model, *, transpose=False):
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    sign = -1 if transpose else 1
    blocks = [torch.stack([torch.stack([ci, sign * si]), torch.stack([-sign * si, ci])]) for ci, si in zip(c, s)]
    return torch.block_diag(*blocks).float()


def test_shift_with_abs_k_is_told_about_negative_k_not_the_block():
    verdict = run_public_check(SHIFT, lambda k, d_model: _shift(abs(k), d_model), quiet=True)
    assert not verdict.passed and "abs(k)" in verdict.message and "(sin, cos)" not in verdict.message
    verdict = run_public_check(SHIFT, lambda k, d_model: _shift(k, d_model, transpose=True), quiet=True)
    assert not verdict.passed and "(sin, cos)" in verdict.message


@pytest.mark.parametrize("factor,word", [(0.5, "factor 2"), (2.0, "twice"), (-1.0, "grow")])
def test_shift_frequency_exponent_is_diagnosed(factor, word):
    def shift(k, d_model):
        omega = 10000.0 ** (-factor * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        return torch.block_diag(*[torch.tensor([[math.cos(k * w), math.sin(k * w)],
                                                [-math.sin(k * w), math.cos(k * w)]])
                                  for w in omega.tolist()]).float()

    verdict = run_public_check(SHIFT, shift, quiet=True)
    assert not verdict.passed and word in verdict.message and "exercise 1" in verdict.message


def test_add_that_ignores_pe_fails():
    def add(x, pe):
        return x + _good_table(x.size(1), x.size(2), x.dtype)

    verdict = run_public_check(ADD, add, quiet=True)
    assert not verdict.passed and "ignored the table" in verdict.message
    assert any(not torch.equal(c["pe"], sinusoidal_encoding(*c["pe"].shape, dtype=c["pe"].dtype))
               for c in ADD.cases(0))  # a learned-style table


def test_add_batch_axis_bug_points_to_its_section():
    verdict = run_public_check(ADD, lambda x, pe: x + pe[: len(x)], quiet=True)
    assert not verdict.passed and "The batch-axis bug" in verdict.message


def test_add_in_place_fails():
    def add(x, pe):
        x += pe[: x.size(1)]
        return x

    verdict = run_public_check(ADD, add, quiet=True)
    assert not verdict.passed and "in place" in verdict.message


def test_add_keeps_the_dtype_of_x():
    assert any(c["x"].dtype == torch.float64 for c in ADD.cases(0))
    verdict = run_public_check(ADD, lambda x, pe: (x + pe[: x.size(1)]).float(), quiet=True)
    assert not verdict.passed and "dtype" in verdict.message


def test_mistakes_found_in_review_get_their_diagnosis():
    def padded_table(length, d_model):  # an odd d_model rounded up, built, and cut back
        E = d_model + d_model % 2
        angle = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (
            -torch.arange(0, E, 2, dtype=torch.float64) / E)
        return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)[:, :d_model].float()

    def row_vector_shift(k, d_model):  # built so that pe[p] @ M == pe[p + k]
        return _shift(k, d_model).T.contiguous()

    for exercise, fn, words in [(SINUSOIDAL, padded_table, "d_model + 1"),
                                (SHIFT, row_vector_shift, "pe[p] @ M"),
                                (ADD, lambda x, pe: x + pe[: x.size(-1)], "x.size(-1)"),
                                (ADD, lambda x, pe: x + pe[: x.shape[2]], "model dimension E")]:
        verdict = run_public_check(exercise, fn, quiet=True)
        assert not verdict.passed and words in verdict.message, verdict.message


def test_offset_reading_prints_one_line_in_the_learners_language():
    from utils.explorers.positional import offset_reading, peak_reading
    from utils.i18n.messages import using_language

    at16, at32 = (positional_explorer_state("rope", p, 0) for p in (16, 32))
    with using_language("en"):
        line = offset_reading(at16, at32, 3)
        assert line == (f"{'RoPE':>21}: p = 16: {at16.at(3):8.4f} at +3, {at16.at(-3):8.4f} at -3 | "
                        f"p = 32: {at32.at(3):8.4f} at +3")
        assert peak_reading(at16) == "RoPE's curve is largest at m - n = +4"
    with using_language("zh"):
        line, peak = offset_reading(at16, at32, 3), peak_reading(at16)
    assert " at " not in line and "largest" not in peak  # no English words left in the Chinese line
    assert f"{at16.at(3):.4f}" in line and f"{at16.at(-3):.4f}" in line and "+4" in peak
    with pytest.raises(ValueError, match="second.*same encoding"):
        offset_reading(at16, positional_explorer_state("sinusoidal", 32, 0), 3)
    with pytest.raises(ValueError, match="offset must be a positive"):
        offset_reading(at16, at32, 0)
