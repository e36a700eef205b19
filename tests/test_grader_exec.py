"""An exercise's process cannot start a program (red team R3, issue 35).

The run-time half of the forbidden-call check patches the forbidden names in the exercise's own process.
A fresh interpreter started from the cell (``subprocess``, ``os.system``, ``os.exec*``) imports torch
unpatched: the red team's cell handed its inputs to ``python -c`` there, which called
``F.scaled_dot_product_attention`` under a computed name, and got the exercise's full marks. The worker
now gives each exercise's process a seccomp filter (inherited by its children) that refuses ``execve``
and ``execveat``, so no program at all starts from learner code, whatever the static check misses.
"""

from __future__ import annotations

import os
import sys

import grader_fixtures as gf
import pytest

from utils.grading import batch, worker

# The cell writes its inputs as .npy, runs a fresh Python on them, and returns what that computed with
# the function the exercise forbids (named by a computed string: no forbidden attribute in the source).
EXEC_BYPASS = '''import subprocess, sys, tempfile
import numpy as np
CHILD = ("import sys, numpy as np, torch\\n"
         "folder = sys.argv[1]\\n"
         "q, k, v = [torch.from_numpy(np.load(folder + '/' + n + '.npy')) for n in 'qkv']\\n"
         "fn = getattr(torch.nn.functional, 'scaled_dot' + '_product_attention')\\n"
         "np.save(folder + '/o.npy', fn(q, k, v).numpy())\\n")
def attend(q, k, v):
    folder = tempfile.mkdtemp()
    for n, t in zip('qkv', (q, k, v)):
        np.save(folder + '/' + n + '.npy', t.detach().numpy())
    subprocess.run([sys.executable, '-c', CHILD, folder], check=True)
    return torch.from_numpy(np.load(folder + '/o.npy'))
'''
# The same through os.system in a forked child, so that the filter's inheritance is what stops it
SYSTEM_BYPASS = EXEC_BYPASS.replace(
    "    subprocess.run([sys.executable, '-c', CHILD, folder], check=True)\n",
    "    import os, shlex\n    open(folder + '/child.py', 'w').write(CHILD)\n"
    "    pid = os.fork()\n    if pid == 0:\n"
    "        os._exit(os.system(shlex.quote(sys.executable) + ' ' + folder + '/child.py ' + folder) and 1)\n"
    "    os.waitpid(pid, 0)\n")


def test_a_forked_process_with_the_filter_cannot_exec_but_still_forks():
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child reports through its exit status)
        code = 3
        try:
            worker.refuse_exec()
            try:
                os.execv(sys.executable, [sys.executable, "-c", "pass"])
            except PermissionError:
                inner = os.fork()  # forking (and the child's own work) still works
                if inner == 0:
                    os._exit(7)
                code = 0 if os.WEXITSTATUS(os.waitpid(inner, 0)[1]) == 7 else 4
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


@pytest.mark.sandbox
def test_a_cell_that_computes_in_a_fresh_interpreter_gains_nothing(tmp_path):
    subs = tmp_path / "subs"
    gf.student(subs, "honest", {"a.ipynb": gf.toy_submission()})
    gf.student(subs, "exec", {"a.ipynb": gf.toy_submission({"ch1.attend": EXEC_BYPASS})})
    gf.student(subs, "system", {"a.ipynb": gf.toy_submission({"ch1.attend": SYSTEM_BYPASS})})
    with gf.static_check_off():  # subprocess and os meet the sandbox's exec filter, not the static check
        summary = batch.grade(subs, tmp_path / "out", jobs=2, timeout=20, seed=5,
                              course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY,
                              memory_mb=512, progress=False)
    rows = gf.exercise_rows(tmp_path / "out")
    assert summary["totals"]["honest"] == sum(gf.TOY_POINTS.values())
    for name in ("exec", "system"):
        row = rows[(name, "ch1.attend")]
        assert row["points"] == "0" and row["status"] != "passed", (name, row)
        for other in ("ch1.add_one", "ch1.total"):
            assert rows[(name, other)]["status"] == "passed", (name, other)
