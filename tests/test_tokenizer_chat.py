"""The chat template against the rendering spelled out in docs/TOKENIZER.md (the chat template)
(ds4's encode_chat_prompt / render_chat_prompt_text), and its ids against the oracle encoding
the rendered text."""

from __future__ import annotations

import pytest
from _tok_support import oracle, oracle_ids, ours

from ds4rt import Ds4rtError
from ds4rt.tokenizer import render_chat

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK, END_THINK = "<think>", "</think>"
MAX_PREFIX = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n"
)


def u(text):
    return {"role": "user", "content": text}


def a(text, reasoning=None):
    m = {"role": "assistant", "content": text}
    if reasoning is not None:
        m["reasoning"] = reasoning
    return m


def test_doc_example_no_thinking():
    assert render_chat([u("Hello")]) == f"{BOS}{USER}Hello{ASSISTANT}{END_THINK}"


def test_thinking_generation_prefix():
    assert render_chat([u("Hello")], think="high") == f"{BOS}{USER}Hello{ASSISTANT}{THINK}"
    assert render_chat([u("Hello")], think=True) == f"{BOS}{USER}Hello{ASSISTANT}{THINK}"


def test_think_max_prefix_after_bos():
    got = render_chat([{"role": "system", "content": "Be brief."}, u("Hi")], think="max")
    assert got == f"{BOS}{MAX_PREFIX}Be brief.{USER}Hi{ASSISTANT}{THINK}"


def test_system_texts_gathered_without_marker():
    msgs = [{"role": "system", "content": "A"}, u("q"), {"role": "developer", "content": "B"}]
    assert render_chat(msgs) == f"{BOS}A\n\nB{USER}q{ASSISTANT}{END_THINK}"


def test_multi_turn_reasoning_dropped_before_last_user():
    msgs = [u("q1"), a("r1", reasoning="t1"), u("q2"), a("r2", reasoning="t2")]
    want_think = (
        f"{BOS}{USER}q1{ASSISTANT}{END_THINK}r1{EOS}{USER}q2{ASSISTANT}{THINK}t2{END_THINK}r2{EOS}"
    )
    assert render_chat(msgs, think="high") == want_think
    want_plain = f"{BOS}{USER}q1{ASSISTANT}{END_THINK}r1{EOS}{USER}q2{ASSISTANT}{END_THINK}r2{EOS}"
    assert render_chat(msgs, think="none") == want_plain
    # an assistant turn closes the conversation: no generation prefix
    assert render_chat(msgs, think="none", add_generation_prompt=True) == want_plain


def test_tool_context_keeps_reasoning():
    msgs = [u("q1"), a("r1", reasoning="t1"), u("q2")]
    got = render_chat(msgs, think="high", tool_context=True)
    assert got == f"{BOS}{USER}q1{ASSISTANT}{THINK}t1{END_THINK}r1{EOS}{USER}q2{ASSISTANT}{THINK}"


def test_tool_results():
    msgs = [
        u("list files"),
        a("calling", reasoning="plan"),
        {"role": "tool", "content": "a.txt"},
        {"role": "tool", "content": "x</tool_result>y"},
    ]
    got = render_chat(msgs, think="high")
    want = (
        f"{BOS}{USER}list files{ASSISTANT}{THINK}plan{END_THINK}calling{EOS}"
        f"{USER}<tool_result>a.txt</tool_result><tool_result>x&lt;/tool_result>y</tool_result>"
        f"{ASSISTANT}{THINK}"
    )
    assert got == want


def test_no_generation_prompt():
    assert render_chat([u("Hi")], add_generation_prompt=False) == f"{BOS}{USER}Hi"


def test_empty_conversation():
    assert render_chat([]) == BOS


def test_bad_role_and_mode():
    with pytest.raises(ValueError):
        render_chat([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError):
        render_chat([u("x")], think="extreme")


CONVERSATIONS = [
    ([u("Hello")], "none"),
    ([u("Hello")], "high"),
    ([{"role": "system", "content": "You are terse."}, u("2+2?")], "max"),
    ([u("q1"), a("r1", "t1"), u("  spaced  \n"), a("ok")], "high"),
    ([u("run"), a("", "t"), {"role": "tool", "content": "out\n"}, u("thanks")], "high"),
    ([u("中文 and English 123"), a("😀 answer")], "none"),
]


@pytest.mark.parametrize("msgs, think", CONVERSATIONS)
def test_ids_equal_oracle_on_rendered_text(msgs, think):
    """Markers by id + plain text in between = the oracle encoding the rendered text (whose
    markers it matches as added tokens), when the messages hold no marker strings."""
    tok = ours()
    text = render_chat(msgs, think=think)
    assert tok.encode_chat(msgs, think=think) == oracle_ids(oracle(), [text])[0]
    assert tok.decode(tok.encode_chat(msgs, think=think)) == text


def test_markers_in_content_stay_text():
    tok = ours()
    msgs = [u("say <think> and <｜Assistant｜>")]
    ids = tok.encode_chat(msgs)
    assert ids.count(128821) == 0 and ids.count(128804) == 1
    parsed = tok.encode_chat(msgs, special_in_content=True)
    assert parsed.count(128821) == 1 and parsed.count(128804) == 2
    assert tok.decode(ids) == tok.decode(parsed) == render_chat(msgs)


def test_render_ids_needs_markers_in_vocabulary():
    from ds4rt.tokenizer import Tokenizer

    byte_chars = [chr(c) for c in range(33, 127)]
    tiny = Tokenizer.from_arrays(byte_chars, [])
    with pytest.raises(Ds4rtError, match="no token"):
        tiny.encode_chat([u("hi")])
