"""The backend query surface: the C API (ds4rt_backend_*), ds4rt.backends() and
`ds4-cli info --backends` (docs/API.md, "Compute backends")."""

from __future__ import annotations

import json

import pytest

import ds4rt
from ds4rt import _core
from ds4rt.ops import COMPUTE_TYPES, TYPE_IDS


def test_cpu_is_first_and_runs_every_op_for_every_computed_type():
    bs = ds4rt.backends()
    cpu = bs[0]
    assert cpu["name"] == "cpu" and cpu["n_devices"] == 1 and cpu["ops_version"] >= 1
    names = _core.backend_op_names()
    assert set(cpu["ops"]) == set(names) and len(names) == len(set(names))
    for op in ("matmul", "get_rows", "moe", "hc_pre", "hc_head", "grouped_out"):
        assert sorted(cpu["ops"][op]) == sorted(COMPUTE_TYPES), op
    assert cpu["ops"]["attention"] == ["F32"]


def test_supports_answers_no_for_a_type_without_kernels():
    op = _core.backend_op_names().index("matmul")
    assert _core.backend_supports(1, 0, op, TYPE_IDS["Q8_0"])
    assert not _core.backend_supports(1, 0, op, TYPE_IDS["IQ4_NL"])


def test_supports_errors():
    with pytest.raises(ds4rt.errors.OutOfRangeError):
        _core.backend_supports(1, 0, 10_000, 0)
    with pytest.raises(ds4rt.errors.InvalidArgumentError):
        _core.backend_supports(0, 0, 0, 0)  # auto is not a backend
    with pytest.raises(ds4rt.errors.BackendError):
        _core.backend_supports(1, 3, 0, 0)  # the CPU has device 0 only
    if "gpu=none" in ds4rt.build_info():
        with pytest.raises(ds4rt.errors.BackendError, match="not compiled into"):
            _core.backend_supports(2, 0, 0, 0)


def test_cli_info_backends_text_and_json(capsys):
    from ds4rt import cli

    assert cli.main(["info", "--backends"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("cpu: 1 device(s)") and "attention" in text
    assert cli.main(["info", "--backends", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == ds4rt.backends()
