"""Package roots that import a public name's module only when the name is first used.

``import pytest_createos.plugin`` runs ``pytest_createos/__init__.py`` first, and pytest loads the
plugin in every run of every project that installs it: the package roots must not import the
fake, the provider and aiohttp up front. A root lists where each public name lives, and
:func:`lazy_exports` gives it the module ``__getattr__`` and ``__dir__`` of PEP 562.

Example::

    # in a package's __init__.py
    __getattr__, __dir__ = lazy_exports(globals(), {"ServerConfig": "fake_server.config"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package whose globals are ``namespace``:
    ``exports`` maps each public name to the module that defines it.

    Example:
        >>> namespace = {"__name__": "demo"}
        >>> getattr_, dir_ = lazy_exports(namespace, {"dedent": "textwrap"})
        >>> getattr_("dedent")("  x")
        'x'
        >>> "dedent" in namespace  # imported once, then an ordinary global
        True
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
