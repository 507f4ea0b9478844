"""HTTP header names in the form aiohttp's header mappings look up fastest.

aiohttp's headers are case-insensitive multidicts: a plain ``str`` name is case-folded on every
lookup, every ``in`` and every assignment, while a name of the multidict's own case-insensitive
string type (``istr``, which aiohttp's :mod:`aiohttp.hdrs` constants are) carries its folded
form. Names the request layer uses on every request are made of that type once, here. The type
is taken from an aiohttp constant rather than imported from multidict, which is aiohttp's
dependency, not ours; it is a ``str`` subclass that spells and compares (case-sensitively) and
hashes like the name it was made from, so plain dicts of headers work with these names too.

Example:
    >>> header_name("X-Api-Key") == "X-Api-Key"
    True
    >>> {"X-Request-ID": "req_00000001"}[X_REQUEST_ID]
    'req_00000001'
"""

from __future__ import annotations

from aiohttp import hdrs

__all__ = ["X_REQUEST_ID", "header_name"]

_CASE_INSENSITIVE = type(hdrs.AUTHORIZATION)


def header_name(name: str) -> str:
    """``name`` as a header name aiohttp looks up without case-folding it.

    Example:
        >>> str(header_name("X-Request-ID"))
        'X-Request-ID'
    """
    return _CASE_INSENSITIVE(name)


#: The id of each answer (and of the request it answers), on every response of the fake.
X_REQUEST_ID = header_name("X-Request-ID")
