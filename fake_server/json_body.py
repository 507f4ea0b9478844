"""The JSON form of every body the fake sends: compact UTF-8, with non-ASCII text as is.

A leaf module: the routes and the connection layer (which answers requests aiohttp could not
parse) both encode with it.

Example::

    encode({"status": "success", "data": {"name": "café"}})
    # b'{"status":"success","data":{"name":"caf\\xc3\\xa9"}}'
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["encode"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode(body: Any) -> bytes:
    """Compact UTF-8 JSON, the form every response body takes.

    Example:
        >>> encode({"ok": True, "name": "café"})
        b'{"ok":true,"name":"caf\\xc3\\xa9"}'
    """
    return _dumps(body).encode()
