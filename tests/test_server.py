"""The OpenAI-compatible server in process (Starlette's test client) on the embedded default
pair: responses equal to the Python API's for the same prompt and options, streaming, DSpark
per request, metrics, and OpenAI-style errors for every kind of bad input (docs/SERVER.md)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("prometheus_client")

import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from server_helpers import chat_ids, engine, metric, sse_events  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

import ds4rt  # noqa: E402
from ds4rt.server import create_app  # noqa: E402

PROMPT = "Tell me about the frames."


@pytest.fixture(scope="module")
def pair():
    model = ds4rt.Model.default(n_threads=1)
    dspark = ds4rt.DSpark.default(model)
    yield model, dspark
    model.close()


@pytest.fixture(scope="module")
def client(pair):
    model, dspark = pair
    with TestClient(create_app(engine(model, dspark, sessions=2, n_ctx=256))) as c:
        yield c


def alone(model, dspark, ids, **opts):
    """The oracle: the same generation through the Python API on a fresh session."""
    with model.session(n_ctx=256, max_batch=32) as s:
        return s.generate(ids, dspark=dspark, **opts)


def test_chat_equals_the_python_api(pair, client):
    model, dspark = pair
    r = client.post(
        "/v1/chat/completions",
        json={
            "model": "deepseek-v4-flash",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 12,
            "temperature": 0,
        },
    )
    assert r.status_code == 200, r.text
    doc = r.json()
    want = alone(model, dspark, chat_ids(model, PROMPT), max_tokens=12)
    choice = doc["choices"][0]
    assert doc["object"] == "chat.completion" and doc["model"] == "deepseek-v4-flash"
    assert choice["message"] == {
        "role": "assistant",
        "content": want.text,
        "reasoning_content": None,
    }
    assert choice["finish_reason"] == ("stop" if want.stop_reason.value == "eos" else "length")
    n_prompt = len(chat_ids(model, PROMPT))
    assert doc["usage"] == {
        "prompt_tokens": n_prompt,
        "completion_tokens": len(want.ids),
        "total_tokens": n_prompt + len(want.ids),
        "prompt_tokens_details": {"cached_tokens": doc["ds4rt"]["cached_tokens"]},
    }
    ext = doc["ds4rt"]
    assert ext["dspark"] is True and ext["decoding"] == "dspark"
    assert ext["spec_stats"]["tokens"] == len(want.ids)
    assert ext["timings"]["generated_tokens"] == len(want.ids)


def test_completion_stream_equals_whole(pair, client):
    model, dspark = pair
    body = {"prompt": "Once upon a time", "max_tokens": 10, "ignore_eos": True}
    whole = client.post("/v1/completions", json=body).json()
    with client.stream(
        "POST",
        "/v1/completions",
        json={**body, "stream": True, "stream_options": {"include_usage": True}},
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"] == whole["usage"]
    final = events[-3]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["ds4rt"]["timings"]["generated_tokens"] == 10
    text = "".join(e["choices"][0]["text"] for e in events[:-2])
    assert text == whole["choices"][0]["text"]
    assert all(e["object"] == "text_completion" for e in events[:-1])
    ids = model.tokenize("Once upon a time", special=True, add_bos=True)
    assert text == alone(model, dspark, ids, max_tokens=10, stop_at_eos=False).text


def test_chat_stream_deltas(client):
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8, "stream": True}
    whole = client.post("/v1/chat/completions", json={**body, "stream": False}).json()
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        events = sse_events(r.iter_lines())
    assert events[0]["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": None,
    }
    assert events[-1] == "[DONE]" and "usage" not in events[-2]
    deltas = [e["choices"][0]["delta"].get("content") or "" for e in events[:-1]]
    assert "".join(deltas) == whole["choices"][0]["message"]["content"]
    assert {e["id"] for e in events[:-1]} == {events[0]["id"]}
    assert events[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_token_id_prompt_and_stop_string(pair, client):
    model, dspark = pair
    ids = [0, 17, 42, 99]
    want = alone(model, dspark, ids, max_tokens=16, stop_at_eos=False)
    stop = want.text[3:6]
    assert len(stop) == 3
    r = client.post(
        "/v1/completions",
        json={"prompt": ids, "max_tokens": 16, "stop": [stop], "ignore_eos": True},
    ).json()
    assert r["choices"][0]["text"] == want.text[: want.text.index(stop)]
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["ds4rt"]["stop_string"] == stop


def test_dspark_per_request(pair, client):
    model, dspark = pair
    before = client.get("/metrics").text
    body = {"prompt": [0, 17, 42], "max_tokens": 12, "ignore_eos": True}
    plain = client.post("/v1/completions", json={**body, "dspark": False}).json()
    off = client.post("/v1/completions", json={**body, "dspark": {"scheduler": "off"}}).json()
    always = client.post(
        "/v1/completions",
        json={**body, "dspark": {"scheduler": "always", "max_draft": 3, "confidence": 0.0}},
    ).json()
    texts = {d["choices"][0]["text"] for d in (plain, off, always)}
    assert len(texts) == 1  # greedy output is the same however it is decoded
    assert plain["ds4rt"]["dspark"] is False and plain["ds4rt"]["spec_stats"] is None
    assert plain["ds4rt"]["decoding"] == "request"
    s_off, s_always = off["ds4rt"]["spec_stats"], always["ds4rt"]["spec_stats"]
    assert s_off["proposed"] == 0 and s_off["no_draft_by_reason"]["scheduler_off"] > 0
    assert (
        s_always["proposed"] > 0 and max(i for i, n in enumerate(s_always["proposed_at"]) if n) < 3
    )
    after = client.get("/metrics").text

    def grew(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("ds4rt_requests_decoding_total", mode="plain", why="request") == 1
    assert grew("ds4rt_requests_decoding_total", mode="dspark", why="dspark") == 2
    assert (
        grew("ds4rt_dspark_no_draft_total", reason="scheduler_off")
        == (s_off["no_draft_by_reason"]["scheduler_off"])
    )
    assert grew("ds4rt_spec_decode_num_draft_tokens_total") == s_always["proposed"]
    assert grew("ds4rt_spec_decode_num_accepted_tokens_total") == s_always["accepted_draft"]
    for i, n in enumerate(s_always["accepted_at"]):
        assert grew("ds4rt_spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) == n
    assert grew("ds4rt_generation_tokens_total") == 36
    assert grew("ds4rt_request_success_total", finished_reason="length") == 3
    assert grew("ds4rt_dspark_verify_seconds_total") == pytest.approx(
        (s_off["verify"] + s_always["verify"]) / 1000, rel=1e-6, abs=1e-9
    )


def test_metrics_page(client):
    page = client.get("/metrics")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    text = page.text
    for name in (
        "ds4rt_num_requests_running",
        "ds4rt_num_requests_waiting",
        "ds4rt_sessions",
        "ds4rt_generation_tokens_per_second",
        "ds4rt_cache_bytes",
        "ds4rt_time_to_first_token_seconds_bucket",
        "ds4rt_dspark_cycles_total",
        "ds4rt_dspark_propose_seconds_total",
        "ds4rt_dspark_net_saved_seconds",
    ):
        assert f"\n{name}" in text, name
    assert metric(text, "ds4rt_sessions") == 2
    stats = client.get("/stats").json()["spec_stats"]
    assert stats["cycles"] == metric(text, "ds4rt_dspark_cycles_total")
    assert stats["proposed"] == metric(text, "ds4rt_spec_decode_num_draft_tokens_total")
    # derived from the summed counters, never summed itself nor exported as a metric
    verified = stats["full"] + stats["partial"] + stats["miss_first"]
    per_verify = round((stats["accepted_draft"] + verified) / verified, 3) if verified else 0.0
    assert stats["committed_per_verify"] == per_verify and "committed_per_verify" not in text
    assert metric(text, "ds4rt_num_requests_running") == 0
    assert "_created" not in text


def test_models_and_health(client):
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["default-target", "deepseek-v4-flash"]
    assert models["data"][0]["max_model_len"] == 256
    assert client.get("/health").json()["status"] == "ok"


# ---- bad input ------------------------------------------------------------------------------

HOSTILE = [
    (b'{"prompt": ', 400, None, "invalid_json"),
    (b"\xff\xfe{}", 400, None, "invalid_utf8"),
    (b'{"prompt": "\\ud800"}', 400, None, "invalid_utf8"),
    (b'{"prompt": "x", "temperature": NaN}', 400, None, "invalid_json"),
    (b"[1, 2]", 400, None, "invalid_json"),
    (b'{"prompt": "x", "max_tokens": "8"}', 400, "max_tokens", None),
    (b'{"prompt": "x", "max_tokens": -5}', 400, "max_tokens", None),
    (b'{"prompt": "x", "stream": "yes"}', 400, "stream", None),
    (b'{"prompt": "x", "temperature": -1}', 400, "temperature", None),
    (b'{"prompt": "x", "top_p": 0}', 400, "top_p", None),
    (b'{"prompt": "x", "seed": 18446744073709551616}', 400, "seed", None),
    (b'{"prompt": "x", "stop": [""]}', 400, "stop", None),
    (b'{"prompt": "x", "stop": 7}', 400, "stop", None),
    (b'{"prompt": "x", "n": 2}', 400, "n", None),
    (b'{"prompt": "x", "presence_penalty": 0.5}', 400, "presence_penalty", None),
    (b'{"prompt": "x", "logprobs": 3}', 400, "logprobs", None),
    (b'{"prompt": "x", "bogus": 1}', 400, "bogus", None),
    (b'{"prompt": "x", "dspark": {"max_draft": 99}}', 400, "dspark.max_draft", None),
    (b'{"prompt": "x", "dspark": {"speed": 1}}', 400, "dspark.speed", None),
    (b'{"prompt": "x", "model": "gpt-4"}', 404, "model", "model_not_found"),
    (b'{"prompt": ["a", "b"]}', 400, "prompt", None),
    (b'{"prompt": [1, 2, 99999]}', 400, "prompt", None),
    (b'{"prompt": [-1]}', 400, "prompt", None),
    (b'{"prompt": []}', 400, "prompt", None),
    (b'{"prompt": "x", "max_tokens": 100000}', 400, "max_tokens", "context_length_exceeded"),
    (b'{"max_tokens": 3}', 400, "prompt", None),
]


@pytest.mark.parametrize(("body", "status", "param", "code"), HOSTILE)
def test_bad_completion_requests(client, body, status, param, code):
    r = client.post("/v1/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert err["param"] == param and err["code"] == code


CHAT_HOSTILE = [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        "messages[0].content[0]",
    ),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools"),
    (
        {"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "huge"},
        "reasoning_effort",
    ),
    ({"messages": [{"role": "user", "content": "x" * 2000}]}, "messages"),
]


@pytest.mark.parametrize(("body", "param"), CHAT_HOSTILE)
def test_bad_chat_requests(client, body, param):
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_body_size_limit_and_routes(pair):
    model, dspark = pair
    with TestClient(create_app(engine(model, dspark, n_ctx=128, max_body_bytes=4096))) as c:
        r = c.post("/v1/completions", content=b'{"prompt": "' + b"a" * 5000 + b'"}')
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        assert c.get("/v1/nothing").json()["error"]["code"] == "not_found"
        assert c.get("/v1/completions").status_code == 405


def test_api_key(pair):
    model, dspark = pair
    with TestClient(create_app(engine(model, dspark, n_ctx=128, api_key="sekrit"))) as c:
        body = {"prompt": "x", "max_tokens": 1}
        r = c.post("/v1/completions", json=body)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        ok = c.post("/v1/completions", json=body, headers={"Authorization": "Bearer sekrit"})
        assert ok.status_code == 200
        assert c.get("/health").status_code == 200  # probes need no key


def test_no_support_model(pair):
    model, _ = pair
    with TestClient(create_app(engine(model, None, n_ctx=128))) as c:
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, "dspark": True})
        assert r.status_code == 400 and r.json()["error"]["param"] == "dspark.enabled"
        ok = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).json()
        assert ok["ds4rt"]["decoding"] == "no_support_model"


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_FIELDS = [
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stream",
    "n",
    "dspark",
    "ignore_eos",
    "logprobs",
    "echo",
    "model",
    "messages",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=5), chat=st.booleans())
def test_any_json_gets_an_answer_never_a_crash(fuzz_client, body, chat):
    """Whatever JSON object a client sends: 200 with a result, or 4xx with OpenAI's error."""
    if "max_tokens" in body and isinstance(body["max_tokens"], int):
        body["max_tokens"] = min(body["max_tokens"], 4)
    path = "/v1/chat/completions" if chat else "/v1/completions"
    r = fuzz_client.post(path, content=json.dumps(body))
    assert r.status_code in (200, 400, 404), r.text
    if r.status_code != 200:
        assert r.json()["error"]["message"]
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert sse_events(r.text.splitlines())[-1] == "[DONE]"
    else:
        assert r.json()["usage"]["completion_tokens"] <= 4 or "max_tokens" not in body


@pytest.fixture(scope="module")
def fuzz_client(pair):
    from ds4rt import GenerationOptions

    model, dspark = pair
    eng = engine(model, dspark, n_ctx=48, defaults=GenerationOptions(max_tokens=4))
    with TestClient(create_app(eng)) as c:
        yield c


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["</", "think", ">", "</think>", "a", "<", "/t", "hink>", "é"]), max_size=12
    ),
    data=st.data(),
)
def test_reasoning_split_does_not_depend_on_the_pieces(parts, data):
    from ds4rt.server.reasoning import END_OF_THINKING, ReasoningSplitter

    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    split = ReasoningSplitter(True)
    reasoning, content = "", ""
    for p in pieces:
        r, c = split.feed(p)
        reasoning += r
        content += c
    reasoning += split.finish()
    i = text.find(END_OF_THINKING)
    if i < 0:
        assert (reasoning, content) == (text, "")
    else:
        assert (reasoning, content) == (text[:i], text[i + len(END_OF_THINKING) :])


def test_chat_with_thinking(pair, client):
    model, dspark = pair
    msgs = [{"role": "user", "content": PROMPT}]
    body = {"messages": msgs, "max_tokens": 24, "reasoning_effort": "high", "ignore_eos": True}
    doc = client.post("/v1/chat/completions", json=body).json()
    ids = model.encode_chat(msgs, think="high")
    assert doc["usage"]["prompt_tokens"] == len(ids)
    want = alone(model, dspark, ids, max_tokens=24, stop_at_eos=False).text
    msg = doc["choices"][0]["message"]
    head, mark, tail = want.partition("</think>")
    assert (msg["reasoning_content"], msg["content"]) == (head, tail)
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
        events = sse_events(r.iter_lines())
    deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == head
    assert "".join(d.get("content") or "" for d in deltas) == tail


def test_stream_cancel_from_another_thread(pair):
    """Stream.cancel(): the server's way to stop a generation whose client went away while its
    own thread reads the stream; returns at once, the iteration ends, INTERRUPTED."""
    import threading

    model, dspark = pair
    with model.session(n_ctx=4096, max_batch=32) as s:
        stream = s.stream([0, 1, 2], max_tokens=3000, stop_at_eos=False, dspark=dspark)
        it = iter(stream)
        first = next(it)
        t = threading.Thread(target=stream.cancel)
        t.start()
        t.join(5)
        rest = list(it)
        r = stream.result
        assert r is not None and r.stop_reason is ds4rt.StopReason.INTERRUPTED
        assert len(r.ids) < 3000 and r.ids == first.ids + [i for p in rest for i in p.ids]
        assert s.position == 3 + len(r.ids)
        assert s.generate([5], max_tokens=2).ids  # the session is free again


def test_serve_without_the_extra_says_what_to_install(tmp_path):
    """Without the server extra's packages, `ds4-cli serve` is a one-line usage error naming
    the extra; `import ds4rt` and `import ds4rt.server` still work."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
        "            raise ImportError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import ds4rt, ds4rt.server\n"
        "from ds4rt.cli import main\n"
        "sys.exit(main(['serve', '--port', '0']))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert "pip install 'ds4rt[server]'" in r.stderr and "Traceback" not in r.stderr


def test_a_prompt_that_extends_a_context_evaluates_only_the_new_tokens(pair):
    """Prefix reuse: a request whose prompt extends what an idle session holds (the last
    prompt + its generated ids) gets that session and evaluates only the rest; the output is
    the same as from an empty context (and with reuse off, nothing is kept)."""
    model, dspark = pair
    for reuse in (True, False):
        with TestClient(
            create_app(engine(model, dspark, sessions=2, n_ctx=256, reuse_prefix=reuse))
        ) as c:
            first = [0, 17, 42, 99]
            a = c.post(
                "/v1/completions", json={"prompt": first, "max_tokens": 6, "ignore_eos": True}
            ).json()
            gen = model.tokenize(a["choices"][0]["text"])
            again = alone(model, dspark, first, max_tokens=6, stop_at_eos=False).ids
            follow = first + again + [5, 6]
            b = c.post(
                "/v1/completions", json={"prompt": follow, "max_tokens": 8, "ignore_eos": True}
            ).json()
            want = alone(model, dspark, follow, max_tokens=8, stop_at_eos=False)
            assert b["choices"][0]["text"] == want.text
            cached = len(first) + len(again) if reuse else 0
            assert b["usage"]["prompt_tokens_details"]["cached_tokens"] == cached
            assert b["ds4rt"]["timings"]["prompt_tokens"] == len(follow) - cached
            assert b["usage"]["prompt_tokens"] == len(follow)
            page = c.get("/metrics").text
            assert metric(page, "ds4rt_prefix_cache_hits_total") == cached
            assert metric(page, "ds4rt_prefix_cache_queries_total") == len(first) + len(follow)
            # a prompt that diverges starts from an empty context, with the same output
            other = [0, 17, 43]
            o = c.post("/v1/completions", json={"prompt": other, "max_tokens": 5}).json()
            assert o["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            assert o["choices"][0]["text"] == alone(model, dspark, other, max_tokens=5).text
            del gen


def test_a_chat_resent_with_a_new_turn(pair):
    model, dspark = pair
    with TestClient(create_app(engine(model, dspark, sessions=1, n_ctx=512))) as c:
        msgs = [{"role": "user", "content": PROMPT}]
        one = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 10}).json()
        reply = one["choices"][0]["message"]["content"]
        msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": "More."}]
        two = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 10}).json()
        ids = model.encode_chat(msgs)
        assert (
            two["choices"][0]["message"]["content"] == alone(model, dspark, ids, max_tokens=10).text
        )
        # the session held turn one's prompt and generated ids: kept where the resent history
        # renders to exactly those ids
        first = model.encode_chat(msgs[:1])
        held = first + alone(model, dspark, first, max_tokens=10).ids
        from ds4rt.server.pool import reusable

        cached = two["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached == reusable(held, ids)
        print("chat turn two reused", cached, "of", len(ids), "held", len(held))


def test_the_server_package_type_checks_strictly(tmp_path):
    """mypy --strict on ds4rt.server as installed (its users embed it: create_app, the engine,
    BackgroundServer)."""
    import subprocess
    import sys

    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "-p", "ds4rt.server"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_failing_generation_is_a_clean_500_and_frees_its_session(pair):
    """A library failure inside a generation: 500 with OpenAI's error JSON (streamed: an error
    event, then [DONE]); the session goes back to the pool and the next request is served."""
    model, dspark = pair
    eng = engine(model, dspark, sessions=1, n_ctx=128)
    session = eng.pool.sessions[0]
    real = session.stream
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) <= 2:
            raise ds4rt.errors.InternalError("injected failure")
        return real(*args, **kwargs)

    session.stream = failing
    with TestClient(create_app(eng)) as c:
        body = {"prompt": [0, 1, 2], "max_tokens": 3}
        r = c.post("/v1/completions", json=body)
        assert r.status_code == 500, r.text
        err = r.json()["error"]
        assert err["code"] == "generation_failed" and "injected failure" in err["message"]
        with c.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
            events = sse_events(s.iter_lines())
        assert events[-1] == "[DONE]" and "injected failure" in events[-2]["error"]["message"]
        ok = c.post("/v1/completions", json=body)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 3
        page = c.get("/metrics").text
        assert metric(page, "ds4rt_request_success_total", finished_reason="error") == 2
        assert metric(page, "ds4rt_requests_rejected_total", reason="generation_failed") == 0
        assert c.get("/health").json()["busy"] == 0
