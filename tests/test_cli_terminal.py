"""ds4-cli on a terminal (a pseudo-terminal, as a user's shell gives it): the chat loop with its
commands, Ctrl-C (the terminal's interrupt character, sent to the foreground process group)
stopping an answer or a one-shot generation, Ctrl-D leaving, and the load progress bar."""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time

import pytest

import ds4rt
from ds4rt import cli_chat, data
from ds4rt.generation import GenerationOptions

CWD = os.path.dirname(data.default_target())
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PROMPT = r"(^|\n)> \Z"  # the chat prompt, waiting for input


class Terminal:
    """ds4-cli run on a pseudo-terminal that is its controlling terminal."""

    def __init__(self, *args: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
        env["TERM"] = "dumb"  # no readline escape sequences in what we read
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec the CLI with the terminal as stdin, stdout, stderr
            os.chdir(CWD)
            os.execve(sys.executable, [sys.executable, "-m", "ds4rt.cli", *args], env)
        self.pid, self.fd = pid, fd
        self.seen = ""  # output not yet matched by read_until
        self.log = ""  # all output
        self.status: int | None = None

    def read_until(self, pattern: str, timeout: float = 120.0) -> str:
        """Reads until `pattern` (a regex) appears in the output since the last match."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.seen)
            if m:
                before, self.seen = self.seen[: m.end()], self.seen[m.end() :]
                return before
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in {self.seen!r}")
            r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"exited before {pattern!r}; output {self.seen!r}")
                self._add(chunk)

    def _add(self, chunk: bytes) -> None:
        text = ANSI.sub("", chunk.decode("utf-8", "replace"))
        self.seen += text
        self.log += text

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 120.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # drain, so the child never blocks on a full terminal
                while select.select([self.fd], [], [], 0.1)[0]:
                    chunk = os.read(self.fd, 4096)
                    if not chunk:
                        break
                    self._add(chunk)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                os.close(self.fd)
                return self.status
        raise AssertionError(f"still running; output {self.log!r}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            os.close(self.fd)


@pytest.fixture
def terminal():
    made = []

    def start(*args: str) -> Terminal:
        t = Terminal(*args)
        made.append(t)
        return t

    yield start
    for t in made:
        t.close()


def expected_chat_positions(messages: list[str], n: int) -> list[int]:
    """Context lengths after each turn, from the same conversation run in-process."""
    m = ds4rt.Model.default()
    conv = cli_chat.Conversation(m.session(), m.tokenizer, None, False)
    out = []
    for text in messages:
        conv.answer(text, GenerationOptions(max_tokens=n), None, open(os.devnull, "w"))
        out.append(conv.session.position)
    return out


def test_chat_keeps_the_history_and_obeys_its_commands(terminal):
    t = terminal("chat", "-n", "6")
    t.read_until("Ctrl-D leaves")
    t.read_until(PROMPT)
    want = expected_chat_positions(["Hello", "And again"], 6)
    t.send("Hello\r")
    t.read_until(PROMPT)
    t.send("/stats\r")
    assert f"context: {want[0]} of 4096 tokens" in t.read_until(PROMPT)
    t.send("And again\r")
    t.read_until(PROMPT)
    t.send("/stats\r")
    assert f"context: {want[1]} of 4096 tokens" in t.read_until(PROMPT)  # history kept
    t.send("/reset\r")
    assert "(conversation cleared)" in t.read_until(PROMPT)
    t.send("/stats\r")
    assert "context: 0 of 4096 tokens" in t.read_until(PROMPT)
    t.send("/nonsense\r")
    assert "unknown command /nonsense" in t.read_until(PROMPT)
    # A Ctrl-C sent the instant the prompt appears went unanswered 1 run in 3 (probably
    # CPython's readline: a SIGINT landing between the prompt and its select() is seen only at
    # the next key; not confirmed). A person never types that fast: let readline settle.
    time.sleep(0.5)
    t.send("\x03")  # Ctrl-C at the prompt: a fresh prompt, as a shell gives
    assert "(Ctrl-D leaves)" in t.read_until(PROMPT)
    t.send("\x04")  # Ctrl-D leaves
    assert t.wait() == 0
    assert "Traceback" not in t.log


def test_ctrl_c_stops_the_answer_and_the_chat_goes_on(terminal):
    t = terminal("chat", "-n", "-1", "--ignore-eos", "-c", "65536")
    t.read_until(PROMPT)
    t.send("Tell me everything\r")
    t.read_until("everything\r?\n")  # the terminal's echo
    t.read_until(r"\S{8}")  # the answer is coming
    t.send("\x03")
    t.read_until("answer stopped")
    t.read_until(PROMPT)
    t.send("/stats\r")
    out = t.read_until(PROMPT)
    n = int(re.search(r"context: (\d+) of 65536", out).group(1))
    assert 10 < n < 60000
    t.send("\x04")
    assert t.wait() == 0 and "Traceback" not in t.log


def test_ctrl_c_stops_a_one_shot_generation(terminal):
    t = terminal("-p", "Hi", "-n", "-1", "--ignore-eos", "-c", "65536")
    t.read_until(r"100\.0%")  # loaded (the bar's own text is no sign of an answer)
    t.read_until(r"\S{8}")
    t.send("\x03")
    t.read_until("ds4-cli: interrupted")
    assert t.wait() == 130
    assert "Traceback" not in t.log and "| stop: interrupted" in t.log


def test_a_progress_bar_while_the_model_loads(terminal):
    t = terminal("-p", "Hi", "-n", "2")
    out = t.read_until(r"\| stop: ")
    bar = r"loading default-target\.gguf \[#+\] 100\.0% \d+\.\d+ MiB / \d+\.\d+ MiB"
    assert re.search(bar, out)
    assert t.wait() == 0


def test_chat_reads_piped_messages_without_a_terminal(tmp_path):
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", "chat", "-n", "4"],
        input="Hello\n/stats\n",
        capture_output=True,
        text=True,
        cwd=CWD,
        timeout=120,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr
    want = expected_chat_positions(["Hello"], 4)[0]
    assert f"context: {want} of 4096 tokens" in r.stdout


def test_conversation_context_is_the_history():
    """Each turn adds the template's user part and the answer; an answer cut short still ends
    its turn with EOS; the session holds exactly the recorded history."""
    m = ds4rt.Model.default()
    conv = cli_chat.Conversation(m.session(), m.tokenizer, "Be brief.", False)
    sink = open(os.devnull, "w")
    conv.answer("Hello", GenerationOptions(max_tokens=5, stop_at_eos=False), None, sink)
    first = m.tokenizer.encode_chat(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    )
    assert conv.history[: len(first)] == first and len(conv.history) == len(first) + 5
    assert not conv.ended_turn
    conv.answer("More", GenerationOptions(max_tokens=5, stop_at_eos=False), None, sink)
    turn = m.tokenizer.encode_chat([{"role": "user", "content": "More"}])[1:]  # no BOS
    start = len(first) + 5
    assert conv.history[start : start + 1 + len(turn)] == [m.eos_id, *turn]
    ref = m.session()
    ref.eval(conv.history)
    assert conv.session.position == ref.position
    import numpy as np

    assert np.array_equal(conv.session.current_logits(), ref.current_logits())
