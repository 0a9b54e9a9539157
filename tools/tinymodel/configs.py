"""Model configurations for the generator: the tiny test models and the real DeepSeek V4 Flash.

Dimension names follow docs/TINY_MODELS.md (its symbol legend). Each deviation of a tiny config
from the reference configurations is listed in `deviations` and in docs/TINY_MODELS.md with
its reason.
"""

from __future__ import annotations

import dataclasses

from gguf import GGMLQuantizationType as QT


@dataclasses.dataclass(frozen=True)
class Dtypes:
    """GGML type of each tensor class (docs/TINY_MODELS.md lists the real model's)."""

    token_embd: QT  # [D, V]
    output: QT  # LM head [D, V]
    hc_fn: QT  # hyper-connection mixing matrices and the HC head
    dense: QT  # q_a, q_b, kv, output_a/b, shared experts
    router: QT  # ffn_gate_inp
    compressor: QT  # compressor kv/gate/ape and all indexer matrices
    exp_gate_up: QT  # routed experts gate/up
    exp_down: QT  # routed experts down
    # support file (ds4's converter policy for the quantised configs; docs/TINY_MODELS.md,
    # support dtypes)
    sup_dense: QT
    sup_hc_fn: QT
    sup_router: QT
    sup_head: QT  # markov_w1/w2, confidence proj (overridable with --head-dtype)


FLOAT_DTYPES = Dtypes(
    token_embd=QT.F32,
    output=QT.F32,
    hc_fn=QT.F32,
    dense=QT.F32,
    router=QT.F32,
    compressor=QT.F32,
    exp_gate_up=QT.F16,
    exp_down=QT.F16,
    sup_dense=QT.F32,
    sup_hc_fn=QT.F32,
    sup_router=QT.F32,
    sup_head=QT.F32,
)

# The dtypes ds4's published "q2" files use (docs/TINY_MODELS.md: configurations, support dtypes).
Q2_DTYPES = Dtypes(
    token_embd=QT.F16,
    output=QT.Q8_0,
    hc_fn=QT.F16,
    dense=QT.Q8_0,
    router=QT.F16,
    compressor=QT.F16,
    exp_gate_up=QT.IQ2_XXS,
    exp_down=QT.Q2_K,
    sup_dense=QT.Q8_0,
    sup_hc_fn=QT.F16,
    sup_router=QT.Q8_0,
    sup_head=QT.Q8_0,
)

Q4_DTYPES = dataclasses.replace(Q2_DTYPES, exp_gate_up=QT.Q4_K, exp_down=QT.Q4_K)


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    L: int  # block_count
    D: int  # embedding_length
    V: int  # vocab_size
    H: int  # head_count
    d_h: int  # key_length = value_length
    r_rot: int  # rope.dimension_count
    Rq: int  # q_lora_rank
    G: int  # output_group_count
    Ro: int  # output_lora_rank
    E: int  # expert_count
    k: int  # expert_used_count
    F: int  # expert_feed_forward_length
    n_shared: int
    n_hash: int
    W: int  # sliding_window
    Hi: int  # indexer head_count
    d_i: int  # indexer key_length
    K_i: int  # indexer top_k
    N: int  # hyper_connection.count
    T_sk: int
    ratios: tuple[int, ...]
    dtypes: Dtypes
    # residual-writing projections (attn_output_b, ffn_down_shexp, ffn_down_exps) std multiplier
    residual_scale: float
    # DSpark support model
    n_stages: int = 3
    block_size: int = 5
    markov_rank: int = 32
    n_target_layers: int = 3
    context_length: int = 1048576
    deviations: tuple[str, ...] = ()

    @property
    def target_layer_ids(self) -> tuple[int, ...]:
        """The last n_target_layers layers of the trunk (Flash: 40, 41, 42)."""
        return tuple(range(self.L - self.n_target_layers, self.L))

    @property
    def hc_dim(self) -> int:
        return self.N * self.D

    @property
    def hc_mix(self) -> int:
        return (2 + self.N) * self.N

    @property
    def group_dim(self) -> int:
        return self.H // self.G * self.d_h

    def check(self) -> None:
        """Shape rules of docs/TINY_MODELS.md and llama.cpp b11739 (docs/ORACLES.md)."""
        problems = []

        def need(ok: bool, what: str) -> None:
            if not ok:
                problems.append(what)

        need(len(self.ratios) == self.L, "one compress ratio per layer")
        need(all(r in (0, 4, 128) for r in self.ratios), "ratios only 0/4/128")
        need(4 in self.ratios, "llama.cpp needs at least one ratio-4 layer")
        need(self.N == 4, "llama.cpp needs exactly 4 hyper-connection streams")
        need(self.d_i >= 64, "llama.cpp needs indexer key_length >= 64")
        need(self.d_i & (self.d_i - 1) == 0 and self.d_i % 32 == 0, "d_i power of two, % 32")
        need(self.r_rot % 2 == 0 and self.r_rot <= min(self.d_h, self.d_i), "r_rot even, <= dims")
        need((self.d_h - self.r_rot) % 64 == 0, "FP8 64-blocks need d_nope % 64 == 0")
        need(self.H % self.G == 0, "H % G == 0")
        need(self.k <= self.E and self.n_hash <= self.L, "k <= E, n_hash <= L")
        need(self.n_target_layers <= self.L, "target layers inside the trunk")
        need((self.D + self.markov_rank) % 32 == 0, "confidence proj ne0 % 32 (Q8_0)")
        d = self.dtypes
        for qt, ne0, what in (
            (d.dense, self.D, "D"),
            (d.dense, self.Rq, "Rq"),
            (d.dense, self.group_dim, "group_dim"),
            (d.dense, self.G * self.Ro, "G*Ro"),
            (d.dense, self.F * self.n_shared, "F*n_shared"),
            (d.exp_gate_up, self.D, "D (expert gate/up)"),
            (d.exp_down, self.F, "F (expert down)"),
        ):
            blk = {QT.Q8_0: 32, QT.Q2_K: 256, QT.Q4_K: 256, QT.IQ2_XXS: 256}.get(qt, 1)
            need(ne0 % blk == 0, f"{what}={ne0} not a multiple of {blk} for {qt.name}")
        if problems:
            raise ValueError(f"config {self.name}: " + "; ".join(problems))


FLOAT = Config(
    name="float",
    L=4,
    D=64,
    V=512,
    H=4,
    d_h=80,
    r_rot=16,
    Rq=64,
    G=2,
    Ro=32,
    E=8,
    k=2,
    F=64,
    n_shared=1,
    n_hash=1,
    W=16,
    Hi=4,
    d_i=64,
    K_i=8,
    N=4,
    T_sk=20,
    ratios=(0, 4, 128, 4),
    dtypes=FLOAT_DTYPES,
    residual_scale=0.1,
    deviations=(
        "d_i = 64 instead of 32: llama.cpp b11739 aborts at context creation with an indexer "
        "key_length below 64 (docs/ORACLES.md)",
    ),
)

QUANT = Config(
    name="quant",
    L=4,
    D=256,
    V=512,
    H=8,
    d_h=192,
    r_rot=64,
    Rq=1024,
    G=8,
    Ro=1024,
    E=8,
    k=2,
    F=256,
    n_shared=1,
    n_hash=1,
    W=16,
    Hi=4,
    d_i=128,
    K_i=8,
    N=4,
    T_sk=20,
    ratios=(0, 0, 4, 128),
    dtypes=Q2_DTYPES,
    residual_scale=0.03,
)

QUANT_Q4 = dataclasses.replace(QUANT, name="quant-q4", dtypes=Q4_DTYPES)

REAL = Config(
    name="real",
    L=43,
    D=4096,
    V=129280,
    H=64,
    d_h=512,
    r_rot=64,
    Rq=1024,
    G=8,
    Ro=1024,
    E=256,
    k=6,
    F=2048,
    n_shared=1,
    n_hash=3,
    W=128,
    Hi=64,
    d_i=128,
    K_i=512,
    N=4,
    T_sk=20,
    ratios=(0, 0) + tuple(4 if layer % 2 == 0 else 128 for layer in range(2, 43)),
    dtypes=Q2_DTYPES,
    residual_scale=0.03,
    markov_rank=256,
)

CONFIGS = {c.name: c for c in (FLOAT, QUANT, QUANT_Q4)}
