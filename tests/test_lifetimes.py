"""close(), context managers and who keeps whom alive: a closed object raises ClosedError (never
crashes), closing a model closes its sessions and support models, a support model in use by a
session is freed when that session lets go, and garbage collection in any order is safe."""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
import textwrap

import pytest

import ds4rt
from ds4rt import BusyError, ClosedError

PROMPT = [0, 5, 9]


def test_model_and_session_are_context_managers():
    with ds4rt.Model.default() as m:
        with m.session() as s:
            assert len(s.generate(PROMPT, max_tokens=3).ids) == 3
        assert s.closed and not m.closed
        for call in (
            lambda: s.eval([1]),
            lambda: s.generate(PROMPT),
            lambda: s.position,
            s.current_logits,
            s.reset,
            s.spec_stats,
            lambda: s.truncate(0),
        ):
            with pytest.raises(ClosedError, match="session is closed"):
                call()
        s.close()  # idempotent
    assert m.closed
    for call in (
        m.session,
        lambda: m.info,
        lambda: ds4rt.DSpark.default(m),
        lambda: m.tokenize("hi"),
        lambda: m.tokenizer.decode([1]),
    ):
        with pytest.raises(ClosedError, match="model"):
            call()
    m.close()


def test_closing_a_model_closes_what_depends_on_it():
    m = ds4rt.Model.default()
    d = ds4rt.DSpark.default(m)
    s = m.session()
    s.generate(PROMPT, max_tokens=4, dspark=d)
    stream = m.tokenizer.stream()
    m.close()
    assert s.closed and d.closed
    with pytest.raises(ClosedError, match="model is closed"):
        s.eval([1])
    with pytest.raises(ClosedError):
        stream.push(5)
    with pytest.raises(ClosedError, match="support model"):
        d._d.info()


def test_a_model_cannot_be_closed_under_a_running_call():
    m = ds4rt.Model.default()
    s = m.session()
    errors = []

    def on_token(t):
        try:
            m.close()
        except BusyError as e:
            errors.append(e)
        return False

    s.generate(PROMPT, max_tokens=5, on_token=on_token)
    assert errors and not m.closed and not s.closed
    m.close()


def test_a_support_model_in_use_lives_until_its_sessions_let_go():
    m = ds4rt.Model.default()
    d = ds4rt.DSpark.default(m)
    s = m.session()
    s.generate(PROMPT, max_tokens=4, dspark=d)
    d.close()
    assert d.closed
    with pytest.raises(ClosedError, match="support model"):
        s.generate([1], max_tokens=2, dspark=d)
    # the session's drafter still reads the support model: plain calls stay safe
    assert len(s.generate([4], max_tokens=5).ids) == 5
    s.eval([3, 3])
    s.close()  # now the support model is freed too
    m.close()


def test_tokenizers_close():
    with ds4rt.Tokenizer.from_gguf(ds4rt.data.default_target()) as t:
        ids = t.encode("hello")
        stream = t.stream()
    assert t.closed
    with pytest.raises(ClosedError, match="tokenizer is closed"):
        t.decode(ids)
    with pytest.raises(ClosedError):
        stream.push(ids[0])
    m = ds4rt.Model.default()
    assert m.tokenizer is not None
    m.tokenizer.close()  # a model's tokenizer is the model's to close
    assert not m.tokenizer.closed and m.tokenizer.decode(ids)
    m.close()
    assert m.tokenizer.closed


def test_garbage_collection_in_any_order_is_safe():
    """Reference cycles through callbacks (a trace that refers to its session) and dropping
    objects in every order; in a child process, so a crash shows as a failure."""
    code = textwrap.dedent(
        """
        import gc, itertools, ds4rt
        for order in itertools.permutations(range(3)):
            m = ds4rt.Model.default()
            d = ds4rt.DSpark.default(m)
            s = m.session()
            s.generate([0, 5, 9], max_tokens=6, dspark=d)
            s.set_trace(lambda layer, stage, pos, data, s=s: None)  # a cycle through s
            objs = [m, d, s]
            del m, d, s
            for i in order:
                objs[i] = None
                gc.collect()
        m = ds4rt.Model.default()
        s = m.session()
        tok = m.tokenizer
        del m
        gc.collect()
        print(len(s.generate("hi", max_tokens=3).ids), tok.decode([5]) != "")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "True"]


def test_objects_survive_their_python_wrappers():
    m = ds4rt.Model.default()
    s = m.session()
    del m
    gc.collect()
    assert len(s.generate(PROMPT, max_tokens=2).ids) == 2  # the session keeps the model
