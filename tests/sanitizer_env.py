"""The environment to run a sanitized C program in (the `sanitize` configuration of
tests/meson.build): UBSan halts on the first report with a stack trace, ASan reports leaks where
LeakSanitizer works."""

from __future__ import annotations

import os
import subprocess
import warnings


def sanitizer_env(exe: str, probe_args: tuple[str, ...] = ("-n", "0")) -> dict[str, str]:
    """The environment to run a sanitized program in. LeakSanitizer needs ptrace, which some
    sandboxes deny: then the run goes on without leak checking and says so."""
    env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
    probe = subprocess.run([exe, *probe_args], env=env, capture_output=True, text=True)
    if "LeakSanitizer" not in probe.stderr:
        return env
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
    warnings.warn("LeakSanitizer does not work here: fuzzing without leak checks", stacklevel=2)
    return env
