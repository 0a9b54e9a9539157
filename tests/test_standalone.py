"""The project stands alone: what its files cite is in the repository or public.

Code comments and docs cite the project's own `docs/` pages (by section name) or public URLs,
never working notes that are not in the repository. Three checks over every tracked text file:

* no file names one of those notes or a path outside the repository (`tests/abi/` is exempt:
  its header is frozen as released);
* every `docs/<page>.md` cited exists;
* every section cited as `docs/<page>.md "Section"` is a heading (or a labelled paragraph) of that
  page, and a bare section number (a section sign and digits) appears only for docs/QUANTS.md,
  the one page with numbered sections.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXEMPT = ("tests/abi/",)
SKIP_DIRS = {".git", "subprojects", "__pycache__", ".venv", "venv", "node_modules"}

# Spelled in pieces so that this file does not cite them itself.
_NOTES = [
    "dsv4-" + "architecture",
    "dspark" + r"\.md",
    "tool" + r"chain\.md",
    "gpu-" + "peer",
    "design" + r"\.md",
    "shared" + "/docs",
    r"\.\./" + "shared",
    "/work" + "/shared",
]
FORBIDDEN = re.compile("|".join(f"(?:{p})" for p in _NOTES))
DOC_CITE = re.compile(r"(?<![\w/.-])docs/([A-Za-z0-9_./-]+\.md)")
SECTION_CITE = re.compile(r'(?<![\w/.-])docs/([A-Za-z0-9_./-]+\.md)[,:]? \(?"([^"]{1,80})"')
SECTION_SIGN = re.compile(r"(\S*\s*)§\s*\d")


def _tracked_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.SubprocessError):
        files = []
    if not files:  # an unpacked source tree without git: walk it
        files = [
            p.relative_to(ROOT).as_posix()
            for p in ROOT.rglob("*")
            if p.is_file()
            and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
            and not p.relative_to(ROOT).parts[0].startswith("build")
        ]
    return sorted(files)


def _texts() -> dict[str, str]:
    texts = {}
    for rel in _tracked_files():
        if rel.startswith(EXEMPT):
            continue
        path = ROOT / rel
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (models, wheels)
        try:
            texts[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


TEXTS = _texts()


def _flat(text: str) -> str:
    """Joins wrapped lines (and their comment markers) so a citation split over lines matches."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#+ |// |\* |/\* )?", " ", text)


def _headings(doc: str) -> list[str]:
    text = TEXTS.get(doc)
    if text is None:
        return []
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} +(.+)$", text, re.M)]


def _section_exists(doc: str, name: str) -> bool:
    """A heading of the page, or a paragraph labelled with the name ("Compute backends (...):")."""
    if any(h == name or h.startswith(name + " ") for h in _headings(doc)):
        return True
    label = re.compile(r"^(?:\*\*)?" + re.escape(name) + r"(?:\*\*)?[ :.(]", re.M)
    return bool(label.search(TEXTS.get(doc, "")))


def test_the_file_list_is_not_empty():
    assert "docs/MODEL.md" in TEXTS and "README.md" in TEXTS, sorted(TEXTS)[:20]


def test_no_file_cites_notes_outside_the_repository():
    hits = [
        f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for rel, text in TEXTS.items()
        for m in FORBIDDEN.finditer(text)
    ]
    assert not hits, "cite docs/ or a public URL instead:\n" + "\n".join(hits)


def test_every_cited_docs_page_exists():
    missing = sorted(
        {
            f"{rel}: docs/{m.group(1)}"
            for rel, text in TEXTS.items()
            for m in DOC_CITE.finditer(text)
            if not (ROOT / "docs" / m.group(1)).is_file()
        }
    )
    assert not missing, "\n".join(missing)


def test_every_cited_section_is_a_heading_of_its_page():
    cited = 0
    wrong = []
    for rel, text in TEXTS.items():
        for m in SECTION_CITE.finditer(_flat(text)):
            doc, name = "docs/" + m.group(1), m.group(2).strip()
            cited += 1
            if not _section_exists(doc, name):
                wrong.append(f'{rel}: {doc} "{name}"')
    assert cited >= 50, f"only {cited} section citations found: is the pattern still right?"
    assert not wrong, "no such section:\n" + "\n".join(sorted(set(wrong)))


@pytest.mark.parametrize("doc", ["docs/QUANTS.md"])
def test_bare_section_numbers_only_for_numbered_pages(doc):
    numbered = [h for h in _headings(doc) if re.match(r"\d+\. ", h)]
    assert numbered, f"{doc} is expected to number its sections"
    stray = []
    for rel, text in TEXTS.items():
        for m in SECTION_SIGN.finditer(text):
            if rel == doc or m.group(1).rstrip().endswith("QUANTS.md"):
                continue
            stray.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}")
    assert not stray, "a § number of a page outside the repository?\n" + "\n".join(stray)
