"""Float64 NumPy reference of DSpark speculative decoding for DeepSeek V4 Flash.

Written from DeepSeek's own reference drafter (`inference/model.py` of
https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash-DSpark) and DeepSpec's verification
(https://github.com/deepseek-ai/DeepSpec), not ds4 where they differ; docs/DSPARK.md is ds4rt's
account of it. "Step N" and "reading N" below are the numbered items of docs/DSPARK_REFERENCE.md
"The algorithm as implemented" and "Readings of the specification"; the file formats are
docs/DSPARK.md "Support file layout" (SFL below). The readings of the specification and every
departure from ds4 are listed in docs/DSPARK_REFERENCE.md.

* `read_support_metadata` / `load_support` read ds4's support GGUF (SFL): the `mtp.N.` stages,
  metadata under the three key spellings, the stage count from tensor names.
* `Drafter` runs the stages as a DeepSeek V4 block stack (a `dsv4_ref.Model` over the stage
  weights, so HC pre/post/head, RoPE, FP8, sinks, grouped output and MoE are the target
  reference's own primitives), with explicit per-stage KV rings (`StageRing`).
* `verify_greedy` / `verify_sampled` and `SpeculativeSession` / `speculative_generate` are the
  decoding loop (steps 6 and 7); `plain_generate` is the non-speculative loop it must match.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field

import numpy as np

from .dsv4_ref import (
    HParams,
    Model,
    RopeParams,
    State,
    attention_with_sinks,
    expected_shapes,
    fp8_roundtrip,
    hc_post,
    rms_norm,
    rope,
    sigmoid,
    softmax,
)

SUPPORT_ARCH = "deepseek4-dspark"
DEFAULT_WINDOW = 128  # context rows per stage (step 1, reading 1)
MAX_TARGET_LAYERS = 8  # ds4 DS4_DSPARK_MAX_TARGET_LAYERS (SFL)
MAX_STAGES = 8  # ds4 DS4_DSPARK_MAX_STAGES (SFL)
MAX_BLOCK_SIZE = 16  # ds4 DS4_DSPARK_MAX_BLOCK_SIZE (SFL)
RESIDUAL_MASS_FLOOR = 1e-8  # step 6: below this the rejection residual falls back to p
METADATA_KEYS = ("block_size", "markov_rank", "noise_token_id", "target_layer_ids")
# SFL: for each key the first hit among these spellings wins
KEY_SPELLINGS = ("deepseek4.dspark.{}", "deepseek4.dspark_{}", "dspark.{}")

# ds4 support names of the final-stage-only and stage-0-only tensors (SFL)
STAGE0_ONLY = ("main_proj.weight", "main_norm.weight")
LAST_ONLY = (
    "norm.weight",
    "hc_head_base.weight",
    "hc_head_fn.weight",
    "hc_head_scale.weight",
    "markov_head.markov_w1.weight",
    "markov_head.markov_w2.weight",
    "confidence_head.proj.weight",
)


# ---------------------------------------------------------------------------------------------
# Support file: metadata, stage count and tensor table (SFL)
# ---------------------------------------------------------------------------------------------
class SupportError(ValueError):
    """A support file that ds4rt must refuse at load time (SFL: every problem is fatal)."""


@dataclass(frozen=True)
class DSparkParams:
    block_size: int  # B
    markov_rank: int  # R
    noise_token_id: int
    target_layer_ids: tuple[int, ...]  # 0-based outputs of these target layers (reading 3)
    n_stages: int  # S, from tensor names
    keys: dict = field(default_factory=dict, compare=False)  # metadata key -> spelling used


def _lookup(fields: dict, k: str):
    for spelling in KEY_SPELLINGS:
        key = spelling.format(k)
        if key in fields:
            return key, fields[key]
    return None, None


def _as_int(key: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise SupportError(f"{key}: expected an integer, got {v!r}")
    return int(v)


def read_support_metadata(fields: dict, n_stages: int, n_layer: int, n_vocab: int) -> DSparkParams:
    """The four DSpark keys (three spellings each, SFL), validated against the target.

    `fields` maps GGUF keys to Python values (GGUF arrays as lists). Every message names the key
    that was read, in the spelling the file used."""
    vals, used = {}, {}
    for k in METADATA_KEYS:
        key, v = _lookup(fields, k)
        if key is None:
            names = ", ".join(s.format(k) for s in KEY_SPELLINGS)
            raise SupportError(f"DSpark metadata {k!r} missing (looked for {names})")
        used[k] = key
        if k == "target_layer_ids":
            v = v if isinstance(v, (list, tuple)) else [v]
            vals[k] = tuple(_as_int(key, x) for x in v)
        else:
            vals[k] = _as_int(key, v)
    dp = DSparkParams(n_stages=n_stages, keys=used, **vals)
    check_params(dp, n_layer, n_vocab)
    return dp


def check_params(dp: DSparkParams, n_layer: int, n_vocab: int) -> None:
    """SFL checks of DSpark parameters against the target; messages name the metadata key in
    the spelling that was read (dp.keys), or the bare `dspark.` spelling."""

    def key(k):
        return dp.keys.get(k, KEY_SPELLINGS[-1].format(k))

    B, R, noise, ids = dp.block_size, dp.markov_rank, dp.noise_token_id, list(dp.target_layer_ids)
    if not 1 <= B <= MAX_BLOCK_SIZE:
        raise SupportError(f"{key('block_size')} = {B}: must be in 1..{MAX_BLOCK_SIZE}")
    if R < 1:
        raise SupportError(f"{key('markov_rank')} = {R}: must be >= 1")
    if not 0 <= noise < n_vocab:
        raise SupportError(
            f"{key('noise_token_id')} = {noise}: outside the target vocabulary (V = {n_vocab})"
        )
    k = key("target_layer_ids")
    if not ids:
        raise SupportError(f"{k} is empty")
    if len(ids) > MAX_TARGET_LAYERS:
        raise SupportError(f"{k} has {len(ids)} entries (at most {MAX_TARGET_LAYERS})")
    for v in ids:
        if v < 0:
            raise SupportError(f"{k} = {ids}: negative layer id {v}")
        if v >= n_layer:
            raise SupportError(
                f"{k} = {ids}: layer {v} out of range (the target has {n_layer} layers)"
            )
    if any(b <= a for a, b in zip(ids, ids[1:], strict=False)):
        raise SupportError(f"{k} = {ids}: not strictly increasing")
    if not 1 <= dp.n_stages <= MAX_STAGES:
        raise SupportError(f"{dp.n_stages} stages: must be in 1..{MAX_STAGES}")


_STAGE_NAME = re.compile(r"^mtp\.(\d+)\.(.+)$")


def stage_count_from_names(names) -> int:
    """Highest `mtp.N.` index + 1 (SFL); refused above MAX_STAGES or with none."""
    stages = [int(m.group(1)) for n in names if (m := _STAGE_NAME.match(n))]
    if not stages:
        raise SupportError("no mtp.N. tensors: not a DSpark support file")
    S = max(stages) + 1
    if S > MAX_STAGES:
        raise SupportError(f"{S} stages (tensor mtp.{S - 1}.*): at most {MAX_STAGES}")
    return S


def stage_hparams(hp: HParams, n_stages: int) -> HParams:
    """The stages as a DeepSeek V4 stack: every dimension from the target (reading 6), no
    compressor, indexer or hash routing (step 3), and the target's SwiGLU clamps (the official code
    has one global limit; the value of the target's last layer is used)."""
    return hp.replace(
        n_layer=n_stages,
        compress_ratios=(0,) * n_stages,
        n_hash=0,
        swiglu_clamp=(hp.swiglu_clamp[-1],) * n_stages,
        swiglu_clamp_shexp=(hp.swiglu_clamp_shexp[-1],) * n_stages,
        defaulted=(),
    )


def support_shapes(hp: HParams, dp: DSparkParams) -> dict[str, tuple[int, ...]]:
    """NumPy shapes (reversed ne) of every tensor of a support file with S stages (SFL)."""
    S, D, R, N = dp.n_stages, hp.n_embd, dp.markov_rank, hp.hc_count
    out = {}
    for name, shape in expected_shapes(stage_hparams(hp, S)).items():
        if name.startswith("blk."):
            out["mtp." + name[4:]] = shape
    last = f"mtp.{S - 1}."
    out["mtp.0.main_proj.weight"] = (D, len(dp.target_layer_ids) * D)
    out["mtp.0.main_norm.weight"] = (D,)
    out[last + "norm.weight"] = (D,)
    out[last + "hc_head_base.weight"] = (N,)
    out[last + "hc_head_fn.weight"] = (N, hp.hc_dim)
    out[last + "hc_head_scale.weight"] = (1,)
    out[last + "markov_head.markov_w1.weight"] = (hp.n_vocab, R)
    out[last + "markov_head.markov_w2.weight"] = (hp.n_vocab, R)
    out[last + "confidence_head.proj.weight"] = (1, D + R)
    return out


def check_support_weights(hp: HParams, dp: DSparkParams, w: dict) -> dict[str, np.ndarray]:
    """Every tensor of SFL present with its shape, nothing else under `mtp.`; float64 copies."""
    exp = support_shapes(hp, dp)
    problems = []
    out = {}
    for name, shape in exp.items():
        if name not in w:
            problems.append(f"missing {name}")
            continue
        a = np.asarray(w[name], dtype=np.float64)
        if name.endswith("attn_output_a.weight") and a.shape == (
            hp.o_groups,
            hp.o_lora_rank,
            hp.group_dim,
        ):
            a = a.reshape(shape)  # the 3-D form of llama.cpp's loader, same bytes
        if a.shape != shape:
            problems.append(f"{name}: shape {a.shape}, expected {shape}")
            continue
        out[name] = a
    extra = sorted(n for n in w if n.startswith("mtp.") and n not in exp)
    problems += [f"unexpected tensor {n}" for n in extra]
    if problems:
        raise SupportError("support tensors do not match the target: " + "; ".join(problems))
    return out


def load_support(path, hp: HParams):
    """(DSparkParams, float64 weights by ds4 name) of a support GGUF, validated against `hp`."""
    from gguf import GGUFReader

    from .dsv4_ref import load_gguf_tensors

    reader = GGUFReader(path)
    arch = reader.fields.get("general.architecture")
    if arch is not None and arch.contents() != SUPPORT_ARCH:
        raise SupportError(f"general.architecture is {arch.contents()!r}, not {SUPPORT_ARCH!r}")
    fields = {k: f.contents() for k, f in reader.fields.items() if "dspark" in k}
    names = [t.name for t in reader.tensors]
    dp = read_support_metadata(fields, stage_count_from_names(names), hp.n_layer, hp.n_vocab)
    return dp, check_support_weights(hp, dp, load_gguf_tensors(reader))


# ---------------------------------------------------------------------------------------------
# Per-stage KV ring (step 1)
# ---------------------------------------------------------------------------------------------
class RingError(RuntimeError):
    pass


class StageRing:
    """Context KV rows of one stage: slot `pos mod capacity` holds position `pos`.

    Rows of positions [start, end) are stored (end - start <= capacity); positions before
    `base` never existed (the ring was reset at `base`). A proposal at p sees the window
    positions max(base, p + 1 - window) .. p and needs end == p + 1. `capacity - window` is the
    number of rows that may be appended past a prefix and cropped away again (rollback)."""

    def __init__(self, window: int, capacity: int, width: int, base: int = 0):
        if window < 1 or capacity < window:
            raise RingError(f"ring window {window}, capacity {capacity}: need 1 <= window <= cap")
        self.window, self.capacity = window, capacity
        self.rows = np.zeros((capacity, width))
        self.reset(base)

    def reset(self, base: int = 0) -> None:
        self.base = self.start = self.end = base

    def copy(self) -> StageRing:
        new = copy.copy(self)
        new.rows = self.rows.copy()
        return new

    def slot(self, pos: int) -> int:
        return pos % self.capacity

    def append(self, pos: int, row) -> None:
        if pos != self.end:
            raise RingError(f"append of position {pos}: the ring ends at {self.end}")
        self.rows[self.slot(pos)] = row
        self.end += 1
        self.start = max(self.start, self.end - self.capacity)

    def window_positions(self) -> range:
        first = max(self.base, self.end - self.window)
        if first < self.start:
            raise RingError(f"window needs position {first}; oldest stored is {self.start}")
        return range(first, self.end)

    def window_rows(self) -> np.ndarray:
        return self.rows[[self.slot(q) for q in self.window_positions()]].copy()

    def crop_to(self, end: int) -> None:
        """Keep positions < end (rollback of rows appended past the committed prefix)."""
        if end > self.end:
            raise RingError(f"crop to {end}: the ring only reaches {self.end}")
        need = max(self.base, end - self.window)
        if need < self.start:
            raise RingError(
                f"crop to {end}: position {need} was overwritten (oldest stored {self.start}); "
                f"capacity {self.capacity} allows {self.capacity - self.window} rows past a prefix"
            )
        self.end = end
        self.start = min(self.start, end)


@dataclass
class DrafterState:
    rings: list  # one StageRing per stage

    @property
    def end(self) -> int:
        return self.rings[0].end

    def crop_to(self, end: int) -> None:
        for r in self.rings:
            r.crop_to(end)

    def reset(self, base: int = 0) -> None:
        for r in self.rings:
            r.reset(base)

    def copy(self) -> DrafterState:
        return DrafterState([r.copy() for r in self.rings])


# ---------------------------------------------------------------------------------------------
# Randomness: every random decision of drafting and verification goes through one object
# ---------------------------------------------------------------------------------------------
class Random:
    """bernoulli(p) is `u < p`, choice(probs) the inverse CDF at u, with u uniform in [0, 1)
    from NumPy's PCG64 (np.random.default_rng(seed)). Tests substitute a scripted object."""

    def __init__(self, seed=0):
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def uniform(self) -> float:
        return float(self.rng.random())

    def bernoulli(self, p: float) -> bool:
        return self.uniform() < p

    def choice(self, probs) -> int:
        c = np.cumsum(probs)
        i = int(np.searchsorted(c, self.uniform() * c[-1], side="right"))
        i = min(i, len(c) - 1)
        while probs[i] <= 0:  # never return a zero-probability index (rounding at the edges)
            i -= 1
        return i


def as_random(rand) -> Random:
    if rand is None or isinstance(rand, (int, np.integer, np.random.Generator)):
        return Random(0 if rand is None else rand)
    return rand


def probs_at(logits, temperature: float) -> np.ndarray:
    """softmax(logits / T) (T > 0)."""
    return softmax(np.asarray(logits, dtype=np.float64) / temperature)


def pick_token(logits, temperature: float, rand) -> int:
    """argmax (smallest id on ties) at T <= 0, else a sample of softmax(logits / T)."""
    if temperature <= 0:
        return int(np.argmax(logits))
    return rand.choice(probs_at(logits, temperature))


# ---------------------------------------------------------------------------------------------
# The drafter (steps 1 to 5)
# ---------------------------------------------------------------------------------------------
@dataclass
class Proposal:
    """One drafted block. Rows are block slots i = 0..B-1 (slot i at position p+1+i predicts
    the token at p+2+i). `drafts` is the confident prefix actually proposed."""

    anchor: int
    p: int  # last committed position; the anchor sits at p + 1
    ids: list  # block input ids [anchor, noise * (B-1)]
    positions: np.ndarray  # p+1 .. p+B
    h: np.ndarray  # [B, D] hc_head output of the last stage, pre-norm (steps 4 and 5)
    hn: np.ndarray  # [B, D] RMSNorm(h, norm of the last stage)
    base_logits: np.ndarray  # [B, V] U_i = output · hn_i
    prev: list  # Markov predecessors prev_i (prev_0 = anchor), for every evaluated slot
    corrected: np.ndarray  # [n, V] U_i + W2 · W1[prev_i] of the drafted slots
    conf_logits: np.ndarray  # raw confidence logits of every evaluated slot
    confidence: np.ndarray  # σ(conf_logits)
    drafts: list  # d_1 .. d_n
    cut: int | None  # slot whose confidence fell below the threshold, or None
    stages: list  # per-stage intermediates (stage_forward traces)

    @property
    def n(self) -> int:
        return len(self.drafts)


class Drafter:
    """DeepSeek V4 Flash DSpark drafter over the target reference model's embeddings and head.

    `window` is the number of context rows per stage (default 128, reading 1; the official code
    sizes it with the same `window_size` as the target's sliding window, also 128 for Flash).
    `simulate_quant` (default: the target's) applies the FP8 round trip to the non-RoPE dims of
    every context and block KV row (reading 5, official numerics); off = llama.cpp's numerics."""

    def __init__(
        self,
        target: Model,
        dp: DSparkParams,
        weights: dict,
        *,
        window: int = DEFAULT_WINDOW,
        simulate_quant: bool | None = None,
    ):
        hp = target.hp
        check_params(dp, hp.n_layer, hp.n_vocab)
        self.target, self.hp, self.dp = target, hp, dp
        self.window = int(window)
        if self.window < 1:
            raise ValueError("window must be >= 1")
        self.simulate_quant = target.simulate_quant if simulate_quant is None else simulate_quant
        w = check_support_weights(hp, dp, weights)
        self.w = w
        S = dp.n_stages
        last = f"mtp.{S - 1}."
        sw = {}
        for name, a in w.items():
            m = _STAGE_NAME.match(name)
            suffix = m.group(2)
            if suffix not in STAGE0_ONLY + LAST_ONLY:
                sw[f"blk.{m.group(1)}.{suffix}"] = a
        sw["token_embd.weight"] = target.w["token_embd.weight"]
        sw["output.weight"] = target.w["output.weight"]
        sw["output_norm.weight"] = w[last + "norm.weight"]
        for k in ("fn", "scale", "base"):
            sw[f"output_hc_{k}.weight"] = w[last + f"hc_head_{k}.weight"]
        # the stage stack: blk.s = mtp.s, output head = the last stage's hc_head + norm + the
        # target's output (the llama.cpp dflash layout, docs/DSPARK_REFERENCE.md "The converter")
        self.stages = Model(stage_hparams(hp, S), sw, simulate_quant=self.simulate_quant)
        self.rope = RopeParams(hp.n_rot, hp.rope_base)  # base rope.freq_base, no YaRN (reading 5)
        self.main_proj = w["mtp.0.main_proj.weight"]
        self.main_norm = w["mtp.0.main_norm.weight"]
        self.markov_w1 = w[last + "markov_head.markov_w1.weight"]  # [V, R]
        self.markov_w2 = w[last + "markov_head.markov_w2.weight"]  # [V, R]
        self.conf_proj = w[last + "confidence_head.proj.weight"][0]  # [D + R]

    @classmethod
    def from_gguf(cls, path, target: Model, **kw) -> Drafter:
        dp, w = load_support(path, target.hp)
        return cls(target, dp, w, **kw)

    @property
    def block_size(self) -> int:
        return self.dp.block_size

    @property
    def capture_layers(self) -> tuple[int, ...]:
        return self.dp.target_layer_ids

    def new_state(self, base: int = 0, capacity: int | None = None) -> DrafterState:
        """Empty rings whose next position is `base`. Default capacity: window + B + 1, room for
        the context rows of a whole verify pass appended and cropped back (reading 2)."""
        cap = self.window + self.block_size + 1 if capacity is None else capacity
        return DrafterState(
            [StageRing(self.window, cap, self.hp.head_dim, base) for _ in range(self.dp.n_stages)]
        )

    # -- context rows (readings 3 to 5) --
    def fuse(self, capture: dict) -> np.ndarray:
        """main_x = RMSNorm_w(main_proj · concat(captures in ascending layer order), main_norm)."""
        h = np.concatenate(
            [np.asarray(capture[il], dtype=np.float64) for il in self.capture_layers]
        )
        return rms_norm(self.main_proj @ h, self.main_norm, self.hp.rms_eps)

    def kv_row(self, s: int, x, pos: int) -> np.ndarray:
        """kv_norm_s(wkv_s · x), RoPE on the last r_rot dims at pos, FP8 on the rest."""
        hp = self.hp
        lw = self.stages.lw
        kv = rms_norm(lw(s, "attn_kv.weight") @ x, lw(s, "attn_kv_a_norm.weight"), hp.rms_eps)
        kv = rope(kv, pos, self.rope)
        if self.simulate_quant:
            kv[: hp.d_nope] = fp8_roundtrip(kv[: hp.d_nope])
        return kv

    def context_rows(self, main_x, pos: int) -> list[np.ndarray]:
        """The context KV row of position pos for every stage (no HC, no attn_norm, reading 5)."""
        return [self.kv_row(s, main_x, pos) for s in range(self.dp.n_stages)]

    def commit(self, state: DrafterState, pos: int, capture: dict) -> np.ndarray:
        """Append the context rows of committed position pos (from the target's captures at pos)
        to every stage ring; returns main_x."""
        main_x = self.fuse(capture)
        for ring, row in zip(state.rings, self.context_rows(main_x, pos), strict=True):
            ring.append(pos, row)
        return main_x

    # -- one stage over the block (step 3 as the reference runs it) --
    def stage_forward(self, s: int, X, ids, positions, ctx_rows):
        """Stage s on the block's HC state X [B, N, D] given the visible context rows
        [n_ctx, d_h]; returns (X_out, trace). Every block row attends, non-causally, to all
        context rows and all B block rows, with sinks."""
        hp, st = self.hp, self.stages
        lw = st.lw
        eps = hp.rms_eps
        B = len(ids)
        t = {"hc_in": X, "ctx_rows": np.asarray(ctx_rows), "positions": np.asarray(positions)}
        att = [st.hc_pre_layer(s, X[i], "attn") for i in range(B)]
        xn = np.array([rms_norm(a[0], lw(s, "attn_norm.weight"), eps) for a in att])
        q = []
        for i in range(B):
            qr = rms_norm(lw(s, "attn_q_a.weight") @ xn[i], lw(s, "attn_q_a_norm.weight"), eps)
            qi = (lw(s, "attn_q_b.weight") @ qr).reshape(hp.n_head, hp.head_dim)
            q.append(rope(rms_norm(qi, None, eps), int(positions[i]), self.rope))
        kv = np.array([self.kv_row(s, xn[i], int(positions[i])) for i in range(B)])
        keys = np.concatenate([np.asarray(ctx_rows).reshape(-1, hp.head_dim), kv])
        scale = 1.0 / math.sqrt(hp.head_dim)
        wa = lw(s, "attn_output_a.weight").reshape(hp.o_groups, hp.o_lora_rank, hp.group_dim)
        o_all, a_all, X1 = [], [], []
        for i in range(B):
            o = attention_with_sinks(q[i], keys, lw(s, "attn_sinks.weight"), scale)
            o = rope(o, int(positions[i]), self.rope, inverse=True)
            low = np.einsum("grd,gd->gr", wa, o.reshape(hp.o_groups, hp.group_dim)).reshape(-1)
            a = lw(s, "attn_output_b.weight") @ low
            o_all.append(o)
            a_all.append(a)
            X1.append(hc_post(a, X[i], att[i][2], att[i][3]))
        X1 = np.array(X1)
        X2, ffn = [], []
        for i in range(B):
            x, pre, post, comb = st.hc_pre_layer(s, X1[i], "ffn")
            fxn = rms_norm(x, lw(s, "ffn_norm.weight"), eps)
            tr = {}
            f = st.moe_sublayer(s, fxn, ids[i], tr)  # stage_hparams: n_hash = 0, never hash
            X2.append(hc_post(f, X1[i], post, comb))
            ffn.append((x, fxn, tr))
        X2 = np.array(X2)
        t.update(
            attn_x=np.array([a[0] for a in att]),
            attn_xn=xn,
            q=np.array(q),
            block_kv=kv,
            attn_o=np.array(o_all),
            attn_out=np.array(a_all),
            hc_after_attn=X1,
            ffn_x=np.array([f[0] for f in ffn]),
            ffn_xn=np.array([f[1] for f in ffn]),
            experts=np.array([f[2]["experts"] for f in ffn]),
            expert_weights=np.array([f[2]["expert_weights"] for f in ffn]),
            ffn_out=np.array([f[2]["ffn_out"] for f in ffn]),
            hc_out=X2,
        )
        return X2, t

    def block_forward(
        self, anchor: int, p: int, state: DrafterState, block_size: int | None = None
    ):
        """Stages 0..S-1 over [anchor, noise * (B-1)] at positions p+1..p+B, then the final HC
        head: returns (ids, positions, h, hn, U, stage traces). The rings must end at p."""
        hp = self.hp
        B = self.block_size if block_size is None else int(block_size)
        if not 1 <= B <= self.block_size:
            raise ValueError(f"block size {B}: the trained block is {self.block_size}")
        if not 0 <= int(anchor) < hp.n_vocab:
            raise ValueError(f"anchor {anchor} outside the vocabulary")
        for s, ring in enumerate(state.rings):
            if ring.end != p + 1:
                raise RingError(
                    f"stage {s}: context ends at position {ring.end - 1}, proposal needs it to "
                    f"end at p = {p} (the row of p must be present, nothing after it)"
                )
        ids = [int(anchor)] + [self.dp.noise_token_id] * (B - 1)
        positions = p + 1 + np.arange(B)
        X = np.array([self.target.embed(t) for t in ids])  # target embeddings, N copies
        traces = []
        for s, ring in enumerate(state.rings):
            X, t = self.stage_forward(s, X, ids, positions, ring.window_rows())
            t["ctx_positions"] = np.array(ring.window_positions())
            traces.append(t)
        h, hn, U = [], [], []
        for i in range(B):
            tr = {}
            U.append(self.stages.output_head(X[i], tr))
            h.append(tr["head_y"])
            hn.append(tr["head_yn"])
        return ids, positions, np.array(h), np.array(hn), np.array(U), traces

    # -- heads (step 5 as the reference runs them) --
    def markov_bias(self, prev: int) -> np.ndarray:
        return self.markov_w2 @ self.markov_w1[int(prev)]

    def confidence_logit(self, h, prev: int) -> float:
        return float(self.conf_proj @ np.concatenate([h, self.markov_w1[int(prev)]]))

    def heads(
        self,
        h,
        U,
        anchor: int,
        temperature: float,
        threshold: float,
        rand,
        n_max: int | None = None,
    ):
        """Markov chain left to right from prev_0 = anchor with the confidence cut.

        For slot i: c_i = σ(proj · [h_i ; W1[prev_i]]); if threshold > 0 and c_i < threshold the
        draft ends before slot i; else logits_i = U_i + W2 · W1[prev_i] and d_i = argmax
        (T <= 0) or a sample of softmax(logits_i / T), which becomes prev_{i+1}. At most n_max
        slots are drafted. Returns (prev, corrected, conf_logits, drafts, cut)."""
        B = len(U) if n_max is None else min(len(U), max(0, int(n_max)))
        prev_i = int(anchor)
        prev, corrected, conf, drafts = [], [], [], []
        cut = None
        for i in range(B):
            prev.append(prev_i)
            c = self.confidence_logit(h[i], prev_i)
            conf.append(c)
            if threshold > 0 and sigmoid(c) < threshold:
                cut = i
                break
            logits = U[i] + self.markov_bias(prev_i)
            corrected.append(logits)
            prev_i = pick_token(logits, temperature, rand)
            drafts.append(prev_i)
        V = len(U[0])
        corrected = np.array(corrected) if corrected else np.zeros((0, V))
        return prev, corrected, np.array(conf), drafts, cut

    def propose(
        self,
        anchor: int,
        p: int,
        temperature: float = 0.0,
        threshold: float = 0.0,
        rng=None,
        *,
        state: DrafterState,
        n_max: int | None = None,
        block_size: int | None = None,
    ) -> Proposal:
        """Draft up to B tokens after `anchor` (the token at p+1, not yet run by the target)."""
        rand = as_random(rng)
        ids, pos, h, hn, U, traces = self.block_forward(anchor, p, state, block_size)
        prev, corr, conf, drafts, cut = self.heads(
            h, U, anchor, temperature, threshold, rand, n_max
        )
        return Proposal(
            anchor=int(anchor),
            p=int(p),
            ids=ids,
            positions=pos,
            h=h,
            hn=hn,
            base_logits=U,
            prev=prev,
            corrected=corr,
            conf_logits=conf,
            confidence=sigmoid(conf),
            drafts=drafts,
            cut=cut,
            stages=traces,
        )


# ---------------------------------------------------------------------------------------------
# Verification (step 6)
# ---------------------------------------------------------------------------------------------
def verify_greedy(drafts, target_logits) -> tuple[int, int]:
    """Longest prefix with d_k == argmax(row k-1), then the argmax after it (the bonus).
    target_logits row j = the target's logits at the verify row of input j ([anchor, d_1..])."""
    n = 0
    while n < len(drafts) and int(drafts[n]) == int(np.argmax(target_logits[n])):
        n += 1
    return n, int(np.argmax(target_logits[n]))


def verify_sampled(drafts, q_rows, p_rows, rand) -> tuple[int, int]:
    """Speculative sampling (step 6): accept d_k with probability min(1, p_k(d_k)/q_k(d_k)), left to
    right; at the first rejection sample norm(max(0, p_k - q_k)) (p_k when its mass is <= 1e-8);
    after a full accept sample the bonus from p_n. q_rows[k] is the distribution d_k was drawn
    from, p_rows[k] the target's at the row of input k. Rows are read lazily, in order."""
    for k, x in enumerate(drafts):
        p, q = p_rows[k], q_rows[k]
        if q[x] <= 0:
            raise ValueError(f"draft {k} = {x} has zero draft probability")
        if rand.bernoulli(min(1.0, p[x] / q[x])):
            continue
        r = np.maximum(p - q, 0.0)
        mass = r.sum()
        r = p if mass <= RESIDUAL_MASS_FLOOR else r / mass
        return k, rand.choice(r)
    return len(drafts), rand.choice(p_rows[len(drafts)])


# ---------------------------------------------------------------------------------------------
# Target rollback (step 7): per-position checkpoints taken during the verify pass
# ---------------------------------------------------------------------------------------------
@dataclass
class TargetCheckpoint:
    """What the target state needs to return to a position: list lengths and compressor frontiers
    (raw/compressed rows past the prefix are dropped by truncation, docs/MODEL.md "Rollback")."""

    n_tokens: int
    lengths: list
    frontiers: list

    @classmethod
    def take(cls, st: State) -> TargetCheckpoint:
        lengths = [(len(ls.raw), len(ls.comp), len(ls.index_comp)) for ls in st.layers]
        frontiers = [
            tuple(
                None if cs is None else (cs.kv.copy(), cs.score.copy())
                for cs in (ls.comp_state, ls.index_state)
            )
            for ls in st.layers
        ]
        return cls(st.n_tokens, lengths, frontiers)

    def restore(self, st: State) -> None:
        for ls, (nr, nc, ni), fr in zip(st.layers, self.lengths, self.frontiers, strict=True):
            del ls.raw[nr:], ls.comp[nc:], ls.index_comp[ni:]
            for cs, saved in zip((ls.comp_state, ls.index_state), fr, strict=True):
                if cs is not None:
                    cs.kv[...], cs.score[...] = saved
        st.n_tokens = self.n_tokens


# ---------------------------------------------------------------------------------------------
# Decoding loops
# ---------------------------------------------------------------------------------------------
@dataclass
class Cycle:
    """One speculative cycle: anchor at p+1, drafts verified at p+1..p+n+1."""

    p: int
    anchor: int
    drafts: list
    confidence: np.ndarray
    n_accepted: int
    next_token: int  # the bonus / residual sample: the next anchor
    emitted: list


class SpeculativeSession:
    """Target + drafter state of one sequence, in the reference alignment (step 2).

    After `prefill`, the target has run positions 0..p, every stage ring holds the context rows
    of 0..p, and `anchor` is the token at p+1 (sampled, not yet run by the target). `cycle`
    drafts after the anchor, verifies [anchor, d_1..d_n] at p+1..p+n+1 in one pass, commits the
    accepted prefix (target rolled back past it, context rows of exactly the committed positions
    appended to the rings) and sets the next anchor.

    ring_mode "commit" appends context rows only for committed positions; "speculative" appends
    the rows of every verify row and crops the rings back (the same result, through rollback)."""

    def __init__(
        self,
        target: Model,
        drafter: Drafter,
        *,
        temperature: float = 0.0,
        threshold: float = 0.0,
        rand=None,
        ring_mode: str = "commit",
        stop_ids=(),
    ):
        if ring_mode not in ("commit", "speculative"):
            raise ValueError(f"ring_mode {ring_mode!r}")
        self.target, self.drafter = target, drafter
        self.temperature, self.threshold = float(temperature), float(threshold)
        self.rand = as_random(rand)
        self.ring_mode = ring_mode
        self.stop_ids = frozenset(int(t) for t in stop_ids)
        self.state = target.new_state()
        self.dstate = drafter.new_state()
        self.p = -1
        self.anchor = None
        self.logits = None  # the target's logits at p (the anchor's distribution)
        self.cycles: list[Cycle] = []

    def copy(self, rand=None) -> SpeculativeSession:
        """An independent copy (same states), optionally with another random source."""
        new = copy.copy(self)
        new.state, new.dstate = self.state.copy(), self.dstate.copy()
        new.cycles = list(self.cycles)
        new.rand = copy.deepcopy(self.rand) if rand is None else as_random(rand)
        return new

    def _forward(self, token: int):
        logits, info = self.target.forward_token(
            token, state=self.state, capture_layers=self.drafter.capture_layers
        )
        return logits, info["capture"]

    def prefill(self, prompt) -> int:
        """Run the prompt, fill the rings, sample the first anchor (returned)."""
        if not prompt:
            raise ValueError("empty prompt")
        for pos, t in enumerate(prompt):
            logits, cap = self._forward(int(t))
            self.drafter.commit(self.dstate, pos, cap)
        self.p = len(prompt) - 1
        self.logits = logits
        self.anchor = pick_token(logits, self.temperature, self.rand)
        return self.anchor

    def generate(self, max_tokens: int) -> list[int]:
        """The pending anchor, then cycles until max_tokens tokens or a stop id."""
        out = [self.anchor]
        while len(out) < max_tokens and out[-1] not in self.stop_ids:
            out += self.cycle(max_tokens - len(out))
        return out[:max_tokens]

    def cycle(self, room: int) -> list[int]:
        """One draft/verify cycle emitting at most `room` tokens (room >= 1)."""
        T, rand, p, a = self.temperature, self.rand, self.p, self.anchor
        prop = self.drafter.propose(
            a, p, T, self.threshold, rand, state=self.dstate, n_max=room - 1
        )
        drafts = prop.drafts
        rows, caps, checkpoints = [], [], []
        for t in [a] + drafts:  # one verify pass over p+1 .. p+n+1
            logits, cap = self._forward(t)
            rows.append(logits)
            caps.append(cap)
            checkpoints.append(TargetCheckpoint.take(self.state))
        if T <= 0:
            n_acc, nxt = verify_greedy(drafts, rows)
        else:
            q_rows = [probs_at(z, T) for z in prop.corrected]
            p_rows = [probs_at(z, T) for z in rows]
            n_acc, nxt = verify_sampled(drafts, q_rows, p_rows, rand)
        accepted = drafts[:n_acc]
        for k, t in enumerate(accepted):  # a stop token inside the accepted prefix ends it
            if t in self.stop_ids:
                accepted, n_acc, nxt = accepted[:k], k, t
                break
        # commit [anchor, accepted] at p+1 .. p+1+n_acc
        if self.ring_mode == "speculative":
            for j, cap in enumerate(caps):
                self.drafter.commit(self.dstate, p + 1 + j, cap)
            self.dstate.crop_to(p + 2 + n_acc)
        else:
            for j in range(n_acc + 1):
                self.drafter.commit(self.dstate, p + 1 + j, caps[j])
        checkpoints[n_acc].restore(self.state)
        emitted = accepted + [nxt]
        self.cycles.append(Cycle(p, a, drafts, prop.confidence, n_acc, nxt, emitted))
        self.p = p + 1 + n_acc
        self.logits = rows[n_acc]
        self.anchor = nxt
        return emitted


def speculative_generate(
    target_model: Model,
    drafter: Drafter,
    prompt,
    max_tokens: int,
    temperature: float = 0.0,
    threshold: float = 0.0,
    seed=0,
    *,
    ring_mode: str = "commit",
    stop_ids=(),
    return_session: bool = False,
):
    """Generate max_tokens tokens after `prompt` with DSpark speculative decoding (greedy
    verification at T <= 0, rejection sampling at T > 0). A stop id ends generation after it is
    emitted. Returns the tokens (and the session with its per-cycle records if asked)."""
    s = SpeculativeSession(
        target_model,
        drafter,
        temperature=temperature,
        threshold=threshold,
        rand=seed,
        ring_mode=ring_mode,
        stop_ids=stop_ids,
    )
    out = []
    if max_tokens > 0:
        s.prefill(prompt)
        out = s.generate(max_tokens)
    return (out, s) if return_session else out


def plain_generate(
    target_model: Model, prompt, max_tokens: int, temperature: float = 0.0, seed=0, *, stop_ids=()
):
    """Ordinary decoding with the target alone: the distribution speculative decoding matches."""
    rand = as_random(seed)
    stop = frozenset(int(t) for t in stop_ids)
    st = target_model.new_state()
    out = []
    if max_tokens <= 0:
        return out
    for t in prompt:
        logits = target_model.forward_token(int(t), state=st)
    while True:
        out.append(pick_token(logits, temperature, rand))
        if len(out) >= max_tokens or out[-1] in stop:
            return out
        logits = target_model.forward_token(out[-1], state=st)
