"""Red team R21 (issue 35): two ready-made routines the forbidden lists did not name.

* ``ch6.online_softmax_update`` by ``F.ctc_loss``: with one time step per score, CTC's log-space sum over
  alignments is a row's logsumexp (2/2 on the local grader, 8/8 on a Gradescope bundle, "passed" from the nbgrader
  judge). Forbidden now, with its namesakes (``torch.ctc_loss``, ``nn.CTCLoss``...), statically and at run time.
* ``ch2.causal_mask`` by ``nn.Transformer.generate_square_subsequent_mask(size) == 0``: torch's own mask.
"""

from __future__ import annotations

import pytest
import torch

from utils.exercises import get
from utils.exercises.forbidden import forbidden_in_source
from utils.exercises.runner import load_function, run_cases

ONLINE = "ch6.online_softmax_update"
CTC = (
    'def _row_lse(block):\n'
    '    B = block.shape[-1]\n'
    '    rows = block.reshape(-1, B).double()\n'
    '    N = rows.shape[0]\n'
    '    top = rows.amax(dim=-1)\n'
    '    shift = torch.where(torch.isfinite(top), top, torch.zeros_like(top)) + 60.0\n'
    '    lp = torch.zeros(B, N, 2, dtype=torch.float64)\n'
    '    lp[:, :, 1] = (rows - shift[:, None]).T\n'
    '    loss = F.ctc_loss(lp, torch.ones(N, 1, dtype=torch.long), torch.full((N,), B, dtype=torch.long),\n'
    '                      torch.ones(N, dtype=torch.long), reduction="none")\n'
    '    return (shift - loss).reshape(block.shape[:-1]).to(block.dtype)\n'
    'def online_softmax_update(running_max, running_sum, block):\n'
    '    new_max = torch.maximum(running_max, block.amax(dim=-1))\n'
    '    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)\n'
    '    lse = _row_lse(block)\n'
    '    new_sum = running_sum * torch.exp(running_max - safe) + torch.exp(lse - safe)\n'
    '    return new_max, new_sum\n'
)
GENSQ = "def causal_mask(size):\n    return nn.Transformer.generate_square_subsequent_mask(size) == 0\n"


def _case():
    torch.manual_seed(0)
    return {"running_max": torch.randn(2, 3), "running_sum": torch.rand(2, 3) + 0.5, "block": torch.randn(2, 3, 4)}


def test_ctc_computes_the_block_s_logsumexp_so_the_route_is_real():
    fn = load_function(CTC, "online_softmax_update", ())
    case = _case()
    got, right = run_cases(fn, [case])[0].output, get(ONLINE).reference(**case)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(got, right))


@pytest.mark.parametrize("call", ["F.ctc_loss(a, b, c, d)", "torch.ctc_loss(a, b, c, d)", "nn.CTCLoss()(a, b, c, d)"])
def test_ctc_is_refused_in_the_online_softmax_update_by_name(call):
    source = f"def online_softmax_update(running_max, running_sum, block):\n    return {call}\n"
    assert forbidden_in_source(source, get(ONLINE).forbidden) is not None


def test_ctc_is_blocked_at_run_time_under_the_name_called():
    forbidden = get(ONLINE).forbidden
    assert forbidden_in_source(CTC, forbidden) == "torch.nn.functional.ctc_loss"
    outcome = run_cases(load_function(CTC, "online_softmax_update", forbidden), [_case()], forbidden)[0]
    assert outcome.forbidden == "torch.nn.functional.ctc_loss" and outcome.output is None, outcome
    assert torch.nn.functional.ctc_loss.__module__ == "torch.nn.functional"  # torch's own is back afterwards


def test_torch_s_square_subsequent_mask_is_refused_in_causal_mask():
    forbidden = get("ch2.causal_mask").forbidden
    assert forbidden_in_source(GENSQ, forbidden) == "torch.nn.Transformer.generate_square_subsequent_mask"
    fair = "def causal_mask(size):\n    return torch.ones(size, size, dtype=torch.bool).tril()\n"
    assert forbidden_in_source(fair, forbidden) is None
    outcome = run_cases(load_function(GENSQ, "causal_mask", forbidden), [{"size": 4}], forbidden)[0]
    assert outcome.forbidden == "torch.nn.Transformer.generate_square_subsequent_mask", outcome
