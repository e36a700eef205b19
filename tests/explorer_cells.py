"""The chapter explorers as the cells a chapter runs: one table for every test that builds them.

The JupyterLab test (tests/browser/test_browser_chapters.py) writes :data:`SETUP` and these cells into
one notebook and runs it in a real kernel; the unit tests (tests/test_explorer_grid.py) build the same
explorers in-process with :func:`build`. Chapter 5's explorer gets a seeded, untrained
``TinyEncoderClassifier`` and ``pronoun_task(60, seed=2)``. Each cell's last line makes the explorer.
"""

from __future__ import annotations

from typing import Any

SETUP = "import torch\ntorch.set_num_threads(1)\ntorch.manual_seed(0)"
"""The Lab notebook's first cell (one thread: the kernel shares two cores with the test)."""

CELLS = {
    "qkv_explorer": 'from utils.widgets.qkv import qkv_explorer\nqkv_explorer("pronoun", d_model=16)',
    "scale_explorer": "from utils.widgets.sdpa import scale_explorer\nscale_explorer()",
    "head_explorer": "from utils.widgets.multihead import head_explorer\nhead_explorer()",
    "positional_explorer": "from utils.widgets.positional import positional_explorer\npositional_explorer()",
    "attention_explorer": (
        "from utils.layers import TinyEncoderClassifier\n"
        "from utils.tasks import NOUNS, VOCAB, pronoun_task\n"
        "from utils.widgets.transformer import attention_explorer\n"
        "torch.manual_seed(0)\n"
        "model = TinyEncoderClassifier(len(VOCAB), 32, 2, 2, 64, len(NOUNS))\n"
        "attention_explorer(model, pronoun_task(60, seed=2))"
    ),
    "window_explorer": "from utils.widgets.at_scale import window_explorer\nwindow_explorer()",
    # chapter 7: a seeded, untrained Llama-style decoder of 3 layers and a byte tokenizer (one token per UTF-8
    # byte, so a Chinese character is merged from three tokens as SmolLM2's are); the chapter's own model is
    # 540 MB, which the Lab test has no need to load
    "heads_explorer": (
        "from types import SimpleNamespace\n"
        "from utils.llm import LlamaConfig, LlamaDecoder\n"
        "from utils.widgets.llm import heads_explorer\n"
        "class Bytes:\n"
        "    def encode(self, text): return SimpleNamespace(ids=list(text.encode('utf-8')))\n"
        "    def decode(self, ids): return bytes(ids).decode('utf-8', errors='replace')\n"
        "torch.manual_seed(0)\n"
        "model = LlamaDecoder(LlamaConfig(vocab_size=256, d_model=32, num_layers=3, num_heads=4, num_kv_heads=2,\n"
        "                                 d_ff=48)).eval()\n"
        "heads_explorer(model, Bytes(), ['the cat. the cat.', '注意注意', 'abc'], groups_of=2)"
    ),
    "sink_cache_explorer": (
        "from utils.widgets.llm import sink_cache_explorer\n"
        "losses = {(None, 0): torch.full((199,), 1.0), (8, 0): torch.full((199,), 3.0),\n"
        "          (8, 4): torch.full((199,), 1.5)}\n"
        "sink_cache_explorer(losses, bytes_per_token=3)"
    ),
}
"""One cell per chapter explorer that no focused Lab test drives, in chapter order."""

CHAPTERS = dict(zip(("ch1", "ch2", "ch3", "ch4", "ch5", "ch6", "ch7"), CELLS))
"""Chapter -> the name of its (first) explorer in :data:`CELLS`."""


def build(name: str) -> Any:
    """The explorer that the cell ``name`` makes, run in a fresh namespace after ``torch.manual_seed(0)``
    (the thread count of the calling process is left alone)."""
    namespace: dict[str, Any] = {}
    exec("import torch\ntorch.manual_seed(0)", namespace)
    *body, last = CELLS[name].splitlines()
    exec("\n".join(body), namespace)
    return eval(last, namespace)
