"""Red team R17 (issue 35): chapter 6's block gradient through forward-mode autodiff (``torch.func.jacfwd``,
``torch.autograd.forward_ad``), chapter 7's RMSNorm through ``F.layer_norm`` on ``cat([x, -x])``, a dataclass
field named like a forbidden name; and fair cells the static check refused: the cell's own ``.backward``
method, a namedtuple's ``.grad`` field, a local variable named ``utils``.

Each route is refused by the static check and, where it runs, blocked at run time; each fair style passes
both static checks and, in one small sandboxed batch, gets full marks.
"""

from __future__ import annotations

import dataclasses

import grader_fixtures as gf
import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises import get
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.runner import load_function, run_cases

GRAD = "ch6.block_score_grad"
RMS = "ch7.rms_norm"


def _verdict(exercise: str, source: str) -> str | None:
    return unsafe_in_source(source) or forbidden_in_source(source, get(exercise).forbidden)


# --------------------------------------------------------------------------------------------------
# Forward mode and the rest of torch's autodiff, for the exercises that forbid autograd's gradients
# --------------------------------------------------------------------------------------------------

_HEAD = "def block_score_grad(grad_out, out, weights, value):\n"
JACFWD = (_HEAD + "    s = torch.log(weights.double())\n"
          "    f = lambda t: (torch.exp(t) @ value.double() * grad_out.double()).sum()\n"
          "    return torch.func.jacfwd(f)(s).to(weights.dtype)\n")
DUAL = (_HEAD + "    s = torch.log(weights)\n    with torch.autograd.forward_ad.dual_level():\n"
        "        d = torch.autograd.forward_ad.make_dual(s, grad_out)\n"
        "        return torch.autograd.forward_ad.unpack_dual(d.exp()).tangent\n")
_F = "lambda t: (torch.exp(t) @ value * grad_out).sum()"
AUTODIFF_ROUTES = {  # each spelled the way a learner would; what the static check names
    "func.jacfwd": ("torch.func.jacfwd(" + _F + ")(torch.log(weights))", "torch.func.jacfwd"),
    "func.jacrev": ("torch.func.jacrev(" + _F + ")(torch.log(weights))", "torch.func.jacrev"),
    "func.grad": ("torch.func.grad(" + _F + ")(torch.log(weights))", "torch.func.grad"),
    "func.grad_and_value": ("torch.func.grad_and_value(" + _F + ")(torch.log(weights))[0]",
                            "torch.func.grad_and_value"),
    "func.jvp": ("torch.func.jvp(torch.exp, (torch.log(weights),), (grad_out,))[1]", "torch.func.jvp"),
    "func.vjp": ("torch.func.vjp(torch.exp, torch.log(weights))[1](grad_out)[0]", "torch.func.vjp"),
    "func.linearize": ("torch.func.linearize(torch.exp, torch.log(weights))[1](grad_out)", "torch.func.linearize"),
    "func.hessian": ("torch.func.hessian(" + _F + ")(torch.log(weights)).sum(-1)", "torch.func.hessian"),
    "functional.jacobian": ("torch.autograd.functional.jacobian(" + _F + ", torch.log(weights))",
                            "torch.autograd.functional.jacobian"),
    "functional.jvp": ("torch.autograd.functional.jvp(torch.exp, torch.log(weights), grad_out)[1]",
                       "torch.autograd.functional.jvp"),
    "functional.vjp": ("torch.autograd.functional.vjp(" + _F + ", torch.log(weights))[1]",
                       "torch.autograd.functional.vjp"),
    "functional.hvp": ("torch.autograd.functional.hvp(" + _F + ", torch.log(weights), grad_out)[1]",
                       "torch.autograd.functional.hvp"),
    "functional.vhp": ("torch.autograd.functional.vhp(" + _F + ", torch.log(weights), grad_out)[1]",
                       "torch.autograd.functional.vhp"),
    "functional.hessian": ("torch.autograd.functional.hessian(" + _F + ", torch.log(weights)).sum(-1)",
                           "torch.autograd.functional.hessian"),
    "from_func_import": ("jacfwd(" + _F + ")(torch.log(weights))", "torch.func.jacfwd"),
    "import_as": ("fad.unpack_dual(fad.make_dual(weights, grad_out)).tangent",
                  "torch.autograd.forward_ad.unpack_dual"),
    "tensor_backward_unbound": ("torch.Tensor.backward(weights.sum()) or weights", "torch.autograd.backward"),
}
_PREFIX = {"from_func_import": "from torch.func import jacfwd\n",
           "import_as": "import torch.autograd.forward_ad as fad\n"}


def _route(name: str) -> str:
    return _PREFIX.get(name, "") + _HEAD + f"    return {AUTODIFF_ROUTES[name][0]}\n"


def _exercises_forbidding_autograd() -> list[str]:
    from utils.exercises.registry import all_exercises

    return sorted(e.id for e in all_exercises().values() if "torch.autograd.grad" in e.forbidden)


def test_every_exercise_that_forbids_autograd_grad_forbids_forward_mode_and_torch_func():
    ids = _exercises_forbidding_autograd()
    assert GRAD in ids
    for exercise in ids:
        missing = {named for _code, named in AUTODIFF_ROUTES.values()} - set(get(exercise).forbidden)
        assert not missing, (exercise, missing)
        assert {"torch.autograd.forward_ad.unpack_dual", "torch.autograd.forward_ad.dual_level"} <= set(
            get(exercise).forbidden)


@pytest.mark.parametrize("name, source", [("a1_jacfwd", JACFWD), ("a2_dual", DUAL)])
def test_r17_forward_mode_cells_are_refused_by_the_static_check(name, source):
    assert _verdict(GRAD, source) in ("torch.func.jacfwd", "torch.autograd.forward_ad.dual_level",
                                      "torch.autograd.forward_ad.make_dual"), name


@pytest.mark.parametrize("name", sorted(AUTODIFF_ROUTES))
def test_each_autodiff_route_is_refused_and_named(name):
    """Named by the forbidden-name check; an import of torch.func or forward_ad is refused before that too."""
    assert forbidden_in_source(_route(name), get(GRAD).forbidden) == AUTODIFF_ROUTES[name][1], name
    assert (_verdict(GRAD, _route(name)) == AUTODIFF_ROUTES[name][1]) == (name not in _PREFIX), name


def _case():
    weights = torch.softmax(torch.randn(2, 3, 4, dtype=torch.float64), -1)
    value = torch.randn(2, 4, 5, dtype=torch.float64)
    out = weights @ value
    return {"grad_out": torch.randn(2, 3, 5, dtype=torch.float64), "out": out, "weights": weights, "value": value}


@pytest.mark.parametrize("name", ["a1_jacfwd", "a2_dual", *sorted(AUTODIFF_ROUTES), "loss_backward"])
def test_each_autodiff_route_is_blocked_at_run_time(name):
    """The run-time half: the route runs while the names are patched out (jvp and jacfwd reach forward_ad's
    make_dual; jacrev, grad and tensor.backward() autograd's own)."""
    source = {"a1_jacfwd": JACFWD, "a2_dual": DUAL, "loss_backward": LOSS_BACKWARD}.get(name) or _route(name)
    forbidden = get(GRAD).forbidden
    fn = load_function(source, "block_score_grad", forbidden)
    outcome = run_cases(fn, [_case()], forbidden)[0]
    assert outcome.forbidden in forbidden, (name, outcome)


LOSS_BACKWARD = (_HEAD + "    s = torch.log(weights).detach().requires_grad_()\n"
                 "    (torch.exp(s) @ value * grad_out).sum().backward()\n    return s.grad * 1\n")


def test_tensor_backward_passes_the_static_check_but_is_blocked_at_run_time():
    """``loss.backward()`` on a tensor reads like any object's method: the static check lets it through, and
    the run time blocks it, since the method calls torch.autograd.backward."""
    assert _verdict(GRAD, LOSS_BACKWARD) is None
    fn = load_function(LOSS_BACKWARD, "block_score_grad", get(GRAD).forbidden)
    assert run_cases(fn, [_case()], get(GRAD).forbidden)[0].forbidden == "torch.autograd.backward"


# --------------------------------------------------------------------------------------------------
# Fair styles: the cell's own .backward, a namedtuple's .grad, a local variable named utils
# --------------------------------------------------------------------------------------------------

_DS = "grad_out @ value.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True)"
FAIR = {
    "f1_own_backward": (GRAD, "class Blk:\n    def __init__(self, w):\n        self.w = w\n"
                              "    def backward(self, g):\n        return self.w * g\n"
                              + _HEAD + f"    b = Blk(weights)\n    return b.backward({_DS})\n"),
    "f1_own_backward_call": (GRAD, "class Blk:\n    def __init__(self, w):\n        self.w = w\n"
                                   "    def backward(self, g):\n        return self.w * g\n"
                                   + _HEAD + f"    return Blk(weights).backward({_DS})\n"),
    "f2_namedtuple_grad": (GRAD, "import collections\nG = collections.namedtuple('G', 'grad delta')\n" + _HEAD
                                 + "    r = G(grad_out @ value.transpose(-2, -1),\n"
                                 "          (grad_out * out).sum(-1, keepdim=True))\n"
                                 "    return weights * (r.grad - r.delta)\n"),
    "f3_utils_local": ("ch2.scaled_dot_product_attention",
                       "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                       "    utils = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                       "    if mask is not None:\n        utils = utils.masked_fill(~mask, float('-inf'))\n"
                       "    w = utils.softmax(-1)\n    return w @ v, w\n"),
    "f3_utils_argument": ("ch2.scaled_dot_product_attention",
                          "def _weights(utils):\n    return utils.softmax(-1)\n"
                          "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                          "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                          "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
                          "    w = _weights(s)\n    return w @ v, w\n"),
    "f3_utils_comprehension": ("ch2.scaled_dot_product_attention",
                               "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                               "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                               "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
                               "    w = [utils.softmax(-1) for utils in (s,)][0]\n    return w @ v, w\n"),
}


@pytest.mark.parametrize("name", sorted(FAIR))
def test_each_fair_style_passes_both_static_checks(name):
    exercise, source = FAIR[name]
    assert _verdict(exercise, source) is None, (name, _verdict(exercise, source))


USES_UTILS = {  # the package, still refused: imported, or a name the cell never binds where it is read
    "import": "import utils\ndef f(x):\n    return x\n",
    "import_as": "import utils as u\ndef f(x):\n    return x\n",
    "import_bound_as_utils": "import numpy as utils\ndef f(x):\n    return utils.asarray(x)\n",
    "global_read": "def f(x):\n    return utils.positional.sinusoidal_encoding(x)\n",
    "bound_elsewhere": "def g(utils):\n    return utils\ndef f(x):\n    return utils.attention.attend(x)\n",
    "bound_after_read": "y = utils.attention\nutils = 1\ndef f(x):\n    return x\n",
    "bound_by_itself": "utils = utils.attention\ndef f(x):\n    return x\n",
    "global_statement": "def f(x):\n    global utils\n    utils = utils.attention\n    return x\n",
    "bound_conditionally": "if False:\n    utils = 1\ndef f(x):\n    return utils.attention.attend(x)\n",
    "comprehension_first_iterable": "def f(x):\n    return [utils for utils in utils.attention.attend(x)]\n",
}


@pytest.mark.parametrize("name", sorted(USES_UTILS))
def test_the_utils_package_is_still_refused_where_the_cell_does_not_bind_the_name(name):
    assert forbidden_in_source(USES_UTILS[name], ("utils",)) == "utils", name


def test_autograd_names_on_torch_chains_are_still_refused():
    forbidden = get(GRAD).forbidden
    for source, named in [("def f(x):\n    return torch.autograd.grad(x, x)\n", "torch.autograd.grad"),
                          ("from torch.autograd import grad\n", "torch.autograd.grad"),
                          ("import torch.autograd as ag\ndef f(x):\n    return ag.backward(x)\n",
                           "torch.autograd.backward"),
                          ("def f(x):\n    ag = torch.autograd\n    return ag.grad(x, x)\n", "torch.autograd.grad"),
                          ("def f(x):\n    return getattr(torch.autograd, 'grad')(x, x)\n", "torch.autograd.grad")]:
        assert forbidden_in_source(source, forbidden) == named, source


# --------------------------------------------------------------------------------------------------
# ch7.rms_norm: torch's other normalisation layers
# --------------------------------------------------------------------------------------------------

_RMS_HEAD = "def rms_norm(x, weight, eps=1e-6):\n"
NORM_ROUTES = {
    "b1_layer_norm_cat": ("    both = torch.cat([x, -x], dim=-1)\n"
                          "    return F.layer_norm(both, both.shape[-1:], eps=eps)[..., :x.shape[-1]] * weight\n",
                          "torch.nn.functional.layer_norm"),
    "torch_layer_norm": ("    return torch.layer_norm(x, x.shape[-1:]) * weight\n", "torch.layer_norm"),
    "nn_LayerNorm": ("    return nn.LayerNorm(x.shape[-1])(x) * weight\n", "torch.nn.LayerNorm"),
    "group_norm": ("    return F.group_norm(x, 1) * weight\n", "torch.nn.functional.group_norm"),
    "nn_GroupNorm": ("    return nn.GroupNorm(1, x.shape[-1])(x) * weight\n", "torch.nn.GroupNorm"),
    "instance_norm": ("    return F.instance_norm(x[None]) [0] * weight\n", "torch.nn.functional.instance_norm"),
    "nn_InstanceNorm1d": ("    return nn.InstanceNorm1d(3)(x) * weight\n", "torch.nn.InstanceNorm1d"),
    "batch_norm": ("    return F.batch_norm(x, None, None, training=True) * weight\n",
                   "torch.nn.functional.batch_norm"),
    "torch_batch_norm": ("    return torch.batch_norm(x, None, None, None, None, True, 0.1, eps, False)\n",
                         "torch.batch_norm"),
    "nn_BatchNorm1d": ("    return nn.BatchNorm1d(x.shape[-1])(x) * weight\n", "torch.nn.BatchNorm1d"),
    "local_response_norm": ("    return F.local_response_norm(x[..., None], 2 * x.shape[-1], beta=0.5) * weight\n",
                            "torch.nn.functional.local_response_norm"),
}


@pytest.mark.parametrize("name", sorted(NORM_ROUTES))
def test_rms_norm_refuses_torch_s_normalisation_layers(name):
    assert _verdict(RMS, _RMS_HEAD + NORM_ROUTES[name][0]) == NORM_ROUTES[name][1], name


def test_b1_is_blocked_at_run_time_too():
    fn = load_function(_RMS_HEAD + NORM_ROUTES["b1_layer_norm_cat"][0], "rms_norm", get(RMS).forbidden)
    case = {"x": torch.randn(3, 8), "weight": torch.randn(8), "eps": 1e-6}
    assert run_cases(fn, [case], get(RMS).forbidden)[0].forbidden == "torch.nn.functional.layer_norm"


@pytest.mark.parametrize("body", [
    "    return F.normalize(x, dim=-1) * math.sqrt(x.shape[-1]) * weight if eps == 0 else "
    "x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight\n",
    "    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)\n"
    "    return x / torch.sqrt(n * n / x.shape[-1] + eps) * weight\n",
])
def test_computing_a_norm_stays_allowed_in_rms_norm(body):
    assert _verdict(RMS, _RMS_HEAD + body) is None


# --------------------------------------------------------------------------------------------------
# A field named like a forbidden name (h1/h2): a use
# --------------------------------------------------------------------------------------------------

FIELDS = {
    "h1_dataclass_astuple": "import dataclasses\n@dataclasses.dataclass\nclass T(torch.Tensor):\n    logsumexp: int\n"
                            "LSE = dataclasses.astuple(torch.zeros(1).as_subclass(T))[0]\n",
    "namedtuple_fields_string": "import collections\nT = collections.namedtuple('T', 'a logsumexp')\n",
    "namedtuple_fields_commas": "import collections\nT = collections.namedtuple('T', 'a,logsumexp')\n",
    "keyword_field": "import typing\nT = typing.NamedTuple('T', logsumexp=int)\n",
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_named_like_a_forbidden_name_is_a_use(name):
    assert forbidden_in_source(FIELDS[name], get("ch6.online_softmax_update").forbidden) == "torch.logsumexp", name


# --------------------------------------------------------------------------------------------------
# One small sandboxed batch (the toy course, with the real exercises' forbidden lists)
# --------------------------------------------------------------------------------------------------

_TOTAL_HEAD = "def total(x):\n    t = x.double()\n"
BATCH_FAIR = {
    "f1_own_backward": {"ch1.total": "class Acc:\n    def backward(self, t):\n        return float(t.sum())\n"
                                     + _TOTAL_HEAD + "    a = Acc()\n    return a.backward(t)\n"},
    "f2_namedtuple_grad": {"ch1.total": "import collections\nG = collections.namedtuple('G', 'grad n')\n"
                                       + _TOTAL_HEAD + "    r = G(t.sum(), t.numel())\n    return float(r.grad)\n"},
    "f3_utils_local": {"ch1.attend": "def attend(q, k, v):\n"
                                     "    utils = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                                     "    return torch.softmax(utils, dim=-1) @ v\n"},
}
BATCH_ROUTES = {
    "a1_jacfwd": _TOTAL_HEAD + "    return float(torch.func.jacfwd(lambda s: (s * s / 2).sum())(t).sum())\n",
    "a2_dual": _TOTAL_HEAD + "    with torch.autograd.forward_ad.dual_level():\n"
                             "        d = torch.autograd.forward_ad.make_dual(t, torch.ones_like(t))\n"
                             "        return float(torch.autograd.forward_ad.unpack_dual(d * d / 2).tangent.sum())\n",
    "loss_backward": _TOTAL_HEAD + "    s = t.clone().requires_grad_()\n    (s * s / 2).sum().backward()\n"
                                   "    return float(s.grad.sum())\n",
}


@pytest.fixture(scope="module")
def r17_batch(tmp_path_factory):
    students = {name: dict(cells) for name, cells in BATCH_FAIR.items()}
    students.update({name: {"ch1.total": source} for name, source in BATCH_ROUTES.items()})
    total = dataclasses.replace(gf.TOTAL, forbidden=get(GRAD).forbidden)
    attend = dataclasses.replace(gf.ATTEND, forbidden=get("ch2.scaled_dot_product_attention").forbidden)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(gf.TOY_REGISTRY, "ch1.total", total)
        patch.setitem(gf.TOY_REGISTRY, "ch1.attend", attend)
        return grade_class(tmp_path_factory.mktemp("r17"), students)


@pytest.mark.sandbox
def test_a_correct_solution_in_each_fair_style_gets_full_marks(r17_batch):
    for name, cells in BATCH_FAIR.items():
        for exercise in cells:
            got = row(r17_batch, name, exercise)
            assert got["status"] == "passed" and got["points"] == got["max_points"], (name, exercise, got)


@pytest.mark.sandbox
def test_each_r17_route_gets_no_points_and_says_why(r17_batch):
    for name in BATCH_ROUTES:
        got = row(r17_batch, name, "ch1.total")
        assert got["status"] == "forbidden" and got["points"] == "0", (name, got)
    assert "torch.autograd.backward" in row(r17_batch, "loss_backward", "ch1.total")["feedback"]
