"""torch's names that forbidden names are matched against, read once per process (make test's time, issue 38).

:func:`utils.exercises.runner.forbid` blocks each forbidden name's namesakes (``torch.native_layer_norm`` for
``F.layer_norm``) and aten operators. Finding them scanned every callable of six torch spaces and every
dispatcher operator again for each name, in each exercise's forked process of the grader's worker: about 0.5 s
of CPU per process, most of a sandboxed batch's time. Now each space and the operator list are read once per
process (again only when one grew), and the worker reads them, and the exercise's own names, before it forks.

- What is found is exactly what the old scan found, for every forbidden name of the course (the old scan is
  kept below as the specification).
- A name looked up after a space grew sees the new callable.
- Once read, entering ``forbid`` reads no name's words again (a count, not a timing).
- The worker reads an exercise's names from its cell file before forking, and a broken file costs nothing.
- In a real sandboxed worker, an exercise's process starts with them read: it uses almost no CPU before the
  cell runs (CPU time, with a wide margin: about 0.004 s read, 0.12 s and more not read).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import types

import grader_fixtures as gf
import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises import all_exercises, common, runner
from utils.exercises.common import NAMESAKE_SPACES, differentiates, holds_in_order, name_words, torch_namesakes
from utils.exercises.definition import TORCH_ATTENTION
from utils.grading import worker


def _old_namesakes(dotted: str) -> tuple[str, ...]:
    """The scan as it was before the index: every space's callables, read again for this one name."""
    root, _, last = dotted.rpartition(".")
    if not root.startswith("torch") or differentiates(root):
        return ()
    words, found = name_words(last), []
    for space in NAMESAKE_SPACES:
        owner = torch.Tensor if space == "torch.Tensor" else importlib.import_module(space)
        names = {n for cls in owner.__mro__[:-1] for n in vars(cls)} if isinstance(owner, type) else set(vars(owner))
        for name in sorted(names):
            value = common._static_value(owner, name)
            if name.startswith("__") or f"{space}.{name}" == dotted or not callable(value) \
                    or isinstance(value, types.ModuleType):
                continue
            if holds_in_order(words, name_words(name)):
                found.append(f"{space}.{name}")
    return tuple(found)


def _old_aten(dotted: str) -> list[str]:
    root, _, last = dotted.rpartition(".")
    if not root.startswith("torch") or differentiates(root):
        return []
    words, found = name_words(last), []
    for full in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = full.partition("::")
        parts = name_words(rest.split(".")[0]) or [""]
        parts = parts[1:] if parts[0] in runner._ATEN_PREFIXES and len(parts) > 1 else parts
        if namespace == "aten" and parts[0] == words[0] and holds_in_order(words, parts):
            found.append(rest.split(".")[0])
    return sorted(set(found))


def _course_names() -> list[str]:
    names = {n for e in all_exercises().values() for n in e.forbidden if "." in n}
    names |= {"torch.nn.functional.layer_norm", "torch.nn.functional.cross_entropy", "torch.Tensor.logsumexp",
              "torch.autograd.grad", "numpy.einsum"}
    return sorted(names)


@pytest.fixture
def fresh(monkeypatch):
    """Empty memos, restored afterwards."""
    monkeypatch.setattr(common, "_NAMESAKES", {})
    monkeypatch.setattr(common, "_SPACES", {})
    monkeypatch.setattr(runner, "_ATEN_PACKETS", {})
    monkeypatch.setattr(runner, "_ATEN_WORDS", [-1, ()])


def test_every_course_name_finds_what_the_old_scan_found(fresh):
    names = _course_names()
    assert len(names) > 40
    for name in names:
        assert torch_namesakes(name) == _old_namesakes(name), name
        packets = runner._aten_packets(name)
        assert sorted({p.__name__.split(".")[0] for p in packets if isinstance(p, torch._ops.OpOverloadPacket)}) \
            == _old_aten(name), name
    assert "torch.native_layer_norm" in torch_namesakes("torch.nn.functional.layer_norm")


def test_a_callable_added_to_a_space_is_found_by_a_later_name(fresh, monkeypatch):
    torch_namesakes("torch.nn.functional.softmax")  # the spaces are read
    monkeypatch.setattr(torch.nn.functional, "my_own_log_softmax_twice", lambda x: x, raising=False)
    assert "torch.nn.functional.my_own_log_softmax_twice" in torch_namesakes("torch.log_softmax")
    assert "torch.nn.functional.my_own_log_softmax_twice" in _old_namesakes("torch.log_softmax")


def test_once_read_forbid_reads_no_name_again(fresh, monkeypatch):
    names = sorted(all_exercises()["ch2.scaled_dot_product_attention"].forbidden)
    names = [n for n in names if "." in n]
    runner.read_torch_names()
    runner.read_forbidden(names)
    calls = []
    counting = lambda name: calls.append(name) or name_words(name)  # noqa: E731
    monkeypatch.setattr(common, "name_words", counting)
    monkeypatch.setattr(runner, "name_words", counting)
    with runner.forbid(names) as called:
        assert called == []
        with pytest.raises(runner.ForbiddenCall):
            torch.nn.functional.scaled_dot_product_attention(*torch.ones(3, 1, 2, 4))
    assert calls == []


def test_forbid_still_blocks_a_namesake_when_the_names_were_read_first(fresh):
    runner.read_forbidden(["torch.nn.functional.layer_norm"])
    with runner.forbid(["torch.nn.functional.layer_norm"]) as called:
        with pytest.raises(runner.ForbiddenCall):
            torch.native_layer_norm(torch.ones(2, 4), [4], None, None, 1e-5)
    assert called == ["torch.native_layer_norm"]


def test_the_worker_reads_an_exercise_s_names_from_its_cell_file_and_ignores_a_broken_one(fresh, tmp_path):
    worker._index_torch()
    (tmp_path / "in" / "0").mkdir(parents=True)
    cell = {"source": "def f(x):\n    return x\n", "func_name": "f",
            "forbidden": ["torch.softmax", "torch.nn.LayerNorm", "utils"]}
    (tmp_path / "in" / "0" / "cell.json").write_text(json.dumps(cell))
    worker._read_forbidden(tmp_path, 0)
    assert "softmax" in runner._ATEN_PACKETS
    # the names and their aliases, as the child computes them (torch.nn.modules.normalization.LayerNorm...)
    assert set(common._NAMESAKES) == set(worker._aliases(["torch.softmax", "torch.nn.LayerNorm"])) and \
        len(common._NAMESAKES) > 3
    (tmp_path / "in" / "1").mkdir()
    (tmp_path / "in" / "1" / "cell.json").write_text("{not json")
    worker._read_forbidden(tmp_path, 1)  # nothing raised
    worker._read_forbidden(tmp_path, 7)  # no such file: nothing raised


# The cell's top level says how much CPU its process used before the cell ran: a fork's counters start at 0.
EARLY_CPU = ("import os  # EARLY CPU\n_used = sum(os.times()[:2])\n"
             "def attend(q, k, v):\n"
             "    s = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n"
             "    return s if _used < 0.06 else s + 1\n")


@pytest.mark.sandbox
def test_an_exercise_process_starts_with_the_names_read(tmp_path, monkeypatch):
    # the toy attend forbids every torch attention routine, as chapter 2's exercises do (about 80 names with their
    # aliases: some 0.1 s to find in a process of its own, with the spaces read)
    attend = dataclasses.replace(gf.ATTEND, forbidden=(*gf.ATTEND.forbidden, *TORCH_ATTENTION))
    monkeypatch.setitem(gf.TOY_REGISTRY, "ch1.attend", attend)
    with gf.static_check_off("# EARLY CPU"):
        batch = grade_class(tmp_path, {"early": {"ch1.attend": EARLY_CPU}})
    got = row(batch, "early", "ch1.attend")
    assert got["status"] == "passed", got
