"""The training corpus of the embedded model: which files, the held-out split, chat samples.

Sources (all offline on the development machine, docs/MODELS.md):
* the CPython standard library's `.py` files of the interpreter that runs this (3.11 here),
  site-packages excluded;
* the English reST sources of the Python documentation (`python3.11-doc`, `html/_sources`),
  unpacked with `apt-get download python3.11-doc && dpkg -x` (no installation needed).

The split is by file: a file is held out when the first byte of sha1(its relative path) is
below HELDOUT_BYTE, so the split does not depend on the file order or on which other files exist.

Besides the raw files, every training function becomes a chat sample in the shape ds4rt's chat
template renders (`BOS <｜User｜>signature<｜Assistant｜></think>body EOS`), so that
`ds4-cli -p "def f(x):"`, which goes through the template, is answered with a function body.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import random
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

HELDOUT_BYTE = 6  # ~2.3 % of the files (6/256)
MAX_FILE_BYTES = 400_000  # larger files are generated tables or data, not code
MAX_BODY_CHARS = 2400  # chat samples: longer function bodies are skipped
DOC_SUBDIR = "usr/share/doc/python3.11/html/_sources"


@dataclasses.dataclass(frozen=True)
class Doc:
    source: str  # "py" or "rst"
    rel: str  # path relative to its root (the split key)
    text: str

    @property
    def heldout(self) -> bool:
        return is_heldout(self.source + ":" + self.rel)


def is_heldout(key: str) -> bool:
    return hashlib.sha1(key.encode("utf-8")).digest()[0] < HELDOUT_BYTE


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # a few test files are deliberately in other encodings


def python_docs(root: Path | None = None) -> Iterator[Doc]:
    root = root or stdlib_root()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "site-packages" in rel.split("/"):
            continue
        text = _read(path)
        if text and text.strip():
            yield Doc("py", rel, text)


def rst_docs(doc_root: Path) -> Iterator[Doc]:
    src = doc_root / DOC_SUBDIR
    if not src.is_dir():
        raise FileNotFoundError(
            f"{src} missing: unpack python3.11-doc there (apt-get download python3.11-doc; "
            f"dpkg -x python3.11-doc_*.deb {doc_root})"
        )
    for path in sorted(src.rglob("*.txt")):
        text = _read(path)
        if text and text.strip():
            yield Doc("rst", path.relative_to(src).as_posix(), text)


@dataclasses.dataclass(frozen=True)
class ChatSample:
    user: str  # the function's signature line(s), dedented (and sometimes its docstring)
    assistant: str  # the rest of the function, dedented


def _signature_end(fn: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int | None:
    """0-based index of the line that ends the `def ...:` header, or None."""
    first_body = fn.body[0].lineno - 1
    start = fn.lineno - 1
    for i in range(start, first_body + 1):
        if lines[i].rstrip().endswith(":") and not lines[i].lstrip().startswith("#"):
            if i == first_body:  # one-line `def f(): return x`
                return None
            return i
    return None


def chat_samples(text: str, rng: random.Random) -> Iterator[ChatSample]:
    """Functions of a Python file as (signature -> body) pairs. Decorators are left out, one-line
    functions and bodies over MAX_BODY_CHARS are skipped. Half of the samples with a docstring
    keep it in the user part."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    lines = text.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        end = getattr(node, "end_lineno", None)
        sig_end = _signature_end(node, lines)
        if end is None or sig_end is None:
            continue
        split = sig_end + 1
        doc = node.body[0]
        has_doc = (
            isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)
            and len(node.body) > 1
        )
        if has_doc and rng.random() < 0.5:
            split = doc.end_lineno
        block = textwrap.dedent("\n".join(lines[node.lineno - 1 : end]))
        blines = block.split("\n")
        k = split - (node.lineno - 1)
        user = "\n".join(blines[:k])
        body = "\n".join(blines[k:]).rstrip() + "\n"
        if not body.strip() or len(body) > MAX_BODY_CHARS:
            continue
        yield ChatSample(user, body)


def collect(doc_root: Path, stdlib: Path | None = None) -> list[Doc]:
    return list(python_docs(stdlib)) + list(rst_docs(doc_root))


def stats(docs: list[Doc]) -> dict:
    out = {}
    for d in docs:
        key = f"{d.source}_{'heldout' if d.heldout else 'train'}"
        n, b = out.get(key, (0, 0))
        out[key] = (n + 1, b + len(d.text.encode("utf-8")))
    return {k: {"files": n, "bytes": b} for k, (n, b) in sorted(out.items())}


def default_doc_root() -> Path:
    return Path(os.environ.get("DS4RT_TRAIN_DOCS", "/tmp/ds4rt-train-docs"))
