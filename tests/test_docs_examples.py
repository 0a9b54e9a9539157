"""Every example of README.md and docs/*.md runs: each fenced python block as a program, each
ds4-cli line of a sh block as a command, and mypy --strict passes on the python blocks that use
ds4rt (the user's view of the typed API).

They run in a directory where the file names the examples use stand for the embedded pair:
target.gguf, model.gguf and DeepSeek-V4-Flash.gguf are the default target, support.gguf and
DeepSeek-V4-Flash-DSpark.gguf its support model. tests/ is on the path for the examples of the
float64 references and the llama.cpp oracle (which skip when the oracle is not set up)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ds4rt import data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
DOCS = ["README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")
)
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELLS = ("sh", "bash", "console", "shell")
STAND_INS = {
    "target.gguf": data.default_target(),
    "model.gguf": data.default_target(),
    "DeepSeek-V4-Flash.gguf": data.default_target(),
    "support.gguf": data.default_support(),
    "DeepSeek-V4-Flash-DSpark.gguf": data.default_support(),
}


def fenced(lang_ok) -> list[tuple[str, int, str]]:
    out = []
    for doc in DOCS:
        text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        for i, m in enumerate(FENCE.finditer(text)):
            if lang_ok(m.group(1)):
                out.append((doc, i, m.group(2)))
    return out


def python_blocks():
    return fenced(lambda lang: lang == "python")


def cli_lines():
    out = []
    for doc, i, body in fenced(lambda lang: lang in SHELLS):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if "ds4-cli" in line and not line.startswith("#"):
                out.append((doc, i, line))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs")
    for name, src in STAND_INS.items():
        os.symlink(src, d / name)
    return d


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
    env["PYTHONPATH"] = TESTS
    return env


@pytest.mark.parametrize(
    "doc,index,code", python_blocks(), ids=[f"{d}:{i}" for d, i, _ in python_blocks()]
)
def test_python_example_runs(workdir, doc, index, code):
    path = workdir / f"example_{index}.py"
    path.write_text(code)
    r = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=child_env(),
        timeout=600,
    )
    skipped = re.search(r"Skipped: (.*)", r.stderr)
    if r.returncode != 0 and skipped:
        pytest.skip(f"{doc}: {skipped.group(1)}")
    assert r.returncode == 0, f"{doc} block {index}:\n{code}\n{r.stderr}"


@pytest.mark.parametrize(
    "doc,index,line", cli_lines(), ids=[f"{d}:{ln}" for d, _, ln in cli_lines()]
)
def test_cli_example_runs(workdir, doc, index, line):
    script = f'ds4-cli() {{ "{sys.executable}" -m ds4rt.cli "$@"; }}\n{line}\n'
    r = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert r.returncode == 0, f"{doc}: {line}\n{r.stderr}"
    assert "Traceback" not in r.stderr


def test_there_are_examples():
    docs_with_python = {d for d, _, _ in python_blocks()}
    assert {"README.md", "docs/API.md"} <= docs_with_python
    assert any(d == "docs/CLI.md" for d, _, _ in cli_lines())
    assert any("chat" in ln for _, _, ln in cli_lines())


def test_the_examples_type_check_strictly(tmp_path):
    """mypy --strict on the python examples that use ds4rt (the package ships py.typed and a
    stub of its extension), as a user's script would be checked."""
    pytest.importorskip("mypy")
    files = []
    for doc, index, code in python_blocks():
        if re.search(r"^(import ds4rt|from ds4rt)", code, re.M) and "from reference" not in code:
            name = re.sub(r"\W", "_", f"{doc}_{index}") + ".py"
            (tmp_path / name).write_text(code)
            files.append(name)
    assert len(files) >= 5
    # and mistakes are caught: a misspelt option, a wrong type, a result used as a list
    (tmp_path / "mistakes.py").write_text(
        "import ds4rt\n"
        "s = ds4rt.Model.default().session()\n"
        's.generate("x", max_tokns=3)\n'
        's.generate("x", temperature="hot")\n'
        'ids: list[int] = s.generate("x")\n'
    )
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files, "mistakes.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    errors = [ln for ln in r.stdout.splitlines() if ": error:" in ln]
    assert all(ln.startswith("mistakes.py:") for ln in errors), r.stdout
    assert {int(ln.split(":")[1]) for ln in errors} == {3, 4, 5}, r.stdout


def test_the_package_is_typed():
    import ds4rt

    pkg = os.path.dirname(ds4rt.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    stub = open(os.path.join(pkg, "_core.pyi"), encoding="utf-8").read()
    declared = set(re.findall(r"^(?:def|class) (\w+)|^(\w+):", stub, re.M))
    names = {a or b for a, b in declared}
    public = {n for n in dir(ds4rt._core) if not n.startswith("__")}
    raw_enums = set(ds4rt._core.HEADER_ENUMS)  # the header's enum classes, used via HEADER_ENUMS
    # every name the package uses from the extension is declared in its stub
    used = set()
    for mod in os.listdir(pkg):
        if mod.endswith(".py"):
            used |= set(re.findall(r"_core\.(\w+)", open(os.path.join(pkg, mod)).read()))
    assert used <= names, used - names
    assert names <= public | raw_enums, names - public
