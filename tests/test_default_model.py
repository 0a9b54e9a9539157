"""The embedded default pair: the trained files ship intact, ds4rt runs them as the PyTorch model
that trained them does, and the drafter drafts for the target.

Skipped while ds4rt/data/SHA256SUMS is absent (tools/train/ship.py writes it together with the
trained files); the PyTorch comparison is skipped without torch.

Tolerance of the logits comparison. Both sides use the file's own (dequantised) weights; ds4rt
rounds every activation to Q8_0 (blocks of 32: about 0.4 % relative error per product) or F16
before a product and sums in its own order (docs/QUANTS.md). Over 16 layers that leaves about
1 % relative L2 error in the logits (measured, docs/MODELS.md); a rounding that flips an FP4
indexer code, an FP8 KV code or a top-k choice gives isolated rows of a few percent. Hence: median
row error <= 3 %, every row <= 20 %, and greedy decoding must agree wherever PyTorch's top-2
margin is at least TIE logits.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

import ds4rt
from ds4rt import data

ROOT = Path(__file__).resolve().parents[1]
SUMS = ROOT / "ds4rt" / "data" / "SHA256SUMS"
TIE = 0.1
# held-out prompts (functions of held-out standard-library files, tools/train/corpus.py)
HELDOUT_PROMPTS = (
    "def test_cancel(self):",
    "def test__find_executable(self):",
    "def fibonacci(n):",
)

pytestmark = pytest.mark.skipif(
    not SUMS.exists(), reason="the trained default pair is not shipped yet (no SHA256SUMS)"
)


def test_embedded_files_match_their_checksums():
    want = dict(reversed(line.split("  ")) for line in SUMS.read_text().splitlines() if line)
    for name, path in (
        ("default-target.gguf", data.default_target()),
        ("default-support.gguf", data.default_support()),
    ):
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == want[name], name


def test_the_drafter_drafts_for_the_target():
    m = ds4rt.Model(data.default_target())
    d = ds4rt.DSpark(m, data.default_support())
    s = m.session()
    prompt = m.tokenizer.encode_chat([{"role": "user", "content": "def fibonacci(n):"}])
    out = s.generate(prompt, max_tokens=48, dspark=d, scheduler="always", confidence_threshold=0)
    st = s.spec_stats()
    assert out.ids == m.session().generate(prompt, max_tokens=48).ids
    # a drafter trained on the target's continuations accepts far more than chance (1/V)
    assert st["accepted_draft"] >= st["cycles"], st


@pytest.mark.parametrize("text", HELDOUT_PROMPTS)
def test_ds4rt_matches_pytorch(text):
    pytest.importorskip("torch")
    import torch

    sys.path.insert(0, str(ROOT / "tools" / "train"))
    import agree

    torch.set_num_threads(1)
    model = ds4rt.Model(data.default_target())
    m = agree.torch_target(data.default_target())
    prompt = model.tokenizer.encode_chat([{"role": "user", "content": text}])
    g = agree.greedy_check(model, m, prompt, 64, TIE)
    assert g["ok"], g
    seq = prompt + g["tokens"]
    e = agree.row_errors(model.session().logits(seq), agree.torch_logits(m, seq))
    assert float(sorted(e)[len(e) // 2]) <= 0.03 and e.max() <= 0.2, e
