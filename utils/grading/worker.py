"""The untrusted half of the grader: runs one notebook's exercise cells inside the sandbox.

Started by :mod:`utils.grading.sandbox` as ``python -I -S -c "<bootstrap>" KIT PATHS JOBDIR STATUS_FD
COMMAND_FD``, with only the worker kit of the course importable (:mod:`utils.grading.kit`). It

1. imports torch (once per worker: this is the expensive part) with one thread;
2. lowers its own resource limits (address space, CPU seconds, file size, processes, no core dumps)
   *before* any learner code runs, and makes itself non-dumpable (no same-uid ``ptrace``);
3. for each command the grader sends, runs one exercise's cases in a **forked** process:

   * ``run i`` (the public cases, which the grader writes into ``in/i`` with the cell only when exercise
     ``i`` is due): the child reads them itself and writes into ``out/i``;
   * ``probe i`` (the probe inputs, in ``in/pi``, after the public run's outcomes are read): the same in a
     fresh folder ``work/pi``, into ``out/pi``, in a process and under a CPU limit of its own, so that what
     the function does on a probe input alone (which never counts) cannot cost its cases (red team R24);
   * ``hide i`` (the hidden cases, written into ``in/hi`` only after every public run of the unit is
     over): the worker reads them *before* forking, answers ``loaded i``, and forks only on ``go i``,
     which the grader sends once it has removed ``in/hi``: no learner code ever runs while a hidden
     input is on disk. The child runs the cell again, in a fresh folder ``work/hi`` (so that what the
     cell's top level did in the public run, such as making a folder, does not get in its way), and
     writes into ``out/hi``.

   The worker writes ``start i`` and forks; the child closes the status and command pipes first,
   points its stdout and stderr at ``/dev/null`` (what learner code prints is never read, so it never
   crosses a pipe: a 300 MB print costs the CPU of writing it, not the grader's time to drain it), sets
   its CPU-time limit (``RLIMIT_CPU``: ``SIGXCPU`` at the exercise's timeout, in CPU seconds,
   ``SIGKILL`` :data:`CPU_GRACE` seconds later), executes the cell with
   :func:`~utils.exercises.runner.load_function` (a fresh namespace, the forbidden names patched), calls
   :func:`~utils.exercises.runner.run_cases`, writes the raw outcomes (``.npy`` + JSON, see
   :mod:`utils.grading.serialize`) and exits. The worker itself then writes ``done i`` (or ``exit i
   CODE`` / ``died i SIGNAL``; a child killed by ``SIGKILL`` after using its CPU time, as when learner
   code ignores ``SIGXCPU``, is reported as ``SIGXCPU``).

So every exercise runs in a fresh copy of an interpreter that has never run learner code: what an
earlier cell did to its own process (patched modules, threads, open files, walked frames) is gone
before a later cell's source even reaches the worker.

Nothing here decides a grade: the files and status lines are read as hostile by the trusted process,
which owns the wall-clock backstop, stops this process before reading what it wrote, and kills it (and, via
the PID namespace, all its descendants).
Of the course it imports only the runner side (:mod:`utils.exercises.runner`,
:mod:`utils.exercises.common`, :mod:`utils.grading.serialize`): no reference, no judging code
(``tests/test_grader_boundary.py`` checks it).
"""

from __future__ import annotations

import json
import math
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


def _limit(kind: int, value: int, hard: int | None = None) -> None:
    try:
        resource.setrlimit(kind, (value, value if hard is None else hard))
    except (ValueError, OSError):
        pass


CPU_GRACE = 2
"""Seconds of CPU time between an exercise's ``SIGXCPU`` (its timeout) and the kernel's ``SIGKILL``."""


def _apply_limits(limits: dict[str, int]) -> None:
    """Limits relative to what the worker uses after importing torch, so torch's own mappings fit."""
    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    vm_size = int(fields.get("VmSize", "0 kB").split()[0]) * 1024
    threads = int(fields.get("Threads", "1").strip() or 1)
    used_cpu = int(sum(os.times()[:2])) + 1
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_FSIZE, limits["fsize"])
    _limit(resource.RLIMIT_CPU, used_cpu + 4 * limits["cpu"] + 60)  # this process runs no learner code
    if limits.get("memory"):
        _limit(resource.RLIMIT_AS, vm_size + limits["memory"])
    if os.getuid() != 0:  # not enforced for root; the PID namespace covers that case
        _limit(resource.RLIMIT_NPROC, threads + limits["nproc"])


def warm() -> None:
    """Import torch with one thread, and the runner, and read torch's names: once per worker, before any fork
    (each exercise starts warm), or once in the fork server that the worker is a fork of."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch  # noqa: I001  (once per worker: the point of this design)

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import utils.exercises.runner

    _index_torch()
    utils.exercises.runner.read_torch_names()


def main(argv: list[str]) -> int:
    jobdir, status_fd, command_fd = Path(argv[0]), int(argv[1]), int(argv[2])
    os.umask(0o077)  # what learner code writes is its own, unless it says otherwise
    warm()
    from utils.grading import serialize

    limits = json.loads((jobdir / "job.json").read_text(encoding="utf-8"))["limits"]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large file is an OSError, not a dead worker
    _not_dumpable()
    _apply_limits(limits)
    try:  # learner output goes nowhere (the grader never reads it); the worker's own output stays piped
        sink = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        sink = -1
    _status(status_fd, "ready")
    commands = os.fdopen(command_fd, "rb", buffering=0)
    while True:
        line = commands.readline(100).decode("ascii", "replace").split()
        if len(line) != 2 or line[0] not in ("run", "probe", "hide") or not line[1].isdigit():
            return 0  # EOF (the grader is done with us) or nonsense: stop
        index = int(line[1])
        cases, out, inputs, fresh = None, jobdir / "out" / str(index), str(index), None
        seconds = limits["cpu"]
        if line[0] == "probe":  # the probe inputs: a process (and CPU time, less) of their own, after the public run
            out, inputs, fresh = jobdir / "out" / f"p{index}", f"p{index}", f"p{index}"
            seconds = min(seconds, limits.get("probe_cpu", seconds))
        if line[0] == "hide":  # the hidden cases: read here, then removed by the grader before any learner code runs
            cases, out, fresh = serialize.load(jobdir / "in" / f"h{index}"), jobdir / "out" / f"h{index}", f"h{index}"
            _status(status_fd, f"loaded {index}")
            if commands.readline(100).decode("ascii", "replace").split() != ["go", str(index)]:
                return 0
        _read_forbidden(jobdir, index)
        _reap()
        _status(status_fd, f"start {index}")
        pid = os.fork()
        if pid == 0:  # the exercise's own process: it cannot write status lines or read commands
            code = 1
            try:
                os.close(status_fd)
                os.close(command_fd)
                if sink >= 0:
                    os.dup2(sink, 1)
                    os.dup2(sink, 2)
                    os.close(sink)
                refuse_exec()  # before any learner code: no program starts from this process or its children
                cpu = math.ceil(sum(os.times()[:2])) + seconds  # ~0 used: a fork's counters start at 0
                _limit(resource.RLIMIT_CPU, cpu, cpu + CPU_GRACE)
                code = _run_exercise(jobdir, index, out, cases, inputs, fresh)
            finally:
                _EXIT(code)  # bound before any learner code: a cell may rebind os._exit
        del cases
        _pid, wait_status, usage = os.wait4(pid, 0)
        sys.stdout.flush()
        if os.WIFSIGNALED(wait_status):
            name = _signal_name(os.WTERMSIG(wait_status))
            if name == "SIGKILL" and usage.ru_utime + usage.ru_stime >= seconds:
                name = "SIGXCPU"  # the hard CPU limit: the child ignored (or caught) its SIGXCPU
            _status(status_fd, f"died {index} {name}")
        elif os.WEXITSTATUS(wait_status) not in (0, 1):
            _status(status_fd, f"exit {index} {os.WEXITSTATUS(wait_status)}")
        else:
            _status(status_fd, f"done {index}")


def _read_forbidden(jobdir: Path, index: int) -> None:
    """What exercise ``index``'s forbidden names patch, found before forking (:func:`~utils.exercises.runner.
    read_forbidden`), so that its processes (public, probe, hidden) start with it: each would spend about 0.5 s of
    CPU finding it again. Only the cell file's list of names is used; if it cannot be read, the child finds them."""
    from utils.exercises.runner import read_forbidden

    try:
        cell = json.loads((jobdir / "in" / str(index) / "cell.json").read_text(encoding="utf-8"))
        read_forbidden(sorted(_aliases([name for name in cell["forbidden"] if "." in name])))
    except Exception:  # noqa: BLE001  (an optimisation only: the child reads the file again and says what failed)
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal-{number}"


def _not_dumpable() -> None:
    """No process of this uid may ptrace us or open our /proc files (fds, memory): a learner's exercise
    process (forked from us) cannot reach back into the worker that runs the next exercise."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


_SECCOMP_ARCH = {"x86_64": (0xC000003E, 59, 322), "aarch64": (0xC00000B7, 221, 281)}
"""``platform.machine()`` -> (its ``AUDIT_ARCH_*``, the numbers of ``execve`` and ``execveat``)."""


def refuse_exec() -> bool:
    """Make this process, and every process it forks, unable to start a program: a seccomp filter that
    answers ``execve`` and ``execveat`` with ``EPERM`` (and every system call of another ABI, such as
    x86's 32-bit ones, too). A fresh interpreter would import torch without the forbidden names patched
    out, and nothing an exercise asks for needs a program. False where this system has no such filter."""
    import platform

    arch = _SECCOMP_ARCH.get(platform.machine())
    if arch is None:
        return False
    try:
        import ctypes

        audit, execve, execveat = arch
        deny, allow = 0x00050000 | 1, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
        program = [  # (code, jt, jf, k) of classic BPF over struct seccomp_data
            (0x20, 0, 0, 4),  # A = arch
            (0x15, 1, 0, audit),  # native ABI: go on; else deny
            (0x06, 0, 0, deny),
            (0x20, 0, 0, 0),  # A = system call number
            (0x35, 3, 0, 0x40000000),  # x32's numbers (same arch, bit 30 set): deny
            (0x15, 2, 0, execve),
            (0x15, 1, 0, execveat),
            (0x06, 0, 0, allow),
            (0x06, 0, 0, deny),
        ]

        class Filter(ctypes.Structure):
            _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                        ("k", ctypes.c_uint32)]

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

        filters = (Filter * len(program))(*program)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what an unprivileged filter needs
            return False
        prog = Program(len(program), filters)
        return libc.prctl(22, 2, ctypes.addressof(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except (OSError, AttributeError, TypeError):
        return False


def _reap() -> None:
    """Reap leftover processes of earlier exercises (as the PID namespace's init, they become ours)."""
    while True:
        try:
            pid, _status_code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _run_exercise(jobdir: Path, index: int, out: Path, cases: list | None = None, inputs: str | None = None,
                  fresh: str | None = None) -> int:
    """Run exercise ``index`` in this (forked) process: read its cell and (unless ``cases`` were read
    already) its inputs from ``in/<inputs>``, which the grader writes only when they are due, run the cases
    (in the folder ``fresh`` when given), write the raw outcomes into ``out``. Returns the exit status."""
    from utils.exercises.common import one_line
    from utils.exercises.runner import MissingFunction, load_function, run_cases
    from utils.grading import serialize

    record: dict[str, object] = {}
    stage = "cell"  # "function" once the cell has run: what a BaseException escaped from (R24: told apart)
    folder = os.fspath(out)  # before any learner code: from here on only what was bound before it ran is used
    try:
        cell = json.loads((jobdir / "in" / str(index) / "cell.json").read_text(encoding="utf-8"))
        if cases is None:
            cases = serialize.load(jobdir / "in" / (inputs or str(index)))
        if fresh:  # a hidden or probe run starts in a folder of its own: what the public run left there stays
            os.makedirs(fresh, exist_ok=True)
            os.chdir(fresh)
        # Bare package names ("utils") are for the static check only: runner.forbid() patches attributes.
        named = _aliases([name for name in cell["forbidden"] if "." in name])
        forbidden = sorted(named)
        try:
            fn = load_function(cell["source"], cell["func_name"], forbidden)  # we are the sandbox
        except MissingFunction:
            record["load_error"] = ["LookupError", f"the cell does not define {cell['func_name']}()"]
        else:
            stage = "function"
            outcomes = run_cases(fn, cases, forbidden, gradients=cell.get("gradients") is True)
            for outcome in outcomes:  # the name the exercise lists, whichever alias was called
                outcome.forbidden = named.get(outcome.forbidden, outcome.forbidden) if outcome.forbidden else None
            try:
                serialize.dump_outcomes(outcomes, folder)
            except OSError as exc:  # e.g. the learner's code used up every file descriptor
                _close_learner_files()
                record["load_error"] = ["OSError", f"the results could not be written ({exc.strerror})"]
    except SystemExit as exc:
        record["load_error"] = ["SystemExit", f"sys.exit({_plain_text(exc.code, quoted=True)}) was called"]
    except BaseException as exc:  # the cell's top level raised, or a BaseException escaped run_cases
        record["load_error"] = [type(exc).__name__, one_line(_error_text(exc), limit=300), stage]
    if record:  # what the learner's code left behind (sys.stdout, os.open) is not used: the process ends here
        try:
            serialize.write_json(folder, "load_error.json", record)
        except BaseException:
            if "Too many open files" in str(record) or not _close_learner_files():
                return 1
            try:
                serialize.write_json(folder, "load_error.json", record)
            except BaseException:
                return 1
    return 0


def _plain_text(*values: object, quoted: bool = False) -> str:
    """The arguments of what the learner's code raised, as text, without calling a method of the learner's: a
    string as it is (``quoted``: by its ``repr``), a number or None by its built-in ``repr``, anything else by its
    class's name."""
    parts = []
    for value in values:
        kind = type(value)
        parts.append(value if kind is str and not quoted else repr(value) if value is None or kind in (
            bool, int, float, str) else f"<{kind.__name__}>")
    return " ".join(parts)


_PLAIN = (str, int, float, bool, type(None))


def _error_text(exc: BaseException) -> str:
    """``str(exc)`` where that runs none of the learner's code (Python's own exception, holding only strings and
    numbers: ``[Errno 2] No such file or directory: 'x'``), else :func:`_plain_text` of its arguments."""
    args = BaseException.args.__get__(exc)  # not exc.args: a class of the learner's may define args
    names = (OSError.filename.__get__(exc), OSError.filename2.__get__(exc)) if isinstance(exc, OSError) else ()
    held = [*args, *names]
    if type(exc).__module__ == "builtins" and all(type(value) in _PLAIN for value in held):
        return str(exc)
    return _plain_text(*args)


_INDEX: dict[int, list[str]] = {}


def _index_torch() -> None:
    """Every function and class of a loaded torch module, by identity: where else torch holds it. Made
    once per worker, before any learner code runs (by the fork server, for a worker forked from it)."""
    if _INDEX:
        return
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "torch" or module_name.startswith("torch.")):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if callable(value) and not attr.startswith("__"):
                _INDEX.setdefault(id(value), []).append(f"{module_name}.{attr}")


def _aliases(names: list[str]) -> dict[str, str]:
    """Each forbidden dotted name, and every other name a torch module holds the same object under (the
    class ``torch.nn.Transformer`` builds its layers from is ``torch.nn.modules.activation``'s, not
    ``torch.nn``'s), mapped to the name the exercise lists."""
    from utils.exercises.common import resolve

    named = {name: name for name in names}
    for name in names:
        resolved = resolve(name)
        if resolved is not None:
            for alias in _INDEX.get(id(getattr(*resolved)), []):
                named.setdefault(alias, name)
    return named


_CLOSERANGE, _GETRLIMIT, _EXIT = os.closerange, resource.getrlimit, os._exit  # built-ins, bound at import


def _close_learner_files() -> bool:
    """Close every descriptor but stdin, stdout and stderr (this process ends right after)."""
    try:
        _CLOSERANGE(3, _GETRLIMIT(resource.RLIMIT_NOFILE)[0])
    except (OSError, ValueError):
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
