"""OpenAI-style errors: ``{"error": {"message", "type", "param", "code"}}`` with its status.

Every way a request can fail ends in one of these, never in a traceback or an HTML page:
malformed JSON or UTF-8, a field of the wrong type or outside its domain, an unknown field, a
prompt that does not fit the context, a full queue (429), a server that is shutting down (503).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        headers = {"Retry-After": "1"} if self.status in (429, 503) else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def invalid(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # pydantic names the member of a union it tried ("str", "list[int]", ...): not a field
            tag = str(part)
            if "[" in tag or tag[:1].isupper() or tag in ("str", "int", "bool", "float", "list"):
                continue
            out += ("." if out else "") + str(part)
    return out


def from_validation(e: ValidationError) -> APIError:
    """The first problem pydantic found, in OpenAI's words where OpenAI has some."""
    errs = e.errors(include_url=False)
    # the most specific one: unions report one error per member; prefer the deepest location
    first = max(errs, key=lambda x: len(x["loc"]))
    param = _loc(first["loc"])
    if first["type"] == "extra_forbidden":
        return invalid(f"Unrecognized request argument supplied: {param}", param)
    if first["type"] == "missing":
        return invalid(f"Missing required parameter: '{param}'.", param)
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    got = first.get("input")
    shown = json.dumps(got)[:80] if isinstance(got, (int, float, str, bool, type(None))) else None
    where = f"'{param}'" if param else "the request body"
    return invalid(
        f"Invalid value for {where}: {msg}" + (f" (got {shown})" if shown is not None else ""),
        param or None,
    )


def parse_body(raw: bytes) -> Any:
    """The body as JSON: strict UTF-8, no NaN/Infinity, no lone surrogates in strings."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise invalid(
            f"The request body is not valid UTF-8 (byte {e.start}: {raw[e.start : e.start + 1]!r})",
            code="invalid_utf8",
        ) from None

    def no_constant(name: str) -> Any:
        raise invalid(f"{name} is not valid JSON", code="invalid_json")

    try:
        doc = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise invalid(
            f"The request body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
            code="invalid_json",
        ) from None
    except RecursionError:
        raise invalid("The request body nests too deeply", code="invalid_json") from None
    try:  # "\ud800" is valid JSON but no text: it cannot be encoded as UTF-8
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(
            "The request body holds a lone UTF-16 surrogate (\\ud800-\\udfff): not text",
            code="invalid_utf8",
        ) from None
    if not isinstance(doc, dict):
        raise invalid("The request body must be a JSON object", code="invalid_json")
    return doc
