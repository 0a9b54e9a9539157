"""The trained pair's path into ds4rt, on a tiny random pair: a PyTorch target and drafter
(tools/train/model.py, drafter.py) exported by tools/train/gguf_io.py in the shipped dtypes (what
train_target.py / train_drafter.py write), installed by tools/train/ship.py, then run by ds4rt.
ds4rt's DSpark proposals must be PyTorch's on the same context: the drafts, the Markov-corrected
logits and the confidences (docs/MODELS.md, "Checks").

This is the check that separates "ds4rt drafts differently" from "the drafter is weak": the
PyTorch side reads the exported files back (dequantised), so both compute the same function of
the same weights; ds4rt rounds activations to Q8_0 / F16 before its products (docs/QUANTS.md),
about 1 % on the logits here, hence a relative tolerance and drafts compared except at
near-ties (top-2 margin below TIE). Skipped without torch (CI has none).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "train"))
sys.path.insert(0, str(ROOT / "tools"))

import agree  # noqa: E402
import gguf_io  # noqa: E402
import ship  # noqa: E402
from drafter import Drafter  # noqa: E402
from tinymodel import tokenizer as tt  # noqa: E402
from tinymodel import write as tw  # noqa: E402

import ds4rt  # noqa: E402
from model import Shape, Target  # noqa: E402

# the tiny generator's "float" shape (docs/TINY_MODELS.md), every width a multiple of 32 so the
# shipped dtypes (Q8_0 matrices, F16 mixing) apply
SHAPE = Shape(
    L=4, D=64, V=512, H=4, d_h=80, r_rot=16, Rq=64, G=2, Ro=32, E=4, k=2, F=64, n_shared=1,
    n_hash=1, W=16, Hi=4, d_i=64, K_i=8, ratios=(0, 4, 128, 4), markov_rank=32,
)  # fmt: skip
TIE = 0.05
ANCHORS = (4, 15, 16, 30, 41)  # last committed positions (the window is 16 rows)


def _vocab():
    tok = tt.tiny_tokenizer(SHAPE.V)
    vocab = {
        "tokens": tok.tokens,
        "types": tok.types,
        "merges": tok.merges,
        "bos_id": tok.bos_id,
        "eos_id": tok.eos_id,
        "pad_id": tok.pad_id,
    }
    return vocab, tw.noise_token_id(tok)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def shipped_pair(tmp_path_factory):
    """A random pair written as a device run leaves it ($OUT: the target in parts, the
    support file, metrics with sha256), then shipped by ship.py into a data folder."""
    out = tmp_path_factory.mktemp("device_out")
    data = tmp_path_factory.mktemp("data")
    vocab, noise = _vocab()
    tgt = Target(SHAPE)
    tgt.init_weights(seed=0)
    dr = Drafter(SHAPE, tgt, noise)
    dr.init_weights(seed=1)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # heads that matter: random Markov and confidence weights
        for name in ("markov_head.markov_w2.weight", "confidence_head.proj.weight"):
            w = dr.last(name)
            w.copy_(torch.randn(w.shape, generator=g) / w.shape[-1] ** 0.5)
    gguf_io.write_target(out / "target.gguf", SHAPE, tgt.numpy_weights(), vocab, "tiny export")
    gguf_io.write_support(out / "support.gguf", SHAPE, dr.numpy_weights(), noise, "tiny export")
    blob = (out / "target.gguf").read_bytes()
    half = len(blob) // 2
    (out / "target.gguf.part00").write_bytes(blob[:half])
    (out / "target.gguf.part01").write_bytes(blob[half:])
    sums = {n: _sha(out / n) for n in ("target.gguf", "support.gguf")}
    (out / "target.gguf").unlink()
    (out / "metrics.json").write_text(json.dumps({"drafter": {"steps": 0}, "sha256": sums}))
    ship.install([out], data, data / "training.json")
    return data, noise


def test_ship_installs_what_the_device_made(shipped_pair):
    data, _ = shipped_pair
    want = dict(
        reversed(line.split("  ")) for line in (data / "SHA256SUMS").read_text().split("\n") if line
    )
    for name in ("default-target.gguf", "default-support.gguf"):
        assert _sha(data / name) == want[name]
    assert json.loads((data / "training.json").read_text()) == {"drafter": {"steps": 0}}


def test_ship_refuses_a_file_that_changed_on_the_way(shipped_pair, tmp_path):
    data, _ = shipped_pair
    (tmp_path / "support.gguf").write_bytes((data / "default-support.gguf").read_bytes())
    (tmp_path / "metrics.json").write_text(json.dumps({"sha256": {"support.gguf": "0" * 64}}))
    with pytest.raises(SystemExit, match="sha256"):
        ship.install([tmp_path], data, None)


def test_ship_writes_the_acceptance_prior(shipped_pair, tmp_path):
    """--prior: the installed support file carries the measured curve (cut to the block size)
    as ds4rt.dspark.acceptance_prior, and the sums are the installed files'."""
    data, _ = shipped_pair
    out = tmp_path / "out"
    out.mkdir()
    (out / "support.gguf").write_bytes((data / "default-support.gguf").read_bytes())
    (out / "metrics.json").write_text(json.dumps({}))
    new = tmp_path / "data"
    new.mkdir()
    (new / "default-target.gguf").write_bytes((data / "default-target.gguf").read_bytes())
    curve = [0.7, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 0.9, 0.9]
    acc = tmp_path / "acceptance.json"
    acc.write_text(json.dumps({"always_threshold0": {"conditional_acceptance_at": curve}}))
    ship.install([out], new, None, acc)
    meta = ds4rt.gguf.inspect(str(new / "default-support.gguf"))["metadata"]
    block = meta["dspark.block_size"]
    assert meta["ds4rt.dspark.acceptance_prior"] == pytest.approx(curve[:block], abs=1e-7)
    sums = (new / "SHA256SUMS").read_text()
    assert _sha(new / "default-support.gguf") in sums


def _sequence(n, seed=3):
    rng = np.random.default_rng(seed)
    return [0] + [int(t) for t in rng.integers(3, SHAPE.V - 8, n - 1)]


def test_ds4rt_drafts_what_pytorch_drafts(shipped_pair):
    data, _ = shipped_pair
    tpath, spath = str(data / "default-target.gguf"), str(data / "default-support.gguf")
    model = ds4rt.Model(tpath)
    dspark = ds4rt.DSpark(model, spath)
    torch.set_num_threads(1)
    m = agree.torch_target(tpath, dtype=torch.float64)  # ds4rt's official numerics
    dr = agree.torch_drafter(spath, m, dtype=torch.float64)
    assert dr.window == SHAPE.W  # ds4rt's default context window: the target's (DSPARK.md)
    seq = _sequence(max(ANCHORS) + 2)
    res = agree.drafter_check(model, dspark, dr, seq, ANCHORS, TIE)
    errs = np.concatenate([r["rel_err"] for r in res])
    assert all(r["ok"] for r in res), res
    assert np.median(errs) <= 0.03 and errs.max() <= 0.1, errs
    assert max(r["conf_err"] for r in res) <= 0.02, res
    # the drafts are not all the same token (a drafter that ignores its input would pass)
    assert len({t for r in res for t in r["drafts"]}) > 3, res


def test_ship_a_support_only_run(shipped_pair, tmp_path):
    """tools/train/device_drafter.sh returns a support model alone: it is paired with the
    shipped target, and only the drafter's metrics are replaced."""
    data, _ = shipped_pair
    work = tmp_path / "data"
    work.mkdir()
    for name in ("default-target.gguf", "default-support.gguf", "training.json"):
        (work / name).write_bytes((data / name).read_bytes())
    bench = work / "training.json"
    bench.write_text(json.dumps({"target": {"steps": 7}, "drafter": {"steps": 0}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "support.gguf").write_bytes((data / "default-support.gguf").read_bytes())
    sums = {"support.gguf": _sha(out / "support.gguf")}
    (out / "metrics.json").write_text(json.dumps({"drafter": {"steps": 9}, "sha256": sums}))
    ship.install([out], work, bench)
    assert json.loads(bench.read_text()) == {"target": {"steps": 7}, "drafter": {"steps": 9}}
    assert _sha(work / "default-target.gguf") == _sha(data / "default-target.gguf")
