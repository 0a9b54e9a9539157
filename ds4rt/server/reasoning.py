"""Thinking text apart from the answer, as OpenAI-style clients of DeepSeek expect it.

With thinking on (``reasoning_effort``, or the server's --think), the chat template ends the
prompt with ``<think>``: what the model writes up to ``</think>`` is its reasoning
(``reasoning_content``), the rest the answer (``content``) - docs/TOKENIZER.md, the chat
template. The text arrives in pieces, and a piece may end inside the marker, so a tail that
could still become the marker is held back until the next piece decides.
"""

from __future__ import annotations

END_OF_THINKING = "</think>"


class ReasoningSplitter:
    def __init__(self, thinking: bool):
        self.thinking = thinking
        self._held = ""

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, content) that are safe to hand out after this piece."""
        if not self.thinking:
            return "", text
        buf = self._held + text
        i = buf.find(END_OF_THINKING)
        if i >= 0:
            self.thinking = False
            self._held = ""
            return buf[:i], buf[i + len(END_OF_THINKING) :]
        keep = 0
        for k in range(min(len(buf), len(END_OF_THINKING) - 1), 0, -1):
            if END_OF_THINKING.startswith(buf[-k:]):
                keep = k
                break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], ""

    def finish(self) -> str:
        """The reasoning still held back when the text ended (it never closed)."""
        held, self._held = self._held, ""
        return held
