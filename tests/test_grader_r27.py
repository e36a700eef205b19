"""Red team R27 (issue 35): chapter 7's ``rms_norm`` written with ``F.normalize`` is fair, and earns its point.

The root mean square of ``x`` over its last dimension ``d`` is ``||x|| / sqrt(d)``, and with ``eps``:
``x / sqrt(mean(x**2) + eps) == x / ||[x, sqrt(d * eps)]|| * sqrt(d)``. So ``F.normalize`` of ``x`` with that
column added, scaled by ``sqrt(d)``, computes RMSNorm. The red team asked whether to forbid it; the course decides
it is fair (README: computing a norm is part of writing RMSNorm, as ``softplus`` is part of writing chapter 6's
logsumexp): a ready-made *normalization layer* is forbidden, a norm is not. This test keeps that decision
visible: a change that refuses it must change the README too.
"""

from __future__ import annotations

from utils.exercises import get
from utils.exercises.check_cell import run_public_check
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.runner import load_function

NORMALIZE = (
    "def rms_norm(x, weight, eps=1e-6):\n"
    "    d = x.shape[-1]\n"
    "    c = torch.full((*x.shape[:-1], 1), math.sqrt(d * eps), dtype=x.dtype)\n"
    "    y = F.normalize(torch.cat([x, c], dim=-1), dim=-1)[..., :d] * math.sqrt(d)\n"
    "    return y * weight\n"
)


def test_rms_norm_from_a_norm_is_fair_and_passes_the_check(capsys):
    exercise = get("ch7.rms_norm")
    assert forbidden_in_source(NORMALIZE, exercise.forbidden) is None and unsafe_in_source(NORMALIZE) is None
    assert run_public_check(exercise, load_function(NORMALIZE, "rms_norm", exercise.forbidden)).passed
    assert "✅" in capsys.readouterr().out
