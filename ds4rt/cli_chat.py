"""`ds4-cli chat`: an interactive conversation on DeepSeek V4's chat template.

The conversation lives in the session: each turn evaluates only what is new (the user's
message wrapped in the template's markers), so the model sees the history exactly as it was
generated. Commands: /reset starts again, /stats prints statistics, /help lists them; Ctrl-C
stops the current answer (what was said so far stays in the history), Ctrl-D leaves. A line
ending in a backslash continues on the next line. docs/CLI.md describes the options.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from .cli_common import (
    EXIT_INTERRUPTED,
    add_dspark_arguments,
    add_model_arguments,
    add_sampling_arguments,
    generation_options,
    load,
    note,
    session_for,
)
from .dspark import DSpark
from .generation import GenerationOptions, GenerationResult, StopReason
from .model import Session
from .tokenizer import Tokenizer

HELP = "/reset clears the conversation, /stats shows statistics, Ctrl-C stops an answer, "
HELP += "Ctrl-D leaves"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4-cli chat",
        description="Interactive multi-turn chat on DeepSeek V4's chat template. " + HELP + ".",
    )
    add_model_arguments(p)
    add_sampling_arguments(p, n_default=-1)
    add_dspark_arguments(p)
    return p


class Conversation:
    """The turns of one conversation, kept in a session."""

    def __init__(self, session: Session, tok: Tokenizer, system: str | None, think: bool):
        self.session = session
        self.tok = tok
        self.system = system
        self.think = "high" if think else "none"
        self.history: list[int] = []  # every id in the session's context, in order
        self.ended_turn = True  # the last answer ended with EOS (or there was none)
        self.last: GenerationResult | None = None

    def reset(self) -> None:
        self.session.reset()
        self.session.reset_spec_stats()
        self.history = []
        self.ended_turn = True

    def turn_ids(self, text: str) -> list[int]:
        """What the template adds for a new user message after the history."""
        if not self.history:
            messages = ([{"role": "system", "content": self.system}] if self.system else []) + [
                {"role": "user", "content": text}
            ]
            return self.tok.encode_chat(messages, think=self.think)
        ids = self.tok.encode_chat([{"role": "user", "content": text}], think=self.think)
        if ids and ids[0] == self.tok.bos_id:
            ids = ids[1:]
        eos = self.tok.eos_id
        if not self.ended_turn and eos is not None:  # an answer cut short still ends its turn
            ids = [eos, *ids]
        return ids

    def answer(
        self, text: str, opts: GenerationOptions, dspark: DSpark | None, out: TextIO
    ) -> None:
        ids = self.turn_ids(text)
        room = self.session.n_ctx - self.session.position
        if len(ids) >= room:
            note(f"the message needs {len(ids)} tokens and {room} are left; /reset starts again")
            return
        interrupted = False
        with self.session.stream(ids, opts, dspark=dspark) as stream:
            try:
                for piece in stream:
                    out.write(piece.text)
                    out.flush()
            except KeyboardInterrupt:
                interrupted = True
        r = stream.result
        assert r is not None
        self.last = r
        out.write("\n")
        out.flush()
        if r.timings.prompt_tokens < len(ids):  # stopped while reading the message
            self.session.reset()
            self.session.eval(self.history)
            note("interrupted while reading the message; it is left out of the conversation")
            return
        self.history += ids + r.ids
        eos = self.tok.eos_id
        self.ended_turn = bool(r.ids) and r.ids[-1] == eos
        if interrupted:
            note("answer stopped (it stays in the conversation)")
        if r.stop_reason is StopReason.CONTEXT_FULL:
            note(f"the context is full ({self.session.n_ctx} tokens); /reset starts again")

    def stats(self, out: TextIO, dspark: DSpark | None) -> None:
        s = self.session
        print(f"context: {s.position} of {s.n_ctx} tokens", file=out)
        if self.last is not None:
            print(
                f"last answer: {self.last.timings.line()} | stop: {self.last.stop_reason}", file=out
            )
        if dspark is not None:
            print(s.spec_stats_line(), file=out)


def _read_message(prompt: str) -> str:
    """One message from the user; a line ending in a backslash continues."""
    lines: list[str] = []
    while True:
        line = input(prompt if not lines else "")
        if line.endswith("\\"):
            lines.append(line[:-1])
            continue
        lines.append(line)
        return "\n".join(lines)


def main(argv: list[str]) -> int:
    from .cli_common import apply_environment, check_llama_cpp_flags

    parser = build_parser()
    check_llama_cpp_flags(argv, parser)
    args = parser.parse_args(argv)
    apply_environment(args)
    opts = generation_options(args)
    interactive = sys.stdin.isatty()
    if interactive:
        try:
            import readline  # noqa: F401 - line editing and history for input()
        except ImportError:
            pass
    loaded = load(args)
    with loaded.model as model:
        tok = model._need_tokenizer()
        conv = Conversation(session_for(loaded, args), tok, args.system, args.think)
        out = sys.stdout
        if interactive:
            print(f"ds4-cli chat: {HELP}", file=sys.stderr)
        prompt = "> " if interactive else ""
        while True:
            try:
                text = _read_message(prompt)
            except EOFError:
                if interactive:
                    out.write("\n")
                return 0
            except KeyboardInterrupt:  # at the prompt: a fresh line, as a shell does
                if not interactive:
                    return EXIT_INTERRUPTED
                out.write("^C (Ctrl-D leaves)\n")
                continue
            cmd = text.strip()
            if cmd in ("/exit", "/quit"):
                return 0
            if cmd == "/reset":
                conv.reset()
                print("(conversation cleared)", file=out)
            elif cmd == "/stats":
                conv.stats(out, loaded.dspark)
            elif cmd == "/help":
                print(HELP + "; /exit leaves", file=out)
            elif cmd.startswith("/") and " " not in cmd:
                print(f"unknown command {cmd} ({HELP})", file=out)
            elif cmd:
                conv.answer(text, opts, loaded.dspark, out)
