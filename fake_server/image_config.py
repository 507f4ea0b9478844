"""What an image says about the commands run in it: the variables its Dockerfile's ``ENV`` set
and the directory its last ``WORKDIR`` named.

Docker keeps both in the image's configuration, and every command of a container starts with
them: ``ENV`` variables are in its environment (under what the sandbox and the request set),
and ``WORKDIR`` is its directory unless the request names one. ``ARG`` is the build's alone,
and ``USER``, ``CMD``, ``ENTRYPOINT``... are ignored (a sandbox runs its own init, as root).

Example:
    >>> image = ImageConfig({"GREETING": "hi"}, "/srv/app")
    >>> image.environment({"TOKEN": "t"}) == {"GREETING": "hi", "TOKEN": "t"}
    True
    >>> STOCK_IMAGE.workdir
    '/root'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["STOCK_IMAGE", "ImageConfig"]


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """An image's environment and working directory (shared by every sandbox started from
    it: never changed once built)."""

    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = "/root"

    def environment(self, *layers: Mapping[str, str]) -> dict[str, str]:
        """The image's variables with ``layers`` on top, later ones winning (the sandbox's
        declared ``envs``, then a request's ``env``), as ``docker run -e`` overrides ``ENV``."""
        merged = dict(self.env)
        for layer in layers:
            merged.update(layer)
        return merged


#: A stock rootfs's (``devbox:1``...): no variables of its own, commands start in root's home.
STOCK_IMAGE = ImageConfig()
