"""Tiny random DSpark support models for the DSpark reference tests.

`random_support_weights()` draws every tensor of ds4's support layout (docs/DSPARK.md "Support file
layout") for a tiny target (`tiny.tiny_float_hparams()` or any HParams), with values exactly
representable in the dtype `write_support_gguf()` stores them in (F32; routed experts F16), so a
file read back equals the in-memory weights. `write_support_gguf()` writes ds4's layout with the
metadata that ds4's converter writes, under any of the three key spellings.
"""

from __future__ import annotations

import numpy as np

from .dspark_ref import SUPPORT_ARCH, DSparkParams, support_shapes
from .dsv4_ref import HParams
from .tiny import RESIDUAL_WRITES, _to_storage

SPELLINGS = {
    "dotted": "deepseek4.dspark.{}",
    "underscore": "deepseek4.dspark_{}",
    "bare": "dspark.{}",
}


def tiny_dspark_params(
    hp: HParams,
    *,
    block_size: int = 5,
    markov_rank: int = 32,
    noise_token_id: int | None = None,
    target_layer_ids=None,
    n_stages: int = 3,
) -> DSparkParams:
    """Defaults as the gen tool's tiny support file: B = 5, R = 32, the last three target layers
    (or all of them if there are fewer), noise = the id before the last few specials."""
    if target_layer_ids is None:
        target_layer_ids = tuple(range(max(0, hp.n_layer - 3), hp.n_layer))
    if noise_token_id is None:
        noise_token_id = hp.n_vocab - 6 if hp.n_vocab > 8 else hp.n_vocab - 1
    return DSparkParams(block_size, markov_rank, noise_token_id, tuple(target_layer_ids), n_stages)


def storage_type(name: str) -> str:
    return "F16" if "_exps." in name else "F32"


def random_support_weights(
    hp: HParams, dp: DSparkParams, seed: int = 1, residual_scale: float = 0.1
) -> dict:
    """Every support tensor: matrices ~ N(0, 1/in) (residual writes × residual_scale), norm
    weights ~ 1 + N(0, 0.1²), HC scales ~ U(0.5, 1.5), HC/router biases ~ N(0, 0.1²), sinks
    ~ N(0, 1), markov_w1 ~ N(0, 1/R), markov_w2 ~ N(0, 0.25), confidence proj ~ N(0, 1/(D+R))."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in support_shapes(hp, dp).items():
        short = name.split(".", 2)[-1]
        if short.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif short.startswith("hc_") and short.endswith("scale.weight"):
            a = rng.uniform(0.5, 1.5, shape)
        elif short.endswith("base.weight") or short == "exp_probs_b.bias":
            a = 0.1 * rng.standard_normal(shape)
        elif short == "attn_sinks.weight":
            a = rng.standard_normal(shape)
        elif short == "markov_head.markov_w1.weight":
            a = rng.standard_normal(shape) / np.sqrt(dp.markov_rank)
        elif short == "markov_head.markov_w2.weight":
            a = 0.5 * rng.standard_normal(shape)
        else:  # a matrix [.., out, in]
            a = rng.standard_normal(shape) / np.sqrt(shape[-1])
            if short in RESIDUAL_WRITES:
                a *= residual_scale
        w[name] = _to_storage(a, storage_type(name))
    return w


def support_metadata(dp: DSparkParams, spelling: str = "bare") -> dict:
    """The four DSpark keys in one spelling ('dotted', 'underscore', 'bare' or a format
    string), as {key: value}."""
    fmt = SPELLINGS.get(spelling, spelling)
    return {
        fmt.format("block_size"): dp.block_size,
        fmt.format("markov_rank"): dp.markov_rank,
        fmt.format("noise_token_id"): dp.noise_token_id,
        fmt.format("target_layer_ids"): list(dp.target_layer_ids),
    }


def write_support_gguf(
    path,
    dp: DSparkParams,
    weights: dict,
    *,
    spelling: str = "bare",
    ids_type: str = "UINT32",
    extra_metadata: dict | None = None,
    name: str = "ds4rt tiny DSpark support (dspark_tiny)",
) -> None:
    """A ds4-layout support GGUF: general.*, the DSpark keys (u32; target ids as a UINT32
    or INT32 array), stage_count / n_layers, then the tensors in `weights` order (F32, routed
    experts F16). `extra_metadata` adds {key: (GGUFValueType name, value)} entries."""
    import gguf
    from gguf import GGUFValueType as T

    wr = gguf.GGUFWriter(str(path), arch=SUPPORT_ARCH)
    wr.add_key_value("general.alignment", 32, T.UINT32)
    wr.add_key_value("general.name", name, T.STRING)
    for key, v in support_metadata(dp, spelling).items():
        if isinstance(v, list):
            wr.add_key_value(key, [int(x) for x in v], T.ARRAY, T[ids_type])
        else:
            wr.add_key_value(key, int(v), T.UINT32)
    wr.add_key_value("dspark.stage_count", dp.n_stages, T.UINT32)
    wr.add_key_value("dspark.n_layers", dp.n_stages, T.UINT32)
    for key, (typ, v) in (extra_metadata or {}).items():
        wr.add_key_value(key, v, T[typ])
    for tname, a in weights.items():
        dt = np.float16 if storage_type(tname) == "F16" else np.float32
        wr.add_tensor(tname, np.ascontiguousarray(a, dtype=dt))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
