"""Typed reading of JSON request bodies and query strings, with 400s that name the field.

Example::

    CREATE = BodySchema(obj({"shape": string()}, ignored=("host_id",)), required=True)
    shape = CREATE.parse(raw).string("shape")
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from fake_server import errors
from fake_server.errors import ApiError

__all__ = [
    "ENV_NAME",
    "MAX_JSON_DEPTH",
    "PATH_FORBIDDEN",
    "Body",
    "BodySchema",
    "parse_json",
    "path_problem",
    "query_int",
]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: No body the API takes nests deeper than a few levels; past this it is refused with a 400
#: (deep enough nesting would otherwise end in a RecursionError somewhere later).
MAX_JSON_DEPTH = 32
_INT64 = 1 << 63
_BACKSLASH = ord("\\")
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


#: One decoder for every body (json.loads with hooks builds a decoder per call).
_DECODER = json.JSONDecoder(parse_int=_integer, parse_float=_real, parse_constant=_constant)


def parse_json(raw: bytes | str) -> Any:
    """Parse a request body as strict JSON, or raise a 400 :class:`ApiError` that says why.

    Beyond the grammar it refuses what would break the fake later, far from the request: lone
    surrogates (they cannot be encoded back into an answer or the journal), NaN, infinities
    and numbers out of range, and nesting deeper than :data:`MAX_JSON_DEPTH`.

    Example::

        parse_json(b'{"seconds": 5}')         # {'seconds': 5}
        parse_json(b'{"seconds": Infinity}')  # ApiError(400, errors.JSON_NOT_FINITE)
    """
    # Plain ASCII with no \u escape holds no surrogate, and nests no deeper than it has
    # brackets: most bodies, checked at C speed instead of walked. ASCII without a NUL byte is
    # not UTF-16 or UTF-32 (whose "\u" has NULs between its bytes, and a BOM is not ASCII), so
    # it is UTF-8, what json.detect_encoding would answer, without asking it. (Bytes are
    # searched for an int, a plain memchr, an eighth of the cost of a bytes needle: a backslash
    # first, as most bodies have none.)
    plain = (
        isinstance(raw, bytes)
        and raw.isascii()
        and 0 not in raw
        and (_BACKSLASH not in raw or b"\\u" not in raw)
        and raw.count(b"{") + raw.count(b"[") <= MAX_JSON_DEPTH
    )
    try:
        if isinstance(raw, bytes):
            raw = (
                raw.decode("ascii")
                if plain
                else raw.decode(json.detect_encoding(raw), "surrogatepass")
            )
        elif raw.startswith("\ufeff"):
            raise ValueError("a byte order mark before a JSON text")  # as json.loads refuses
        # What _DECODER.decode does, but for the whitespace around the document, which it finds
        # with a regex on each side: JSON has four whitespace characters (RFC 8259).
        text = raw.strip(" \t\n\r")
        data, end = _DECODER.raw_decode(text)
        if end != len(text):
            raise ValueError("more after the JSON text")  # as decode refuses "Extra data"
    except _Refused as exc:
        raise ApiError(400, str(exc)) from None
    except RecursionError:
        raise ApiError(400, errors.JSON_TOO_DEEP.format(depth=MAX_JSON_DEPTH)) from None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, errors.INVALID_JSON) from None
    if not plain:
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


#: One compiled check of a body field: raises a 400 naming the field when its value is wrong.
_Check = Callable[[str, Any], None]


class BodySchema:
    """A JSON object request body, declared once as a JSON Schema (built with
    :mod:`fake_server.api_schema`): the OpenAPI document shows it and :meth:`parse` enforces it.

    What is enforced, with a 400 naming the field: unknown fields (unless the schema's
    ``patternProperties`` tolerate them: fields real clients send that the API ignores), required
    fields, each field's JSON type (items and values of arrays and maps included; strings never
    hold NUL), numeric ``minimum``/``maximum`` and variable names (``propertyNames``). ``null``
    is read as "absent", as clients send it for unset fields. Domain rules the schema documents
    from the model's own constants (a known shape, a free name, a signal the fake delivers) are
    the model's to check, with the contract's messages.

    Example::

        SEED = BodySchema(obj({"seed": integer(minimum=0)}), required=True)
        SEED.parse(b'{"seed": -1}')   # ApiError(400): {"seed": "must be at least 0"}
    """

    def __init__(
        self,
        schema: Mapping[str, Any],
        *,
        required: bool = False,
        description: str | None = None,
        checks: Mapping[str, Callable[[Any], object]] = MappingProxyType({}),
    ) -> None:
        """``checks`` replace the derived check of a field by the model's own (which raises
        ``ValueError`` saying what is wrong), where the model words it for every caller alike."""
        self.schema = schema
        #: Whether the operation requires a body (an empty one still reads as ``{}``).
        self.required = required
        self.description = description
        properties: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
        self._checks = {
            name: _model_check(checks[name]) if name in checks else _check_of(field)
            for name, field in properties.items()
        }
        self._required: tuple[str, ...] = tuple(schema.get("required", ()))
        self._tolerated = [re.compile(pattern) for pattern in schema.get("patternProperties", {})]

    def parse(self, raw: bytes) -> Body:
        """Parse ``raw`` (empty, or ``null``, means ``{}``) and check it against the schema."""
        # A body of `null` is no body, as Go's decoder reads it into the server's struct (the
        # Rust SDK sends `null` for the actions that take no body, windows' focus and restore).
        data: Any = parse_json(raw) if raw.strip() else None
        if data is None:
            data = {}
        elif not isinstance(data, dict):
            raise ApiError(400, errors.BODY_NOT_OBJECT)
        checks = self._checks
        for name in sorted(data):
            check = checks.get(name)
            if check is None:
                if not any(pattern.match(name) for pattern in self._tolerated):
                    raise ApiError.invalid(name, errors.UNKNOWN_FIELD)
                continue
            value = data[name]
            if value is not None:
                check(name, value)
        for name in self._required:
            if data.get(name) is None:
                raise ApiError.invalid(name, "is required")
        return Body(data)


def _check_of(schema: Mapping[str, Any]) -> _Check:
    """The check of one field's value (not ``None``), compiled from its schema."""
    branches = schema.get("anyOf", ())
    if "type" not in schema and any(branch.get("type") == "null" for branch in branches):
        # nullable(x): null is "absent", read before any check; x decides the rest.
        (schema,) = [branch for branch in branches if branch.get("type") != "null"]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return _number_check(schema)
    if kind == "string":
        return _string_check
    if kind == "boolean":
        return _kind_check(bool, "a boolean")
    if kind == "array":
        return _list_check
    if kind == "object":
        if "additionalProperties" in schema and "properties" not in schema:
            return _env_check if "propertyNames" in schema else _map_check
        return _kind_check(dict, "an object")
    return _unchecked  # a reference or a constant: the model's domain rule


def _model_check(check: Callable[[Any], object]) -> _Check:
    def model_check(name: str, value: Any) -> None:
        try:
            check(value)
        except ValueError as exc:
            raise ApiError.invalid(name, str(exc)) from None

    return model_check


def _unchecked(name: str, value: Any) -> None:
    return None


def _kind_check(kind: type, label: str) -> _Check:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, kind):
            raise ApiError.invalid(name, f"must be {label}")

    return check


def _string_check(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ApiError.invalid(name, "must be a string")
    if "\x00" in value:
        raise ApiError.invalid(name, "must not contain NUL bytes")


def _number_check(schema: Mapping[str, Any]) -> _Check:
    integral = schema["type"] == "integer"
    kind: type | tuple[type, ...] = int if integral else (int, float)
    label = "an integer" if integral else "a number"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        bounds = f"must be between {low} and {high}"
    else:
        bounds = f"must be at least {low}" if low is not None else f"must be at most {high}"

    def check(name: str, value: Any) -> None:
        # bool is an int in Python but never a number in JSON schemas.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ApiError.invalid(name, f"must be {label}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ApiError.invalid(name, bounds)

    return check


def _all_text(values: Iterable[Any]) -> bool:
    """Whether every value is a string without NUL: str.join refuses anything but strings, so
    the check runs at C speed instead of one call per value."""
    try:
        return "\x00" not in "".join(values)
    except TypeError:
        return False


def _list_check(name: str, value: Any) -> None:
    if not isinstance(value, list) or not _all_text(value):
        raise ApiError.invalid(name, "must be a list of strings")


def _map_check(name: str, value: Any) -> None:
    if not isinstance(value, dict) or not _all_text(value.values()):
        raise ApiError.invalid(name, "must be an object of strings")


def _env_check(name: str, value: Any) -> None:
    _map_check(name, value)
    if not all(ENV_NAME.match(key) for key in value):
        raise ApiError.invalid(name, errors.ENV_NAME_INVALID)


class Body:
    """A request body that passed its :class:`BodySchema`: its fields, read by type."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def has(self, name: str) -> bool:
        return name in self.data

    def _typed(self, name: str, kind: type[_T]) -> _T | None:
        value = self.data.get(name)
        # The schema checked the value; this only guards a handler reading a field as another
        # type than its schema declares (a bug, not a bad request).
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"body field {name!r} is declared as another type")
        return value

    def string(self, name: str) -> str | None:
        return self._typed(name, str)

    def boolean(self, name: str) -> bool | None:
        return self._typed(name, bool)

    def integer(self, name: str) -> int | None:
        return self._typed(name, int)

    def number(self, name: str) -> float | None:
        value = self._typed(name, (int, float))  # type: ignore[arg-type]
        return None if value is None else float(value)

    def string_list(self, name: str) -> list[str] | None:
        return self._typed(name, list)

    def string_map(self, name: str) -> dict[str, str] | None:
        return self._typed(name, dict)


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
    """An integer query parameter, clamped to ``high``; 400 when it is not an integer, is below
    ``low`` or does not fit in 64 bits (as a body's integer: a client decoding the number
    echoed back, such as a page's ``offset``, could not)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = _integer(raw)
    except ValueError:
        raise ApiError.invalid(name, "must be an integer") from None
    except _Refused:
        raise ApiError.invalid(name, f"must be at most {_INT64 - 1}") from None
    if value < low:
        raise ApiError.invalid(name, f"must be at least {low}")
    return min(value, high) if high is not None else value
