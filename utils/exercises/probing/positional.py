"""Chapter 4's probes: the sinusoidal table read back column by column.

* ``sinusoidal_encoding``: for length 12 and d_model 8, the sine columns (0, 2, …) and the cosine columns
  (1, 3, …) are judged apart; when both differ, each pair's frequency is read back from the learner's
  table (the angle at position 1) and compared with p / 10000^(2i / d_model), pair by pair.

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import math

import torch

from utils.exercises.probes import Probe
from utils.exercises.probing.kit import max_error, numbers, probe_output, reference_output, same
from utils.i18n.messages import tr

_LENGTH, _D_MODEL = 12, 8


def _table_inputs(gen: torch.Generator) -> list:
    return [{"length": _LENGTH, "d_model": _D_MODEL}]


def _frequencies(got: torch.Tensor) -> list[float] | None:
    """Each pair's frequency w, when column 2i is sin(p w) and column 2i + 1 is cos(p w) for every p."""
    positions = torch.arange(got.shape[0], dtype=torch.float64)
    found = []
    for i in range(got.shape[1] // 2):
        w = math.atan2(float(got[1, 2 * i]), float(got[1, 2 * i + 1]))
        if not (same(got[:, 2 * i], torch.sin(positions * w), atol=1e-3, rtol=1e-3)
                and same(got[:, 2 * i + 1], torch.cos(positions * w), atol=1e-3, rtol=1e-3)):
            return None
        found.append(w)
    return found


def _table_explain(reference, inputs, outcomes) -> str | None:
    got, expected = probe_output(outcomes, 0), reference_output(reference, inputs[0])
    if got is None or got.shape != expected.shape or not got.is_floating_point() or same(got, expected):
        return None
    got = got.double()
    sines, cosines = expected[:, 0::2].double(), expected[:, 1::2].double()
    even_ok, odd_ok = same(got[:, 0::2], sines), same(got[:, 1::2], cosines)
    if even_ok and not odd_ok:
        if same(got[:, 1::2], sines):
            return tr("your even columns (0, 2, …) hold the right sines, and your odd columns (1, 3, …) hold the "
                      "same sines again: the odd columns take the cosine of the same angle, cos(p / 10000^(2i / "
                      "d_model))")
        return tr("your even columns (0, 2, …), the sines, are right; your odd columns (1, 3, …) differ (max abs "
                  "error {error:.3g}): each holds cos of the same angle as the sine beside it",
                  error=max_error(got[:, 1::2], cosines))
    if odd_ok and not even_ok:
        return tr("your odd columns (1, 3, …), the cosines, are right; your even columns (0, 2, …) differ (max abs "
                  "error {error:.3g}): each holds sin of the same angle as the cosine beside it",
                  error=max_error(got[:, 0::2], sines))
    found = _frequencies(got)
    if found is None:
        return None
    want = [1 / 10000 ** (2 * i / _D_MODEL) for i in range(_D_MODEL // 2)]
    wrong = [i for i, (g, w) in enumerate(zip(found, want)) if abs(g - w) > 1e-4]
    if not wrong:
        return None
    text = tr("for length {L} and d_model {E} your columns are sin and cos of p·w, but with the frequencies w = "
              "{got} for pairs i = 0 … {last}, where p / 10000^(2i / d_model) gives w = {want} (pairs that differ: "
              "{wrong})", L=_LENGTH, E=_D_MODEL, got=numbers(found), last=len(want) - 1, want=numbers(want),
              wrong=", ".join(map(str, wrong)))
    if all(0 < g <= 1 for g in found):
        exponents = [-math.log(g) / math.log(10000) for g in found]
        text += tr("; your exponents of 10000 are {got}, and 2i / d_model gives {want}",
                   got=numbers(exponents), want=numbers([2 * i / _D_MODEL for i in range(_D_MODEL // 2)]))
    return text


SINUSOIDAL_PROBES = (Probe("columns_and_frequencies", _table_inputs, _table_explain),)


# --------------------------------------------------------------------------------------------------
# relative_shift_matrix
# --------------------------------------------------------------------------------------------------


def _shift_inputs(gen: torch.Generator) -> list:
    return [{"k": k, "d_model": 4} for k in (0, 1, 2, -1)]


def _shift_explain(reference, inputs, outcomes) -> str | None:
    got = [probe_output(outcomes, i) for i in range(len(inputs))]
    if any(m is None or m.shape != (4, 4) or not m.is_floating_point() for m in got):
        return None
    zero, one, two, minus_one = (m.double() for m in got)
    if all(same(m, reference_output(reference, case)) for m, case in zip(got, inputs)):
        return None
    eye = torch.eye(4, dtype=torch.float64)
    if not same(zero, eye):
        return tr("for k = 0 your matrix is not the identity: a shift by 0 must change nothing (each 2 x 2 block "
                  "is [[cos 0, sin 0], [-sin 0, cos 0]] = I); your first row is {row}", row=numbers(zero[0]))
    if not same(one @ one, two, atol=1e-4):
        return tr("your M_1 @ M_1 is not your M_2: shifting by 1 twice must be shifting by 2, so each block must "
                  "be a rotation by k·w (your M_1 @ M_1 has first row {square}, your M_2 {two})",
                  square=numbers((one @ one)[0]), two=numbers(two[0]))
    if not same(one @ minus_one, eye, atol=1e-4):
        return tr("your M_1 @ M_-1 is not the identity: a shift by -1 must undo a shift by 1 (M_-k is M_k "
                  "transposed)")
    return None


SHIFT_PROBES = (Probe("shift_algebra", _shift_inputs, _shift_explain),)
