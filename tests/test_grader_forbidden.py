"""Forbidden calls and cross-exercise tampering (issue 15, findings 5-7).

The static check (:func:`utils.exercises.forbidden.unsafe_in_source`) rejects the red team's bypasses
with status ``forbidden`` and a reason a student can appeal, and passes every solution's exercise cell.
Independently of that check, each exercise runs in its own forked process and its cell reaches the
worker only when due: an earlier cell cannot change how a later one is run or judged.
"""

from __future__ import annotations

import dataclasses
import functools

import grader_fixtures as gf
import nbformat
import pytest
import torch
import torch.nn.functional as F
from test_grader_r19 import R19_ROUTES
from test_grader_units import grade_class, row

from utils.exercises import get
from utils.exercises.common import resolve
from utils.exercises.definition import TORCH_ATTENTION
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.runner import ForbiddenCall, forbid

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

BYPASSES = {
    "getattr_c": ("def attend(q, k, v):\n"
                  "    return getattr(torch._C._nn, 'scaled_dot_product_' + 'attention')(q, k, v)\n"),
    "getattr_dynamic": "def attend(q, k, v):\n    return getattr(F, 'scaled_dot_' + 'product_attention')(q, k, v)\n",
    "torch_ops": "def attend(q, k, v):\n    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n",
    "importlib": ("import importlib\ndef attend(q, k, v):\n"
                 "    return importlib.import_module('torch.nn.' + 'functional')"
                 ".scaled_dot_product_attention(q, k, v)\n"),
    "dunder_import": "def attend(q, k, v):\n    return __import__('torch').nn.functional.softmax(q @ k.mT, -1) @ v\n",
    "exec_copy": ("_ns = {}\nexec(open('/dev/null').read(), _ns)\n"
                  "def attend(q, k, v):\n    return torch.softmax(q @ k.mT / q.shape[-1] ** 0.5, -1) @ v\n"),
    "eval": "def attend(q, k, v):\n    return eval('F.scaled_dot_product_' + 'attention')(q, k, v)\n",
    "compile": "_code = compile('x = 1', 'x', 'exec')\ndef attend(q, k, v):\n    return q\n",
    "sys_modules": ("import sys\nsys.modules['utils.exercises.runner'].forbid = lambda names: iter([[]])\n"
                    "def attend(q, k, v):\n    return F.softmax(q, -1)\n"),
    "course_import": ("import utils.exercises.runner as r\nr.forbid = None\n"
                      "def attend(q, k, v):\n    return q\n"),
    "frame_walk": ("import sys\n_f = sys._getframe()\nwhile _f.f_back:\n    _f = _f.f_back\n"
                   "def attend(q, k, v):\n    return q\n"),
    "traceback_frame": ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    _f = e.__traceback__.tb_frame\n"
                        "def attend(q, k, v):\n    return q\n"),
    "generator_frame": "_g = (i for i in [1])\n_f = _g.gi_frame\ndef attend(q, k, v):\n    return q\n",
    "builtins_dict": "def attend(q, k, v):\n    return __builtins__['ev' + 'al']('q')\n",
    "globals_dict": "def attend(q, k, v):\n    return globals()['F'].softmax(q, -1)\n",
    "vars_dict": "def attend(q, k, v):\n    return vars(F)['scaled_dot_' + 'product_attention'](q, k, v)\n",
    "dunder_dict": "def attend(q, k, v):\n    return F.__dict__['scaled_dot_' + 'product_attention'](q, k, v)\n",
    "setattr": "setattr(F, 'softmax', None)\ndef attend(q, k, v):\n    return q\n",
    "private_torch": "def attend(q, k, v):\n    return F._in_projection_packed(q, k, v, torch.eye(q.shape[-1]))[0]\n",
    "pickle": "import pickle\ndef attend(q, k, v):\n    return q\n",
    "gc_walk": "import gc\n_all = gc.get_objects()\ndef attend(q, k, v):\n    return q\n",
    # Red team R14 (issue 35): torch under a second name, which the chain rule did not know was torch
    "alias_assign": ("t = torch\ndef attend(q, k, v):\n"
                     "    return t.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_default_arg": ("def attend(q, k, v, t=torch):\n"
                          "    return t.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_for_target": ("for t in (torch,):\n    pass\ndef attend(q, k, v):\n"
                         "    return t.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_list_item": ("def attend(q, k, v):\n"
                        "    return [torch][0].ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_call_result": ("def attend(q, k, v):\n"
                          "    return (lambda m: m)(torch).ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_module_attribute": ("from torch.nn import functional as G\ndef attend(q, k, v):\n"
                               "    return G.torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "alias_private_c": "t = torch\ndef attend(q, k, v):\n    return t._C._special.special_logsumexp(q, [-1])\n",
    "alias_jit_string": ("t = torch\ndef attend(q, k, v):\n"
                         "    return t.jit.CompilationUnit('def f(x):\\n    return x\\n').f(q)\n"),
    # Red team R15 (issue 35): import forms the rules did not list, a getattr by another name, a keyword that
    # is not a literal, and a class pattern whose computed __match_args__ reads any attribute
    "r15_from_jit": ("from torch.jit import CompilationUnit as CU\n"
                     "_U = CU('def f(q):\\n    return torch.ops.aten.rms_norm(q, [4])\\n')\n"
                     "def attend(q, k, v):\n    return q\n"),
    "r15_from_ao_utils": ("from torch.ao.quantization.utils import getattr_from_fqn as g\ndef attend(q, k, v):\n"
                          "    return g(torch, 'ops.aten._scaled_dot_' + 'product_attention_math')(q, k, v)[0]\n"),
    "r15_import_ao_utils": ("import torch.ao.quantization.utils as u\ndef attend(q, k, v):\n"
                            "    return u.getattr_from_fqn(torch, 'ops.aten._scaled_dot_' + 'product_attention_math')"
                            "(q, k, v)[0]\n"),
    "r15_from_serialization": "from torch.serialization import load as L\ndef attend(q, k, v):\n    return q\n",
    "r15_from_overrides": ("from torch.overrides import get_testing_overrides\ndef attend(q, k, v):\n"
                           "    return q\n"),
    "r15_npy_read_array": ("import numpy as np, io\ndef attend(q, k, v):\n"
                           "    return np.lib.format.read_array(io.BytesIO(b''), allow_pickle=not 0)\n"),
    "r15_match_args": ("class _M(type):\n    def __instancecheck__(cls, obj):\n        return True\n"
                       "def _attr(obj, name):\n    class _P(metaclass=_M):\n        __match_args__ = (name,)\n"
                       "    match obj:\n        case _P(found):\n            return found\n"
                       "def attend(q, k, v):\n    f = _attr(_attr(_attr(torch, 'ops'), 'aten'), "
                       "'_scaled_dot_' + 'product_attention_math')\n    return f(q, k, v)[0]\n"),
}


# Issue 35's red team, and what a second look found: each reaches a function, a module or the course's
# reference by a string, or loads code (static check only: each would be refused before running).
STRING_BYPASSES = {
    "resolve_name": ("import pkgutil\ndef attend(q, k, v):\n    name = 'torch.nn.functional:scaled_dot_' + 'product'\n"
                     "    return pkgutil.resolve_name(name + '_attention')(q, k, v)\n"),
    "pydoc_locate": ("import pydoc\ndef attend(q, k, v):\n"
                     "    return pydoc.locate('torch.nn.functional.scaled_dot_' + 'product_attention')(q, k, v)\n"),
    "reduce_getattr": ("import functools\ndef attend(q, k, v):\n    return functools.reduce(getattr, "
                       "['_C', '_nn', 'scaled_dot_' + 'product_attention'], torch)(q, k, v)\n"),
    "module_sys": ("def attend(q, k, v):\n"
                   "    return torch.sys.modules['torch._C']._nn.scaled_dot_product_attention(q, k, v)\n"),
    "nested_modules": ("def attend(q, k, v):\n    mods = nn.modules.module.sys.modules\n"
                       "    return mods['ut' + 'ils.attention'].scaled_dot_product_attention(q, k, v)[0]\n"),
    "formatter": ("import string\ndef attend(q, k, v):\n    return string.Formatter().get_field("
                  "'0._C._nn.scaled_dot_' + 'product_attention', [torch], {})[0](q, k, v)\n"),
    "torch_load": ("import io\ndef attend(q, k, v):\n"
                   "    return torch.load(io.BytesIO(open('x', 'rb').read()), weights_only=False)(q, k, v)\n"),
    "jit_source": ("def attend(q, k, v):\n    unit = torch.jit.CompilationUnit('def f(q, k, v):\\n    return "
                   "torch.nn.functional.scaled_dot_' + 'product_attention(q, k, v)')\n    return unit.f(q, k, v)\n"),
    "overrides": ("def attend(q, k, v):\n    return [f for f in torch.overrides.get_testing_overrides() "
                  "if f.__name__ == 'scaled_dot_' + 'product_attention'][0](q, k, v)\n"),
    "sys_path": ("import sys\nsys.path.insert(0, '/course/utils')\nimport attention as a\n"
                 "def attend(q, k, v):\n    return a.scaled_dot_product_attention(q, k, v)[0]\n"),
    "numpy_pickle": ("import numpy as np\ndef attend(q, k, v):\n"
                     "    return np.load('x.npy', allow_pickle=True).item()(q, k, v)\n"),
    "builtins_exec": ("def attend(q, k, v):\n    ns = {}\n    torch.sys.modules['builtins'].exec('x = 1', ns)\n"
                      "    return q\n"),
}
# Red team R7 (issue 35): strings that the standard library runs as code, and attributes read by a pattern. A string
# annotation alone is allowed since red team R16: nothing a cell may call evaluates it (tests/test_grader_r16.py).
CODE_IN_STRINGS = {
    "string_annotation": ("import typing\ndef _h(a: 'torch.ops.aten.rms_norm'): pass\n_T = typing.get_type_hints(_h)\n"
                          "def attend(q, k, v):\n    return _T['a'](q)\n"),
    "get_type_hints": "from typing import get_type_hints\ndef attend(q, k, v):\n    return q\n",
    "forward_ref": "import typing\nR = typing.ForwardRef('torch')\ndef attend(q, k, v):\n    return q\n",
    "star_import": "from typing import *\ndef attend(q, k, v):\n    return q\n",
    "timeit": ("import timeit\n_G = []\ntimeit.timeit('G.append(torch.ops.aten.rms_norm)', number=1, "
               "globals={'G': _G, 'torch': torch})\ndef attend(q, k, v):\n    return q\n"),
    "cprofile": "import cProfile\ncProfile.run('x = 1')\ndef attend(q, k, v):\n    return q\n",
    "profile": "from profile import run\nrun('x = 1')\ndef attend(q, k, v):\n    return q\n",
    "doctest": "import doctest\ndef attend(q, k, v):\n    return q\n",
    "trace": "import trace\ndef attend(q, k, v):\n    return q\n",
    "sqlite_extension": "import sqlite3\ndef attend(q, k, v):\n    return q\n",
    "private_module": "import _ctypes\ndef attend(q, k, v):\n    return q\n",
    "private_from": "from _imp import create_dynamic\ndef attend(q, k, v):\n    return q\n",
    "match_ops": ("def attend(q, k, v):\n    match torch:\n"
                  "        case object(ops=object(aten=object(rms_norm=r))):\n            return r(q)\n"),
    "match_private": ("def attend(q, k, v):\n    match torch:\n        case object(_C=c):\n            return c\n"),
    "match_dunder": ("def attend(q, k, v):\n    match F:\n        case object(__dict__=d):\n            return d\n"),
}
# A private module of torch's below a public one, bound to a name of its own (found with issue 35's R10 routes).
PRIVATE_SUBMODULES = {
    "private_submodule_alias": ("import torch.nn.attention.experimental._paged_attention as pa\n"
                                "def attend(q, k, v):\n    return pa.PagedAttention\n"),
    "private_submodule_from": ("from torch.nn.attention.experimental._paged_attention import PagedAttention\n"
                               "def attend(q, k, v):\n    return q\n"),
}
# Passes the static check: nn.TransformerEncoderLayer builds its attention from the class that
# torch.nn.modules.transformer holds, which is nn.MultiheadAttention under another name.
TRANSFORMER_LAYER = (
    "def attend(q, k, v):\n    d = q.shape[-1]\n"
    "    mha = nn.TransformerEncoderLayer(d, 1, dim_feedforward=4, dropout=0.0, batch_first=True).self_attn\n"
    "    with torch.no_grad():\n        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))\n"
    "        mha.in_proj_bias.zero_()\n        mha.out_proj.weight.copy_(torch.eye(d))\n"
    "        mha.out_proj.bias.zero_()\n    return mha(q, k, v, need_weights=True)[0].detach()\n")


@pytest.mark.parametrize("name", sorted(BYPASSES) + sorted(STRING_BYPASSES) + sorted(CODE_IN_STRINGS)
                         + sorted(PRIVATE_SUBMODULES))
def test_static_check_flags_each_bypass(name):
    assert unsafe_in_source(BYPASSES.get(name) or STRING_BYPASSES.get(name) or CODE_IN_STRINGS.get(name)
                            or PRIVATE_SUBMODULES[name]), name


@pytest.mark.parametrize("source, module", [
    ("import torch.jit\n", "torch.jit"),
    ("from torch.jit import CompilationUnit\n", "torch.jit"),
    ("from torch import jit as j\n", "torch.jit"),
    ("import torch.ao.quantization.utils as u\n", "torch.ao.quantization.utils"),
    ("from torch.ao.quantization.utils import getattr_from_fqn\n", "torch.ao.quantization.utils"),
    ("from torch.utils import data\n", "torch.utils"),
    ("import io\n", "io"),
    ("import numpy.lib.format as f\n", "numpy.lib.format"),
    ("from numpy import lib\n", "numpy.lib"),
    ("from numpy.lib.format import read_array\n", "numpy.lib.format"),
    ("def f(x):\n    import torch.hub\n    return x\n", "torch.hub"),
    ("from . import attention\n", "."),
])
def test_an_exercise_cell_imports_only_the_allowed_modules(source, module):
    """Red team R15 (issue 35): every import form of a module off the allow-list is refused, whatever the
    module is, with a reason that names it and the modules allowed."""
    reason = unsafe_in_source(source)
    assert reason and module in reason and "torch.nn.functional" in reason and "math" in reason, reason


def test_the_allowed_modules_may_be_imported_in_any_form():
    honest = ("from __future__ import annotations\nimport math\nimport torch.nn.functional as G\n"
              "from torch import nn as N\nfrom torch.nn import functional\nimport numpy as np\n"
              "from collections import abc, OrderedDict\nfrom typing import NamedTuple\nimport operator\n"
              "from dataclasses import dataclass, field\nfrom itertools import chain\nimport sys\n"
              "def f(x):\n    return G.relu(x) + np.float32(1) + operator.add(1, 2)\n")
    assert unsafe_in_source(honest) is None


@pytest.mark.parametrize("source", [
    "def f(x):\n    return read(x, allow_pickle=not 0)\n",
    "def f(x, a=True):\n    return read(x, allow_pickle=a)\n",
    "def f(x):\n    return read(x, allow_pickle=1)\n",
    "def f(x):\n    return read(x, weights_only=None)\n",
    "def f(x):\n    return read(x, **{'allow_pickle': True})\n",
    "def f(x):\n    return read(x, **dict(weights_only=0))\n",
])
def test_a_pickle_switch_is_refused_unless_it_is_the_safe_literal(source):
    assert unsafe_in_source(source), source
    assert unsafe_in_source("def f(x):\n    return g(x, allow_pickle=False) + g(x, weights_only=True)\n") is None


@pytest.mark.parametrize("source", [
    "import numpy as np\ndef f(x):\n    return np.lib\n",
    "import numpy as np\nn = np\ndef f(x):\n    return n.lib.format.read_array(x)\n",
    "def f(x, m=None):\n    return m.read_array(x)\n",
    "import numpy as np\ndef f(x):\n    return getattr(np, 'lib')\n",
    "import numpy as np\ndef f(x):\n    return np.ctypeslib.load_library('a', '.')\n",
    "import numpy as np\ndef f(x):\n    return np.f2py\n",
    "def f(x):\n    match x:\n        case object(lib=lib):\n            return lib\n",
])
def test_numpy_s_routes_to_pickles_libraries_and_compilers_are_refused(source):
    assert unsafe_in_source(source), source


@pytest.mark.parametrize("source", [
    "class M(type):\n    def __instancecheck__(cls, obj):\n        return True\n",
    "class A:\n    def __getattr__(self, name):\n        return name\n",
    "class A:\n    def __bool__(self):\n        return True\n",
    "class A:\n    def __init_subclass__(cls):\n        pass\n",
    "class A:\n    __match_args__ = ('ops',)\n",
    "class A:\n    __slots__: tuple = ('x',)\n",
    "class A(metaclass=type):\n    pass\n",
    "def f(x):\n    match x:\n        case int(n):\n            return n\n",
    "def f(x, P=None):\n    match x:\n        case P(found):\n            return found\n",
    "def f(x):\n    return type('P', (), {'__match_args__': ('ops',)})\n",
    "def f(x):\n    return type('M', (type,), dict(__instancecheck__=lambda c, o: True))\n",
    "def f(x, ns=None):\n    return type('P', (), ns)\n",
])
def test_a_class_may_define_only_the_allowed_special_methods_and_a_class_pattern_no_positions(source):
    assert unsafe_in_source(source), source


def test_honest_classes_and_patterns_still_pass():
    honest = ("import dataclasses\nclass Layer(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
              "        self.lin = nn.Linear(d, d)\n    def forward(self, x):\n        return self.lin(x)\n"
              "    def extra_repr(self):\n        return 'x'\n    def __repr__(self):\n        return 'L'\n"
              "class Rows:\n    def __init__(self, xs):\n        self.xs = xs\n    def __len__(self):\n"
              "        return len(self.xs)\n    def __getitem__(self, i):\n        return self.xs[i]\n"
              "    def __iter__(self):\n        return iter(self.xs)\n    def __call__(self):\n        return self\n"
              "    def __str__(self):\n        return 'r'\n    def __eq__(self, other):\n        return False\n"
              "    def __hash__(self):\n        return 0\n"
              "@dataclasses.dataclass\nclass C:\n    n: int = 1\n    def __post_init__(self):\n        self.n += 1\n"
              "def f(x, shape):\n    match shape:\n        case (n, d) if n > 0:\n            return d\n"
              "        case torch.Size():\n            return x\n        case Rows(xs=xs):\n            return xs\n"
              "    if __name__ == '__main__':\n        pass\n")
    assert unsafe_in_source(honest) is None


def test_every_exercise_cell_of_the_solutions_and_chapters_passes_in_both_languages():
    checked = {}
    for folder in ("solutions", "solutions/zh", "chapters", "chapters/zh"):
        for path in sorted((gf.REPO / folder).glob("*.ipynb")):
            for cell in nbformat.read(str(path), as_version=4).cells:
                exercise = cell.get("metadata", {}).get("course", {}).get("exercise")
                if cell.cell_type == "code" and exercise:
                    assert unsafe_in_source(cell.source) is None, (folder, path.name, exercise)
                    checked[folder] = checked.get(folder, 0) + 1
    present = [f for f in ("solutions", "solutions/zh", "chapters", "chapters/zh") if (gf.REPO / f).is_dir()]
    assert all(checked.get(folder) for folder in present), checked


def test_a_pattern_that_reads_a_forbidden_attribute_is_named():
    source = ("def rms_norm(x, weight, eps=1e-6):\n    match F:\n        case object(rms_norm=r):\n"
              "            return r(x, (x.shape[-1],), weight, eps)\n")
    assert forbidden_in_source(source, ["torch.nn.functional.rms_norm"]) == "torch.nn.functional.rms_norm"


def test_honest_annotations_patterns_and_imports_still_pass():
    honest = ("from __future__ import annotations\nimport typing\nfrom typing import Optional\n"
              "import itertools, functools, collections, dataclasses\n"
              "def attend(q: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:\n"
              "    match q.shape:\n        case (n, d):\n            pass\n"
              "        case torch.Size():\n            pass\n    return q\n")
    assert unsafe_in_source(honest) is None


def test_a_private_name_is_allowed_only_on_self_and_only_when_the_source_sets_it():
    """``self._scale`` that the class sets is honest; a private name of torch's is refused even when the
    source sets it on self (a method called unbound, ``A.get(torch)``, has torch for self), and so is
    any private name read from anything else, a name a module is bound to under a second name included."""
    honest = ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._w = 2.0\n"
              "    def _twice(self, x):\n        return x * self._w\n    def forward(self, x):\n"
              "        return self._twice(x)\n")
    assert unsafe_in_source(honest) is None
    unbound = ("class A:\n    def __init__(self):\n        self._C = None\n    def get(self):\n        return self._C\n"
               "def attend(q, k, v):\n    return A.get(torch)\n")
    assert "_C" in unsafe_in_source(unbound)
    for source in ("def attend(q, k, v):\n    return q._version\n",
                   "class A:\n    _w = 1\ndef attend(q, k, v, m=torch):\n    return m._w\n"):
        assert unsafe_in_source(source), source



def test_documented_public_names_with_an_underscore_are_allowed_but_torch_s_private_ones_are_not():
    """A namedtuple's ``_replace``/``_asdict`` are public APIs; torch's private names stay refused whatever the
    chain starts at."""
    honest = ("import collections\nP = collections.namedtuple('P', 'a b')\n"
              "def attend(q, k, v):\n"
              "    p = P(1, 2)._replace(a=3)\n    return q * p._asdict()['a'] * len(P._fields)\n")
    assert unsafe_in_source(honest) is None
    for source in ("t = torch\ndef attend(q, k, v):\n    return t._C\n",
                   "def attend(q, k, v, m=torch):\n    return m._dynamo\n"):
        assert unsafe_in_source(source), source

def test_a_cuda_tensor_method_is_allowed_but_not_torch_cuda_under_another_name():
    assert unsafe_in_source("def attend(q, k, v):\n    return q.cuda()\n") is None
    assert unsafe_in_source("t = torch\ndef attend(q, k, v):\n    return t.cuda.jiterator\n")


def test_the_transformer_layer_bypass_passes_the_static_check():
    assert unsafe_in_source(TRANSFORMER_LAYER) is None  # so the sandbox's run-time check must catch it


def test_a_forbidden_call_is_reported_by_the_name_the_student_called():
    sdpa = get("ch2.scaled_dot_product_attention")
    assert "utils.attention.scaled_dot_product_attention" in sdpa.forbidden  # both end alike
    called = "def f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
    assert forbidden_in_source(called, sdpa.forbidden) == "torch.nn.functional.scaled_dot_product_attention"
    aliased = "import torch.nn.functional as G\ndef f(q, k, v):\n    return G.scaled_dot_product_attention(q, k, v)\n"
    assert forbidden_in_source(aliased, sdpa.forbidden) == "torch.nn.functional.scaled_dot_product_attention"
    imported = "from torch.nn.functional import scaled_dot_product_attention as s\n"
    assert forbidden_in_source(imported, sdpa.forbidden) == "torch.nn.functional.scaled_dot_product_attention"


def test_static_check_passes_every_solution_exercise_cell():
    checked = 0
    for path in gf.course_notebooks():
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.get("metadata", {}).get("course", {}).get("exercise"):
                assert unsafe_in_source(cell.source) is None, (path.name, cell.metadata["course"]["exercise"])
                checked += 1
    for source in gf.TOY_SOLUTIONS.values():
        assert unsafe_in_source(source) is None
    assert checked or not gf.course_notebooks()


def test_honest_uses_pass_the_static_check():
    honest = ("import math\nclass Layer(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
              "        self._scale = 1 / math.sqrt(d)\n        self.mods = nn.ModuleList([nn.Linear(d, d)])\n"
              "    def forward(self, x):\n        for m in self.modules():\n            pass\n"
              "        return getattr(self, 'mods')[0](x) * self._scale\n")
    assert unsafe_in_source(honest) is None


R10_ATTEND = {
    "mha_forward": ("def attend(q, k, v):\n    n, length, d = q.shape\n    eye = torch.eye(d)\n"
                    "    out, _ = F.multi_head_attention_forward(q.transpose(0, 1), k.transpose(0, 1), "
                    "v.transpose(0, 1), d, 1, None, None, None, None, False, 0.0, eye, None, training=False, "
                    "use_separate_proj_weight=True, q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye)\n"
                    "    return out.transpose(0, 1)\n"),
    "flex": ("import torch.nn.attention.flex_attention as fa\ndef attend(q, k, v):\n"
             "    return getattr(fa, 'flex_attention')(q[:, None], k[:, None], v[:, None])[:, 0]\n"),
}
R10_TOTAL = ("def total(x):\n    logits = torch.distributions.Categorical(logits=x.double()).logits\n"
             "    return float((x.double()[0] - logits[0]).exp())\n")


@pytest.fixture(scope="module")
def bypass_batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bypass")
    attackers = {f"by_{name}": {"ch1.attend": source} for name, source in BYPASSES.items()}
    later = [f"'{i}'" for i in (1, 2)]
    attackers["peek"] = {"ch1.add_one": (  # what can the first cell see of the later ones?
        "import os  # PEEK\nraise RuntimeError(str(sorted(os.listdir('../in'))) + open('../job.json').read()[:150])\n")}
    attackers["by_transformer_layer"] = {"ch1.attend": TRANSFORMER_LAYER}
    # patches its process for the exercises after it, through a function: the static check refuses
    # torch.softmax = ... written out (tests/test_grader_r16b.py), not a module passed as an argument
    attackers["tamper"] = {"ch1.add_one": (
        "import threading, time  # TAMPER\ndef _patch(t):\n    t.softmax = lambda x, dim=-1: x * 0\n_patch(torch)\n"
        "def _again():\n    while True:\n        _patch(torch)\n        time.sleep(0.001)\n"
        "threading.Thread(target=_again, daemon=True).start()\n"
        "def add_one(x):\n    return x + torch.softmax(torch.zeros(2), dim=-1).sum()\n")}
    attackers.update({f"r10_{name}": {"ch1.attend": source} for name, source in R10_ATTEND.items()})
    attackers["r10_categorical"] = {"ch1.total": R10_TOTAL}
    # the toy attend forbids torch's attention routines here, as the course's attention exercises do, but
    # not nn.Transformer's classes (so that only the run-time check can catch TRANSFORMER_LAYER); the toy
    # total forbids what chapter 6's online softmax update does
    routines = tuple(name for name in TORCH_ATTENTION if not name.startswith("torch.nn.Transformer"))
    assert "torch.nn.MultiheadAttention" in routines and len(routines) < len(TORCH_ATTENTION)
    attend = dataclasses.replace(gf.ATTEND, forbidden=(*gf.ATTEND.forbidden, *routines))
    total = dataclasses.replace(gf.TOTAL, forbidden=get("ch6.online_softmax_update").forbidden)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(gf.TOY_REGISTRY, "ch1.attend", attend)
        patch.setitem(gf.TOY_REGISTRY, "ch1.total", total)
        with gf.static_check_off("# PEEK", "# TAMPER"):  # os and threading meet the sandbox; the bypasses, the check
            batch = grade_class(tmp, attackers)
    batch["later"] = later
    return batch


def test_each_bypass_is_forbidden_with_a_reason_to_appeal(bypass_batch):
    for name in BYPASSES:
        got = row(bypass_batch, f"by_{name}", "ch1.attend")
        assert got["status"] == "forbidden" and got["points"] == "0", got
        assert "ask your instructor" in got["feedback"] or "implement it yourself" in got["feedback"], got
        assert row(bypass_batch, f"by_{name}", "ch1.total")["status"] == "passed"


def test_r15_routes_are_refused_in_the_sandbox_batch_and_say_why(bypass_batch):
    """Red team R15 (issue 35): the class pattern used as getattr, and getattr_from_fqn imported or bound
    under another name, are refused with what was refused named, and the student's other cell still runs."""
    for name, says in (("r15_match_args", "__instancecheck__"), ("r15_from_ao_utils", "torch.ao.quantization.utils"),
                       ("r15_import_ao_utils", "torch.ao.quantization.utils")):
        got = row(bypass_batch, f"by_{name}", "ch1.attend")
        assert got["status"] == "forbidden" and got["points"] == "0" and says in got["feedback"], (name, got)
        assert row(bypass_batch, f"by_{name}", "ch1.total")["status"] == "passed"


def test_a_torch_class_reached_under_another_name_is_forbidden_at_run_time(bypass_batch):
    got = row(bypass_batch, "by_transformer_layer", "ch1.attend")
    assert got["status"] == "forbidden" and "torch.nn.MultiheadAttention" in got["feedback"], got
    assert row(bypass_batch, "by_transformer_layer", "ch1.total")["status"] == "passed"


def test_r10_routes_are_forbidden_in_the_sandbox(bypass_batch):
    """Red team R10 (issue 35): F.multi_head_attention_forward and flex_attention (named in the source),
    and torch.distributions.Categorical, whose logits are normalised by the Tensor method logsumexp (named
    nowhere: only the run-time block of torch.Tensor.logsumexp sees it)."""
    for name in R10_ATTEND:
        got = row(bypass_batch, f"r10_{name}", "ch1.attend")
        assert got["status"] == "forbidden" and got["points"] == "0", (name, got)
        assert row(bypass_batch, f"r10_{name}", "ch1.total")["status"] == "passed"
    got = row(bypass_batch, "r10_categorical", "ch1.total")
    assert got["status"] == "forbidden" and "torch.Tensor.logsumexp" in got["feedback"], got
    assert row(bypass_batch, "r10_categorical", "ch1.attend")["status"] == "passed"


def test_a_cell_sees_no_later_cell_nor_its_inputs(bypass_batch):
    got = row(bypass_batch, "peek")
    assert got["status"] == "error" and "['0']" in got["feedback"], got  # only its own inputs
    for later in bypass_batch["later"]:
        assert later not in got["feedback"].split("]")[0]
    assert "source" not in got["feedback"] and "def " not in got["feedback"]
    assert row(bypass_batch, "peek", "ch1.total")["status"] == "passed"


def test_an_earlier_cell_cannot_change_how_a_later_one_runs(bypass_batch):
    assert row(bypass_batch, "tamper")["status"] == "failed"  # the patch took: its own softmax gave zeros
    for eid in ("ch1.attend", "ch1.total"):  # attend uses torch.softmax; the patch died with its process
        assert row(bypass_batch, "tamper", eid)["status"] == "passed", row(bypass_batch, "tamper", eid)


@pytest.mark.parametrize(
    "source, named",
    [
        ("import subprocess\ndef f(x):\n    return subprocess.run(['python', '-c', '1'])", "import subprocess"),
        ("from subprocess import check_output\ndef f(x):\n    return check_output('ls')", "from subprocess import ..."),
        ("import os\ndef f(x):\n    os.system('python -c 1')\n    return x", "import os"),
        ("import os as o\ndef f(x):\n    return o.popen('ls').read()", "import os"),
        ("import os\ndef f(x):\n    os.execv('/bin/sh', ['sh'])", "import os"),
        ("import os\ndef f(x):\n    return os.spawnlp(os.P_WAIT, 'ls', 'ls')", "import os"),
        ("import os\ndef f(x):\n    return os.posix_spawn('/bin/ls', ['ls'], {})", "import os"),
        ("from os import system\ndef f(x):\n    return system('ls')", "from os import"),
        ("import pty\ndef f(x):\n    return pty.spawn('sh')", "import pty"),
        ("import posix\ndef f(x):\n    posix.system('ls')\n    return x", "import posix"),  # os's own source
        ("import posix as p\ndef f(x):\n    return p.posix_spawn('/bin/ls', ['ls'], {})", "import posix"),
        ("from posix import execv\ndef f(x):\n    execv('/bin/sh', ['sh'])", "from posix import"),
        ("import _posixsubprocess\ndef f(x):\n    return _posixsubprocess.fork_exec", "import _posixsubprocess"),
    ],
)
def test_starting_a_program_is_named_by_the_static_check(source, named):
    """No program starts from an exercise's process (seccomp refuses execve, test_grader_exec.py); the
    static check names why, so the row says why instead of an error from inside the sandbox. A module off
    the allow-list (os, posix, subprocess) is named by its import, and the reason lists the modules allowed."""
    reason = unsafe_in_source(source)
    assert reason == named or (reason.startswith(named) and "torch.nn.functional" in reason), reason


def test_os_is_refused_even_for_paths_and_sys_is_allowed():
    """No exercise needs ``os`` (issue 35: with it a cell could write the grader's result files and end its
    process); ``sys`` is allowed for its numbers and streams (``_cell_rules.SYS_MEMBERS``)."""
    for source in ("import os\ndef f(x):\n    return os.path.join('a', 'b')", "import os.path\n",
                   "from os import path\n", "from os.path import join\n"):
        assert unsafe_in_source(source).startswith(source.split("\n")[0].split(" import")[0]), source
    assert unsafe_in_source("import sys\ndef f(x):\n    return x * sys.float_info.epsilon") is None


# Red team R10 (issue 35): a forbidden function reached through a string (getattr's name) or through
# another object that computes the same thing (torch.special's, a Tensor method), and torch attention
# routines that some attention exercises did not list. Each: (exercise, source, the name the check gives).
_OSU = ("def online_softmax_update(running_max, running_sum, block):\n"
        "    new_max = torch.maximum(running_max, block.amax(dim=-1))\n"
        "    shift = torch.where(new_max == float('-inf'), 0.0, new_max)\n    lse = {}(dim=-1)\n"
        "    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(lse - shift)\n")
_CACHE = ("def attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):\n"
          "    k_all = torch.cat([k_cache, k_new], dim=-2)\n    v_all = torch.cat([v_cache, v_new], dim=-2)\n")
_MHAF = (_CACHE + "    N, H, T1, D = k_all.shape\n    eye = torch.eye(D, dtype=q_new.dtype)\n"
         "    qq = q_new.reshape(N * H, 1, D).transpose(0, 1)\n    kk = k_all.reshape(N * H, T1, D).transpose(0, 1)\n"
         "    vv = v_all.reshape(N * H, T1, D).transpose(0, 1)\n"
         "    out, _ = F.multi_head_attention_forward(qq, kk, vv, D, 1, None, None, None, None, False, 0.0,\n"
         "        eye, None,\n"
         "        training=False, need_weights=True, use_separate_proj_weight=True, q_proj_weight=eye,\n"
         "        k_proj_weight=eye, v_proj_weight=eye)\n"
         "    return out.transpose(0, 1).reshape(N, H, 1, D), k_all, v_all\n")
_FLEX6 = ("from torch.nn.attention.flex_attention import flex_attention\n" + _CACHE
          + "    return flex_attention(q_new, k_all, v_all), k_all, v_all\n")
_FLEX3 = ("from torch.nn.attention.flex_attention import flex_attention, create_block_mask\n"
          "def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):\n"
          "    N, L, E = x.shape\n    H, D = num_heads, E // num_heads\n"
          "    q = (x @ w_q).view(N, L, H, D).transpose(1, 2)\n    k = (x @ w_k).view(N, L, H, D).transpose(1, 2)\n"
          "    v = (x @ w_v).view(N, L, H, D).transpose(1, 2)\n    if mask is None:\n"
          "        out = flex_attention(q, k, v)\n    else:\n"
          "        m = mask.expand(N, H, L, L).contiguous()\n"
          "        bm = create_block_mask(lambda b, h, i, j: m[b, h, i, j], N, H, L, L, device='cpu')\n"
          "        out = flex_attention(q, k, v, block_mask=bm)\n"
          "    return out.transpose(1, 2).reshape(N, L, E) @ w_o\n")
_GETATTR_SDPA = "def attend(q, k, v, mask=None):\n    return getattr(F, 'scaled_dot_product_attention')(q, k, v)\n"
R10_ROUTES = {
    "tensor_getattr": ("ch6.online_softmax_update", _OSU.format('getattr(block, "logsumexp")'), "torch.logsumexp"),
    "special_getattr": ("ch6.online_softmax_update",
                        _OSU.format('(lambda f, b: (lambda **kw: f(b, **kw)))(getattr(torch.special, "logsumexp"), '
                                    'block)'), "torch.special.logsumexp"),
    "special_softmax": ("ch6.online_softmax_update", _OSU.format("torch.special.softmax(block, -1).log"),
                        "torch.special.softmax"),
    "hasattr_string": ("ch6.online_softmax_update", _OSU.format("(block.exp().sum(-1).log() if hasattr(block, "
                                                                "'log_softmax') else block).sum"), "torch.log_softmax"),
    "mha_forward": ("ch6.attend_with_cache", _MHAF, "torch.nn.functional.multi_head_attention_forward"),
    "flex_cache": ("ch6.attend_with_cache", _FLEX6, "torch.nn.attention.flex_attention.flex_attention"),
    "flex_heads": ("ch3.multi_head_attention", _FLEX3, "torch.nn.attention.flex_attention.flex_attention"),
    "getattr_sdpa": ("ch2.scaled_dot_product_attention", _GETATTR_SDPA,
                     "torch.nn.functional.scaled_dot_product_attention"),
    # chapter 7's: a getattr evaluated before the run-time block, in a default argument or a class body
    "default_getattr": ("ch7.rms_norm", "def rms_norm(x, weight, eps=1e-6, _f=getattr(F, 'rms_norm')):\n"
                        "    return _f(x, (x.shape[-1],), weight, eps)\n", "torch.nn.functional.rms_norm"),
    "class_getattr": ("ch7.rms_norm", "class _K:\n    f = staticmethod(getattr(torch, 'rms_norm'))\n"
                      "def rms_norm(x, weight, eps=1e-6):\n    return _K.f(x, (x.shape[-1],), weight, eps)\n",
                      "torch.rms_norm"),
}

R10_ROUTES.update(R19_ROUTES)  # red team R19: torch's other names for a norm or a softmax (tests/test_grader_r19.py)


@pytest.mark.parametrize("name", sorted(R10_ROUTES))
def test_a_forbidden_name_reached_by_a_string_or_another_object_is_named(name):
    eid, source, named = R10_ROUTES[name]
    reason = unsafe_in_source(source)  # nothing else in these sources is refused but flex_attention's import
    assert reason is None or reason.startswith("from torch.nn.attention.flex_attention import ..."), reason
    assert forbidden_in_source(source, get(eid).forbidden) == named, (name, get(eid).forbidden)


def test_a_string_is_only_flagged_when_it_is_a_forbidden_name_whole():
    forbidden = get("ch6.online_softmax_update").forbidden
    honest = 'def f(block):\n    """the logsumexp of each row, by softmax\'s rule"""\n    return block.amax(-1)\n'
    assert forbidden_in_source(honest, forbidden) is None
    assert forbidden_in_source("def f(x):\n    return {'softmax': x}\n", forbidden) == "torch.nn.functional.softmax"


def test_every_attention_exercise_forbids_every_torch_attention_routine():
    for eid in ("ch2.scaled_dot_product_attention", "ch3.multi_head_attention", "ch5.encoder_layer_post_ln",
                "ch5.encoder_layer_pre_ln", "ch6.attend_with_cache", "ch7.grouped_query_attention"):
        missing = set(TORCH_ATTENTION) - set(get(eid).forbidden)
        assert not missing, (eid, missing)
    assert {"torch.nn.attention.flex_attention.flex_attention", "torch.nn.functional.multi_head_attention_forward",
            "torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention"} <= set(TORCH_ATTENTION)
    for name in TORCH_ATTENTION:
        assert resolve(name) is not None, name  # each exists here, so the run time can block it


def test_each_chapter_7_exercise_forbids_the_course_s_own_function_at_run_time():
    own = {"ch7.rms_norm": "utils.llm.blocks.rms_norm", "ch7.rotate_half_rope": "utils.llm.blocks.rotate_half_rope",
           "ch7.grouped_query_attention": "utils.llm.blocks.grouped_query_attention"}
    for eid, name in own.items():
        assert name in get(eid).forbidden and resolve(name) is not None, (eid, name)


def test_the_online_softmax_update_blocks_every_object_that_computes_it_at_run_time():
    block = torch.randn(3, 5)
    routes = {"torch.Tensor.logsumexp": lambda: getattr(block, "logsumexp")(dim=-1),  # noqa: B009
              "torch.special.logsumexp": lambda: getattr(torch.special, "logsumexp")(block, dim=-1),  # noqa: B009
              "torch.special.softmax": lambda: torch.special.softmax(block, -1),
              "torch.special.log_softmax": lambda: torch.special.log_softmax(block, -1),
              "torch.Tensor.log_softmax": lambda: block.log_softmax(-1),
              "torch.Tensor.logcumsumexp": lambda: block.logcumsumexp(-1),
              "torch.nn.functional.cross_entropy": lambda: F.cross_entropy(block, torch.zeros(3, dtype=torch.long)),
              "torch.Tensor.softmax": lambda: block.softmax(-1),
              "torch.logaddexp": lambda: functools.reduce(torch.logaddexp, block.unbind(-1)),  # red team R14
              "torch.Tensor.logaddexp": lambda: block[:, 0].logaddexp(block[:, 1]),
              "torch.logaddexp2": lambda: torch.logaddexp2(block[:, 0], block[:, 1]),
              "torch.Tensor.logaddexp2": lambda: block[:, 0].logaddexp2(block[:, 1])}
    with forbid(get("ch6.online_softmax_update").forbidden) as called:
        for name, route in routes.items():
            with pytest.raises(ForbiddenCall):
                route()
            assert called[-1] == name
    assert "logsumexp" not in vars(torch.Tensor)  # restored as it was: inherited, not copied onto Tensor
    assert torch.allclose(block.logsumexp(-1), torch.logsumexp(block, -1))


def test_a_blocks_logsumexp_by_logaddexp_is_named_by_the_static_check():
    """Red team R14 (issue 35): the block's logsumexp folded by numpy's or torch's logaddexp got 2/2."""
    forbidden = get("ch6.online_softmax_update").forbidden
    head = "def online_softmax_update(running_max, running_sum, block):\n    lse = "
    sources = {"numpy.logaddexp": "import numpy as np\n" + head + "np.logaddexp.reduce(block.numpy(), axis=-1)\n",
               "numpy.logaddexp2": "import numpy\n" + head + "numpy.logaddexp2.reduce(block.numpy(), axis=-1)\n",
               "torch.logaddexp": "import functools\n" + head + "functools.reduce(torch.logaddexp, block.unbind(-1))\n",
               "torch.Tensor.logaddexp": head + "block[..., 0].logaddexp(block[..., 1])\n"}
    for name, source in sources.items():
        assert forbidden_in_source(source, forbidden) == name, source


def test_the_sliding_window_mask_forbids_the_course_s_own():
    window = get("ch6.sliding_window_mask")
    source = ("from utils.at_scale import sliding_window_mask as s\n"
              "def sliding_window_mask(L, window):\n    return s(L, window)\n")
    assert forbidden_in_source(source, window.forbidden) == "utils.at_scale"
    assert resolve("utils.at_scale.sliding_window_mask") is not None  # so the run time blocks it too
