"""Exercises of chapter 4, "Positional encoding". See :mod:`utils.exercises.definition`.

Shape letters: N batch, L sequence length, E model dimension (``d_model``).

* ``ch4.sinusoidal_encoding(length, d_model) -> (L, E)``: the fixed sin/cos table, float32.
* ``ch4.add_positional_encoding(x, pe) -> (N, L, E)``: add ``pe[:L]`` to a batch-first ``x``; ``pe`` is any
  ``(max_len, E)`` table (sinusoidal or learned).
* ``ch4.relative_shift_matrix(k, d_model) -> (E, E)``: the matrix ``M`` with ``M @ PE(p) == PE(p + k)``
  for every position ``p`` and any integer ``k`` (``PE(p)`` is the 1-D row ``pe[p]`` of the table, read as
  a column vector).

The diagnoses name the section of the notebook that explains each mistake; the wrong answers
themselves are in :mod:`utils.exercises.mistakes.positional`.
"""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake
from utils.exercises.edges import positional as edges
from utils.exercises.mistakes import positional as wrong
from utils.exercises.probing import contrasts
from utils.exercises.probing.positional import SHIFT_PROBES, SINUSOIDAL_PROBES
from utils.positional import sinusoidal_encoding as _sinusoidal_table

__all__ = [
    "ADD",
    "EXERCISES",
    "SHIFT",
    "SINUSOIDAL",
    "add_positional_encoding_reference",
    "relative_shift_matrix_reference",
    "sinusoidal_encoding_reference",
]

_ODD_MYTH = "see the myth check on an odd d_model right after exercise 1"
_ROTATION = "see 'PE(p + k) is a fixed rotation of PE(p)' above exercise 2"
_BATCH_BUG = "see 'The batch-axis bug' below exercise 3"
_FREQUENCY = ("the frequencies are those of exercise 1: w_i = 10000^(-2i / d_model) with 2i = 0, 2, 4, ... "
              "(torch.arange(0, d_model, 2))")


# --------------------------------------------------------------------------------------------------
# ch4.sinusoidal_encoding
# --------------------------------------------------------------------------------------------------


def sinusoidal_encoding_reference(length: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/E)), PE[p, 2i+1] = cos(p / 10000^(2i/E)). Returns (L, E) float32."""
    return _sinusoidal_table(length, d_model, dtype=torch.float32)


def _sinusoidal_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen  # the inputs are two ints
    cases = [
        {"length": 1, "d_model": 2 * rng.randint(1, 4)},  # a single position: all sines 0, all cosines 1
        {"length": rng.randint(5, 20), "d_model": 2 * rng.randint(2, 8)},
        {"length": rng.randint(20, 64), "d_model": 2 * rng.randint(8, 32)},
        {"length": rng.randint(3, 16), "d_model": 2 * rng.randint(1, 6) + 1},  # odd E
        {"length": rng.randint(2, 10), "d_model": 2 * rng.randint(1, 3)},
    ]
    return cases


SINUSOIDAL = Exercise(
    id="ch4.sinusoidal_encoding",
    reference=sinusoidal_encoding_reference,
    make_cases=_sinusoidal_cases,
    make_edge_cases=edges.sinusoidal_edges,
    probes=(*SINUSOIDAL_PROBES, contrasts.SINUSOIDAL_CONTRAST),
    parts=edges.SINUSOIDAL_PARTS,
    points=2,
    mistakes=[
        Mistake(
            "sin_cos_swapped", wrong._sin_cos_swapped,
            "Sin and cos are swapped: even columns (0, 2, 4, ...) take the sine and odd columns the cosine, "
            "so row 0 should read 0, 1, 0, 1, ...",
        ),
        Mistake(
            "exponent_pair_index", wrong._exponent_pair_index,
            "The exponent is off by a factor 2: the pair (2i, 2i+1) uses 10000^(2i / d_model), and you "
            "used the pair index i instead of 2i",
        ),
        Mistake(
            "exponent_doubled", wrong._exponent_doubled,
            "The exponent is twice too large: torch.arange(0, d_model, 2) already is 2i (0, 2, 4, ...), so "
            "do not multiply it by 2 again; the exponent is 2i / d_model",
        ),
        Mistake(
            "exponent_positive", wrong._exponent_positive,
            "Your angles grow with the pair index: the angle is p / 10000^(2i / d_model) (the frequency "
            "w_i = 10000^(-2i / d_model) shrinks), and you multiplied p by 10000^(2i / d_model)",
        ),
        Mistake(
            "exponent_e_minus_1", wrong._exponent_e_minus_1,
            "The exponent divides by d_model, not d_model - 1: 10000^(2i / d_model)",
        ),
        Mistake(
            "one_frequency", wrong._one_frequency,
            "Every pair turns at the same speed, 1 radian per position: your exponent 2i / d_model came out "
            "as 0 (an integer division such as two_i // d_model?); it must be a float between 0 and 1",
        ),
        Mistake(
            "exponent_column_index", wrong._exponent_column_index,
            "The cosine column 2i+1 must share the frequency of its sine column 2i: use 10000^(2i / d_model) "
            "for both, not the column index (2i+1) for the cosine",
        ),
        Mistake("base_1000", wrong._base_1000, "The base is 10000, not 1000: w_i = 10000^(-2i / d_model)"),
        Mistake(
            "starts_at_one", wrong._starts_at_one,
            "Positions start at 0, not 1: row 0 is PE(0) = sin 0, cos 0, ... = 0, 1, 0, 1, ... "
            "(torch.arange(length))",
        ),
        Mistake(
            "degrees", wrong._degrees,
            "The angles are in radians: torch.sin takes p / 10000^(2i / d_model) as it is, with no "
            "pi / 180 conversion",
        ),
        Mistake(
            "halves", wrong._halves,
            "You put all the sines first and all the cosines after them: the table interleaves them, "
            "column 2i is a sine and column 2i+1 the cosine of the same angle (pe[:, 0::2] and pe[:, 1::2])",
        ),
        Mistake(
            "odd_crash", wrong._odd_crash,
            "With an odd d_model there is one more sine column than cosine columns: assign "
            f"cos(angle[:, :d_model // 2]) to pe[:, 1::2] ({_ODD_MYTH})",
        ),
        Mistake(
            "odd_too_few_angles", wrong._odd_too_few_angles,
            "With an odd d_model you need ceil(d_model / 2) angles, one per sine column (torch.arange(0, "
            "d_model, 2)), not d_model // 2: the last column is a sine of its own, and the cosines use "
            f"the first d_model // 2 angles ({_ODD_MYTH})",
        ),
        Mistake(
            "odd_last_zero", wrong._odd_last_zero,
            "With an odd d_model your last column is 0: it is the sine of one more pair, "
            f"sin(p / 10000^((d_model - 1) / d_model)) ({_ODD_MYTH})",
        ),
        Mistake(
            "odd_padded", wrong._odd_padded,
            "With an odd d_model your table has one column too many: return exactly (length, d_model), "
            "whose last column is a sine",
        ),
        Mistake(
            "odd_padded_drop_first", wrong._odd_padded_drop_first,
            "With an odd d_model you built d_model + 1 columns and dropped the first one, so every column "
            "moved one place: drop the last (cosine) column instead, so that the table ends with a sine",
        ),
        Mistake(
            "odd_padded_frequencies", wrong._odd_padded_frequencies,
            "With an odd d_model you built the table for d_model + 1 columns and cut the last one: that "
            "table's frequencies divide by d_model + 1. The exponent is 2i / d_model with the d_model you "
            f"were given: compute ceil(d_model / 2) angles for it ({_ODD_MYTH})",
        ),
        Mistake(
            "float64_table", wrong._float64_table,
            "Your table is float64: return it as float32, as the docstring says (computing in float64 "
            "is fine, then cast with .float())",
        ),
        Mistake(
            "batch_axis_added", wrong._batch_axis_added,
            "Return the (length, d_model) table itself: the leading batch axis (unsqueeze(0), as for a "
            "register_buffer) belongs to the module that stores it, not to this function",
        ),
        Mistake(
            "transposed_table", wrong._transposed_table,
            "Your table is transposed: one row per position, so the shape is (length, d_model)",
        ),
    ],
    forbidden=("utils", "utils.positional.sinusoidal_encoding", "utils.positional.PositionalEncoding"),
    atol=1e-4,
    rtol=1e-4,
    hint="compute the angle p / 10000^(2i / d_model) once for each pair, then fill columns 0::2 and 1::2.",
)


# --------------------------------------------------------------------------------------------------
# ch4.add_positional_encoding
# --------------------------------------------------------------------------------------------------


def add_positional_encoding_reference(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """x (N, L, E) + pe[:L] (L, E), broadcast over N. Returns (N, L, E)."""
    L = x.size(1)
    return x + pe[:L]  # (N, L, E) + (L, E)


def _add_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    shapes = [  # (N, L, E, table, dtype)
        (1, rng.randint(3, 9), 2 * rng.randint(2, 6), "learned", torch.float32),  # batch 1: the batch-axis bug
        (4, 4, 2 * rng.randint(2, 6), "sinusoidal", torch.float32),  # N == L: only here pe[:N] is pe[:L]
        (rng.randint(2, 5), 1, 2 * rng.randint(1, 4), "learned", torch.float32),  # length 1
        (rng.randint(2, 4), rng.randint(5, 12), 2 * rng.randint(1, 5) + 1, "sinusoidal", torch.float32),  # odd E
        (rng.randint(2, 3), rng.randint(10, 20), 16, "sinusoidal", torch.float64),
        (2, rng.randint(3, 6), 8, "learned float32", torch.float64),  # x's dtype is kept, not the table's
    ]
    cases = []
    for N, L, E, table, dtype in shapes:
        max_len = L + rng.randint(1, 12)
        table_dtype = torch.float32 if table.endswith("float32") else dtype
        if table.startswith("learned"):  # a random table, as a learned one starts: any table must work
            pe = torch.randn(max_len, E, generator=gen, dtype=table_dtype)
        else:
            pe = _sinusoidal_table(max_len, E, dtype=table_dtype)
        cases.append({"x": torch.randn(N, L, E, generator=gen, dtype=dtype), "pe": pe})
    return cases


ADD = Exercise(
    id="ch4.add_positional_encoding",
    reference=add_positional_encoding_reference,
    make_cases=_add_cases,
    make_edge_cases=edges.add_edges,
    probes=(contrasts.ADD_POSITIONAL_CONTRAST,),
    gradients=True,  # it is trained through: a right output that cuts or poisons the gradient fails
    points=1,
    mistakes=[
        Mistake(
            "batch_axis", wrong._batch_axis,
            "You sliced the table with x.size(0), which is the batch size N in a batch-first (N, L, E) "
            f"tensor: slice it with the length L = x.size(1) ({_BATCH_BUG})",
        ),
        Mistake(
            "sequence_first", wrong._sequence_first,
            "You used the sequence-first recipe: a (max_len, 1, E) table sliced with x.size(0) gives every "
            f"token of sample n the encoding PE(n); in a batch-first x the positions are axis 1 ({_BATCH_BUG})",
        ),
        Mistake(
            "unsqueeze_middle", wrong._unsqueeze_middle,
            "pe[:L].unsqueeze(1) has shape (L, 1, E), which lines L up with the batch axis of x: an (L, E) "
            "slice already broadcasts over N (or unsqueeze(0) for (1, L, E))",
        ),
        Mistake(  # before "whole_table": when E >= max_len the two give the same sum
            "feature_size", wrong._feature_size,
            "You sliced the table with x.size(-1) (or x.size(2)), which is the model dimension E: slice it "
            f"with the length L = x.size(1) ({_BATCH_BUG})",
        ),
        Mistake(
            "whole_table", wrong._whole_table,
            "You added the whole (max_len, E) table: keep only the rows of positions 0..L-1",
        ),
        Mistake(
            "feature_axis", wrong._feature_axis,
            "Your pe[:, :L] slices the feature axis of a (max_len, E) table (that recipe is for a "
            "(1, max_len, E) table): slice the rows, pe[:L]",
        ),
        Mistake(
            "off_by_one", wrong._off_by_one,
            "Off by one: positions start at 0, so token p gets row p of the table, rows 0..L-1 (not 1..L)",
        ),
        Mistake(
            "last_rows", wrong._last_rows,
            "You took the last L rows of the table: token p gets row p, so take the first L rows",
        ),
        Mistake(
            "ignores_pe", wrong._ignores_pe,
            "You ignored the table you were given and built a sinusoidal one: pe can be any (max_len, E) "
            "table, a learned one too (the check passes a random one), so add the rows of pe itself",
        ),
        Mistake(
            "multiplied", wrong._multiplied,
            "The encoding is added to the embeddings, not multiplied with them: x + (the first L rows of pe)",
        ),
        Mistake(
            "scaled", wrong._scaled,
            "Do not scale x here: the sqrt(E) factor of 'Why multiply the embeddings by √E?' belongs to the "
            "embedding layer; this function only adds",
        ),
        Mistake(
            "concatenated", wrong._concatenated,
            "You concatenated the encoding to x, doubling E: the encoding is added, so the output keeps the "
            "shape (N, L, E)",
        ),
        Mistake(
            "forgot_x", wrong._forgot_x,
            "You returned the encoding alone: the output is the embeddings x plus the encoding",
        ),
        Mistake(
            "cast_to_float32", wrong._cast_to_float32,
            "Keep the dtype of x: for a float64 batch (and table) your sum comes back float32, and it must stay "
            "float64 (look for a .float() cast, or a tensor made without dtype=)",
        ),
        Mistake(
            "cast_to_table_dtype", wrong._cast_to_table_dtype,
            "Your sum takes the dtype of pe, not of x (a `.to(pe.dtype)`): with a float64 x and a float32 table "
            "it comes back float32. Keep the dtype of x: cast the table's rows to it, pe[:L].to(x.dtype)",
        ),
    ],
    forbidden=("utils", "utils.positional.PositionalEncoding", "utils.positional.sinusoidal_encoding"),
    hint="x is (N, L, E) and pe is (max_len, E); (L, E) broadcasts over N.",
)


# --------------------------------------------------------------------------------------------------
# ch4.relative_shift_matrix
# --------------------------------------------------------------------------------------------------


def relative_shift_matrix_reference(k: int, d_model: int) -> torch.Tensor:
    """The (E, E) matrix M with M @ PE(p) == PE(p + k) for every p; E even. Block i is
    [[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]] acting on (sin(p w_i), cos(p w_i))."""
    return wrong.rotation_blocks(k, d_model, wrong.right_block)  # the construction its wrong variants share


def _shift_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    return [
        {"k": rng.randint(1, 5), "d_model": 2},  # one pair
        {"k": rng.randint(1, 20), "d_model": 2 * rng.randint(2, 8)},
        {"k": 0, "d_model": 2 * rng.randint(1, 4)},  # no shift: the identity
        {"k": -rng.randint(1, 10), "d_model": 2 * rng.randint(2, 6)},  # a shift to the left
        {"k": rng.randint(20, 60), "d_model": 2 * rng.randint(8, 16)},
    ]


SHIFT = Exercise(
    id="ch4.relative_shift_matrix",
    reference=relative_shift_matrix_reference,
    make_cases=_shift_cases,
    make_edge_cases=edges.shift_edges,
    probes=(*SHIFT_PROBES, contrasts.RELATIVE_SHIFT_CONTRAST),
    parts=edges.SHIFT_PARTS,
    points=3,
    mistakes=[
        Mistake(
            "cosines_only", wrong._cosines_only,
            "Your blocks hold cos(k w_i) on their diagonal and nothing beside it: each 2 x 2 block is a "
            f"rotation, so sin(k w_i) and -sin(k w_i) go off its diagonal ({_ROTATION})",
        ),
        Mistake(  # before "transposed": on a negative k the two give the same matrix
            "absolute_k", wrong._absolute_k,
            "Your matrix is right for k >= 0 but shifts forward for a negative k as well: use k as it is, "
            "not abs(k); a negative k moves the encoding backwards (the matrix for -k is the transpose of "
            "the one for k)",
        ),
        Mistake(
            "transposed", wrong._transposed,
            "Your matrix shifts by -k (it is the transpose of M_k): each pair is (sin, cos), not (cos, sin), "
            "so the block is [[cos, sin], [-sin, cos]] (the transpose of the textbook rotation; "
            f"{_ROTATION}). Also check that M acts on a column, M @ pe[p] (not pe[p] @ M), and that you "
            "used k, not -k",
        ),
        Mistake(
            "missing_minus", wrong._missing_minus,
            "A sign is wrong: cos(a + b) = cos a cos b - sin a sin b, so the second row of each block is "
            f"[-sin(k w_i), cos(k w_i)] ({_ROTATION})",
        ),
        Mistake(
            "block_sin_cos_swapped", wrong._block_sin_cos_swapped,
            "Sines and cosines are swapped inside your blocks: the diagonal of each block is cos(k w_i) "
            f"(with k = 0 the matrix is the identity; {_ROTATION})",
        ),
        Mistake(
            "no_frequency", wrong._no_frequency,
            "Every pair turns by its own angle k * w_i with w_i = 10000^(-2i / d_model), not by k radians",
        ),
        Mistake(
            "exponent_pair_index", wrong._shift_exponent_pair_index,
            f"The exponent is off by a factor 2 (you used the pair index i for 2i): {_FREQUENCY}",
        ),
        Mistake(
            "exponent_doubled", wrong._shift_exponent_doubled,
            f"The exponent is twice too large (arange(0, d_model, 2) already is 2i): {_FREQUENCY}",
        ),
        Mistake(
            "exponent_positive", wrong._shift_exponent_positive,
            f"Your angles grow with the pair index (k * 10000^(2i / d_model), or k / w_i): the angle is "
            f"k * w_i, and {_FREQUENCY}",
        ),
        Mistake(
            "halves_layout", wrong._halves_layout,
            "Your blocks pair dimension i with dimension i + d_model / 2 (the [sin ..., cos ...] layout): in "
            "this table pair i is the neighbours (2i, 2i + 1), so each 2 x 2 block sits on the diagonal "
            "(torch.block_diag)",
        ),
        Mistake(
            "block_at_pair_index", wrong._block_at_pair_index,
            "Pair i occupies rows and columns 2i and 2i + 1, not i and i + 1: your blocks overlap",
        ),
        Mistake(
            "last_block_missing", wrong._last_block_missing,
            "Your last 2 x 2 block is 0: there are d_model / 2 pairs, and every one needs its block "
            "(an off-by-one in the loop?)",
        ),
        Mistake(
            "block_diag_of_list", wrong._block_diag_of_list,
            "torch.block_diag takes the blocks as separate arguments: unpack your list, "
            "torch.block_diag(*blocks)",
        ),
        Mistake(
            "float64_matrix", wrong._shift_float64,
            "Your matrix is float64: return it as float32, as the docstring says (.float() at the end)",
        ),
        Mistake(
            "stacked_blocks", wrong._stacked_blocks,
            "You returned the (d_model / 2, 2, 2) stack of blocks: put them on the diagonal of one "
            "(d_model, d_model) matrix (torch.block_diag)",
        ),
    ],
    forbidden=("utils", "utils.exercises.positional.relative_shift_matrix_reference"),
    atol=1e-5,
    rtol=1e-4,
    hint="expand sin((p + k) w) and cos((p + k) w) with the angle-addition formulas; put one 2 x 2 block "
         "per pair on the diagonal (torch.block_diag).",
)


EXERCISES: tuple[Exercise, ...] = (SINUSOIDAL, SHIFT, ADD)  # notebook order
