"""Generator of DeepSeek V4 Flash (`deepseek4`) test models and DSpark support files.

`generate()` is what tools/make_tiny_model.py calls; docs/TINY_MODELS.md describes the output.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gguf import GGMLQuantizationType as QT

from . import configs, layout, tokenizer, write

HEAD_DTYPES = {"f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0}


@dataclasses.dataclass
class Result:
    target: Path
    support: Path
    tokenizer_json: Path | None
    config: configs.Config
    n_target_tensors: int
    n_support_tensors: int
    target_size: int
    support_size: int


def generate(
    out_dir: str | Path,
    config: str | configs.Config = "float",
    seed: int = 0,
    head_dtype: str | None = None,
    real_layout: bool = False,
    tokenizer_json: bool = False,
) -> Result:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # a Config itself: a variant of a named one (dataclasses.replace), for tests of limits
    if real_layout:
        cfg = configs.REAL
    else:
        cfg = config if isinstance(config, configs.Config) else configs.CONFIGS[config]
    cfg.check()
    head = HEAD_DTYPES[head_dtype] if head_dtype else None
    if real_layout:
        tok = tokenizer.real_tokenizer()
    else:
        tok = tokenizer.tiny_tokenizer(cfg.V)
    if len(tok.tokens) != cfg.V:
        raise ValueError(f"tokenizer has {len(tok.tokens)} ids, config needs {cfg.V}")

    t_specs = layout.target_tensors(cfg)
    s_specs = layout.support_tensors(cfg, head)
    label = "DeepSeek V4 Flash (real layout, no data)" if real_layout else f"ds4rt tiny {cfg.name}"
    t_meta = write.target_metadata(cfg, tok, label)
    s_meta = write.support_metadata(cfg, write.noise_token_id(tok), label + " DSpark support")
    target, support = out / "target.gguf", out / "support.gguf"
    if real_layout:
        t_size = write.write_sparse_gguf(target, "deepseek4", t_meta, t_specs)
        s_size = write.write_sparse_gguf(support, "deepseek4-dspark", s_meta, s_specs)
    else:
        write.write_gguf(target, "deepseek4", t_meta, t_specs, seed)
        write.write_gguf(support, "deepseek4-dspark", s_meta, s_specs, seed + 1)
        t_size, s_size = target.stat().st_size, support.stat().st_size
    tj = None
    if tokenizer_json:
        tj = out / "tokenizer.json"
        doc = tokenizer.to_tokenizer_json(tok)
        tj.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return Result(target, support, tj, cfg, len(t_specs), len(s_specs), t_size, s_size)
