"""Sessions of one model generating on several threads at once (tests/concurrent_sessions.c)
under ThreadSanitizer, the library built with -Db_sanitize=thread (the `tsan` configuration of
tests/meson.build): any data race inside the library is a report and a non-zero exit, and every
thread's greedy output must equal the single-threaded reference (docs/ROBUSTNESS.md)."""

from __future__ import annotations

import os
import subprocess

import ds4rt


def test_concurrent_sessions_under_thread_sanitizer(c_programs):
    exe = c_programs("tsan").path("concurrent_sessions")
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1")
    r = subprocess.run(
        [exe, ds4rt.data.default_target(), ds4rt.data.default_support(), "3", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr[-8000:]
    assert "ThreadSanitizer" not in r.stderr, r.stderr[-8000:]
