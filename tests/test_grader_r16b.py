"""After the learner's code ran, the runner and the worker use nothing the cell could have changed (issue 35,
after red team R16: a cell rebound ``torch.equal`` to hide that it changed its input; ``json.dumps``, ``np.save``,
``torch.where`` or ``torch.autograd.grad`` would have hidden as much).

The run-time half: a cell that rebinds them in its process (here, in the test's own process, put back after
each test) changes nothing in the outcomes the worker writes. The static half: a cell may not set or delete an
attribute of a module, or of what a module holds (:mod:`utils.exercises._cell_rules`). The sandboxed batch that
grades such cells for real is in ``tests/test_grader_r16.py`` (one batch for R16 and this).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from utils.exercises.common import Outcome
from utils.exercises.forbidden import unsafe_in_source
from utils.exercises.runner import load_function, run_cases
from utils.grading import serialize

_OWNERS = (json, json.JSONEncoder, np, torch, torch.Tensor, torch.autograd, os)


@pytest.fixture
def restore():
    """Put back every attribute of the objects a test's cell patches."""
    saved = [(owner, dict(vars(owner))) for owner in _OWNERS]
    yield
    for owner, before in saved:
        for name in set(vars(owner)) - set(before) if isinstance(owner, type) else ():  # a module's: a lazy import
            delattr(owner, name)
        for name, value in before.items():
            if vars(owner).get(name) is not value:
                setattr(owner, name, value)


def _written(fn, cases, tmp_path, **kwargs) -> list[Outcome]:
    """Run ``fn`` on ``cases`` as the worker does, write the outcomes, and read them back as the grader does."""
    serialize.dump_outcomes(run_cases(fn, cases, **kwargs), tmp_path / "out")
    return serialize.load_outcomes(tmp_path / "out", sorted({key for case in cases for key in case}))


_CHANGES_X = "def add_one(x):\n    x.add_(1)\n    return x + 0\n"
HIDE_MUTATION = {  # each rebinds what the worker wrote its outcomes with, to drop "mutated"
    "json_dumps": ("import json\n_real = json.dumps\ndef _clean(obj, *a, **k):\n"
                   "    if isinstance(obj, list):\n        obj = [dict(r, mutated=[]) for r in obj]\n"
                   "    return _real(obj, *a, **k)\njson.dumps = _clean\n"),
    "json_encoder": ("import json\n_real = json.JSONEncoder.encode\ndef _clean(self, obj):\n"
                     "    if isinstance(obj, list):\n        obj = [dict(r, mutated=[]) for r in obj]\n"
                     "    return _real(self, obj)\njson.JSONEncoder.encode = _clean\n"),
}


@pytest.mark.parametrize("name", sorted(HIDE_MUTATION))
def test_a_cell_that_rebinds_json_cannot_hide_an_input_change(name, restore, tmp_path):
    fn = load_function(HIDE_MUTATION[name] + _CHANGES_X, "add_one")
    got = _written(fn, [{"x": torch.zeros(3)}], tmp_path)
    assert len(got) == 1 and got[0].mutated == ["x"], (name, got)
    assert unsafe_in_source(HIDE_MUTATION[name] + _CHANGES_X), name  # and the static check names it first


CHANGE_OUTPUT = {  # each rebinds what the outputs were copied or written with, to write zeros
    "np_save": ("import numpy as np\n_save = np.save\n"
                "np.save = lambda file, arr, *a, **k: _save(file, arr * 0, *a, **k)\n"),
    "tensor_numpy": "_numpy = torch.Tensor.numpy\ntorch.Tensor.numpy = lambda self, *a, **k: _numpy(self) * 0\n",
    "tensor_detach": "torch.Tensor.detach = lambda self: torch.zeros_like(self)\n",
    "tensor_cpu": "torch.Tensor.cpu = lambda self, *a, **k: torch.zeros_like(self)\n",
}


@pytest.mark.parametrize("name", sorted(CHANGE_OUTPUT))
def test_a_cell_that_rebinds_numpy_or_tensor_methods_cannot_change_what_is_written(name, restore, tmp_path):
    fn = load_function(CHANGE_OUTPUT[name] + "def add_one(x):\n    return x + 1\n", "add_one")
    got = _written(fn, [{"x": torch.arange(4.0)}], tmp_path)
    assert torch.equal(got[0].output, torch.arange(4.0) + 1), (name, got)


_SCALE = ("_seen = []\ndef double(x):\n    _seen.append(x)\n"
          "    return torch.tensor(x.detach().tolist(), dtype=x.dtype) * 2 + 0 * x\n")  # the graph reaches x only as 0
FAKE_GRADIENT = {  # each rebinds what the gradient report used, so that a cut graph seems to train
    "torch_where": "_where = torch.where\ntorch.where = lambda c, a, b: _seen[-1] * 2 if _seen else _where(c, a, b)\n",
    "autograd_grad": ("torch.autograd.grad = lambda outputs, inputs, **k: "
                      "tuple(torch.ones_like(i) * 2 for i in inputs)\n"),
    "tensor_sum": "torch.Tensor.sum = lambda self, *a, **k: (_seen[-1] * 2).double().mean() * self.numel()\n",
}


@pytest.mark.parametrize("name", sorted(FAKE_GRADIENT))
def test_a_cell_that_rebinds_torch_cannot_fake_its_gradient_report(name, restore, tmp_path):
    fn = load_function(_SCALE + FAKE_GRADIENT[name], "double")
    got = _written(fn, [{"x": torch.arange(1.0, 4.0)}], tmp_path, gradients=True)
    assert got[0].gradients == {"x": "zero"}, (name, got)
    assert torch.equal(got[0].output, torch.arange(1.0, 4.0) * 2)


def test_an_output_s_own_iter_never_runs_outside_the_forbidden_block():
    """A tuple whose ``__iter__`` is the learner's would run it when the output is copied, after the call: with
    the forbidden names put back (here, chapter 6's ``torch.logsumexp``). The copy reads the tuple's own items."""
    ran = []

    class Pair(tuple):
        def __iter__(self):
            ran.append(torch.logsumexp(tuple.__getitem__(self, 0), -1))
            return iter([ran[-1], tuple.__getitem__(self, 1)])

    x = torch.arange(3.0)
    outcome = run_cases(lambda x: Pair((x + 1, x + 2)), [{"x": x}], ["torch.logsumexp"])[0]
    assert not ran and outcome.forbidden is None and outcome.error is None, outcome
    assert type(outcome.output) is tuple and torch.equal(outcome.output[0], x + 1), outcome


def test_an_error_s_own_str_runs_inside_the_forbidden_block():
    class Loud(Exception):
        def __str__(self):
            return str(torch.logsumexp(torch.zeros(2), -1))

    def raises(x):
        raise Loud()

    outcome = run_cases(raises, [{"x": torch.zeros(2)}], ["torch.logsumexp"])[0]
    assert outcome.forbidden == "torch.logsumexp", outcome


def test_what_the_learner_left_under_the_results_name_is_replaced(tmp_path):
    """A link (or a read-only file) planted where the worker writes ``outcomes.json`` neither redirects the
    results elsewhere nor keeps them out."""
    folder, elsewhere = tmp_path / "out", tmp_path / "elsewhere.json"
    folder.mkdir()
    elsewhere.write_text("[]")
    (folder / "outcomes.json").symlink_to(elsewhere)
    (folder / "0.npy").write_text("planted")
    os.chmod(folder / "0.npy", 0o444)
    serialize.dump_outcomes([Outcome(output=torch.ones(2), mutated=["x"])], folder)
    assert elsewhere.read_text() == "[]" and not (folder / "outcomes.json").is_symlink()
    got = serialize.load_outcomes(folder, ["x"])
    assert got[0].mutated == ["x"] and torch.equal(got[0].output, torch.ones(2))


MODULE_CHANGES = {
    "assign": ("torch.equal = lambda a, b: True\n", "torch.equal = ..."),
    "class_method": ("torch.Tensor.clone = lambda self: self\n", "torch.Tensor.clone = ..."),
    "collections": ("import collections\ncollections.OrderedDict = dict\n", "collections.OrderedDict = ..."),
    "numpy_alias": ("import numpy as n\nn.mean = print\n", "n.mean = ..."),
    "functional": ("F.softmax = torch.sigmoid\n", "F.softmax = ..."),
    "delete": ("del torch.where\n", "del torch.where"),
    "augmented": ("math.pi += 1\n", "math.pi = ..."),
    "alias": ("t = torch\nt.equal = max\n", "t.equal = ..."),
    "alias_of_a_class": ("T = torch.Tensor\nT.sum = max\n", "T.sum = ..."),
    "tuple_alias": ("a, b = torch.autograd, 1\na.grad = max\n", "a.grad = ..."),
    "walrus": ("if (g := torch.autograd):\n    g.grad = max\n", "g.grad = ..."),
    "imported_name": ("from torch import nn as m\nm.Linear = max\n", "m.Linear = ..."),
}


@pytest.mark.parametrize("name", sorted(MODULE_CHANGES))
def test_a_cell_may_not_change_a_module_or_what_it_holds(name):
    source, says = MODULE_CHANGES[name]
    reason = unsafe_in_source(source)
    assert reason and says in reason and "may not change a module" in reason, (name, reason)


def test_a_cell_may_still_set_attributes_of_its_own_objects():
    source = ("class Norm(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
              "        self.weight = nn.Parameter(torch.ones(d))\n        self.eps = 1e-6\n"
              "def rms_norm(x, weight, eps=1e-6):\n    layer = Norm(x.shape[-1])\n    layer.eps = eps\n"
              "    lin = nn.Linear(2, 2)\n    lin.weight = nn.Parameter(torch.ones(2, 2))\n"
              "    x = x.clone()\n    x.requires_grad = x.requires_grad\n"
              "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + layer.eps) * weight\n")
    assert unsafe_in_source(source) is None
    fn = load_function(source, "rms_norm")
    assert fn(torch.ones(2, 3), torch.ones(3)).shape == (2, 3)


def test_what_escaped_the_runner_is_described_without_the_learner_s_code():
    """A ``BaseException`` that escapes the runner is described after the learner's code ran: by Python's own text
    where that runs none of the learner's code, else by its arguments' plain values and class names."""
    from utils.grading.worker import _error_text

    ran = []

    class Loud:
        def __repr__(self):
            ran.append("repr")
            return "loud"

    class Stop(BaseException):
        def __str__(self):
            ran.append("str")
            return "stop"

        @property
        def args(self):
            ran.append("args")
            return ()

    texts = [_error_text(error) for error in (Stop("planted", 3), KeyError(Loud()), OSError(2, "gone", Loud()))]
    assert not ran and texts == ["planted 3", "<Loud>", "2 gone"], (ran, texts)
    assert _error_text(FileNotFoundError(2, "No such file or directory", "x")) == \
        "[Errno 2] No such file or directory: 'x'"
