"""Typed reading of JSON request bodies and query strings, with 400s that name the field.

Example::

    body = Body.parse(raw, allowed={"shape", "name"}, tolerated={"host_id"})
    shape = body.string("shape", required=True)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from fake_server import errors
from fake_server.errors import ApiError

__all__ = [
    "ENV_NAME",
    "MAX_JSON_DEPTH",
    "PATH_FORBIDDEN",
    "Body",
    "parse_json",
    "path_problem",
    "query_int",
]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: No body the API takes nests deeper than a few levels; past this it is refused with a 400
#: (deep enough nesting would otherwise end in a RecursionError somewhere later).
MAX_JSON_DEPTH = 32
_INT64 = 1 << 63
#: What no path in a sandbox may hold, as a regex character class (the OpenAPI document's path
#: pattern is built from it): NUL and the other controls, and the invisible characters
#: (zero-width, bidi overrides) that the sandbox's filesystem refuses.
PATH_FORBIDDEN = (
    r"\x00-\x1f\x7f-\x9f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
)
#: The sandbox filesystem's limits on a path (bashkit's): directories deep, bytes in one name,
#: bytes in all.
MAX_PATH_DEPTH = 100
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
# Tag characters lie outside the BMP, where a JSON Schema pattern cannot name them portably.
_UNSAFE_PATH = re.compile(f"[{PATH_FORBIDDEN}\\U000e0000-\\U000e007f]")
_T = TypeVar("_T")


class _Refused(Exception):
    """A value json.loads must not turn into Python (raised from its parse hooks)."""


def _integer(text: str) -> int:
    # Checked on the text first: int() of a very long number is slow, or refused on 3.11+.
    if len(text.lstrip("-")) > 19:
        raise _Refused(errors.JSON_INT_RANGE)
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise _Refused(errors.JSON_INT_RANGE)
    return value


def _real(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise _Refused(errors.JSON_NOT_FINITE)
    return value


def _constant(name: str) -> Any:  # NaN, Infinity, -Infinity: Python's extension, not JSON
    raise _Refused(errors.JSON_NOT_FINITE)


def parse_json(raw: bytes | str) -> Any:
    """Parse a request body as strict JSON, or raise a 400 :class:`ApiError` that says why.

    Beyond the grammar it refuses what would break the fake later, far from the request: lone
    surrogates (they cannot be encoded back into an answer or the journal), NaN, infinities
    and numbers out of range, and nesting deeper than :data:`MAX_JSON_DEPTH`.

    Example::

        parse_json(b'{"seconds": 5}')         # {'seconds': 5}
        parse_json(b'{"seconds": Infinity}')  # ApiError(400, errors.JSON_NOT_FINITE)
    """
    try:
        data = json.loads(raw, parse_int=_integer, parse_float=_real, parse_constant=_constant)
    except _Refused as exc:
        raise ApiError(400, str(exc)) from None
    except RecursionError:
        raise ApiError(400, errors.JSON_TOO_DEEP.format(depth=MAX_JSON_DEPTH)) from None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, errors.INVALID_JSON) from None
    _check_tree(data)
    return data


def _check_tree(data: Any) -> None:
    """Depth and text checks over a parsed body, without recursion."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_JSON_DEPTH:
            raise ApiError(400, errors.JSON_TOO_DEEP.format(depth=MAX_JSON_DEPTH))
        if isinstance(value, dict):
            for key in value:
                _check_text(key)
            pending.extend((item, depth + 1) for item in value.values())
        else:
            pending.extend((item, depth + 1) for item in value)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ApiError(400, errors.JSON_NOT_TEXT) from None


class Body:
    """A parsed JSON object body whose fields are read with type checks."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def parse(
        cls,
        raw: bytes,
        *,
        allowed: Collection[str],
        tolerated: Collection[str] = (),
    ) -> Body:
        """Parse ``raw`` (empty means ``{}``); unknown fields are refused unless tolerated
        (fields real clients are known to send that the API ignores)."""
        if not raw.strip():
            return cls({})
        data = parse_json(raw)
        if not isinstance(data, dict):
            raise ApiError(400, errors.BODY_NOT_OBJECT)
        unknown = sorted(set(data) - set(allowed) - set(tolerated))
        if unknown:
            raise ApiError.invalid(unknown[0], errors.UNKNOWN_FIELD)
        return cls(data)

    def has(self, name: str) -> bool:
        return name in self.data

    def _typed(self, name: str, kind: type[_T] | tuple[type, ...], label: str) -> _T | None:
        value = self.data.get(name)
        if value is None:
            return None
        # bool is an int in Python but never a number in JSON schemas.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ApiError.invalid(name, f"must be {label}")
        return value  # type: ignore[return-value]

    def string(self, name: str, *, required: bool = False) -> str | None:
        value = self._typed(name, str, "a string")
        if value is None and required:
            raise ApiError.invalid(name, "is required")
        if value is not None and "\x00" in value:
            raise ApiError.invalid(name, "must not contain NUL bytes")
        return value

    def boolean(self, name: str) -> bool | None:
        return self._typed(name, bool, "a boolean")

    def integer(self, name: str, *, low: int | None = None, high: int | None = None) -> int | None:
        value = self._typed(name, int, "an integer")
        if value is not None and (
            (low is not None and value < low) or (high is not None and value > high)
        ):
            raise ApiError.invalid(name, f"must be between {low} and {high}")
        return value

    def string_list(self, name: str) -> list[str] | None:
        value = self._typed(name, list, "a list of strings")
        if value is not None and not all(
            isinstance(item, str) and "\x00" not in item for item in value
        ):
            raise ApiError.invalid(name, "must be a list of strings")
        return value

    def string_map(self, name: str) -> dict[str, str] | None:
        value = self._typed(name, dict, "an object of strings")
        if value is not None and not all(
            isinstance(item, str) and "\x00" not in item for item in value.values()
        ):
            raise ApiError.invalid(name, "must be an object of strings")
        return value

    def env_map(self, name: str) -> dict[str, str] | None:
        """A map of environment variables whose names are checked."""
        value = self.string_map(name)
        if value is not None:
            bad = [key for key in value if not ENV_NAME.match(key)]
            if bad:
                raise ApiError.invalid(name, errors.ENV_NAME_INVALID)
        return value


def path_problem(path: str) -> str | None:
    r"""What makes ``path`` one no sandbox can hold, or None: a :data:`PATH_FORBIDDEN`
    character, more than :data:`MAX_PATH_DEPTH` directories, a name longer than
    :data:`MAX_NAME_BYTES` or a path longer than :data:`MAX_PATH_BYTES` (the sandbox
    filesystem's own limits, checked before anything is touched).

    Example:
        >>> path_problem("/srv/app/caf\u00e9.txt") is None, path_problem("/srv/a\x1bb") is None
        (True, False)
    """
    if _UNSAFE_PATH.search(path):
        return errors.PATH_INVALID
    encoded = path.encode()
    names = [name for name in encoded.split(b"/") if name]
    if len(encoded) > MAX_PATH_BYTES or any(len(name) > MAX_NAME_BYTES for name in names):
        return errors.PATH_TOO_LONG.format(path_bytes=MAX_PATH_BYTES, name_bytes=MAX_NAME_BYTES)
    if len(names) > MAX_PATH_DEPTH:
        return errors.PATH_TOO_DEEP.format(depth=MAX_PATH_DEPTH)
    return None


def query_int(
    query: Mapping[str, str], name: str, default: int, *, low: int = 0, high: int | None = None
) -> int:
    """An integer query parameter, clamped to ``high``; 400 when it is not an integer or below
    ``low``."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError.invalid(name, "must be an integer") from None
    if value < low:
        raise ApiError.invalid(name, f"must be at least {low}")
    return min(value, high) if high is not None else value
