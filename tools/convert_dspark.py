#!/usr/bin/env python3
"""Convert a DeepSeek V4 DSpark drafter between ds4's support GGUF and llama.cpp's dflash draft.

    convert_dspark.py to-dflash SUPPORT.gguf --target TARGET.gguf -o DRAFT.gguf
        [--window 128] [--attn-output-a 3d|2d] [--with-target-head]
    convert_dspark.py to-ds4 DRAFT.gguf -o SUPPORT.gguf [--spelling bare|dotted|underscore]
        [--window 128]

Formats (docs/DSPARK.md, formats):

* ds4 support (`general.architecture = deepseek4-dspark`): stages `mtp.<s>.*`, metadata
  `dspark.{block_size, markov_rank, noise_token_id, target_layer_ids}` in one of three spellings
  (docs/DSPARK.md "Support file layout"), no model hyperparameters (they come from the target).
* llama.cpp draft (`general.architecture = dflash`): stages `blk.<s>.*`, the target's deepseek4
  hyperparameters under `dflash.*` (block_count = stages, uncompressed attention), the DSpark
  keys `dflash.block_size`, `dflash.target_layers` (= ds4 ids + 1: llama.cpp captures layer
  *inputs*), `dflash.sample_from_anchor` = true, the target's tokenizer with
  `tokenizer.ggml.mask_token_id` = the noise token.

Tensor data is copied byte for byte (same GGML type); only names change, and `attn_output_a`
takes llama.cpp's 3-D view {group_dim, Ro, G} of ds4's 2-D [group_dim, G·Ro] (same bytes).
Everything dropped or defaulted is reported on stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFReader, GGUFValueType, GGUFWriter

VT = GGUFValueType
SUPPORT_ARCH = "deepseek4-dspark"
DRAFT_ARCH = "dflash"
TARGET_ARCH = "deepseek4"
DEFAULT_WINDOW = 128
KEY_SPELLINGS = {
    "dotted": "deepseek4.dspark.{}",
    "underscore": "deepseek4.dspark_{}",
    "bare": "dspark.{}",
}
DSPARK_KEYS = ("block_size", "markov_rank", "noise_token_id", "target_layer_ids")

# global (non-stage) tensors: ds4 suffix on its stage -> llama.cpp name ("first"/"last" stage)
GLOBAL_NAMES = [
    ("first", "main_proj.weight", "fc.weight"),
    ("first", "main_norm.weight", "enc.output_norm.weight"),
    ("last", "norm.weight", "output_norm.weight"),
    ("last", "hc_head_fn.weight", "output_hc_fn.weight"),
    ("last", "hc_head_base.weight", "output_hc_base.weight"),
    ("last", "hc_head_scale.weight", "output_hc_scale.weight"),
    ("last", "markov_head.markov_w1.weight", "markov_w1.weight"),
    ("last", "markov_head.markov_w2.weight", "markov_w2.weight"),
    ("last", "confidence_head.proj.weight", "conf_proj.weight"),
]
# the 24 tensors of every stage keep their suffix: mtp.<s>.X <-> blk.<s>.X
STAGE_SUFFIXES = [
    "hc_attn_fn.weight",
    "hc_attn_scale.weight",
    "hc_attn_base.weight",
    "attn_norm.weight",
    "attn_q_a.weight",
    "attn_q_a_norm.weight",
    "attn_q_b.weight",
    "attn_kv.weight",
    "attn_kv_a_norm.weight",
    "attn_sinks.weight",
    "attn_output_a.weight",
    "attn_output_b.weight",
    "hc_ffn_fn.weight",
    "hc_ffn_scale.weight",
    "hc_ffn_base.weight",
    "ffn_norm.weight",
    "ffn_gate_inp.weight",
    "exp_probs_b.bias",
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_down_exps.weight",
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
]
# deepseek4.* keys copied to dflash.* unchanged (llama.cpp's generic and DSV4-draft hparams)
COPIED_TARGET_KEYS = [
    "context_length",
    "embedding_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "attention.q_lora_rank",
    "attention.output_lora_rank",
    "attention.output_group_count",
    "rope.dimension_count",
    "rope.freq_base",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_count",
    "expert_group_count",
    "expert_group_used_count",
    "expert_weights_scale",
    "expert_weights_norm",
    "expert_gating_func",
    "hyper_connection.count",
    "hyper_connection.sinkhorn_iterations",
    "hyper_connection.epsilon",
]
PER_LAYER_TARGET_KEYS = ["swiglu_clamp_exp", "swiglu_clamp_shexp"]  # shortened to the stages
# set by the converter, not copied: block_count (stages), attention.sliding_window (the
# drafter's window), attention.compress_ratios (all 0). Dropped: indexer keys,
# compress_rope_freq_base and rope.scaling.* (compressed layers only; the drafter has base
# RoPE without YaRN, docs/DSPARK_REFERENCE.md), hash_layer_count (never hash routing), nextn.
SET_TARGET_KEYS = ["block_count", "attention.sliding_window", "attention.compress_ratios"]


class ConvertError(ValueError):
    pass


def note(msg: str) -> None:
    print(f"convert_dspark: {msg}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# GGUF helpers
# ---------------------------------------------------------------------------------------------
def read_fields(reader: GGUFReader) -> dict:
    """{key: (value, type, sub_type)} in file order, without the GGUF.* pseudo-fields."""
    out = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        sub = f.types[-1] if f.types[0] == VT.ARRAY else None
        out[key] = (f.contents(), f.types[0], sub)
    return out


def tensor_bytes(reader: GGUFReader, t) -> np.ndarray:
    return np.asarray(reader.data[t.data_offset : t.data_offset + t.n_bytes], dtype=np.uint8)


def byte_shape(ne, qtype) -> tuple[int, ...]:
    """gguf-py's raw shape for a byte buffer: reversed ne with ne0 given in bytes."""
    block, size = GGML_QUANT_SIZES[qtype]
    if ne[0] % block:
        raise ConvertError(f"ne0 = {ne[0]} is not a multiple of the block size {block}")
    return (*reversed([int(n) for n in ne[1:]]), int(ne[0]) // block * size)


def write_gguf(path, arch: str, meta: dict, tensors: list) -> None:
    """meta: {key: (value, type, sub_type)}; tensors: [(name, ne, qtype, bytes)]."""
    w = GGUFWriter(str(path), arch=arch)
    if "general.alignment" in meta:
        w.data_alignment = int(meta["general.alignment"][0])
    for key, (v, typ, sub) in meta.items():
        if key == "general.architecture":
            continue
        w.add_key_value(key, v, typ, sub_type=sub)
    for name, ne, qtype, data in tensors:
        w.add_tensor(name, data, raw_shape=byte_shape(ne, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def arch_of(fields: dict) -> str | None:
    v = fields.get("general.architecture")
    return None if v is None else v[0]


# ---------------------------------------------------------------------------------------------
# ds4 support -> llama.cpp dflash
# ---------------------------------------------------------------------------------------------
def dspark_key(fields: dict, k: str):
    """(key, value) of the first spelling present (docs/DSPARK.md, formats), or (None, None)."""
    for fmt in KEY_SPELLINGS.values():
        key = fmt.format(k)
        if key in fields:
            return key, fields[key][0]
    return None, None


def stage_of(name: str):
    m = re.match(r"^mtp\.(\d+)\.(.+)$", name)
    return (int(m.group(1)), m.group(2)) if m else (None, None)


def support_to_draft_names(n_stages: int) -> dict:
    """ds4 support name -> llama.cpp draft name for a file with n_stages stages."""
    last = n_stages - 1
    names = {}
    for where, suffix, llama in GLOBAL_NAMES:
        names[f"mtp.{0 if where == 'first' else last}.{suffix}"] = llama
    for s in range(n_stages):
        for suffix in STAGE_SUFFIXES:
            names[f"mtp.{s}.{suffix}"] = f"blk.{s}.{suffix}"
    return names


def ds4_to_dflash(
    support_path,
    target_path,
    out_path,
    *,
    window: int = DEFAULT_WINDOW,
    attn_output_a: str = "3d",
    with_target_head: bool = False,
) -> dict:
    """Write the llama.cpp draft of a ds4 support file; returns a summary dict."""
    sup = GGUFReader(support_path)
    tgt = GGUFReader(target_path)
    sf, tf = read_fields(sup), read_fields(tgt)
    if arch_of(sf) not in (None, SUPPORT_ARCH):
        raise ConvertError(f"{support_path}: architecture {arch_of(sf)!r}, not {SUPPORT_ARCH!r}")
    if arch_of(tf) != TARGET_ARCH:
        raise ConvertError(f"{target_path}: architecture {arch_of(tf)!r}, not {TARGET_ARCH!r}")
    if attn_output_a not in ("2d", "3d"):
        raise ConvertError("attn_output_a must be '2d' or '3d'")
    if window < 1:
        raise ConvertError("window must be >= 1")

    def tkey(k):
        key = f"{TARGET_ARCH}.{k}"
        if key not in tf:
            raise ConvertError(f"{target_path}: {key} missing")
        return tf[key]

    stages = sorted({stage_of(t.name)[0] for t in sup.tensors if stage_of(t.name)[0] is not None})
    if not stages or stages != list(range(len(stages))):
        raise ConvertError(f"{support_path}: stages {stages} are not 0..S-1")
    S = len(stages)
    vals = {}
    for k in DSPARK_KEYS:
        key, v = dspark_key(sf, k)
        if key is None:
            raise ConvertError(f"{support_path}: DSpark key {k!r} missing in all spellings")
        vals[k] = v
    for key in ("dspark.stage_count", "dspark.n_layers"):
        if key in sf and int(sf[key][0]) != S:
            raise ConvertError(f"{key} = {sf[key][0]} but the tensors have {S} stages")
    n_layer = int(tkey("block_count")[0])
    ids = [int(v) for v in vals["target_layer_ids"]]
    if not ids or any(i < 0 or i >= n_layer for i in ids) or ids != sorted(set(ids)):
        raise ConvertError(f"target_layer_ids {ids}: need strictly increasing ids < {n_layer}")
    n_vocab = len(tf["tokenizer.ggml.tokens"][0]) if "tokenizer.ggml.tokens" in tf else None
    noise = int(vals["noise_token_id"])
    if n_vocab is not None and not 0 <= noise < n_vocab:
        raise ConvertError(f"noise_token_id {noise} outside the target vocabulary ({n_vocab})")

    # metadata
    meta = {}
    for key, v in sf.items():
        if key.startswith("general.") and key != "general.architecture":
            meta[key] = v
    p = DRAFT_ARCH + "."
    meta[p + "block_count"] = (S, VT.UINT32, None)
    for k in COPIED_TARGET_KEYS:
        key = f"{TARGET_ARCH}.{k}"
        if key in tf:
            meta[p + k] = tf[key]
    meta[p + "attention.sliding_window"] = (int(window), VT.UINT32, None)
    meta[p + "attention.compress_ratios"] = ([0] * S, VT.ARRAY, VT.UINT32)
    for k in PER_LAYER_TARGET_KEYS:
        key = f"{TARGET_ARCH}.{k}"
        if key in tf:
            v, typ, sub = tf[key]
            last = v[-1] if isinstance(v, list) else v
            meta[p + k] = ([last] * S, VT.ARRAY, sub if typ == VT.ARRAY else typ)
    meta[p + "block_size"] = (int(vals["block_size"]), VT.UINT32, None)
    meta[p + "target_layers"] = ([i + 1 for i in ids], VT.ARRAY, VT.UINT32)
    meta[p + "sample_from_anchor"] = (True, VT.BOOL, None)
    for key, v in tf.items():
        if key.startswith("tokenizer."):
            meta[key] = v
    meta["tokenizer.ggml.mask_token_id"] = (noise, VT.UINT32, None)
    known = {f"{fmt.format(k)}" for fmt in KEY_SPELLINGS.values() for k in DSPARK_KEYS}
    known |= {"dspark.stage_count", "dspark.n_layers"}
    dropped = [k for k in sf if not k.startswith("general.") and k not in known]
    if dropped:
        note(f"support keys not carried into the draft: {dropped}")

    # tensors
    names = support_to_draft_names(S)
    G = int(tkey("attention.output_group_count")[0])
    Ro = int(tkey("attention.output_lora_rank")[0])
    out, seen = [], set()
    for t in sup.tensors:
        if t.name not in names:
            raise ConvertError(f"{support_path}: unexpected tensor {t.name}")
        ne = [int(n) for n in t.shape]
        if t.name.endswith("attn_output_a.weight"):
            if len(ne) != 2 or ne[1] != G * Ro:
                raise ConvertError(f"{t.name}: ne {ne}, expected [group_dim, {G * Ro}]")
            if attn_output_a == "3d":
                ne = [ne[0], Ro, G]
        out.append((names[t.name], ne, t.tensor_type, tensor_bytes(sup, t)))
        seen.add(t.name)
    missing = sorted(set(names) - seen)
    if missing:
        raise ConvertError(f"{support_path}: missing tensors {missing}")
    if with_target_head:  # optional in llama.cpp's loader: a draft that runs without the target
        for t in tgt.tensors:
            if t.name in ("token_embd.weight", "output.weight"):
                out.append((t.name, [int(n) for n in t.shape], t.tensor_type, tensor_bytes(tgt, t)))
    write_gguf(out_path, DRAFT_ARCH, meta, out)
    return {"stages": S, "tensors": len(out), "target_layers": [i + 1 for i in ids]}


# ---------------------------------------------------------------------------------------------
# llama.cpp dflash -> ds4 support
# ---------------------------------------------------------------------------------------------
def dflash_to_ds4(
    draft_path,
    out_path,
    *,
    spelling: str = "bare",
    window: int = DEFAULT_WINDOW,
) -> dict:
    """Write ds4's support file for a llama.cpp DSV4 draft; returns a summary dict.

    ds4's file carries no window: the draft's `attention.sliding_window` must equal `window`
    (what the ds4rt drafter will use), else the conversion is refused."""
    dr = GGUFReader(draft_path)
    df = read_fields(dr)
    if arch_of(df) != DRAFT_ARCH:
        raise ConvertError(f"{draft_path}: architecture {arch_of(df)!r}, not {DRAFT_ARCH!r}")
    if spelling not in KEY_SPELLINGS:
        raise ConvertError(f"spelling must be one of {sorted(KEY_SPELLINGS)}")
    p = DRAFT_ARCH + "."

    def dkey(k):
        if p + k not in df:
            raise ConvertError(f"{draft_path}: {p + k} missing")
        return df[p + k][0]

    if int(dkey("hyper_connection.count")) <= 0:
        raise ConvertError(f"{draft_path}: not a DeepSeek V4 draft (hyper_connection.count = 0)")
    S = int(dkey("block_count"))
    win = int(dkey("attention.sliding_window"))
    if win != window:
        raise ConvertError(
            f"{p}attention.sliding_window = {win}: ds4's support file cannot carry a window, "
            f"and the drafter would use {window} (pass window={win} if that is intended)"
        )
    if df.get(p + "sample_from_anchor", (True,))[0] not in (True, "true"):
        raise ConvertError(f"{p}sample_from_anchor is false: not DSpark's anchor-first layout")
    ids = [int(v) - 1 for v in dkey("target_layers")]
    if any(i < 0 for i in ids):
        raise ConvertError(f"{p}target_layers {dkey('target_layers')}: an entry 0 has no ds4 id")
    if "tokenizer.ggml.mask_token_id" not in df:
        raise ConvertError(f"{draft_path}: tokenizer.ggml.mask_token_id (the noise token) missing")
    noise = int(df["tokenizer.ggml.mask_token_id"][0])
    by_name = {t.name: t for t in dr.tensors}
    if "markov_w1.weight" not in by_name:
        raise ConvertError(f"{draft_path}: no markov_w1.weight: a DFlash draft, not DSpark")
    rank = int(by_name["markov_w1.weight"].shape[0])

    fmt = KEY_SPELLINGS[spelling]
    meta = {}
    for key, v in df.items():
        if key.startswith("general.") and key != "general.architecture":
            meta[key] = v
    meta[fmt.format("block_size")] = (int(dkey("block_size")), VT.UINT32, None)
    meta[fmt.format("markov_rank")] = (rank, VT.UINT32, None)
    meta[fmt.format("noise_token_id")] = (noise, VT.UINT32, None)
    meta[fmt.format("target_layer_ids")] = (ids, VT.ARRAY, VT.UINT32)
    meta["dspark.stage_count"] = (S, VT.UINT32, None)
    meta["dspark.n_layers"] = (S, VT.UINT32, None)
    n_dropped = sum(1 for k in df if k.startswith((p, "tokenizer.")))
    note(f"dropped {n_dropped} dflash.*/tokenizer.* keys (ds4 reads them from the target)")

    names = {v: k for k, v in support_to_draft_names(S).items()}
    out = []
    for t in dr.tensors:
        if t.name in ("token_embd.weight", "output.weight"):
            note(f"dropped {t.name} (ds4 shares the target's)")
            continue
        if t.name not in names:
            raise ConvertError(f"{draft_path}: tensor {t.name} has no ds4 equivalent")
        ne = [int(n) for n in t.shape]
        if t.name.endswith("attn_output_a.weight") and len(ne) == 3:
            ne = [ne[0], ne[1] * ne[2]]
        out.append((names[t.name], ne, t.tensor_type, tensor_bytes(dr, t)))
    missing = sorted(set(names) - {t.name for t in dr.tensors})
    if missing:
        raise ConvertError(f"{draft_path}: missing tensors {missing}")
    write_gguf(out_path, SUPPORT_ARCH, meta, out)
    return {"stages": S, "tensors": len(out), "target_layer_ids": ids}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-dflash", help="ds4 support GGUF -> llama.cpp dflash draft GGUF")
    a.add_argument("support")
    a.add_argument("--target", required=True, help="the deepseek4 target GGUF (hyperparameters)")
    a.add_argument("-o", "--out", required=True)
    a.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    a.add_argument("--attn-output-a", choices=("3d", "2d"), default="3d")
    a.add_argument(
        "--with-target-head",
        action="store_true",
        help="also copy the target's token_embd/output (optional draft tensors)",
    )
    b = sub.add_parser("to-ds4", help="llama.cpp dflash draft GGUF -> ds4 support GGUF")
    b.add_argument("draft")
    b.add_argument("-o", "--out", required=True)
    b.add_argument("--spelling", choices=sorted(KEY_SPELLINGS), default="bare")
    b.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "to-dflash":
            info = ds4_to_dflash(
                args.support,
                args.target,
                args.out,
                window=args.window,
                attn_output_a=args.attn_output_a,
                with_target_head=args.with_target_head,
            )
        else:
            info = dflash_to_ds4(args.draft, args.out, spelling=args.spelling, window=args.window)
    except ConvertError as e:
        note(f"error: {e}")
        return 1
    note(f"wrote {Path(args.out)}: {info}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
