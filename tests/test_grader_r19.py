"""Red team R19 (issue 35): torch's other names for a forbidden routine (``torch.native_layer_norm`` on
``cat([x, -x])`` for RMSNorm, ``torch.native_batch_norm``, ``F.linear_cross_entropy``,
``torch.distributions.SoftmaxTransform``) got full marks; a fair cell that picks its device with
``torch.cuda.is_available()`` was refused.

Each route is refused by the static check, naming what it reaches, and blocked at run time; the fair idioms
(``F.normalize``, ``torch.linalg.vector_norm``, ``torch.rsqrt``, the device idiom) pass. One small sandboxed
batch grades each route and each fair cell as the red team did.
"""

from __future__ import annotations

import dataclasses

import grader_fixtures as gf
import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises import get
from utils.exercises.common import Status, torch_namesakes, with_namesakes
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.judging import judge
from utils.exercises.runner import ForbiddenCall, forbid, load_function, run_cases

RMS = "ch7.rms_norm"
ONLINE = "ch6.online_softmax_update"
_RMS_HEAD = "def rms_norm(x, weight, eps=1e-6):\n"


def _verdict(exercise: str, source: str) -> str | None:
    return unsafe_in_source(source) or forbidden_in_source(source, get(exercise).forbidden)


def _rms_case() -> dict:
    return {"x": torch.randn(3, 8, dtype=torch.float64), "weight": torch.randn(8, dtype=torch.float64), "eps": 1e-6}


# --------------------------------------------------------------------------------------------------
# 1. torch's other normalisation routines in ch7.rms_norm (R1, R2)
# --------------------------------------------------------------------------------------------------

R1 = (_RMS_HEAD + "    d = x.shape[-1]\n"
      "    y = torch.native_layer_norm(torch.cat([x, -x], dim=-1), [2 * d], None, None, eps)[0]\n"
      "    return y[..., :d] * weight\n")
R2 = (_RMS_HEAD + "    d = x.shape[-1]\n    z = torch.cat([x, -x], dim=-1).reshape(1, -1, 2 * d)\n"
      "    y = torch.native_batch_norm(z, None, None, None, None, True, 0.0, eps)[0]\n"
      "    return y.reshape(*x.shape[:-1], 2 * d)[..., :d] * weight\n")
NORM_NAMESAKES = ("native_layer_norm", "native_batch_norm", "native_group_norm", "batch_norm_elemt",
                  "batch_norm_stats", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
                  "batch_norm_update_stats", "cudnn_batch_norm", "miopen_batch_norm", "quantized_batch_norm")


@pytest.mark.parametrize("name", NORM_NAMESAKES)
def test_torch_s_other_normalisation_routines_are_refused_in_rms_norm_and_named(name):
    assert _verdict(RMS, _RMS_HEAD + f"    return torch.{name}(x)\n") == f"torch.{name}"


@pytest.mark.parametrize("source", [R1, R2], ids=["r1_native_layer_norm", "r2_native_batch_norm"])
def test_r1_and_r2_are_refused_by_the_static_check_and_blocked_at_run_time(source):
    assert _verdict(RMS, source) in ("torch.native_layer_norm", "torch.native_batch_norm")
    forbidden = get(RMS).forbidden
    fn = load_function(source, "rms_norm", forbidden)
    outcome = run_cases(fn, [_rms_case()], forbidden)[0]
    assert outcome.forbidden == _verdict(RMS, source) and outcome.output is None, outcome  # named as called
    x = torch.randn(2, 4)  # and torch's own is back afterwards
    assert torch.allclose(torch.native_layer_norm(x, [4], None, None, 1e-5)[0], torch.layer_norm(x, [4]))


FAIR_RMS = {
    "normalize": "    return F.normalize(x, dim=-1) * math.sqrt(x.shape[-1]) * weight if eps == 0 else "
                 "x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight\n",
    "vector_norm": "    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)\n"
                   "    return x / torch.sqrt(n * n / x.shape[-1] + eps) * weight\n",
    "torch_norm": "    n = torch.norm(x, dim=-1, keepdim=True)\n"
                  "    return x / torch.sqrt(n * n / x.shape[-1] + eps) * weight\n",
    "tensor_norm": "    n = x.norm(dim=-1, keepdim=True)\n"
                   "    return x / torch.sqrt(n * n / x.shape[-1] + eps) * weight\n",
    "rsqrt": "    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight\n",
}


@pytest.mark.parametrize("name", sorted(FAIR_RMS))
def test_computing_a_norm_by_hand_stays_allowed_statically_and_at_run_time(name):
    source, forbidden = _RMS_HEAD + FAIR_RMS[name], get(RMS).forbidden
    assert _verdict(RMS, source) is None
    case = _rms_case()
    outcome = run_cases(load_function(source, "rms_norm", forbidden), [case], forbidden)[0]
    assert outcome.forbidden is None and outcome.error is None, outcome
    assert torch.allclose(outcome.output, get(RMS).reference(**case))


def test_the_namesakes_of_a_norm_leave_the_fair_norms_out():
    found = {name.rpartition(".")[2] for forbidden in get(RMS).forbidden for name in torch_namesakes(forbidden)}
    assert {"native_layer_norm", "native_batch_norm", "native_group_norm"} <= found
    assert not found & {"normalize", "vector_norm", "norm", "rsqrt", "mean", "pow", "sqrt", "matrix_norm"}


def test_a_gradient_s_names_have_no_namesakes():
    """``grad`` is in ``torch.no_grad`` and ``requires_grad_``: torch.autograd's and torch.func's names (and
    ``torch._functorch``'s, which the grader's worker adds as their aliases) get none."""
    for name in (*get("ch6.block_score_grad").forbidden, "torch._functorch.apis.grad"):
        assert torch_namesakes(name) == (), name


# --------------------------------------------------------------------------------------------------
# 2, 3. chapter 6's online softmax update by linear_cross_entropy (S3, S5) and SoftmaxTransform (S4)
# --------------------------------------------------------------------------------------------------

_OSU_HEAD = ("def online_softmax_update(running_max, running_sum, block):\n"
             "    new_max = torch.maximum(running_max, block.amax(dim=-1))\n"
             "    shift = torch.where(new_max == float('-inf'), 0.0, new_max)\n"
             "    bm = block.amax(dim=-1)\n    base = torch.where(bm == float('-inf'), torch.zeros_like(bm), bm)\n"
             "    safe = torch.where(block == float('-inf'), base[..., None] - 200, block).float()\n")
_OSU_TAIL = ("    fresh = torch.where(bm == float('-inf'), torch.zeros_like(lse), torch.exp(lse - shift))\n"
             "    return new_max, running_sum * torch.exp(running_max - shift) + fresh\n")
_LSE_BY_LOSS = ("    lse = (loss.reshape(block.shape[:-1]) + safe[..., 0]).to(block.dtype)\n")
_FLAT = ("    flat = safe.reshape(-1, block.shape[-1])\n"
         "    eye, first = torch.eye(block.shape[-1]), torch.zeros(flat.shape[0], dtype=torch.int64)\n")
_BY_PROBABILITY = ("    j = safe.argmax(dim=-1, keepdim=True)\n"
                   "    lse = (safe.gather(-1, j) - torch.log(p.gather(-1, j))).squeeze(-1).to(block.dtype)\n")
SOFTMAX_ROUTES = {  # name -> (the lines that compute lse, or p for _BY_PROBABILITY; the name the check gives)
    "s3_linear_cross_entropy": (_FLAT + "    loss = F.linear_cross_entropy(flat, eye, first, reduction='none', "
                                "options=nn.LinearCrossEntropyOptions())\n" + _LSE_BY_LOSS,
                                "torch.nn.functional.linear_cross_entropy"),
    "s5_linear_cross_entropy_loss": (_FLAT + "    m = nn.LinearCrossEntropyLoss(len(eye), len(eye), reduction='none')\n"
                                     "    with torch.no_grad():\n        m.linear.weight.copy_(eye)\n"
                                     "    loss = m(flat, first)\n" + _LSE_BY_LOSS, "torch.nn.LinearCrossEntropyLoss"),
    "s4_softmax_transform": ("    p = torch.distributions.SoftmaxTransform()(safe)\n" + _BY_PROBABILITY,
                             "torch.distributions.SoftmaxTransform"),
    "s4_transforms_module": ("    p = torch.distributions.transforms.SoftmaxTransform()(safe)\n" + _BY_PROBABILITY,
                             "torch.distributions.SoftmaxTransform"),
    "nn_log_softmax": ("    p = nn.LogSoftmax(dim=-1)(safe).exp()\n" + _BY_PROBABILITY, "torch.nn.LogSoftmax"),
    "adaptive_log_softmax": ("    p = nn.AdaptiveLogSoftmaxWithLoss\n" + _BY_PROBABILITY,
                             "torch.nn.AdaptiveLogSoftmaxWithLoss"),
}


def _osu_case() -> dict:
    block = torch.randn(3, 4, 5)
    block[0, 0] = float("-inf")
    return {"running_max": torch.randn(3, 4), "running_sum": torch.rand(3, 4) + 0.5, "block": block}


@pytest.mark.parametrize("name", sorted(SOFTMAX_ROUTES))
def test_a_softmax_under_another_name_is_refused_and_named(name):
    lines, named = SOFTMAX_ROUTES[name]
    assert _verdict(ONLINE, _OSU_HEAD + lines + _OSU_TAIL) == named


@pytest.mark.parametrize("name", ["s3_linear_cross_entropy", "s5_linear_cross_entropy_loss", "s4_softmax_transform",
                                  "s4_transforms_module"])
def test_a_softmax_under_another_name_is_blocked_at_run_time(name):
    source, forbidden = _OSU_HEAD + SOFTMAX_ROUTES[name][0] + _OSU_TAIL, get(ONLINE).forbidden
    case = _osu_case()
    right = get(ONLINE).reference(**case)
    fn = load_function(source, "online_softmax_update", ())
    unblocked = run_cases(fn, [case])[0].output  # the route does compute the answer
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(unblocked, right)), name
    outcome = run_cases(load_function(source, "online_softmax_update", forbidden), [case], forbidden)[0]
    assert outcome.forbidden in with_namesakes(forbidden) and outcome.output is None, outcome
    assert outcome.forbidden.rpartition(".")[2] in source, outcome  # named as the cell called it


def test_a_softmax_transform_made_without_its_name_is_blocked_at_run_time():
    """``transform_to(constraints.simplex)`` is a ``SoftmaxTransform``, named nowhere in the cell: its instances
    cannot be called while the exercise runs (their class's ``__call__`` is blocked), and can again afterwards."""
    source = ("def online_softmax_update(running_max, running_sum, block):\n"
              "    d = torch.distributions\n    p = d.transform_to(d.constraints.simplex)(block)\n"
              "    return running_max, p.sum(-1)\n")
    forbidden = get(ONLINE).forbidden
    assert _verdict(ONLINE, source) is None  # only the run time sees it
    outcome = run_cases(load_function(source, "online_softmax_update", forbidden), [_osu_case()], forbidden)[0]
    assert outcome.forbidden == "torch.distributions.SoftmaxTransform" and outcome.output is None, outcome
    assert "__call__" not in vars(torch.distributions.SoftmaxTransform)  # restored: inherited, not copied
    x = torch.randn(2, 3)
    assert torch.allclose(torch.distributions.transform_to(torch.distributions.constraints.simplex)(x),
                          torch.softmax(x, -1))


def test_distributions_helpers_that_normalise_by_a_softmax_are_blocked_and_stick_breaking_is_not():
    """``logits_to_probs`` calls ``F.softmax`` and ``Categorical`` ``Tensor.logsumexp`` (blocked as those);
    ``StickBreakingTransform`` (``biject_to(simplex)``) maps onto the simplex by products of sigmoids, no softmax:
    allowed."""
    block, forbidden = torch.randn(3, 5), get(ONLINE).forbidden
    from torch.distributions import utils as distribution_utils

    with forbid(forbidden) as called:
        for route in (lambda: distribution_utils.logits_to_probs(block),
                      lambda: torch.distributions.Categorical(logits=block).logits):
            with pytest.raises(ForbiddenCall):
                route()
        stick = torch.distributions.StickBreakingTransform()(block)
    assert called == ["torch.nn.functional.softmax", "torch.Tensor.logsumexp"], called
    assert torch.allclose(stick.sum(-1), torch.ones(3))
    assert not {"torch.distributions.StickBreakingTransform", "torch.distributions.transforms.StickBreakingTransform"} \
        & set(with_namesakes(forbidden))


R19_ROUTES = {  # also in tests/test_grader_forbidden.py's list: (exercise, source, the name the check gives)
    "r19_native_layer_norm": (RMS, R1, "torch.native_layer_norm"),
    "r19_native_batch_norm": (RMS, R2, "torch.native_batch_norm"),
    **{f"r19_{name}": (ONLINE, _OSU_HEAD + lines + _OSU_TAIL, named)
       for name, (lines, named) in SOFTMAX_ROUTES.items()},
}

# --------------------------------------------------------------------------------------------------
# 4. A fair cell refused: the device idiom (f8) and a torch.testing self-check (f9)
# --------------------------------------------------------------------------------------------------

F8 = ('DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n' + _RMS_HEAD
      + "    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight\n")
HARMLESS_CUDA_USES = ("is_available", "device_count", "current_device", "get_device_name", "is_bf16_supported",
                      "synchronize", "memory_allocated", "max_memory_allocated")


def test_f8_the_device_idiom_passes_both_checks_and_runs():
    assert _verdict(RMS, F8) is None
    case, forbidden = _rms_case(), get(RMS).forbidden
    outcome = run_cases(load_function(F8, "rms_norm", forbidden), [case], forbidden)[0]
    assert outcome.forbidden is None and torch.allclose(outcome.output, get(RMS).reference(**case))


@pytest.mark.parametrize("member", HARMLESS_CUDA_USES)
def test_each_harmless_torch_cuda_member_is_allowed(member):
    for source in (f"def f(x):\n    return torch.cuda.{member}()\n",
                   f"import torch as T\ndef f(x):\n    return x if T.cuda.{member} else None\n"):
        assert unsafe_in_source(source) is None, source


@pytest.mark.parametrize("source", [
    "def f(x):\n    return torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')\n",
    "def f(x):\n    return torch.cuda.jiterator\n",
    "c = torch.cuda\ndef f(x):\n    return c.is_available()\n",
    "def f(x):\n    return torch.cuda\n",
    "def f(x):\n    return torch.cuda.set_device(0)\n",
    "def f(x):\n    return torch.cuda.memory.memory_allocated()\n",
    "def f(x):\n    return torch.cuda.is_available.__module__\n",
    "def f(x):\n    return torch.cuda.synchronize.cache\n",
    "def f(x):\n    return x.cuda\n",
    "def f(x, t=torch):\n    return t.cuda.is_available()\n",
    "from torch import cuda\n",
    "import torch.cuda\n",
])
def test_the_rest_of_torch_cuda_stays_refused(source):
    assert unsafe_in_source(source) is not None, source


def test_f9_a_torch_testing_self_check_is_refused_with_a_pointer_to_torch_allclose():
    """Chosen: refused as before (``torch.testing`` is a module no cell may use), and the message says what to use
    instead; a self-check with ``torch.allclose`` passes."""
    f9 = (_RMS_HEAD + "    out = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight\n"
          "    torch.testing.assert_close(out.shape, x.shape)\n    return out\n")
    reason = unsafe_in_source(f9)
    assert reason is not None and "torch.testing" in reason and "torch.allclose" in reason, reason
    fair = f9.replace("torch.testing.assert_close(out.shape, x.shape)", "assert torch.allclose(out, out)")
    assert _verdict(RMS, fair) is None


# --------------------------------------------------------------------------------------------------
# 5. Odd outputs diagnosed as what they are (w1 sparse, w2 meta, w3 mkldnn)
# --------------------------------------------------------------------------------------------------

_RIGHT = "    out = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight\n"
ODD_OUTPUTS = {  # name -> (what the function returns, what the diagnosis names)
    "w1_sparse": ("out.to_sparse()", "sparse_coo"),
    "w2_meta": ("torch.empty(out.shape, dtype=out.dtype, device='meta')", "meta"),
    "w3_mkldnn": ("out.float().to_mkldnn()", "mkldnn"),
    "in_a_tuple": ("(out, torch.empty(1, device='meta'))", "meta"),
}


@pytest.mark.parametrize("name", sorted(ODD_OUTPUTS))
def test_an_odd_output_is_an_error_that_names_its_layout_or_device(name):
    returned, named = ODD_OUTPUTS[name]
    fn = load_function(_RMS_HEAD + _RIGHT + f"    return {returned}\n", "rms_norm")
    outcome = run_cases(fn, [_rms_case()])[0]
    assert outcome.output is None and outcome.error is not None and outcome.error[0] != "NotImplementedError", outcome
    assert named in outcome.error[1], outcome.error
    verdict = judge(get(RMS), [_rms_case()], [outcome])
    assert verdict.status == Status.ERROR and named in verdict.message, verdict
    assert verdict.message.startswith("your function returned an output that cannot be compared"), verdict


def test_not_attempted_only_when_the_function_itself_raises_not_implemented_error():
    stub = load_function(_RMS_HEAD + "    raise NotImplementedError\n", "rms_norm")
    assert judge(get(RMS), [_rms_case()], run_cases(stub, [_rms_case()])).status == Status.NOT_ATTEMPTED
    dense = load_function(_RMS_HEAD + _RIGHT + "    return out\n", "rms_norm")  # a control: plain output
    outcome = run_cases(dense, [_rms_case()])[0]
    assert outcome.error is None and outcome.output.layout == torch.strided


# --------------------------------------------------------------------------------------------------
# One small sandboxed batch (the toy course's total, with chapter 6's and 7's forbidden lists)
# --------------------------------------------------------------------------------------------------

_TOTAL_HEAD = "def total(x):\n    t = x.double()\n"
BATCH_ROUTES = {  # student -> (the cell, what its feedback names)
    "r1_native_layer_norm": (_TOTAL_HEAD + "    y = torch.native_layer_norm(torch.stack([t, -t]), [t.numel()], None, "
                             "None, 1e-5)[0]\n    return float(t.sum() + 0 * y.sum())\n", "torch.native_layer_norm"),
    "r2_native_batch_norm": (_TOTAL_HEAD + "    y = torch.native_batch_norm(t[None, :, None], None, None, None, None, "
                             "True, 0.0, 1e-5)[0]\n    return float(t.sum() + 0 * y.sum())\n",
                             "torch.native_batch_norm"),
    "s3_linear_cross_entropy": (_TOTAL_HEAD + "    loss = F.linear_cross_entropy(t[None].float(), "
                                "torch.eye(t.numel()), torch.zeros(1, dtype=torch.int64), "
                                "options=nn.LinearCrossEntropyOptions())\n"
                                "    return float(t.sum() + 0 * loss)\n", "torch.nn.functional.linear_cross_entropy"),
    "s4_softmax_transform": (_TOTAL_HEAD + "    p = torch.distributions.SoftmaxTransform()(t)\n"
                             "    return float(t.sum() + 0 * p.sum())\n", "torch.distributions.SoftmaxTransform"),
    "s4_transform_to": (_TOTAL_HEAD + "    d = torch.distributions\n    p = d.transform_to(d.constraints.simplex)(t)\n"
                        "    return float(t.sum() + 0 * p.sum())\n",
                        "torch.distributions.SoftmaxTransform"),  # the run time's (named nowhere)
    "f9_testing_self_check": (_TOTAL_HEAD + "    torch.testing.assert_close(t.shape, x.shape)\n"
                              "    return float(t.sum())\n",
                              "torch.allclose"),  # refused still, and told what to use instead
    "r1_run_time": ("# RUN TIME ONLY\n" + _TOTAL_HEAD + "    y = torch.native_layer_norm(torch.stack([t, -t]), "
                    "[t.numel()], None, None, 1e-5)[0]\n    return float(t.sum() + 0 * y.sum())\n",
                    "torch.native_layer_norm"),  # named by what the cell called, not by what it stands for
}
BATCH_FAIR = {
    "f8_device_idiom": 'DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' + _TOTAL_HEAD
                       + "    return float(t.to(DEVICE).sum().cpu())\n",
    "f_norms": _TOTAL_HEAD + "    n = torch.linalg.vector_norm(t) + F.normalize(t, dim=0).sum()\n"
                             "    n = n + torch.rsqrt(t * t + 1).sum()\n    return float(t.sum() + 0 * n)\n",
}

BATCH_ODD = {  # student -> (the cell, what its feedback names): an error, never "not attempted"
    "w1_sparse": (_TOTAL_HEAD + "    return t.sum().to_sparse()\n", "sparse_coo"),
    "w2_meta": (_TOTAL_HEAD + "    return torch.empty((), device='meta')\n", "meta device"),
}


@pytest.fixture(scope="module")
def r19_batch(tmp_path_factory):
    forbidden = tuple(dict.fromkeys(get(ONLINE).forbidden + get(RMS).forbidden))
    total = dataclasses.replace(gf.TOTAL, forbidden=forbidden)
    students = {name: {"ch1.total": source} for name, (source, _) in BATCH_ROUTES.items()}
    students.update({name: {"ch1.total": source} for name, source in BATCH_FAIR.items()})
    students.update({name: {"ch1.total": source} for name, (source, _) in BATCH_ODD.items()})
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(gf.TOY_REGISTRY, "ch1.total", total)
        with gf.static_check_off("# RUN TIME ONLY"):  # that cell meets the sandbox's run-time block alone
            return grade_class(tmp_path_factory.mktemp("r19"), students)


@pytest.mark.sandbox
def test_each_r19_route_gets_no_points_and_says_why(r19_batch):
    for name, (_, said) in BATCH_ROUTES.items():
        got = row(r19_batch, name, "ch1.total")
        assert got["status"] == "forbidden" and got["points"] == "0" and said in got["feedback"], (name, got)


@pytest.mark.sandbox
def test_each_fair_r19_cell_gets_full_marks(r19_batch):
    for name in BATCH_FAIR:
        got = row(r19_batch, name, "ch1.total")
        assert got["status"] == "passed" and got["points"] == got["max_points"], (name, got)


@pytest.mark.sandbox
def test_an_odd_output_is_an_error_naming_it_in_the_sandbox(r19_batch):
    for name, (_, said) in BATCH_ODD.items():
        got = row(r19_batch, name, "ch1.total")
        assert got["status"] == "error" and got["points"] == "0" and said in got["feedback"], (name, got)
