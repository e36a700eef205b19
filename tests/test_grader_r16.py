"""Red team R16 (issue 35): routes around the exercise-cell checks, and fair cells the checks refused.

Each route the red team found is refused by the static check (:func:`utils.exercises.forbidden.unsafe_in_source`)
or blocked at run time (:mod:`utils.exercises.runner`); each fair way of writing a cell it found refused now
passes, and a correct solution written that way gets full marks in a sandboxed batch (one batch, shared).
"""

from __future__ import annotations

import dataclasses
import sys

import grader_fixtures as gf
import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises import get
from utils.exercises.definition import TORCH_ATTENTION
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.runner import load_function, run_cases

# functools.update_wrapper reads any attribute by a computed name, through an nn.Module's update()
_ATTR = ("import functools\nclass _Box(nn.Module):\n    def update(self, value):\n        self.got = value\n"
         "def _attr(obj, name):\n    holder, box = nn.Module(), _Box()\n    holder.add_module(name, box)\n"
         "    functools.update_wrapper(holder, obj, assigned=(), updated=(name,))\n    return box.got\n")
_META = ("import sys\ndef _module(name):\n    for finder in sys.meta_path:\n"
         "        spec = finder.find_spec(name, None)\n"
         "        if spec is not None:\n            module = spec.loader.create_module(spec)\n"
         "            spec.loader.exec_module(module)\n            return module\n"
         "_builtins = _module('built' + 'ins')\n")
ROUTES = {
    "update_wrapper_updated": (_ATTR, "functools.update_wrapper"),
    "update_wrapper_positional": ("import functools\nfunctools.update_wrapper(a, b, (), ('x',))\n", "update_wrapper"),
    "wraps_assigned": ("import functools\n@functools.wraps(f, assigned=('x',))\ndef g():\n    pass\n", "wraps"),
    "wraps_from_alias": ("from functools import wraps as w\nw(f, ('x',), ())\n", "wraps"),
    "update_wrapper_value": ("import functools\nu = functools.update_wrapper\n", "update_wrapper"),
    "functools_rebound": ("import functools as ft\nm = ft\n", "ft"),
    "singledispatch": ("import functools\n@functools.singledispatch\ndef f(x):\n    return x\n", "singledispatch"),
    "functools_through_torch": ("def f():\n    return torch.functools\n", "functools"),
    "meta_path": (_META, "meta_path"),
    "from_sys_meta_path": ("from sys import meta_path\n", "meta_path"),
    "sys_path_hooks": ("import sys\nh = sys.path_hooks\n", "path_hooks"),
    "sys_getattr_literal": ("import sys\nm = getattr(sys, 'path_importer_cache')\n", "path_importer_cache"),
    "builtins_getattr": (_META + "_get = _builtins.getattr\n", ".getattr"),
    "module_getattr": ("def f(b):\n    return b.getattr\n", ".getattr"),
    "type_alias": ("t = type\nX = t('X', (), {})\n", "type"),
    "type_of_type": ("X = type(int)('X', (), {'_' * 2 + 'eq' + '_' * 2: lambda s, o: True})\n", "type(...)"),
    "type_bound": ("c = type(int)\n", "type(...)"),
    "class_of_class": ("X = int.__class__('X', (), {})\n", ".__class__"),
    "subclass_type": ("class M(type):\n    pass\n", "type"),
    "make_dataclass": ("import dataclasses\nX = dataclasses.make_dataclass('X', [], namespace={})\n", "make_dataclass"),
    "from_make_dataclass": ("from dataclasses import make_dataclass\n", "make_dataclass"),
    "named_tuple_meta": ("import typing\nX = typing.NamedTupleMeta('X', (), {})\n", "NamedTupleMeta"),
    "function_meta": ("X = torch.autograd.function.FunctionMeta('X', (), {})\n", "FunctionMeta"),
}
_OWN = "class N:\n    def __init__(self):\n        self.utils = 1\n    def get(self):\n        return self.utils\n"
OWN_MISUSE = {  # self.utils is the cell's own only while the method is called on an instance
    "unbound": _OWN + "u = N.get(torch)\n",
    "through_a_list": _OWN + "u = [N][0].get(torch)\n",
    "getattr_literal": _OWN + "u = getattr(N, 'get')(torch)\n",
    "through_a_function": _OWN + "def f(o):\n    return o.get()\nu = f(N)\n",
}


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_r16_route_is_refused_and_named(name):
    source, says = ROUTES[name]
    reason = unsafe_in_source(source)
    assert reason and says in reason, (name, reason)


@pytest.mark.parametrize("name", sorted(OWN_MISUSE))
def test_a_method_reading_its_own_sensitive_attribute_must_be_called_on_an_instance(name):
    assert unsafe_in_source(OWN_MISUSE[name]), name


_BODY = "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight\n"
FAIR = {
    "string_annotations": ('def rms_norm(x: "torch.Tensor", weight: "torch.Tensor", eps: float = 1e-6)'
                           ' -> "torch.Tensor":\n' + _BODY),
    "string_annotation_calls": "def _h(a: \"__import__('ctypes')\") -> 'F.scaled_dot_product_attention':\n    pass\n"
                               "x: 'torch.ops' = 1\ndef rms_norm(x, weight, eps=1e-6):\n" + _BODY,
    "from_linalg": "from torch.linalg import vector_norm\nfrom torch.special import expit\nimport torch.fft\n"
                   "import torch.linalg as LA\ndef rms_norm(x, weight, eps=1e-6):\n"
                   "    n = vector_norm(x, dim=-1, keepdim=True)\n"
                   "    return x / (n ** 2 / x.shape[-1] + eps).sqrt() * weight\n",
    "slots_and_context": 'class _C:\n    __slots__ = ("eps", "depth")\n    def __init__(self, eps):\n'
                         '        self.eps = eps\n'
                         "    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n"
                         "        return False\n"
                         "def rms_norm(x, weight, eps=1e-6):\n    with _C(eps):\n    " + _BODY,
    "operators": "class _P:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, o):\n"
                 "        return self.v < o.v\n"
                 "    def __add__(self, o):\n        return _P(self.v + o.v)\n    def __rmul__(self, t):\n"
                 "        return t * self.v\ndef rms_norm(x, weight, eps=1e-6):\n" + _BODY,
    "class_checks": "def rms_norm(x, weight, eps=1e-6):\n    assert x.__class__ is torch.Tensor, x.__class__.__name__\n"
                    "    assert isinstance(x, type(weight)) and type(x).__name__ == 'Tensor', f'{type(x)}'\n" + _BODY,
    "own_sensitive_names": "class Cfg(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                           "        self.utils = 1\n        self.compile = False\n    def forward(self, x):\n"
                           "        return x if self.compile else x * self.utils\n"
                           "def rms_norm(x, weight, eps=1e-6):\n    cfg = Cfg()\n    x = cfg(x)\n" + _BODY,
    "functools_plain": "import functools\n@functools.lru_cache\ndef _k(n):\n    return n\ndef _w(f):\n"
                       "    @functools.wraps(f)\n    def g(*a, **k):\n        return f(*a, **k)\n    return g\n"
                       "@_w\ndef rms_norm(x, weight, eps=1e-6):\n" + _BODY,
    "sys_numbers": "import sys\nfrom sys import float_info\ndef rms_norm(x, weight, eps=1e-6):\n"
                   "    assert sys.maxsize > 0 and float_info.epsilon > 0 and sys.version_info >= (3,)\n" + _BODY,
}


@pytest.mark.parametrize("name", sorted(FAIR))
def test_each_fair_style_passes_both_static_checks(name):
    assert unsafe_in_source(FAIR[name]) is None, (name, unsafe_in_source(FAIR[name]))
    assert forbidden_in_source(FAIR[name], get("ch7.rms_norm").forbidden) is None, name


# --------------------------------------------------------------------------------------------------
# The run-time half (the runner, in this process)
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("exercise, call, named", [
    ("ch7.rms_norm", lambda x: torch.ops.aten.rms_norm(x, [x.shape[-1]], None, 1e-6), "rms_norm"),
    ("ch7.rms_norm", lambda x: torch.ops.aten.rms_norm.default(x, [x.shape[-1]], None, 1e-6), "rms_norm"),
    ("ch6.online_softmax_update", lambda x: torch.ops.aten.logsumexp.default(x, [-1]), "logsumexp"),
    ("ch6.online_softmax_update", lambda x: torch.ops.aten._softmax(x, -1, False), "softmax"),
    ("ch2.scaled_dot_product_attention",
     lambda x: torch.ops.aten._scaled_dot_product_attention_math(x[None], x[None], x[None])[0],
     "scaled_dot_product_attention"),
    ("ch2.scaled_dot_product_attention",
     lambda x: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(x[None, None], x[None, None],
                                                                           x[None, None])[0],
     "scaled_dot_product_attention"),
])
def test_a_forbidden_operator_reached_through_torch_ops_is_blocked_at_run_time(exercise, call, named):
    outcome = run_cases(lambda x: call(x), [{"x": torch.randn(3, 4)}], get(exercise).forbidden)[0]
    assert outcome.forbidden and outcome.forbidden.endswith(named), (exercise, outcome)
    assert outcome.forbidden in get(exercise).forbidden
    assert isinstance(call(torch.randn(3, 4)), torch.Tensor)  # put back once the block is over


def test_a_patched_torch_equal_or_clone_does_not_hide_an_input_change():
    saved = torch.equal, torch.Tensor.clone

    def changes(x):
        torch.equal = lambda a, b: True
        torch.Tensor.clone = lambda self, *a, **k: self
        x.add_(1)
        return x

    try:
        outcome = run_cases(changes, [{"x": torch.zeros(3)}])[0]
    finally:
        torch.equal, torch.Tensor.clone = saved
    assert outcome.mutated == ["x"], outcome


def test_online_softmax_update_forbids_torch_s_attention_routines():
    forbidden = get("ch6.online_softmax_update").forbidden
    assert set(TORCH_ATTENTION) <= set(forbidden)
    source = ("def online_softmax_update(running_max, running_sum, block):\n"
              "    w = F.scaled_dot_product_attention(block[..., None, :1], block[..., :, None], block[..., :, None])\n"
              "    return running_max, running_sum + w[..., 0, 0]\n")
    assert forbidden_in_source(source, forbidden) == "torch.nn.functional.scaled_dot_product_attention"


def test_a_cell_may_start_with_a_future_import_and_hold_a_dataclass():
    source = ("from __future__ import annotations\nfrom dataclasses import dataclass, field\n@dataclass\nclass C:\n"
              "    d: int\n    parts: list = field(default_factory=list)\n"
              "def causal_mask(size: int) -> torch.Tensor:\n"
              "    return torch.ones(C(size).d, size, dtype=torch.bool).tril()\n")
    fn = load_function(source, "causal_mask")
    assert fn(3).tolist() == torch.ones(3, 3, dtype=torch.bool).tril().tolist()
    assert "__exercise__" not in sys.modules


# --------------------------------------------------------------------------------------------------
# One sandboxed batch: the fair styles get full marks, the routes none
# --------------------------------------------------------------------------------------------------

FAIR_CELLS = {
    "fair_annotations": {
        "ch1.attend": ("from torch.linalg import vector_norm\nfrom torch.special import expit\nimport torch.fft\n"
                       'def attend(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor") -> "torch.Tensor":\n'
                       "    scale = vector_norm(torch.ones(q.shape[-1], dtype=q.dtype))\n"
                       "    scores = q @ k.transpose(-2, -1) / scale\n"
                       "    w = (scores - scores.amax(-1, keepdim=True)).exp()\n"
                       "    return (w / w.sum(-1, keepdim=True)) @ v\n"),
        "ch1.add_one": ('class _Depth:\n    __slots__ = ("depth",)\n    def __init__(self):\n        self.depth = 0\n'
                        "    def __enter__(self):\n        self.depth += 1\n        return self\n"
                        "    def __exit__(self, *exc):\n        self.depth -= 1\n        return False\n"
                        "def add_one(x):\n    with _Depth():\n        return x + 1\n"),
        "ch1.total": ("from __future__ import annotations\nfrom dataclasses import dataclass, field\n@dataclass\n"
                      "class _Acc:\n    parts: list = field(default_factory=list)\n    scale: float = 1.0\n"
                      "def total(x: torch.Tensor) -> float:\n    acc = _Acc()\n    acc.parts.append(x.double().sum())\n"
                      "    return float(sum(acc.parts) * acc.scale)\n"),
    },
    "fair_objects": {
        "ch1.attend": ("class _Scale:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, other):\n"
                       "        return self.v < other.v\n    def __add__(self, other):\n"
                       "        return _Scale(self.v + other.v)\n"
                       "    def __mul__(self, t):\n        return t * self.v\n"
                       "def attend(q, k, v):\n    s = _Scale(0.0) + _Scale(1 / math.sqrt(q.shape[-1]))\n"
                       "    assert _Scale(0.0) < s\n"
                       "    return torch.softmax(s * (q @ k.transpose(-2, -1)), dim=-1) @ v\n"),
        "ch1.add_one": ("def add_one(x):\n    if x.__class__ is not torch.Tensor:\n"
                        "        raise TypeError(f'expected a tensor, got {x.__class__.__name__}')\n"
                        "    return x + 1\n"),
        "ch1.total": ("class _Sum(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.utils = 'double'\n        self.compile = False\n    def forward(self, x):\n"
                      "        y = x.double() if self.utils == 'double' else x\n"
                      "        return 0.0 if self.compile else float(y.sum())\n"
                      "def total(x):\n    return _Sum()(x)\n"),
    },
}
ATTACKS = {
    "r16_wraps_ops": ("ch1.attend", _ATTR + "def attend(q, k, v):\n    op = _attr(_attr(_attr(torch, 'ops'), 'aten'), "
                      "'_scaled_dot_product_attention' + '_math')\n    return op(q, k, v)[0]\n", "update_wrapper"),
    "r16_meta_path": ("ch1.attend", _META + "def attend(q, k, v):\n    f = _builtins.getattr(F, 'scaled_dot_product_'"
                      " + 'attention')\n    return f(q, k, v)\n", "computed name"),
    "r16_type_alias": ("ch1.total", "t = type\n_B = t('B', (), {})\n"
                       "def total(x):\n    return float(x.double().sum())\n", "type"),
}
_CHANGES_X = "def add_one(x):\n    x.add_(1)\n    return x + 0\n"
# through a function: torch.equal = ... written out is refused by the static check (tests/test_grader_r16b.py)
HIDE_CHANGE = ("def _patch(t, tensor):\n    t.equal = lambda a, b: True\n"
               "    tensor.clone = lambda self, *a, **k: self\n_patch(torch, torch.Tensor)\n" + _CHANGES_X)
_DROP = "        if isinstance(obj, list):\n            obj = [dict(r, mutated=[]) for r in obj]\n"
HIDE_CHANGE_AFTER = {  # issue 35, after R16: what the worker wrote or ended with, rebound to drop "mutated"
    "r16b_json_dumps": ("import json\ndef _patch(m):\n    real = m.dumps\n    def clean(obj, *a, **k):\n" + _DROP
                        + "        return real(obj, *a, **k)\n    m.dumps = clean\n_patch(json)\n" + _CHANGES_X),
    "r16b_json_encoder": ("import json\ndef _patch(e):\n    real = e.encode\n    def clean(self, obj):\n" + _DROP
                          + "        return real(self, obj)\n    e.encode = clean\n_patch(json.JSONEncoder)\n"
                          + _CHANGES_X),
    "r16b_os_exit": ("import json, os\ndef _patch(m):\n    real = m._exit\n    def later(code):\n"
                     "        base = m.environ['HOME'] + '/../out'\n        for name in m.listdir(base):\n"
                     "            path = base + '/' + name + '/outcomes.json'\n            if m.path.exists(path):\n"
                     "                with open(path) as handle:\n                    obj = json.loads(handle.read())\n"
                     "                with open(path, 'w') as handle:\n"
                     "                    json.dump([dict(r, mutated=[]) for r in obj], handle)\n"
                     "        real(code)\n    m._exit = later\n_patch(os)\n" + _CHANGES_X),
}


@pytest.fixture(scope="module")
def r16_batch(tmp_path_factory):
    students = {name: dict(cells) for name, cells in FAIR_CELLS.items()}
    students.update({name: {exercise: source} for name, (exercise, source, _says) in ATTACKS.items()})
    students["r16_hide_change"] = {"ch1.add_one": HIDE_CHANGE}
    students.update({name: {"ch1.add_one": source} for name, source in HIDE_CHANGE_AFTER.items()})
    # the toy total forbids what chapter 6's online softmax update does, torch's attention routines included
    total = dataclasses.replace(gf.TOTAL, forbidden=get("ch6.online_softmax_update").forbidden)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(gf.TOY_REGISTRY, "ch1.total", total)
        # the HIDE_CHANGE_AFTER cells import json and os, refused statically: here they meet the run-time side
        with gf.static_check_off("_patch(json)", "_patch(json.JSONEncoder)", "_patch(os)"):
            return grade_class(tmp_path_factory.mktemp("r16"), students)


@pytest.mark.sandbox
def test_a_correct_solution_in_each_fair_style_gets_full_marks(r16_batch):
    for name, cells in FAIR_CELLS.items():
        for exercise in cells:
            got = row(r16_batch, name, exercise)
            assert got["status"] == "passed" and got["points"] == got["max_points"], (name, exercise, got)


@pytest.mark.sandbox
def test_each_r16_route_gets_no_points_and_says_why(r16_batch):
    for name, (exercise, _source, says) in ATTACKS.items():
        got = row(r16_batch, name, exercise)
        assert got["status"] == "forbidden" and got["points"] == "0" and says in got["feedback"], (name, got)
    for name in ("r16_hide_change", *HIDE_CHANGE_AFTER):
        got = row(r16_batch, name, "ch1.add_one")
        assert got["status"] == "failed" and got["points"] == "0", (name, got)
        assert "changed its input x" in got["feedback"], (name, got)
        source = HIDE_CHANGE if name == "r16_hide_change" else HIDE_CHANGE_AFTER[name]
        assert (unsafe_in_source(source) is None) == (name == "r16_hide_change"), name  # json, os: refused too
