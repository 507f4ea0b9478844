"""Delegated sandbox access tokens (contract §4.13, §1.2).

A sandbox's owner enables one token for it (``POST …/access-token``), shown once in plaintext
and afterwards only as a hint. Sent as ``X-Api-Key`` (or any credential header), the token
acts for the owner's tenant on that one sandbox, and only on its runtime routes (exec, files,
processes, the desktop): any other route answers 403, the same routes on another sandbox 404.
Rotating replaces the token at once (the old one answers 401 from then on); disabling, or the
sandbox going away, ends it.

Tokens are credentials: they are never journaled, logged or put in an error, and an
:class:`AccessToken`'s ``repr`` leaves the token out.

Example::

    tokens = AccessTokens(ids, clock.wall)
    issued = tokens.enable(tenant, sandbox)   # issued.token: 'skp_sb_...', shown once
    tokens.live.get(issued.token)             # the AccessToken: its owner and sandbox
    tokens.rotate(sandbox)               # a new token; the old one no longer resolves
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fake_server import errors
from fake_server.clock import isoformat
from fake_server.errors import ApiError
from fake_server.identifiers import Identifiers

if TYPE_CHECKING:
    from fake_server.sandbox import Sandbox
    from fake_server.tenants import Tenant

__all__ = [
    "DELEGATED_AREAS",
    "TOKEN_PREFIX",
    "AccessToken",
    "AccessTokens",
    "delegable",
    "is_token_shaped",
]

#: What delegated tokens look like (owners' keys are ``skp_`` and letters or digits).
TOKEN_PREFIX = "skp_sb_"
_TOKEN_LENGTH = 32
#: The routes under ``/v1/sandboxes/{id}`` a delegated token may call: the sandbox's runtime.
DELEGATED_AREAS = ("/exec", "/files", "/processes", "/computer")
_SANDBOX = "/v1/sandboxes/{id}"


def delegable(template: str | None) -> bool:
    """Whether a delegated token may call the route ``template``.

    Example:
        >>> delegable("/v1/sandboxes/{id}/processes/{pid}/wait"), delegable("/v1/sandboxes/{id}")
        (True, False)
    """
    if template is None or not template.startswith(_SANDBOX + "/"):
        return False
    rest = template[len(_SANDBOX) :]
    return any(rest == area or rest.startswith(area + "/") for area in DELEGATED_AREAS)


def is_token_shaped(key: str) -> bool:
    """Whether ``key`` looks like a delegated token (such a key never makes a tenant).

    Example:
        >>> is_token_shaped("skp_sb_abc"), is_token_shaped("skp_abc")
        (True, False)
    """
    return key.startswith(TOKEN_PREFIX)


@dataclass(slots=True)
class AccessToken:
    """The token a sandbox has enabled, and for whom it acts."""

    token: str = field(repr=False)
    #: The tenant it acts for (its tokens are revoked when it is dropped).
    owner: Tenant = field(repr=False)
    sandbox: str
    created_at: datetime
    rotated_at: datetime | None = None

    def hint(self) -> str:
        """The first nine and last four characters, e.g. ``skp_sb_fi...irst``."""
        return f"{self.token[:9]}...{self.token[-4:]}"

    def _times(self) -> dict[str, Any]:
        times = {"created_at": isoformat(self.created_at)}
        if self.rotated_at is not None:
            times["rotated_at"] = isoformat(self.rotated_at)
        return times

    def issued_view(self) -> dict[str, Any]:
        """What enabling or rotating answers: the plaintext token, this once."""
        return {"token": self.token, "enabled": True, **self._times()}

    def metadata_view(self) -> dict[str, Any]:
        """What reading it answers: a hint, never the token."""
        return {"enabled": True, "token_hint": self.hint(), **self._times()}


#: What a sandbox without a token answers.
_DISABLED: dict[str, Any] = {"enabled": False}


class AccessTokens:
    """Every sandbox's token, by sandbox id and by token (sandbox ids are unique across
    tenants)."""

    def __init__(self, ids: Identifiers, wall: Callable[[], datetime]) -> None:
        self._ids = ids
        self._wall = wall
        self._by_sandbox: dict[str, AccessToken] = {}
        self._by_token: dict[str, AccessToken] = {}
        #: The live tokens by token, read-only: ``live.get(key)`` is the token a key is, if it
        #: is one (the request layer asks on every request: a map's own ``get``, no call of ours).
        self.live: Mapping[str, AccessToken] = MappingProxyType(self._by_token)

    def _mint(self) -> str:
        while True:
            token = TOKEN_PREFIX + self._ids.key_chars(_TOKEN_LENGTH)
            if token not in self._by_token:
                return token

    def enable(self, owner: Tenant, sandbox: Sandbox) -> AccessToken:
        """Issue the token of ``owner``'s ``sandbox``; 409 if it has one."""
        if sandbox.id in self._by_sandbox:
            raise ApiError(409, errors.ACCESS_TOKEN_ENABLED)
        issued = AccessToken(self._mint(), owner, sandbox.id, self._wall())
        self._by_sandbox[sandbox.id] = issued
        self._by_token[issued.token] = issued
        return issued

    def metadata(self, sandbox: Sandbox) -> dict[str, Any]:
        issued = self._by_sandbox.get(sandbox.id)
        return dict(_DISABLED) if issued is None else issued.metadata_view()

    def rotate(self, sandbox: Sandbox) -> AccessToken:
        """Replace the token (the old one stops resolving now); 404 if there is none."""
        issued = self._by_sandbox.get(sandbox.id)
        if issued is None:
            raise ApiError(404, errors.ACCESS_TOKEN_NOT_FOUND)
        del self._by_token[issued.token]
        issued.token = self._mint()
        issued.rotated_at = self._wall()
        self._by_token[issued.token] = issued
        return issued

    def disable(self, sandbox: Sandbox) -> None:
        """Revoke the sandbox's token, if it has one."""
        issued = self._by_sandbox.pop(sandbox.id, None)
        if issued is not None:
            del self._by_token[issued.token]

    def forget_tenant(self, tenant_id: str) -> None:
        """Revoke every token of a tenant that is being dropped."""
        for issued in [i for i in self._by_sandbox.values() if i.owner.id == tenant_id]:
            del self._by_sandbox[issued.sandbox]
            del self._by_token[issued.token]

    def clear(self) -> None:
        self._by_sandbox.clear()
        self._by_token.clear()

    def __len__(self) -> int:
        return len(self._by_sandbox)
