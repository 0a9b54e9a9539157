"""The server on a real uvicorn bound to a free 127.0.0.1 port: the openai client, ds4's curl
request, many clients at once (every greedy result equal to the same request run alone), a
client leaving mid-stream, a full queue, hostile requests beside a good one, and a shutdown
that drains what is in flight (docs/SERVER.md). Counts and times are kept small: CI has two
cores."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from server_helpers import LiveServer, engine, metric, sse_events  # noqa: E402

import ds4rt  # noqa: E402

PROMPT = "Explain Redis streams."
TIMEOUT = 60


@pytest.fixture(scope="module")
def pair():
    model = ds4rt.Model.default(n_threads=1)
    dspark = ds4rt.DSpark.default(model)
    yield model, dspark
    model.close()


@pytest.fixture(scope="module")
def live(pair):
    model, dspark = pair
    with LiveServer(engine(model, dspark, sessions=2, queue=8, n_ctx=512)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key="none", timeout=TIMEOUT, max_retries=0)


def wait_idle(srv, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h = httpx.get(srv.url + "/health", timeout=TIMEOUT).json()
        if h["busy"] == 0 and h["waiting"] == 0:
            return h
        time.sleep(0.02)
    raise AssertionError(f"the server did not become idle: {h}")


def cli_json(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
    out = subprocess.run(
        [sys.executable, "-m", "ds4rt.cli", "--json", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=os.path.dirname(ds4rt.data.default_target()),  # outside the source tree
        env=env,
    )
    return json.loads(out.stdout)


def test_openai_client_equals_ds4_cli(client):
    """Greedy output through the openai client is ds4-cli's for the same prompt and options."""
    want = cli_json("-p", PROMPT, "-n", "12", "--temp", "0", "--ignore-eos", "--seed", "1")
    chat = client.chat.completions.create(
        model="deepseek-v4-flash",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=12,
        temperature=0,
        seed=1,
        extra_body={"ignore_eos": True},
    )
    assert chat.choices[0].message.content == want["text"]
    assert chat.choices[0].finish_reason == "length"
    assert chat.usage.prompt_tokens == len(want["prompt_ids"])
    assert chat.usage.completion_tokens == len(want["ids"]) == 12
    pieces = []
    for ev in client.chat.completions.create(
        model="deepseek-v4-flash",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    ):
        if ev.choices and ev.choices[0].delta.content:
            pieces.append(ev.choices[0].delta.content)
        if ev.usage is not None:
            assert ev.usage.completion_tokens == 12
    assert "".join(pieces) == want["text"]


def test_openai_client_completions(client):
    want = cli_json("--raw", "-p", "Once upon a time", "-n", "10", "--temp", "0", "--ignore-eos")
    done = client.completions.create(
        model="default-target",
        prompt="Once upon a time",
        max_tokens=10,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert done.choices[0].text == want["text"]
    streamed = "".join(
        ev.choices[0].text
        for ev in client.completions.create(
            model="default-target",
            prompt="Once upon a time",
            max_tokens=10,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        if ev.choices
    )
    assert streamed == want["text"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="default-target", prompt="x", max_tokens=100000)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
    assert [m.id for m in client.models.list()] == ["default-target", "deepseek-v4-flash"]
    assert client.models.retrieve("deepseek-v4-flash").id == "deepseek-v4-flash"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_ds4_curl_request(live):
    """The request ds4's docs/SERVER.md shows, byte for byte, against the default pair with
    DSpark (only the port differs)."""
    body = (
        '{"model":"deepseek-v4-flash","messages":[{"role":"user","content":'
        '"Explain Redis streams."}],"stream":true}'
    )
    # no max_tokens: it runs until EOS or the context (512 here) is full
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-N",
            f"{live.url}/v1/chat/completions",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    events = sse_events(out.stdout.splitlines())
    assert events[-1] == "[DONE]"
    final = events[-2]
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert final["ds4rt"]["dspark"] is True and final["ds4rt"]["spec_stats"]["cycles"] > 0
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])


def _complete(url, prompt, n, **extra):
    r = httpx.post(
        url + "/v1/completions",
        json={"prompt": prompt, "max_tokens": n, "ignore_eos": True, **extra},
        timeout=TIMEOUT,
    )
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def _request(url, job):
    """A completion or a chat, streamed or whole: its text."""
    kind, prompt, n, extra = job
    if kind == "completion":
        return _complete(url, prompt, n, **extra)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": n, **extra}
    if not extra.get("stream"):
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=TIMEOUT)
        return r.json()["choices"][0]["message"]["content"]
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=TIMEOUT) as r:
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])


def test_many_clients_at_once(live):
    """9 clients on 2 sessions (7 wait in the queue), greedy and sampled (seeded), completions
    and chats, streamed and whole: each gets what it gets alone."""
    jobs = [("completion", [0, 17 + i, 42], 8 + 2 * i, {}) for i in range(3)]
    # sampled: a seed fixes the draws when the drafts do not depend on timing (plain decoding,
    # or a scheduler that is not adaptive; docs/SERVER.md, "Seeds")
    fixed = {"scheduler": "always", "confidence": 0.0, "max_draft": 3}
    jobs += [("completion", [0, 30], 10, {"temperature": 0.9, "seed": 1, "dspark": False})]
    jobs += [("completion", [0, 31], 10, {"temperature": 0.9, "seed": 2, "dspark": fixed})]
    jobs += [
        (
            "completion",
            [0, 32],
            10,
            {"temperature": 0.8, "seed": 3, "dspark": {"measured_costs": False}},
        )
    ]
    jobs += [("chat", f"Question {i}?", 9, {"stream": i == 1}) for i in range(2)]
    jobs += [
        (
            "chat",
            "Say more.",
            7,
            {"temperature": 0.7, "top_p": 0.9, "seed": 5, "stream": True, "dspark": fixed},
        )
    ]
    alone = [_request(live.url, j) for j in jobs]
    wait_idle(live)
    page = httpx.get(live.url + "/metrics").text
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
        together = list(ex.map(lambda j: _request(live.url, j), jobs))
    assert together == alone
    wait_idle(live)
    after = httpx.get(live.url + "/metrics").text
    assert metric(after, "ds4rt_request_queue_time_seconds_count") - metric(
        page, "ds4rt_request_queue_time_seconds_count"
    ) == len(jobs)


def test_disconnect_mid_stream_frees_the_session(live):
    page = httpx.get(live.url + "/metrics").text
    body = {"prompt": [0, 5, 6], "max_tokens": 400, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", live.url + "/v1/completions", json=body, timeout=TIMEOUT) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: ") for line in got)
    # the session comes back long before 400 tokens would have been generated
    wait_idle(live, timeout=10)
    assert _complete(live.url, [0, 1, 2], 4)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = httpx.get(live.url + "/metrics").text
        aborted = metric(now, "ds4rt_request_success_total", finished_reason="abort") - metric(
            page, "ds4rt_request_success_total", finished_reason="abort"
        )
        if aborted == 1:
            break
        time.sleep(0.05)
    assert aborted == 1
    assert (
        metric(now, "ds4rt_generation_tokens_total") - metric(page, "ds4rt_generation_tokens_total")
        < 400 + 4
    )


def test_disconnect_while_waiting_for_a_whole_response(live):
    body = json.dumps({"prompt": [0, 7, 8], "max_tokens": 400, "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", live.port), timeout=TIMEOUT) as s:
        s.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        time.sleep(0.3)
    wait_idle(live, timeout=10)


def test_full_queue_answers_429_at_once(pair):
    model, dspark = pair
    with LiveServer(engine(model, dspark, sessions=1, queue=0, n_ctx=512)) as srv:
        body = {"prompt": [0, 5, 6], "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", srv.url + "/v1/completions", json=body, timeout=TIMEOUT) as r:
            lines = r.iter_lines()  # kept: a dropped iterator closes the response
            next(lines)  # generating: the one session is busy
            t0 = time.monotonic()
            busy = httpx.post(
                srv.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=TIMEOUT
            )
            assert time.monotonic() - t0 < 5
            assert busy.status_code == 429 and busy.json()["error"]["code"] == "queue_full"
            assert busy.headers["retry-after"] == "1"
        wait_idle(srv)
        page = httpx.get(srv.url + "/metrics").text
        assert metric(page, "ds4rt_requests_rejected_total", reason="queue_full") == 1


def _post(path, body, length=None):
    n = len(body) if length is None else length
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {n}\r\n\r\n"
    ).encode() + body


HOSTILE_RAW = [  # (request, status of the answer; None: the connection is just closed)
    (b"GARBAGE\r\n\r\n", 400),  # not HTTP: uvicorn answers it (in plain text)
    (_post("/v1/completions", b"\xff\xfe\xfd\xfc\xfb"), 400),
    (_post("/v1/completions", b'{"prompt":'), 400),
    (_post("/v1/chat/completions", b"[]"), 400),
    (_post("/v1/completions", b"{}", length=99999999999), 413),
    (_post("/v1/completions", b'{"prompt":"x","max_tokens":"eight"}'), 400),
    (_post("/v1/completions", b'{"prompt":"x"}', length=50), None),  # truncated body
    (_post("/v1/completions", b'{"prompt":"' + b"\\ud800" + b'"}'), 400),
    (
        _post(
            "/v1/chat/completions",
            b'{"messages":[{"role":"user","content":"' + b"a" * 5000 + b'"}]}',
        ),
        400,
    ),
]


def _raw(port, data):
    """Sends data and reads one response (b"" if the server closes without one). The write
    side stays open: uvicorn takes a half-closed connection for a client that went away."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                head, sep, body = out.partition(b"\r\n\r\n")
                if sep:
                    lengths = [
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ]
                    if lengths and len(body) >= lengths[0]:
                        break
        except TimeoutError:  # a truncated body: the server waits for the rest, then gives up
            pass
    return out


def test_hostile_requests_beside_a_good_one(live):
    good = [0, 9, 10]
    want = _complete(live.url, good, 40)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("text", _complete(live.url, good, 40)))
    t.start()
    answers = [_raw(live.port, data) for data, _ in HOSTILE_RAW]
    t.join(TIMEOUT)
    assert result["text"] == want
    for (data, status), out in zip(HOSTILE_RAW, answers, strict=True):
        if status is None:
            assert out == b"", out
            continue
        head, _, body = out.partition(b"\r\n\r\n")
        assert int(head.split(b" ", 2)[1]) == status, (data[:80], out[:300])
        if data.startswith(b"POST"):
            assert json.loads(body)["error"]["message"]
    wait_idle(live)


def test_shutdown_drains_in_flight_requests(pair):
    model, dspark = pair
    srv = LiveServer(engine(model, dspark, sessions=1, queue=2, n_ctx=512))
    body = {"prompt": [0, 3, 4], "max_tokens": 60, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", srv.url + "/v1/completions", json=body, timeout=TIMEOUT) as r:
        lines = r.iter_lines()
        first = next(lines)
        stopper = threading.Thread(target=srv.stop)
        stopper.start()  # SIGTERM's path: stop accepting, let the stream finish
        events = sse_events([first, *lines])
    stopper.join(TIMEOUT)
    assert events[-1] == "[DONE]"
    assert events[-2]["ds4rt"]["timings"]["generated_tokens"] == 60
    assert all(s.closed for s in srv.engine.pool.sessions)


def test_ds4_cli_serve_from_the_command_line(tmp_path):
    """`ds4-cli serve` with the seed's ds4-server options (`--mtp SUPPORT --dspark --ctx
    200000`) on the embedded pair: serves, stops on SIGINT with status 0 after printing the
    stats line of all requests (ds4's DS4_DSPARK_STATS=1)."""
    import signal

    env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
    env["DS4_DSPARK_STATS"] = "1"
    serve = ["serve", "--mtp", ds4rt.data.default_support(), "--dspark", "--ctx", "200000"]
    p = subprocess.Popen(
        [sys.executable, "-m", "ds4rt.cli", *serve, "--port", "0", "-t", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=os.path.dirname(ds4rt.data.default_target()),
    )
    try:
        port = None
        seen = []
        for line in p.stderr:
            seen.append(line)
            if "Uvicorn running on http://127.0.0.1:" in line:
                port = int(line.split("127.0.0.1:")[1].split()[0])
                break
        assert port, "".join(seen)
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            timeout=TIMEOUT,
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6},
        )
        assert r.status_code == 200 and r.json()["ds4rt"]["dspark"] is True
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        assert p.wait(timeout=TIMEOUT) == 0, rest
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    stats = [line for line in rest.splitlines() if "DSpark stats (all requests)" in line]
    assert len(stats) == 1 and " tokens=6 " in stats[0], rest


def test_a_client_leaving_the_queue_never_generates(pair):
    model, dspark = pair
    with LiveServer(engine(model, dspark, sessions=1, queue=4, n_ctx=512)) as srv:
        body = {"prompt": [0, 5, 6], "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", srv.url + "/v1/completions", json=body, timeout=TIMEOUT) as r:
            lines = r.iter_lines()  # kept: a dropped iterator closes the response
            next(lines)  # the one session is busy
            queued = json.dumps({"prompt": [0, 1], "max_tokens": 400}).encode()
            with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
                s.sendall(_post("/v1/completions", queued))
                deadline = time.monotonic() + 10
                while httpx.get(srv.url + "/health").json()["waiting"] != 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
            deadline = time.monotonic() + 10  # the client is gone: it leaves the queue
            while httpx.get(srv.url + "/health").json()["waiting"] != 0:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        wait_idle(srv)
        page = httpx.get(srv.url + "/metrics").text
        assert metric(page, "ds4rt_requests_rejected_total", reason="client_disconnected") == 1
        assert metric(page, "ds4rt_request_queue_time_seconds_count") == 1  # only the stream


def test_a_mixed_crowd(live):
    """12 clients at once on 2 sessions, a fixed random mix of good requests, clients that leave
    mid-stream and hostile requests: every good one gets what it gets alone, every hostile one
    a 4xx, and the server ends idle with every session back."""
    import random

    rng = random.Random(7)
    plan = []
    for i in range(12):
        kind = rng.choice(["good", "good", "leave", "hostile"])
        plan.append((kind, [0, 40 + i, 3], rng.randint(4, 12)))
    want = {i: _complete(live.url, p, n) for i, (k, p, n) in enumerate(plan) if k == "good"}
    wait_idle(live)

    def act(i):
        kind, prompt, n = plan[i]
        if kind == "good":
            return _complete(live.url, prompt, n)
        if kind == "leave":
            body = {"prompt": prompt, "max_tokens": 300, "ignore_eos": True, "stream": True}
            with httpx.stream(
                "POST", live.url + "/v1/completions", json=body, timeout=TIMEOUT
            ) as r:
                lines = r.iter_lines()
                next(lines)
            return None
        out = _raw(live.port, _post("/v1/completions", b'{"prompt": [1, 2], "n": "x"}'))
        return int(out.split(b" ", 2)[1])

    with concurrent.futures.ThreadPoolExecutor(len(plan)) as ex:
        got = list(ex.map(act, range(len(plan))))
    for i, (kind, _, _) in enumerate(plan):
        if kind == "good":
            assert got[i] == want[i]
        elif kind == "hostile":
            assert got[i] == 400
    assert {k for k, _, _ in plan} == {"good", "leave", "hostile"}
    wait_idle(live, timeout=20)


def test_shutdown_ends_what_outlasts_the_grace_period(pair):
    """A generation still running when the drain timeout is over is cancelled: the server
    stops within seconds, not when the 3000 tokens are done, and frees its sessions."""
    model, dspark = pair
    srv = LiveServer(engine(model, dspark, sessions=1, n_ctx=4096), drain_timeout=1)
    body = {"prompt": [0, 3, 4], "max_tokens": 3000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", srv.url + "/v1/completions", json=body, timeout=TIMEOUT) as r:
        lines = r.iter_lines()
        next(lines)
        t0 = time.monotonic()
        srv.stop(timeout=30)
        assert time.monotonic() - t0 < 15
    assert all(s.closed for s in srv.engine.pool.sessions)


def test_no_dspark_server_lets_a_request_ask_for_it(pair, tmp_path):
    """ds4-server --no-dspark on the embedded pair: plain decoding by default (counted as the
    server's choice), DSpark for a request that asks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DS4_")}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ds4rt.server.main",
            "--no-dspark",
            "--port",
            "0",
            "-t",
            "1",
            "--ctx",
            "256",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=os.path.dirname(ds4rt.data.default_target()),
    )
    try:
        port = None
        for line in p.stderr:
            if "Uvicorn running on http://127.0.0.1:" in line:
                port = int(line.split("127.0.0.1:")[1].split()[0])
                break
        assert port
        url = f"http://127.0.0.1:{port}/v1/completions"
        body = {"prompt": [0, 1, 2], "max_tokens": 4}
        plain = httpx.post(url, json=body, timeout=TIMEOUT).json()["ds4rt"]
        spec = httpx.post(url, json={**body, "dspark": True}, timeout=TIMEOUT).json()["ds4rt"]
        assert (plain["dspark"], plain["decoding"]) == (False, "server")
        assert (spec["dspark"], spec["decoding"]) == (True, "dspark")
    finally:
        p.terminate()
        p.wait(timeout=TIMEOUT)
