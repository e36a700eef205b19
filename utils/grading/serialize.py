"""Values across the trust boundary: JSON plus ``.npy`` files, never pickle.

Both sides use this module: the trusted grader writes the inputs (cases) with :func:`dump`, the
sandboxed worker writes the learner's raw outputs with :func:`dump_outcomes` (with only what was bound
before any cell ran: :data:`_TRUSTED`), and the trusted grader reads them back with :func:`load_outcomes`,
which treats every byte as hostile:

* every file is read through :func:`utils.grading.files.read_regular` (no link, no FIFO, no device,
  checked on the open descriptor), each name at most once, and the files of one value are bounded in
  total (:data:`MAX_OUTCOME_BYTES`) and in count (records are counted before any is decoded);
* ``.npy`` files are read with ``allow_pickle=False``, must be plain numeric/bool arrays of a known
  dtype, have a bounded size, and live directly in the value's folder (no path tricks);
* JSON nesting, list lengths, string lengths and integers are bounded;
* anything the worker could not encode (an object with a lying ``__eq__``, a numpy array, a module)
  comes back as an :class:`Opaque` stand-in that is never equal to anything and only carries the
  type's name, so :func:`utils.exercises.judging.describe` can say what the learner returned.

Encoded values (``enc``): ``{"t": "none"}``, ``{"t": "bool"|"int"|"str", "v": ...}``,
``{"t": "float", "v": "repr"}`` (so NaN and inf survive JSON), ``{"t": "tuple", "v": [enc, ...]}``,
``{"t": "tensor", "f": "3.npy", "dtype": "float32"}`` and ``{"t": "other", "type": "Name"}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from utils.exercises.common import GRADIENT_STATES, Outcome
from utils.grading import files

MAX_NPY_BYTES = 64 * 2**20
"""Largest single array the trusted side accepts from the sandbox."""
MAX_OUTCOME_BYTES = 256 * 2**20
"""All the files of one exercise's outcomes together."""
MAX_JSON_BYTES = 4 * 2**20
MAX_DEPTH = 4
MAX_ITEMS = 64
MAX_STR = 2000

# torch dtype name -> (torch dtype, numpy dtype stored on disk). bfloat16 travels as its raw uint16 bits.
DTYPES: dict[str, tuple[torch.dtype, np.dtype]] = {
    "float64": (torch.float64, np.dtype("<f8")), "float32": (torch.float32, np.dtype("<f4")),
    "float16": (torch.float16, np.dtype("<f2")), "bfloat16": (torch.bfloat16, np.dtype("<u2")),
    "int64": (torch.int64, np.dtype("<i8")), "int32": (torch.int32, np.dtype("<i4")),
    "int16": (torch.int16, np.dtype("<i2")), "int8": (torch.int8, np.dtype("i1")),
    "uint8": (torch.uint8, np.dtype("u1")), "bool": (torch.bool, np.dtype("?")),
}
_NPY_NAME = re.compile(r"^[0-9]{1,6}\.npy$")
_TYPE_NAME = re.compile(r"[^A-Za-z0-9_]")
_TENSOR_BASE = torch._C.TensorBase  # noqa: SLF001  (an immutable type: no cell can patch its methods)
_TRUSTED: dict[str, Any] = {
    "tensor": torch.Tensor, "isinstance": isinstance, "detach": _TENSOR_BASE.detach, "cpu": _TENSOR_BASE.cpu,
    "dtype": _TENSOR_BASE.dtype.__get__, "view": _TENSOR_BASE.view, "numpy": _TENSOR_BASE.numpy, "int16": torch.int16,
    "np_view": np.ndarray.view, "astype": np.ndarray.astype, "tobytes": np.ndarray.tobytes, "uint16": np.dtype("<u2"),
    "dtype_names": {torch_dtype: name for name, (torch_dtype, _np) in DTYPES.items()},
    "escape": json.encoder.encode_basestring_ascii, "open": os.open, "write": os.write, "close": os.close,
    "mkdir": os.mkdir, "unlink": os.unlink, "chmod": os.chmod, "fspath": os.fspath}
"""What the worker writes the outcomes with after the learner's code ran, bound at import (before any cell runs):
built-ins and methods of immutable types. A cell that rebinds ``json.dumps``, ``np.save``, ``os.open`` or
``torch.Tensor.numpy`` in its process changes nothing in what is written (issue 35, after red team R16)."""


class Opaque:
    """Stand-in for a value the sandbox could not encode. Equal to nothing, not even itself."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object>"


def opaque(type_name: str) -> Opaque:
    """An :class:`Opaque` whose ``type(...).__name__`` is ``type_name`` (sanitized)."""
    name = _TYPE_NAME.sub("_", str(type_name))[:60] or "object"
    if not name[0].isalpha():
        name = "T" + name
    return type(name, (Opaque,), {"__slots__": ()})()


class DecodeError(ValueError):
    """The sandbox's files are malformed: the grader reports an error for that exercise."""


# --------------------------------------------------------------------------------------------------
# Writing (both sides)
# --------------------------------------------------------------------------------------------------


class _Writer:
    def __init__(self, folder: Path | str) -> None:
        self.folder = _TRUSTED["fspath"](folder)
        self.count = 0

    def encode(self, value: Any, depth: int = 0) -> dict[str, Any]:
        if value is None:
            return {"t": "none"}
        if isinstance(value, bool):
            return {"t": "bool", "v": bool(value)}
        if isinstance(value, int):
            number = int(value)
            if abs(number) > 2**62:
                return {"t": "other", "type": "huge_int"}
            return {"t": "int", "v": number}
        if isinstance(value, float):
            return {"t": "float", "v": repr(float(value))}
        if isinstance(value, str):
            return {"t": "str", "v": str(value)[:MAX_STR]}
        if _TRUSTED["isinstance"](value, _TRUSTED["tensor"]):
            return self._tensor(value)
        if isinstance(value, (tuple, list)) and depth < MAX_DEPTH and len(value) <= MAX_ITEMS:
            return {"t": "tuple", "v": [self.encode(v, depth + 1) for v in value]}
        return {"t": "other", "type": type(value).__name__}

    def _tensor(self, value: torch.Tensor) -> dict[str, Any]:
        t = _TRUSTED
        tensor = t["cpu"](t["detach"](value))
        dtype = t["dtype_names"].get(t["dtype"](tensor))
        if dtype is None:
            return {"t": "other", "type": f"tensor_{str(t['dtype'](tensor)).replace('torch.', '')}"}
        array = t["numpy"](t["view"](tensor, t["int16"]) if dtype == "bfloat16" else tensor)  # bfloat16: its bits
        array, name = t["np_view"](array, t["uint16"]) if dtype == "bfloat16" else array, f"{self.count}.npy"
        self.count += 1
        _write_file(self.folder, name, _npy_bytes(array, DTYPES[dtype][1]))
        return {"t": "tensor", "f": name, "dtype": dtype}


def _json_text(value: Any) -> str:
    """``value`` (None, bool, int, str, list, tuple, str-keyed dict) as ASCII JSON, with :data:`_TRUSTED` only."""
    kind, escape = type(value), _TRUSTED["escape"]
    if value is None or kind is bool or kind is int:
        return "null" if value is None else ("true" if value else "false") if kind is bool else int.__repr__(value)
    if kind is str:
        return escape(value)
    if kind is list or kind is tuple:
        return "[" + ", ".join([_json_text(item) for item in value]) + "]"
    if kind is dict:
        return "{" + ", ".join([escape(k) + ": " + _json_text(v) for k, v in dict.items(value) if type(k) is str]) + "}"
    raise TypeError(f"cannot write a {kind.__name__} as JSON")


def _npy_bytes(array: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.npy`` file (format 1.0, C order) of ``array`` stored as ``dtype``, made by :data:`_TRUSTED` only."""
    data = _TRUSTED["tobytes"](_TRUSTED["astype"](array, dtype, copy=False), "C")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype.str, repr(tuple(array.shape)))  # noqa: UP031
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1") + data


def _make_folder(folder: str) -> None:
    try:
        _TRUSTED["mkdir"](folder, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:  # its parent first
        _make_folder(folder.rstrip("/").rpartition("/")[0] or "/")
        _TRUSTED["mkdir"](folder, 0o700)


def _write_file(folder: str, name: str, data: bytes) -> None:
    """Write ``data`` as a new file ``folder/name``: what the learner's code left under that name (a file made
    read-only, a link) is removed first, so it cannot keep the outcomes out."""
    t, path = _TRUSTED, folder + "/" + name
    with contextlib.suppress(OSError):
        t["chmod"](folder, 0o700)
    with contextlib.suppress(FileNotFoundError):
        t["unlink"](path)
    fd = t["open"](path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[t["write"](fd, view):]
    finally:
        t["close"](fd)


def write_json(folder: Path | str, name: str, value: Any) -> None:
    """Write plain JSON data ``value`` as ``folder/name`` with :data:`_TRUSTED` only (after learner code ran)."""
    folder = _TRUSTED["fspath"](folder)
    _make_folder(folder)
    _write_file(folder, name, _json_text(value).encode("ascii"))


def dump(value: Any, folder: Path) -> None:
    """Write ``value`` (cases, outcomes: JSON-able structure with tensors inside) into ``folder``."""
    _make_folder(_TRUSTED["fspath"](folder))
    writer = _Writer(folder)

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {"t": "dict", "v": {str(k): walk(v) for k, v in item.items()}}
        if isinstance(item, list) and item and isinstance(item[0], dict):
            return {"t": "list", "v": [walk(v) for v in item]}
        return writer.encode(item)

    write_json(folder, "value.json", walk(value))


def dump_outcomes(outcomes: list[Outcome], folder: Path | str) -> None:
    """Write :class:`~utils.exercises.common.Outcome` s (worker side, after the learner's code ran: with
    :data:`_TRUSTED` only)."""
    folder = _TRUSTED["fspath"](folder)
    _make_folder(folder)
    writer = _Writer(folder)
    records = []
    for outcome in outcomes:
        try:
            encoded = writer.encode(outcome.output)
        except Exception as exc:  # a hostile tensor subclass, a full disk: report, do not crash
            encoded = {"t": "other", "type": type(exc).__name__}
        try:
            grads = {str(k): writer.encode(v) for k, v in outcome.gradient_values.items()}
        except Exception:  # as for the output: a gradient that cannot be written is left out
            grads = {}
        records.append({
            "output": encoded,
            "gradient_values": grads,
            "error": list(outcome.error) if outcome.error else None,
            "mutated": list(outcome.mutated),
            "forbidden": outcome.forbidden,
            "gradients": dict(outcome.gradients),
            "backward_error": outcome.backward_error,
        })
    _write_file(folder, "outcomes.json", _json_text(records).encode("ascii"))


# --------------------------------------------------------------------------------------------------
# Reading (trusted side: everything is hostile)
# --------------------------------------------------------------------------------------------------


class _Reader:
    """Reads the files of one value folder through a descriptor, each name at most once, and at most
    :data:`MAX_OUTCOME_BYTES` in all: a small JSON file that names one big ``.npy`` many times costs
    an error, not the grader's memory."""

    def __init__(self, dir_fd: int, max_bytes: int) -> None:
        self.dir_fd = dir_fd
        self.left = max_bytes
        self.seen: set[str] = set()

    def read(self, name: str, limit: int) -> bytes:
        if name in self.seen:
            raise DecodeError(f"{name} is named more than once")
        self.seen.add(name)
        try:
            data = files.read_regular(name, min(limit, self.left), dir_fd=self.dir_fd)
        except files.TooLarge as exc:
            if exc.size <= limit:
                raise DecodeError(f"the files are too large in total (over {MAX_OUTCOME_BYTES // 2**20} MB)") from None
            raise DecodeError(f"{name} is too large") from None
        except files.Refused as exc:
            raise DecodeError(f"{name} {exc}") from None
        self.left -= len(data)
        return data

    def json(self, name: str) -> Any:
        data = self.read(name, MAX_JSON_BYTES)
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise DecodeError(f"{name} is unreadable: {type(exc).__name__}") from None


@contextlib.contextmanager
def _reader(folder: Path | int, max_bytes: int = 0) -> Iterator[_Reader]:
    """A :class:`_Reader` on ``folder`` (a path, whose last part must not be a link, or an open descriptor)."""
    max_bytes = max_bytes or MAX_OUTCOME_BYTES
    if isinstance(folder, int):
        yield _Reader(folder, max_bytes)
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise DecodeError(f"the folder {Path(folder).name} is missing or not a folder ({exc.strerror})") from None
    try:
        yield _Reader(fd, max_bytes)
    finally:
        os.close(fd)


def read_json(folder: Path | int, name: str) -> Any:
    """Decode the JSON file ``name`` of ``folder`` (bounded, read through a descriptor, no links)."""
    with _reader(folder) as reader:
        return reader.json(name)


def _load_tensor(reader: _Reader, enc: dict[str, Any]) -> torch.Tensor:
    name, dtype = enc.get("f"), enc.get("dtype")
    if not isinstance(name, str) or not _NPY_NAME.match(name) or dtype not in DTYPES:
        raise DecodeError("bad tensor entry")
    data = reader.read(name, MAX_NPY_BYTES)
    torch_dtype, np_dtype = DTYPES[dtype]
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(array, np.ndarray) or array.dtype != np_dtype:
            raise DecodeError(f"tensor file {name} has an unexpected dtype")
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, copy=True, order="C")
    except DecodeError:
        raise
    except Exception as exc:  # malformed header, pickled object array, truncated file, MemoryError
        raise DecodeError(f"tensor file {name} is unreadable: {type(exc).__name__}") from None
    if dtype == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def decode(reader: _Reader, enc: Any, depth: int = 0) -> Any:
    if not isinstance(enc, dict) or depth > MAX_DEPTH + 2:
        raise DecodeError("bad value")
    kind, value = enc.get("t"), enc.get("v")
    if kind == "none":
        return None
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**62:
        return value
    if kind == "float" and isinstance(value, str) and len(value) < 40:
        try:
            return float(value)
        except ValueError:
            raise DecodeError("bad float") from None
    if kind == "str" and isinstance(value, str):
        return value[:MAX_STR]
    if kind == "tensor":
        return _load_tensor(reader, enc)
    if kind == "tuple" and isinstance(value, list) and len(value) <= MAX_ITEMS:
        return tuple(decode(reader, v, depth + 1) for v in value)
    if kind == "dict" and isinstance(value, dict) and len(value) <= MAX_ITEMS:
        return {str(k)[:100]: decode(reader, v, depth + 1) for k, v in value.items()}
    if kind == "list" and isinstance(value, list) and len(value) <= 4096:
        return [decode(reader, v, depth + 1) for v in value]
    if kind == "other":
        return opaque(str(enc.get("type", "object")))
    raise DecodeError(f"bad value of kind {str(kind)[:20]!r}")


def load(folder: Path) -> Any:
    """Read a value written by :func:`dump` (trusted inputs; used by the worker)."""
    with _reader(folder, max_bytes=2**40) as reader:
        return decode(reader, reader.json("value.json"))


def load_outcomes(folder: Path | int, case_keys: list[str], max_records: int = 4096) -> list[Outcome]:
    """Read the worker's outcomes as :class:`~utils.exercises.common.Outcome` s, validating every field.

    ``folder`` is a path or an open folder descriptor. At most ``max_records`` records (checked before
    any value is decoded) and :data:`MAX_OUTCOME_BYTES` of files in all, each file named at most once.
    Raises :class:`DecodeError` when the files are malformed.
    """
    with _reader(folder) as reader:
        records = reader.json("outcomes.json")
        if not isinstance(records, list):
            raise DecodeError("outcomes.json is not a list")
        if len(records) > max_records:
            raise DecodeError(f"outcomes.json has {len(records)} records for {max_records} cases")
        try:
            return [_outcome(reader, record, case_keys) for record in records]
        except MemoryError:
            raise DecodeError("the outputs are too large to read") from None


def _outcome(reader: _Reader, record: Any, case_keys: list[str]) -> Outcome:
    if not isinstance(record, dict):
        raise DecodeError("bad outcome")
    error = record.get("error")
    if error is not None:
        if not (isinstance(error, list) and len(error) == 2 and all(isinstance(e, str) for e in error)):
            raise DecodeError("bad error entry")
        error = (error[0][:100], " ".join(error[1].split())[:300])
    mutated = record.get("mutated") or []
    if not isinstance(mutated, list):
        raise DecodeError("bad mutated entry")
    mutated = [m for m in mutated if isinstance(m, str) and m in case_keys]
    forbidden = record.get("forbidden")
    if forbidden is not None and not isinstance(forbidden, str):
        raise DecodeError("bad forbidden entry")
    gradients = record.get("gradients") or {}
    if not isinstance(gradients, dict):
        raise DecodeError("bad gradients entry")
    gradients = {k: v for k, v in gradients.items() if k in case_keys and v in GRADIENT_STATES}
    backward_error = record.get("backward_error")
    if backward_error is not None and not isinstance(backward_error, str):
        raise DecodeError("bad backward_error entry")
    values = record.get("gradient_values") or {}
    if not isinstance(values, dict):
        raise DecodeError("bad gradient_values entry")
    gradient_values = {k: v for k, v in ((k, decode(reader, v)) for k, v in values.items() if k in case_keys)
                       if isinstance(v, torch.Tensor) and v.is_floating_point()}
    return Outcome(output=decode(reader, record.get("output")), error=error, mutated=mutated,
                   forbidden=forbidden[:200] if forbidden else None, gradients=gradients,
                   backward_error=" ".join(backward_error.split())[:300] if backward_error else None,
                   gradient_values=gradient_values)


def safe_name(text: str) -> str:
    """A file-system-safe version of a student or exercise name."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text).strip(".") or "_"
    return cleaned[:100]


__all__ = ["DecodeError", "Opaque", "decode", "dump", "dump_outcomes", "load", "load_outcomes", "opaque",
           "read_json", "safe_name", "write_json"]
