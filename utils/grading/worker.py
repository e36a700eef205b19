"""The untrusted half of the grader: runs one notebook's exercise cells inside the sandbox.

Started by :mod:`utils.grading.sandbox` as ``python -I -c "<bootstrap>" JOBDIR STATUS_FD START``. It

1. imports torch (once per worker: this is the expensive part) with one thread;
2. lowers its own resource limits (address space, CPU seconds, file size, processes, no core dumps)
   *before* any learner code runs;
3. for each exercise from index ``START`` on: writes ``start i`` on the status pipe, executes the cell
   with :func:`~utils.exercises.runner.load_function` (a fresh namespace, the forbidden names
   patched), calls :func:`~utils.exercises.runner.run_cases` on the inputs the grader wrote, writes
   the raw outcomes (``.npy`` + JSON, see :mod:`utils.grading.serialize`) and ``done i``.

Nothing here decides a grade: the files and status lines are read as hostile by the trusted process,
which owns the timeouts and kills this process (and, via the PID namespace, all its descendants).
Of the course it imports only the runner side (:mod:`utils.exercises.runner`,
:mod:`utils.exercises.common`, :mod:`utils.grading.serialize`): no reference, no judging code
(``tests/test_grader_boundary.py`` checks it).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path


def _status(fd: int, message: str) -> None:
    try:
        os.write(fd, (message + "\n").encode())
    except OSError:
        pass


def _limit(kind: int, value: int) -> None:
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass


def _apply_limits(limits: dict[str, int]) -> None:
    """Limits relative to what the worker uses after importing torch, so torch's own mappings fit."""
    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    vm_size = int(fields.get("VmSize", "0 kB").split()[0]) * 1024
    threads = int(fields.get("Threads", "1").strip() or 1)
    used_cpu = int(sum(os.times()[:2])) + 1
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_FSIZE, limits["fsize"])
    _limit(resource.RLIMIT_CPU, used_cpu + limits["cpu"])
    if limits.get("memory"):
        _limit(resource.RLIMIT_AS, vm_size + limits["memory"])
    if os.getuid() != 0:  # not enforced for root; the PID namespace covers that case
        _limit(resource.RLIMIT_NPROC, threads + limits["nproc"])


def main(argv: list[str]) -> int:
    jobdir, status_fd, start = Path(argv[0]), int(argv[1]), int(argv[2])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch  # noqa: I001  (once per worker: the point of this design)

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    from utils.exercises.common import one_line
    from utils.exercises.runner import MissingFunction, load_function, run_cases
    from utils.grading import serialize

    job = json.loads((jobdir / "job.json").read_text(encoding="utf-8"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large file is an OSError, not a dead worker
    _apply_limits(job["limits"])
    _status(status_fd, "ready")
    for index in range(start, len(job["exercises"])):
        exercise = job["exercises"][index]
        _status(status_fd, f"start {index}")
        out = jobdir / "out" / str(index)
        record: dict[str, object] = {}
        try:
            cases = serialize.load(jobdir / "in" / str(index))
            # Bare package names ("utils") are for the static check only: runner.forbid() patches attributes.
            forbidden = [name for name in exercise["forbidden"] if "." in name]
            try:
                fn = load_function(exercise["source"], exercise["func_name"], forbidden)  # we are the sandbox
            except MissingFunction:
                record["load_error"] = ["LookupError", f"the cell does not define {exercise['func_name']}()"]
            else:
                outcomes = run_cases(fn, cases, forbidden)
                serialize.dump_outcomes(outcomes, out)
        except SystemExit as exc:
            record["load_error"] = ["SystemExit", f"sys.exit({exc.code!r}) was called"]
        except BaseException as exc:  # the cell's top level raised, or a BaseException escaped run_cases
            record["load_error"] = [type(exc).__name__, one_line(str(exc), limit=300)]
        if record:
            try:
                out.mkdir(parents=True, exist_ok=True)
                (out / "load_error.json").write_text(json.dumps(record), encoding="utf-8")
            except BaseException:
                pass
        sys.stdout.flush()
        _status(status_fd, f"done {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
