"""An exercise cell can neither write a file nor import what ends its process (issue 35, after F35j).

The worker writes each case's outcome as files (``../out/<i>/outcomes.json`` and ``.npy``) that the trusted side
reads. A cell that wrote them itself and then ended its process (``os._exit``) could claim "not mutated", "no
forbidden call" or "gradients flow" for code that does otherwise. The static check
(:func:`utils.exercises.forbidden.unsafe_in_source`) now refuses every such route it can see: the modules outside
the course's (``os``, ``json``, ``time``, ``signal``...), ``open`` with any mode but a constant read mode, and
numpy's and torch's writers. ``sys.exit`` stays allowed: it raises ``SystemExit``, which the worker reports as the
cell's error. The run-time defences against forgers are tested with the static check off
(:func:`grader_fixtures.static_check_off`: tests/test_hidden_cases.py, tests/test_grader_units.py).
"""

from __future__ import annotations

import grader_fixtures as gf
import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises.forbidden import unsafe_in_source
from utils.exercises.runner import load_function, run_cases

_RETURN = "    return x + 1\n"
FORGER_ROUTES = {  # each: (a cell of add_one, what the reason names)
    "open_write": ("def add_one(x):\n    open('../out/0/outcomes.json', 'w').write('[]')\n" + _RETURN,
                   "open(..., mode='w')"),
    "open_keyword": ("def add_one(x):\n    with open('../out/0/0.npy', mode='wb') as f:\n        f.write(b'')\n"
                     + _RETURN, "open(..., mode='wb')"),
    "open_append": ("def add_one(x):\n    open('../out/0/outcomes.json', 'a')\n" + _RETURN, "open(..., mode='a')"),
    "open_update": ("def add_one(x):\n    open('../out/0/outcomes.json', 'r+')\n" + _RETURN, "open(..., mode='r+')"),
    "open_computed_mode": ("def add_one(x, m='w'):\n    open('../out/0/outcomes.json', m)\n" + _RETURN,
                           "open(..., mode=m)"),
    "open_unpacked": ("def add_one(x):\n    open(*['../out/0/outcomes.json', 'w'])\n" + _RETURN,
                      "open(*..., **...)"),
    "open_opener": ("def add_one(x):\n    open('a', opener=print)\n" + _RETURN, "open(*..., **...)"),
    "open_passed_on": ("w = open\ndef add_one(x):\n    w('../out/0/outcomes.json', 'w')\n" + _RETURN, "open"),
    "open_in_partial": ("import functools\nw = functools.partial(open, mode='w')\ndef add_one(x):\n" + _RETURN,
                        "open"),
    "np_save": ("import numpy as np\ndef add_one(x):\n    np.save('../out/0/0.npy', x.numpy())\n" + _RETURN,
                ".save"),
    "np_savez": ("import numpy\ndef add_one(x):\n    numpy.savez('a', x.numpy())\n" + _RETURN, ".savez"),
    "np_savetxt": ("import numpy as np\ndef add_one(x):\n    np.savetxt('a', x.numpy())\n" + _RETURN, ".savetxt"),
    "np_save_imported": ("from numpy import save as keep\ndef add_one(x):\n" + _RETURN, "from numpy import save"),
    "np_save_by_getattr": ("import numpy as np\ndef add_one(x):\n    getattr(np, 'save')('a', x.numpy())\n" + _RETURN,
                           ".save"),
    "tofile": ("def add_one(x):\n    x.numpy().tofile('../out/0/0.npy')\n" + _RETURN, ".tofile"),
    "ndarray_dump": ("def add_one(x):\n    x.numpy().dump('../out/0/0.npy')\n" + _RETURN, ".dump"),
    "memmap_write": ("import numpy as np\ndef add_one(x):\n    m = np.memmap('a', dtype='float32', mode='w+', "
                     "shape=(2,))\n" + _RETURN, "memmap(..., mode='w+')"),
    "memmap_default": ("import numpy as np\ndef add_one(x):\n    np.memmap('a')\n" + _RETURN,
                       "memmap(..., mode=...)"),
    "torch_save": ("def add_one(x):\n    torch.save(x, '../out/0/0.npy')\n" + _RETURN, ".save"),
    "torch_from_file_shared": ("def add_one(x):\n    torch.from_file('a', True, 4)\n" + _RETURN,
                               "from_file(..., shared=True)"),
    "storage_from_file": ("def add_one(x):\n    torch.UntypedStorage.from_file('a', shared=True, nbytes=4)\n"
                          + _RETURN, "from_file(..., shared=True)"),
    "distributed_store": ("def add_one(x):\n    torch.distributed.FileStore('a', 1)\n" + _RETURN, ".FileStore"),
    "distributed_init": ("def add_one(x):\n    torch.distributed.init_process_group('gloo', init_method='file:///a')\n"
                         + _RETURN, ".distributed"),
    "import_os": ("import os\ndef add_one(x):\n    os._exit(0)\n" + _RETURN, "import os: os is not among"),
    "from_os": ("from os import _exit\ndef add_one(x):\n    _exit(0)\n" + _RETURN, "from os import ...: os is not"),
    "import_json": ("import json\ndef add_one(x):\n" + _RETURN, "import json: json is not among"),
    "import_signal": ("import signal\ndef add_one(x):\n" + _RETURN, "import signal: signal is not among"),
    "import_time": ("import time\ndef add_one(x):\n" + _RETURN, "import time: time is not among"),
    "dunder_import": ("def add_one(x):\n    __import__('os')._exit(0)\n" + _RETURN, "__import__"),
    "io": ("import io\ndef add_one(x):\n    io.open('a', 'w')\n" + _RETURN, "import io: io is not among"),
    "pathlib": ("import pathlib\ndef add_one(x):\n    pathlib.Path('a').write_text('')\n" + _RETURN,
                "import pathlib: pathlib is not among"),
}
"""Routes by which a cell could write the grader's result files or end its process, each refused by name."""


@pytest.mark.parametrize("name", sorted(FORGER_ROUTES))
def test_each_route_to_write_a_file_or_end_the_process_is_refused_and_named(name):
    source, says = FORGER_ROUTES[name]
    reason = unsafe_in_source(source)
    assert reason is not None and reason.startswith(says), (name, reason)
    if "import " not in says and says != "__import__":
        assert "writes a file" in reason, (name, reason)


FAIR_CELLS = {  # each computes add_one, reading what it likes and writing nothing
    "plain": "def add_one(x):\n    return x + 1\n",
    "reads_a_file": ("def add_one(x):\n    with open('/proc/self/status') as f:\n        f.read(1)\n"
                     "    open('/proc/self/status', 'rb').close()\n"
                     "    open('/proc/self/status', mode='r', encoding='utf-8').close()\n" + _RETURN),
    "sys_numbers": ("import sys\ndef add_one(x):\n    assert sys.float_info.epsilon < 1 and sys.maxsize > 0\n"
                    "    print('ok', file=sys.stderr)\n" + _RETURN),
    "numpy_in_memory": ("import numpy as np\ndef add_one(x):\n"
                        "    return torch.from_numpy(np.asarray(x.numpy()) + 1)\n"),
    "self_save_attribute": ("class Keep:\n    def __init__(self):\n        self.saved = 1\n"
                            "def add_one(x):\n    return x + Keep().saved\n"),
}


@pytest.mark.parametrize("name", sorted(FAIR_CELLS))
def test_a_fair_cell_that_writes_nothing_passes_the_static_check_and_runs(name):
    source = FAIR_CELLS[name]
    assert unsafe_in_source(source) is None, name
    x = torch.zeros(2, 3)
    outcome, = run_cases(load_function(source, "add_one"), [{"x": x}])
    assert outcome.error is None and torch.equal(outcome.output, x + 1), (name, outcome)


def test_read_only_maps_are_allowed():
    assert unsafe_in_source("import numpy as np\ndef f(p):\n    return np.memmap(p, mode='r')\n") is None
    assert unsafe_in_source("import numpy as np\ndef f(p):\n    return np.memmap(p, 'uint8', 'c')\n") is None
    assert unsafe_in_source("def f(p):\n    return torch.from_file(p, size=4)\n") is None
    assert unsafe_in_source("def f(p):\n    return torch.from_file(p, False, 4)\n") is None


def test_sys_exit_stays_allowed_and_the_worker_reports_it_as_the_cell_s_error():
    """``sys.exit`` only raises ``SystemExit``: the worker catches it and records "sys.exit(...) was called" as the
    cell's error (utils/grading/worker.py); the process then writes its own verdict, not the cell's."""
    assert unsafe_in_source("import sys\ndef add_one(x):\n    sys.exit(0)\n") is None


FORGER = ("import json, os\nimport numpy as np\n"
          "def add_one(x):\n    os.makedirs('../out/0', exist_ok=True)\n"
          "    np.save('../out/0/0.npy', (x + 1).numpy())\n"
          "    record = {'output': {'t': 'tensor', 'f': '0.npy', 'dtype': 'float32'}, 'error': None,\n"
          "              'mutated': [], 'forbidden': None}\n"
          "    with open('../out/0/outcomes.json', 'w') as handle:\n        handle.write(json.dumps([record] * 8))\n"
          "    os._exit(0)\n")
"""Claims a correct output and "not mutated" for every case, whatever it computed (F35j's forger)."""
WRITER = ("def add_one(x):\n    x.add_(1)\n    for i in range(12):\n"
          "        with open(f'../out/{i}/outcomes.json', 'w') as handle:\n"
          "            handle.write('[]')\n    return x\n")
"""Mutates its input, then tries to overwrite what the worker wrote, without importing anything."""


@pytest.fixture(scope="module")
def forger_batch(tmp_path_factory):
    return grade_class(tmp_path_factory.mktemp("forgers"), {
        "forger": {"ch1.add_one": FORGER}, "writer": {"ch1.add_one": WRITER},
        "exits": {"ch1.add_one": "import sys\ndef add_one(x):\n    sys.exit(0)\n"},
        "fair": {"ch1.add_one": FAIR_CELLS["reads_a_file"]}})


def test_a_forger_gets_no_points_and_is_told_what_was_refused(forger_batch):
    for student, says in (("forger", "import json"), ("writer", "open(..., mode='w')")):
        got = row(forger_batch, student)
        assert got["status"] == "forbidden" and got["points"] == "0" and says in got["feedback"], (student, got)
        for exercise in ("ch1.attend", "ch1.total"):  # the student's other cells still run
            assert row(forger_batch, student, exercise)["status"] == "passed"


def test_sys_exit_in_a_graded_cell_is_the_cell_s_error_and_a_fair_reader_gets_full_marks(forger_batch):
    got = row(forger_batch, "exits")
    assert got["status"] == "error" and got["points"] == "0" and "sys.exit(0) was called" in got["feedback"], got
    assert forger_batch["summary"]["totals"]["fair"] == sum(gf.TOY_POINTS.values())
