"""Red team R18 (issue 35): ``np.testing.measure`` runs a string as code (numpy's ``testing`` reached as an
attribute of the allowed ``numpy``), ``torch.classes.load_library``, a gradient computed by walking
``res.grad_fn`` and its ``next_functions``; and a fair cell refused: its own class's ``logsumexp`` method.

Each route is refused by the static check, naming what it reaches, and gets no points in one small sandboxed
batch; a fair cell (``np.linalg.norm``, ``nn.init``, its own ``logsumexp`` method) passes and gets full marks.
"""

from __future__ import annotations

import ast
import dataclasses

import grader_fixtures as gf
import pytest
from test_grader_units import grade_class, row

from utils.exercises import get
from utils.exercises._cell_rules import ALLOWED_IMPORTS
from utils.exercises._submodules import AUTOGRAD_GRAPH, refused_reach
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source

ONLINE = "ch6.online_softmax_update"
GRAD = "ch6.block_score_grad"


def _verdict(exercise: str, source: str) -> str | None:
    return unsafe_in_source(source) or forbidden_in_source(source, get(exercise).forbidden)


# --------------------------------------------------------------------------------------------------
# A submodule reached as an attribute of an allowed module (M2, N3)
# --------------------------------------------------------------------------------------------------

_CODE = "CODE = 'import os\\nopen(\"forged.json\", \"w\").write(\"{}\")'\n"
SUBMODULE_ROUTES = {
    "m2_measure": ("numpy.testing", "import numpy as np\n" + _CODE + "def f(x):\n    np.testing.measure(CODE, 1)\n"),
    "n3_alias": ("numpy.testing", "import numpy\nt = numpy\n" + _CODE + "t.testing.measure(CODE, 1)\n"),
    "getattr_testing": ("numpy.testing", "import numpy as np\ngetattr(np, 'testing').rundocs('x.py')\n"),
    "numpy_plain": ("numpy.testing", "import numpy\nnumpy.testing.assert_equal(1, 1)\n"),
    "torch_testing": ("torch.testing", "def f(x):\n    return torch.testing.assert_close(x, x)\n"),
    "torch_classes": ("torch.classes", "torch.classes.load_library('/tmp/x.so')\n"),
    "t_classes": ("torch.classes", "t = torch\nt.classes.load_library('/tmp/x.so')\n"),
    "gradcheck": ("torch.autograd.gradcheck",
                  "def f(x):\n    return torch.autograd.gradcheck.get_numerical_jacobian(torch.exp, (x,))\n"),
}


@pytest.mark.parametrize("name", sorted(SUBMODULE_ROUTES))
def test_a_submodule_reached_through_an_allowed_module_is_refused_and_named(name):
    module, source = SUBMODULE_ROUTES[name]
    reason = unsafe_in_source(source)
    assert reason is not None and module in reason, (name, reason)


@pytest.mark.parametrize("source", [
    "def f(m=__import__):\n    return m\n",  # a control: refused already, for its own reason
    "def f(m):\n    return m.measure('import os', 1)\n",
    "def f(m):\n    return m.rundocs()\n",
    "def f(c):\n    return c.load_library('/tmp/x.so')\n",
])
def test_the_names_that_run_code_are_refused_on_any_object(source):
    """A second net: where the chain's root is not known to be a module (an argument, a default)."""
    assert unsafe_in_source(source) is not None


FAIR_MODULE_USES = {
    "np_linalg": "import numpy as np\ndef f(x):\n    return float(np.linalg.norm(x.numpy()))\n",
    "np_random": "import numpy as np\ndef f(x):\n    return np.random.default_rng(0).normal(size=3)\n",
    "nn_init": "def f(w):\n    return nn.init.zeros_(w)\n",
    "autograd_function": "class Sq(torch.autograd.Function):\n    pass\n",
    "functional": "def f(x):\n    return F.softmax(x, dim=-1) @ torch.linalg.inv(x)\n",
}


@pytest.mark.parametrize("name", sorted(FAIR_MODULE_USES))
def test_fair_uses_of_allowed_submodules_pass(name):
    assert unsafe_in_source(FAIR_MODULE_USES[name]) is None, name


def test_torch_cuda_is_a_harmless_submodule_for_this_rule():
    """``torch.cuda.is_available()``: this rule lets it through (the older rule on ``torch.cuda`` still
    decides it in :func:`unsafe_in_source`)."""
    tree = ast.parse("def f():\n    return torch.cuda.is_available(), nn.init.ones_, torch.nn.parameter.Parameter\n")
    assert refused_reach(tree, ALLOWED_IMPORTS) is None


# --------------------------------------------------------------------------------------------------
# Torch's autograd graph walked by hand (G1)
# --------------------------------------------------------------------------------------------------

_HEAD = "def block_score_grad(grad_out, out, weights, value):\n"
G1 = (_HEAD + "    s = torch.log(weights).detach().requires_grad_()\n"
      "    with torch.enable_grad():\n        r = (torch.exp(s) @ value * grad_out).sum()\n"
      "    node, g = r.grad_fn, torch.ones(())\n"
      "    while node.next_functions:\n"
      "        g = node(g)\n        g = g[0] if isinstance(g, tuple) else g\n"
      "        node = node.next_functions[0][0]\n"
      "    return g\n")


def test_g1_walking_the_graph_is_refused():
    reason = _verdict(GRAD, G1)
    assert reason is not None and ("grad_fn" in reason or "next_functions" in reason), reason


@pytest.mark.parametrize("attr", sorted(AUTOGRAD_GRAPH))
def test_each_autograd_graph_attribute_is_refused_in_every_exercise(attr):
    assert unsafe_in_source(f"def f(x):\n    return x.{attr}\n") is not None, attr


# --------------------------------------------------------------------------------------------------
# A cell's own class's method named like a forbidden name (F2): fair
# --------------------------------------------------------------------------------------------------

_OWN = ("class _Online:\n    def softmax(self, b):\n        e = torch.exp(b)\n"
        "        return e / e.sum(-1, keepdim=True)\n"
        "    def logsumexp(self, b):\n        return torch.log(torch.exp(b).sum(-1))\n"
        "    def both(self, b):\n        return self.logsumexp(b), self.softmax(b)\n")
OWN_FAIR = {
    "call": _OWN + "def f(b):\n    return _Online().logsumexp(b)\n",
    "instance": _OWN + "def f(b):\n    o = _Online()\n    return o.logsumexp(b) + o.softmax(b).sum(-1)\n",
    "object_base": _OWN.replace("class _Online:", "class _Online(object):")
    + "def f(b):\n    return _Online().both(b)\n",
}
OWN_REFUSED = {
    "tensor_method": "def f(b):\n    return b.logsumexp(-1)\n",
    "torch_function": "def f(b):\n    return torch.logsumexp(b, -1)\n",
    "with_a_base": _OWN.replace("class _Online:", "class _Online(torch.Tensor):")
    + "def f(b):\n    return _Online().logsumexp(b)\n",
    "unbound": _OWN + "def f(b):\n    return _Online.logsumexp(torch, b)\n",
    "instance_attribute": _OWN + "def f(b):\n    o = _Online()\n    o.logsumexp = 1\n    return o.logsumexp(b)\n",
    "rebound_name": _OWN + "def f(b, o=None):\n    o = _Online()\n    return o.logsumexp(b)\n",
    "class_renamed": _OWN + "_Online = torch\ndef f(b):\n    return _Online().logsumexp(b)\n",
    "nested_self": _OWN.replace("    def both(self, b):\n        return",
                                "    def both(self, b):\n        g = lambda self: self.logsumexp(b)\n        return")
    + "def f(b):\n    return _Online().both(b)\n",
}


@pytest.mark.parametrize("name", sorted(OWN_FAIR))
def test_a_cell_s_own_method_named_like_a_forbidden_name_is_fair(name):
    assert _verdict(ONLINE, OWN_FAIR[name]) is None, name


@pytest.mark.parametrize("name", sorted(OWN_REFUSED))
def test_a_forbidden_name_on_anything_else_stays_refused(name):
    assert _verdict(ONLINE, OWN_REFUSED[name]) is not None, name


# --------------------------------------------------------------------------------------------------
# One small sandboxed batch (the toy course, with chapter 6's forbidden lists)
# --------------------------------------------------------------------------------------------------

_TOTAL_HEAD = "def total(x):\n    t = x.double()\n"
BATCH = {
    "f2_own_method": _OWN.replace("torch.log(torch.exp(b).sum(-1))", "b.sum()") + _TOTAL_HEAD
    + "    return float(_Online().logsumexp(t))\n",
    "m2_measure": "import numpy as np\n" + _TOTAL_HEAD + "    np.testing.measure('import os', 1)\n"
    "    return float(t.sum())\n",
    "g1_grad_fn": _TOTAL_HEAD + "    s = t.clone().requires_grad_()\n    r = (s * 1).sum()\n"
    "    return float(r.grad_fn(torch.ones(()))[0].sum() * 0 + t.sum())\n",
}


@pytest.fixture(scope="module")
def r18_batch(tmp_path_factory):
    forbidden = tuple(dict.fromkeys(get(ONLINE).forbidden + get(GRAD).forbidden))
    total = dataclasses.replace(gf.TOTAL, forbidden=forbidden)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(gf.TOY_REGISTRY, "ch1.total", total)
        return grade_class(tmp_path_factory.mktemp("r18"), {name: {"ch1.total": s} for name, s in BATCH.items()})


@pytest.mark.sandbox
def test_the_own_method_gets_full_marks(r18_batch):
    got = row(r18_batch, "f2_own_method", "ch1.total")
    assert got["status"] == "passed" and got["points"] == got["max_points"], got


@pytest.mark.sandbox
def test_each_r18_route_gets_no_points_and_says_why(r18_batch):
    for name, said in (("m2_measure", "numpy.testing"), ("g1_grad_fn", "grad_fn")):
        got = row(r18_batch, name, "ch1.total")
        assert got["points"] == "0" and got["status"] != "passed" and said in got["feedback"], (name, got)
