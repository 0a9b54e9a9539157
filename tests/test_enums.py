"""The Python enums are the header's: every enum of include/ds4rt.h, every enumerator, the
values compiled from it (ds4rt/_enums.pxi) and the members of ds4rt.enums."""

from __future__ import annotations

import os
import re

import pytest

import ds4rt
from ds4rt import _core, enums, errors

ENUM_RE = re.compile(r"typedef enum (\w+) \{(.*?)\} \1;", re.S)
MEMBER_RE = re.compile(r"^\s*(DS4RT_\w+)\s*=\s*(-?\w+)", re.M)


def header_enums() -> dict[str, dict[str, int]]:
    text = open(os.path.join(ds4rt.get_include(), "ds4rt.h"), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for name, body in ENUM_RE.findall(text):
        out[name] = {m: int(v, 0) for m, v in MEMBER_RE.findall(body)}
    return out


def test_every_header_enum_is_compiled_in_with_its_values():
    header = header_enums()
    assert len(header) >= 14
    assert header == _core.HEADER_ENUMS


@pytest.mark.parametrize("c_name", sorted(header_enums()))
def test_every_enumerator_has_its_python_member(c_name):
    py = enums.BY_C_NAME[c_name]
    c = header_enums()[c_name]
    assert len(py.__members__) == len(c)
    for member in py:
        matches = [k for k in c if k.endswith("_" + member.name)]
        assert matches, (c_name, member.name)
        assert int(member) == c[min(matches, key=len)]


def test_errors_follow_the_status_enum():
    for status in enums.Status:
        if status is enums.Status.OK:
            continue
        cls = errors.BY_STATUS_NAME[f"DS4RT_ERR_{status.name}"]
        assert issubclass(cls, errors.Ds4rtError)
    with pytest.raises(errors.OutOfRangeError):
        ds4rt.Model.default().session().eval([10**6])


def test_enums_are_used_by_the_modules():
    assert ds4rt.tokenizer.TokenType is enums.TokenType
    assert ds4rt.ops.TYPE_IDS["Q8_0"] == enums.QType.Q8_0 == 8
    assert ds4rt.model.TRACE_STAGES[enums.TraceStage.HEAD] == "head"
    assert ds4rt.dspark.NO_DRAFT_REASONS[enums.NoDraftReason.EMPTY] == "empty"
