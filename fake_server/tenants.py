"""Tenants: every API key is its own namespace of sandboxes.

A tenant is known to the rest of the fake (and to the journal) only by its id, never by its
key. In open mode any non-empty key is a tenant, created on first use; in strict mode only
registered keys are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from fake_server import errors
from fake_server.access_tokens import is_token_shaped
from fake_server.disks import Disks
from fake_server.errors import ApiError
from fake_server.identifiers import Identifiers
from fake_server.lifecycle import Durations, Status
from fake_server.listing import SandboxListing
from fake_server.networks import Networks
from fake_server.sandbox import Sandbox

if TYPE_CHECKING:
    from fake_server.templates import Template

__all__ = ["Tenant", "Tenants"]


@dataclass(eq=False)
class Tenant:
    """One API key's namespace."""

    id: str
    #: Made on first use of an unknown key (open mode), not registered on purpose: such a
    #: tenant may be dropped once idle (``ServerConfig.idle_tenant_s``).
    implicit: bool = False
    #: The fake clock's time of its last authenticated request.
    last_seen: float = 0.0
    #: By id, in creation order. Add and drop sandboxes through :meth:`add` and
    #: :meth:`keep_destroyed` only: :attr:`listing` must follow.
    sandboxes: dict[str, Sandbox] = field(default_factory=dict)
    #: The same sandboxes by position, overall and per status (list pages read this).
    listing: SandboxListing = field(default_factory=SandboxListing)
    #: Live (non-terminal) sandbox names: names are unique only among those.
    names: dict[str, str] = field(default_factory=dict)
    by_ip: dict[str, str] = field(default_factory=dict)
    #: Destroyed sandboxes still readable, oldest first (an ordered set of ids).
    destroyed: dict[str, None] = field(default_factory=dict)
    #: This tenant's own transition and create durations (``None``: the fake's). They go with
    #: the tenant, so a test's timing never reaches another test sharing the fake.
    durations: Durations | None = None
    #: Templates by id, in creation order (see fake_server.templates).
    templates: dict[str, Template] = field(default_factory=dict)
    #: Whether cost-incurring calls go through (402 otherwise): set by the control API.
    has_credit: bool = True
    networks: Networks = field(default_factory=Networks)
    disks: Disks = field(default_factory=Disks)

    def check_credit(self) -> None:
        """402 for a cost-incurring call when the tenant has no credit.

        Example::

            tenant.has_credit = False
            tenant.check_credit()   # ApiError(402, 'insufficient credit')
        """
        if not self.has_credit:
            raise ApiError(402, errors.NO_CREDIT)

    def get(self, sandbox_id: str) -> Sandbox:
        """The sandbox, or 404 (also for another tenant's id: existence is not disclosed)."""
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise ApiError(404, errors.SANDBOX_NOT_FOUND)
        return sandbox

    def add(self, sandbox: Sandbox) -> None:
        self.sandboxes[sandbox.id] = sandbox
        self.listing.add(sandbox)
        self.names[sandbox.name] = sandbox.id
        self.by_ip[sandbox.ip] = sandbox.id

    def release_name(self, sandbox: Sandbox) -> None:
        if self.names.get(sandbox.name) == sandbox.id:
            del self.names[sandbox.name]

    def keep_destroyed(self, sandbox: Sandbox, keep: int) -> None:
        """Keep ``sandbox`` readable as destroyed, and only the ``keep`` newest such: older ones
        are forgotten (a GET answers 404), so a long-running fake does not grow without end."""
        self.destroyed[sandbox.id] = None
        while len(self.destroyed) > keep:
            oldest = next(iter(self.destroyed))
            del self.destroyed[oldest]
            gone = self.sandboxes.pop(oldest, None)
            if gone is None:
                continue
            self.listing.remove(gone)
            if self.by_ip.get(gone.ip) == gone.id:
                del self.by_ip[gone.ip]

    def template(self, ref: str) -> Template | None:
        """One of its templates, by id or name (the template routes and a create's rootfs
        take either)."""
        found = self.templates.get(ref)
        if found is None:
            found = next((t for t in self.templates.values() if t.name == ref), None)
        return found

    def has_live_sandboxes(self) -> bool:
        return len(self.listing) > self.listing.count(Status.DESTROYED)

    def stats(self) -> dict[str, int]:
        """Its sandboxes by status, destroyed ones left out, from the listing's counts (a
        client may ask on every call, and a tenant may hold many sandboxes).

        Example::

            tenant.stats()   # {'running': 2, 'paused': 1, 'other': 0, 'total': 3}
        """
        listing = self.listing
        total = len(listing) - listing.count(Status.DESTROYED)
        running, paused = listing.count(Status.RUNNING), listing.count(Status.PAUSED)
        return {
            "running": running,
            "paused": paused,
            "other": total - running - paused,
            "total": total,
        }


class Tenants:
    """The key → tenant map.

    Example::

        tenants = Tenants(ids, strict=False)
        key = tenants.create()            # a fresh key and tenant
        tenants.resolve(key).id           # 'usr_...'
    """

    def __init__(self, ids: Identifiers, *, strict: bool) -> None:
        self._ids = ids
        self.strict = strict
        self._by_key: dict[str, Tenant] = {}
        #: The registered keys' tenants, read-only: ``known.get(key)`` finds a key's tenant
        #: without making one (the control API names tenants by key and must not register what
        #: it is handed; the request layer, on every request, sends only a key it does not hold
        #: to :meth:`resolve`).
        self.known: Mapping[str, Tenant] = MappingProxyType(self._by_key)
        #: Registered tenants by id: a fresh id never repeats a live one, even after a reseed
        #: starts the id sequence again.
        self._by_id: dict[str, Tenant] = {}
        #: Called with each tenant an unknown key makes (the fake drops idle ones then).
        self.on_implicit: Callable[[Tenant], object] = lambda tenant: None

    def register(self, api_key: str, *, implicit: bool = False) -> Tenant:
        """Register ``api_key`` (idempotent) and return its tenant."""
        tenant = self._by_key.get(api_key)
        if tenant is None:
            tenant_id = self._ids.tenant_id()
            while tenant_id in self._by_id:
                tenant_id = self._ids.tenant_id()
            tenant = Tenant(tenant_id, implicit=implicit)
            self._by_key[api_key] = tenant
            self._by_id[tenant_id] = tenant
        elif not implicit:
            tenant.implicit = False  # registered on purpose now: it stays
        return tenant

    def create(self) -> str:
        """Mint a fresh key with its own empty tenant; returns the key."""
        key = self._ids.api_key()
        while key in self._by_key:
            key = self._ids.api_key()
        self.register(key)
        return key

    def resolve(self, api_key: str | None) -> Tenant:
        """The tenant for a request's key; 401 for a missing key (or an unknown one in strict
        mode, or one shaped like a sandbox access token: a revoked token must not become a
        tenant of its own)."""
        if not api_key or not api_key.strip():
            raise ApiError(401, errors.INVALID_API_KEY)
        tenant = self._by_key.get(api_key)
        if tenant is None:
            if self.strict or is_token_shaped(api_key):
                raise ApiError(401, errors.INVALID_API_KEY)
            tenant = self.register(api_key, implicit=True)
            self.on_implicit(tenant)
        return tenant

    def by_id(self, tenant_id: str) -> Tenant | None:
        """The tenant with this id, if it is still registered."""
        return self._by_id.get(tenant_id)

    def forget(self, api_key: str) -> None:
        """Drop a tenant and everything in it (the plugin does this after each test)."""
        tenant = self._by_key.pop(api_key, None)
        if tenant is not None:
            del self._by_id[tenant.id]

    def keys_of(self, doomed: Callable[[Tenant], bool]) -> list[str]:
        """The keys whose tenants ``doomed`` picks (to drop them)."""
        return [key for key, tenant in self._by_key.items() if doomed(tenant)]

    def __iter__(self) -> Iterator[Tenant]:
        return iter(list(self._by_key.values()))

    def __len__(self) -> int:
        return len(self._by_key)

    def clear(self) -> None:
        self._by_key.clear()
        self._by_id.clear()
