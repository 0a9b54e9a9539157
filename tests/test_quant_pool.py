"""The persistent thread pool as the matmul uses it: results independent of the thread count,
many back-to-back dispatches, pools recreated, and concurrent host calls."""

from __future__ import annotations

import threading

import numpy as np
from quant_util import random_matrix

from ds4rt import ops


def test_thread_counts_give_identical_bits():
    rows, cols = 300, 512
    w = random_matrix("Q4_K", rows, cols, seed=5)
    x = np.random.default_rng(5).standard_normal((6, cols)).astype(np.float32)
    ref = ops.matmul(w, "Q4_K", rows, cols, x, n_threads=1)
    for n in (2, 3, 4, 7, 16, 0):
        y = ops.matmul(w, "Q4_K", rows, cols, x, n_threads=n)
        assert np.array_equal(y.view(np.uint32), ref.view(np.uint32)), n


def test_many_back_to_back_dispatches():
    rows, cols = 512, 1024  # big enough to be split across threads (matmul.c grain)
    w = random_matrix("Q8_0", rows, cols, seed=6)
    x = np.random.default_rng(6).standard_normal((1, cols)).astype(np.float32)
    ref = ops.matmul(w, "Q8_0", rows, cols, x, n_threads=1)
    for _ in range(2000):
        y = ops.matmul(w, "Q8_0", rows, cols, x, n_threads=4)
    assert np.array_equal(y, ref)


def test_concurrent_host_calls_are_serialised_and_correct():
    rows, cols = 200, 1024
    w = random_matrix("IQ2_XXS", rows, cols, seed=7)
    xs = [np.random.default_rng(s).standard_normal((3, cols)).astype(np.float32) for s in range(4)]
    refs = [ops.matmul(w, "IQ2_XXS", rows, cols, x, n_threads=1) for x in xs]
    bad = []

    def work(i):
        for _ in range(20):
            y = ops.matmul(w, "IQ2_XXS", rows, cols, xs[i], n_threads=1 + i % 3)
            if not np.array_equal(y, refs[i]):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_pool_recreated_many_times():
    """Alternating thread counts recreate the host pool on every call; tiny products run on the
    caller, so pools are often destroyed before their workers ever ran."""
    w = random_matrix("Q8_0", 4, 64, seed=8)
    x = np.ones((1, 64), np.float32)
    ref = ops.matmul(w, "Q8_0", 4, 64, x, n_threads=1)
    for i in range(300):
        y = ops.matmul(w, "Q8_0", 4, 64, x, n_threads=2 + i % 3)
        assert np.array_equal(y, ref)
