"""tools/convert_dspark.py: ds4 support GGUF <-> llama.cpp dflash draft GGUF (docs/DSPARK.md,
formats).

Round trips on generated files (byte-identical where the formats allow), the name and metadata
mapping, refusals, and — when the gen branch's tiny models and llama.cpp oracle are present —
llama.cpp b11739 loading the converted draft and running its block (compared numerically with
the float64 reference)."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from dspark_helpers import tiny_pair
from gguf import GGUFReader
from gguf import GGUFValueType as VT
from reference import dspark_ref as D
from reference import dspark_tiny as DT
from reference import dsv4_ref as R
from reference import tiny


@pytest.fixture(scope="module")
def conv(repo_root):
    spec = importlib.util.spec_from_file_location(
        "convert_dspark", os.path.join(repo_root, "tools", "convert_dspark.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write_target(path, hp, w):
    """A deepseek4 target with a minimal tokenizer (the converter copies tokenizer.* keys)."""
    import gguf

    tiny.write_gguf(path, hp, w)
    r = GGUFReader(path)
    wr = gguf.GGUFWriter(str(path) + ".tmp", arch="deepseek4")
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == VT.ARRAY else None
        wr.add_key_value(key, f.contents(), f.types[0], sub_type=sub)
    wr.add_key_value("tokenizer.ggml.model", "gpt2", VT.STRING)
    toks = [f"t{i}" for i in range(hp.n_vocab)]
    wr.add_key_value("tokenizer.ggml.tokens", toks, VT.ARRAY, VT.STRING)
    for t in r.tensors:
        wr.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(str(path) + ".tmp", path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    hp, w, dp, sw = tiny_pair()
    _write_target(d / "target.gguf", hp, w)
    DT.write_support_gguf(d / "support.gguf", dp, sw)
    return d, hp, dp, sw


def _fields(path):
    r = GGUFReader(path)
    return r, {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}


def _tensor_bytes(r):
    return {
        t.name: (t.tensor_type, [int(n) for n in t.shape], bytes(t.data.tobytes()))
        for t in r.tensors
    }


def test_ds4_to_dflash_layout(conv, files, tmp_path):
    d, hp, dp, sw = files
    out = tmp_path / "draft.gguf"
    info = conv.ds4_to_dflash(d / "support.gguf", d / "target.gguf", out)
    assert info == {"stages": 3, "tensors": 81, "target_layers": [2, 3, 4]}
    r, f = _fields(out)
    assert f["general.architecture"].contents() == "dflash"
    want = {
        "dflash.block_count": 3,
        "dflash.block_size": dp.block_size,
        "dflash.target_layers": [i + 1 for i in dp.target_layer_ids],
        "dflash.sample_from_anchor": True,
        "dflash.attention.sliding_window": 128,
        "dflash.attention.compress_ratios": [0, 0, 0],
        "dflash.rope.freq_base": 10000.0,
        "dflash.embedding_length": hp.n_embd,
        "dflash.attention.head_count": hp.n_head,
        "dflash.attention.key_length": hp.head_dim,
        "dflash.attention.output_group_count": hp.o_groups,
        "dflash.hyper_connection.count": hp.hc_count,
        "dflash.expert_gating_func": 4,
        "dflash.swiglu_clamp_exp": [10.0] * 3,
        "tokenizer.ggml.mask_token_id": dp.noise_token_id,
    }
    for key, v in want.items():
        assert f[key].contents() == pytest.approx(v), key
    for gone in (
        "dflash.rope.scaling.type",
        "dflash.attention.indexer.top_k",
        "dflash.hash_layer_count",
    ):
        assert gone not in f
    assert f["dflash.target_layers"].types == [VT.ARRAY, VT.UINT32]
    assert len(f["tokenizer.ggml.tokens"].contents()) == hp.n_vocab
    src = _tensor_bytes(GGUFReader(d / "support.gguf"))
    dst = _tensor_bytes(r)
    names = conv.support_to_draft_names(3)
    assert names["mtp.0.main_proj.weight"] == "fc.weight"
    assert names["mtp.0.main_norm.weight"] == "enc.output_norm.weight"
    assert names["mtp.2.norm.weight"] == "output_norm.weight"
    assert names["mtp.2.hc_head_fn.weight"] == "output_hc_fn.weight"
    assert names["mtp.2.markov_head.markov_w1.weight"] == "markov_w1.weight"
    assert names["mtp.2.confidence_head.proj.weight"] == "conf_proj.weight"
    assert names["mtp.1.ffn_down_shexp.weight"] == "blk.1.ffn_down_shexp.weight"
    assert set(dst) == set(names.values())
    for name, (typ, ne, data) in src.items():
        t2, ne2, data2 = dst[names[name]]
        assert t2 == typ and data2 == data, name
        if name.endswith("attn_output_a.weight"):
            assert ne2 == [hp.group_dim, hp.o_lora_rank, hp.o_groups]
        else:
            assert ne2 == ne


@pytest.mark.parametrize("spelling", ["bare", "dotted", "underscore"])
@pytest.mark.parametrize("a3", ["3d", "2d"])
def test_round_trips_are_byte_identical(conv, files, tmp_path, spelling, a3):
    d, hp, dp, sw = files
    sup = tmp_path / "support.gguf"
    DT.write_support_gguf(sup, dp, sw, spelling=spelling)
    draft, back, draft2 = tmp_path / "d.gguf", tmp_path / "b.gguf", tmp_path / "d2.gguf"
    conv.ds4_to_dflash(sup, d / "target.gguf", draft, attn_output_a=a3)
    conv.dflash_to_ds4(draft, back, spelling=spelling)
    assert back.read_bytes() == sup.read_bytes()  # ds4 -> dflash -> ds4: the same file
    conv.ds4_to_dflash(back, d / "target.gguf", draft2, attn_output_a=a3)
    assert draft2.read_bytes() == draft.read_bytes()  # dflash -> ds4 -> dflash
    got, weights = D.load_support(back, hp)
    assert got == dp and all(np.array_equal(weights[k], sw[k]) for k in sw)


def test_int32_ids_and_other_keys_round_trip_in_value(conv, files, tmp_path):
    """An INT32 target-id array comes back as UINT32 (ds4's converter type) with equal values;
    tensor data stays byte-identical."""
    d, hp, dp, sw = files
    sup = tmp_path / "support.gguf"
    DT.write_support_gguf(sup, dp, sw, ids_type="INT32")
    conv.ds4_to_dflash(sup, d / "target.gguf", tmp_path / "d.gguf")
    conv.dflash_to_ds4(tmp_path / "d.gguf", tmp_path / "b.gguf")
    assert _tensor_bytes(GGUFReader(tmp_path / "b.gguf")) == _tensor_bytes(GGUFReader(sup))
    assert D.load_support(tmp_path / "b.gguf", hp)[0] == dp


def test_refusals(conv, files, tmp_path):
    d, hp, dp, sw = files
    draft = tmp_path / "d.gguf"
    conv.ds4_to_dflash(d / "support.gguf", d / "target.gguf", draft, window=64)
    with pytest.raises(conv.ConvertError, match="sliding_window = 64"):
        conv.dflash_to_ds4(draft, tmp_path / "b.gguf")
    conv.dflash_to_ds4(draft, tmp_path / "b.gguf", window=64)  # explicitly accepted
    with pytest.raises(conv.ConvertError, match="architecture"):
        conv.ds4_to_dflash(d / "target.gguf", d / "target.gguf", tmp_path / "x.gguf")
    with pytest.raises(conv.ConvertError, match="architecture"):
        conv.dflash_to_ds4(d / "support.gguf", tmp_path / "x.gguf")
    bad = D.DSparkParams(dp.block_size, dp.markov_rank, dp.noise_token_id, (1, 2, 4), 3)
    DT.write_support_gguf(tmp_path / "bad.gguf", bad, sw)
    with pytest.raises(conv.ConvertError, match="target_layer_ids"):
        conv.ds4_to_dflash(tmp_path / "bad.gguf", d / "target.gguf", tmp_path / "x.gguf")
    extra = {**sw, "mtp.1.extra.weight": np.zeros(4)}
    DT.write_support_gguf(tmp_path / "extra.gguf", dp, extra)
    with pytest.raises(conv.ConvertError, match="unexpected tensor mtp.1.extra"):
        conv.ds4_to_dflash(tmp_path / "extra.gguf", d / "target.gguf", tmp_path / "x.gguf")


def test_cli(conv, files, tmp_path, repo_root):
    d, *_ = files
    tool = os.path.join(repo_root, "tools", "convert_dspark.py")
    draft, back = tmp_path / "d.gguf", tmp_path / "b.gguf"
    run = [sys.executable, tool, "to-dflash", str(d / "support.gguf"), "--target"]
    r = subprocess.run(run + [str(d / "target.gguf"), "-o", str(draft)], capture_output=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, tool, "to-ds4", str(draft), "-o", str(back)])
    assert r.returncode == 0 and back.read_bytes() == (d / "support.gguf").read_bytes()
    r = subprocess.run(
        [sys.executable, tool, "to-ds4", str(d / "target.gguf"), "-o", str(back)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "error:" in r.stderr


# --- with the gen branch's tiny models and llama.cpp oracle ------------------------------------
def _gen(tmp_path_factory, config, seed=3):
    """A gen-tool model (tests/tiny_models cache): the folder with target.gguf, support.gguf."""
    tiny_models = pytest.importorskip("tiny_models", reason="tests/tiny_models.py is absent")
    res = tiny_models.model(tmp_path_factory, config, seed=seed)
    assert res.support.parent == res.target.parent
    return res.target.parent


@pytest.fixture(scope="module")
def gen_float(tmp_path_factory):
    return _gen(tmp_path_factory, "float")


@pytest.mark.parametrize("config", ["float", "quant"])
def test_gen_support_round_trip_and_reference(conv, tmp_path_factory, tmp_path, config):
    """The gen tool's independent ds4-layout writer (float: F32/F16; quant: Q8_0 heads and
    dense weights, IQ2_XXS/Q2_K experts): its support file converts to a dflash draft and back
    byte for byte, and the reference runs it: greedy speculative == plain."""
    d = _gen(tmp_path_factory, config)
    sup, tgt = d / "support.gguf", d / "target.gguf"
    conv.ds4_to_dflash(sup, tgt, tmp_path / "d.gguf")
    conv.dflash_to_ds4(tmp_path / "d.gguf", tmp_path / "b.gguf")
    assert (tmp_path / "b.gguf").read_bytes() == sup.read_bytes()
    m = R.Model.from_gguf(tgt)
    dr = D.Drafter.from_gguf(sup, m)
    prompt = [0, 40, 77, 300, 12]
    assert D.speculative_generate(m, dr, prompt, 8) == D.plain_generate(m, prompt, 8)


def _llama(lo):
    lo.require()
    lib, ffi = getattr(lo, "_lib", None), getattr(lo, "_ffi", None)
    if lib is None or ffi is None:
        pytest.skip("NO LLAMA.CPP ORACLE: the oracle module exposes no library handle")
    return lib, ffi


def _load(lib, ffi, lo, path):
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = lib.llama_model_load_from_file(os.fsencode(path), mp)
    assert model != ffi.NULL, f"llama.cpp refused {path}:\n{lo.recent_log()}"
    return model


def _context(lib, ffi, lo, model, other=None, n_ctx=64):
    cp = lib.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = n_ctx
    cp.n_seq_max, cp.n_threads, cp.n_threads_batch = 1, 2, 2
    cp.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.type_k = cp.type_v = lib.GGML_TYPE_F32
    if other is not None:
        cp.ctx_other = other
    ctx = lib.llama_init_from_model(model, cp)
    assert ctx != ffi.NULL, lo.recent_log()
    return ctx


@pytest.mark.parametrize("config, a3", [("float", "3d"), ("float", "2d"), ("quant", "3d")])
def test_llama_cpp_loads_converted_draft(conv, tmp_path_factory, tmp_path, config, a3):
    """llama.cpp b11739 loads the converted draft: every key it requires and every tensor shape
    and dtype (attn_output_a 3-D as its loader declares it, or 2-D through its reshape
    allowance; the quant config's Q8_0/IQ2_XXS/Q2_K tensors)."""
    lo = pytest.importorskip("oracle.llama_oracle", reason="tests/oracle/ is not in this tree")
    lib, ffi = _llama(lo)
    d = _gen(tmp_path_factory, config)
    draft = tmp_path / "draft.gguf"
    conv.ds4_to_dflash(d / "support.gguf", d / "target.gguf", draft, attn_output_a=a3)
    model = _load(lib, ffi, lo, draft)
    try:
        buf = ffi.new("char[]", 256)
        assert lib.llama_model_meta_val_str(model, b"general.architecture", buf, 256) > 0
        assert ffi.string(buf) == b"dflash"
        assert lib.llama_model_n_layer(model) == 3 and lib.llama_model_n_swa(model) == 128
        assert lib.llama_model_rope_type(model) == 0  # normal (interleaved pairs), not NeoX
        assert lib.llama_vocab_mask(lib.llama_model_get_vocab(model)) == 506  # the noise token
        assert lib.llama_model_meta_val_str(model, b"dflash.block_size", buf, 256) > 0
        assert ffi.string(buf) == b"5"  # read by its DSpark Markov head
        # (the loader throws without dflash.target_layers, so loading proves it was read)
    finally:
        lib.llama_model_free(model)


@pytest.mark.slow
def test_llama_cpp_runs_the_block_like_the_reference(conv, gen_float, tmp_path):
    """llama.cpp's DSV4 draft graph (b11739) on the converted file, non-causal, block
    [anchor, mask x 4] at p+1..p+5 with no context rows, against the reference with an empty
    window and the FP8 simulation off: the Markov-corrected logits of every slot agree to
    float32 rounding and the greedy drafts are equal. (Injecting context rows through an
    embedding batch gives NaN or state-dependent values in that build, so the context-row path
    is checked against the restated formulas only — docs/DSPARK_REFERENCE.md.)"""
    lo = pytest.importorskip("oracle.llama_oracle", reason="tests/oracle/ is not in this tree")
    lib, ffi = _llama(lo)
    sup, tgt = gen_float / "support.gguf", gen_float / "target.gguf"
    draft = tmp_path / "draft.gguf"
    conv.ds4_to_dflash(sup, tgt, draft)
    tm = _load(lib, ffi, lo, tgt)
    dm = _load(lib, ffi, lo, draft)
    tc = _context(lib, ffi, lo, tm)
    dc = _context(lib, ffi, lo, dm, other=tc)
    m = R.Model.from_gguf(tgt, simulate_quant=False)
    dr = D.Drafter.from_gguf(sup, m)
    V, B = m.hp.n_vocab, dr.block_size
    try:
        lib.llama_set_causal_attn(dc, False)
        for p, anchor in ((5, 40), (17, 300)):
            lib.llama_memory_clear(lib.llama_get_memory(dc), True)
            ids = [anchor] + [dr.dp.noise_token_id] * (B - 1)
            batch = lib.llama_batch_init(B, 0, 1)
            batch.n_tokens = B
            for i, t in enumerate(ids):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, p + 1 + i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, 1
            rc = lib.llama_decode(dc, batch)
            lib.llama_batch_free(batch)
            assert rc == 0, lo.recent_log()
            ll = np.array(
                [
                    np.frombuffer(ffi.buffer(lib.llama_get_logits_ith(dc, i), 4 * V), np.float32)
                    for i in range(B)
                ],
                dtype=np.float64,
            )
            prop = dr.propose(anchor, p, state=dr.new_state(base=p + 1))
            z = prop.corrected
            rel = np.linalg.norm(ll - z, axis=1) / np.linalg.norm(z, axis=1)
            assert rel.max() < 2e-4, rel
            assert ll.argmax(axis=1).tolist() == prop.drafts
    finally:
        lib.llama_free(dc)
        lib.llama_free(tc)
        lib.llama_model_free(dm)
        lib.llama_model_free(tm)
