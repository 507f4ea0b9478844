"""Overlay networks: a tenant's named networks and the sandboxes that are members of them.

Membership follows the sandbox: it joins through ``POST /v1/sandboxes/{id}/networks`` or its
create request, and leaves through ``DELETE …/networks/{net}`` or by ending (a sandbox that
reaches ``destroyed`` or ``failed`` is no member of anything). A network with live members
cannot be deleted.

Example::

    networks = Networks()
    net = networks.create(ids, clock.wall(), "backend")
    networks.attach(net.id, sandbox)
    networks.view(net)["members"]     # [{'sandbox_id': 'sb_...', 'status': 'running', ...}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fake_server import errors
from fake_server.clock import isoformat
from fake_server.errors import ApiError
from fake_server.identifiers import Identifiers
from fake_server.lifecycle import Lifecycle, Status
from fake_server.registry import Registry
from fake_server.sandbox import Sandbox

__all__ = ["Network", "Networks", "parse_refs"]


@dataclass(eq=False, slots=True)
class Network:
    """One overlay network and its members (by sandbox id, in the order they joined)."""

    id: str
    name: str
    created_at: datetime
    members: dict[str, Sandbox] = field(default_factory=dict)

    def join(self, sandbox: Sandbox) -> None:
        """Make ``sandbox`` a member (again: harmless).

        Example::

            network.join(sandbox)
        """
        self.members[sandbox.id] = sandbox

    def view(self, *, members: bool) -> dict[str, Any]:
        """The network as the API shows it: ``member_count`` always, ``members`` on a GET of
        the network itself.

        Example::

            network.view(members=False)   # {'id': 'net_...', 'name': 'backend', ...}
        """
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "created_at": isoformat(self.created_at),
            "member_count": len(self.members),
        }
        if members:
            body["members"] = [_member(sandbox) for sandbox in self.members.values()]
        return body


def _member(sandbox: Sandbox) -> dict[str, Any]:
    member: dict[str, Any] = {
        "sandbox_id": sandbox.id,
        "status": sandbox.status.value,
        "name": sandbox.name,
    }
    if sandbox.status is not Status.CREATING:  # no address yet, as in the sandbox's view
        member["ip"] = sandbox.ip
    return member


def parse_refs(raw: object, field: str = "networks") -> list[str]:
    """The ``networks`` of a create request, ``[{"id": "<network id or name>"}]``: the refs
    (400 naming the first bad item otherwise).

    Example:
        >>> parse_refs([{"id": "backend"}])
        ['backend']
    """
    if not isinstance(raw, list):
        raise ApiError.invalid(field, "must be a list of {id}")
    refs = []
    for index, item in enumerate(raw):
        ref = item.get("id") if isinstance(item, Mapping) and set(item) <= {"id"} else None
        if not isinstance(ref, str) or not ref or "\x00" in ref:
            raise ApiError.invalid(f"{field}[{index}]", "must be {id: <network id or name>}")
        refs.append(ref)
    return refs


class Networks(Registry[Network]):
    """One tenant's networks.

    Example::

        networks = Networks()
        networks.create(ids, now, "backend").name    # 'backend'
        networks.get("backend")                      # by name or by id
    """

    def __init__(self) -> None:
        super().__init__(errors.NETWORK_NOT_FOUND, errors.NETWORK_NAME_TAKEN)

    def create(self, ids: Identifiers, now: datetime, name: str | None) -> Network:
        """A new network named ``name`` (400 for a bad name, 409 for a taken one).

        Example::

            networks.create(ids, clock.wall(), "backend").id    # 'net_...'
        """
        name = self.check_new_name(name)
        return self.add(Network(id=ids.network_id(), name=name, created_at=now))

    def delete(self, ref: str) -> Network:
        """Delete a network; 409 while a sandbox is still a member.

        Example::

            networks.delete("backend")
        """
        network = self.get(ref)
        if network.members:
            raise ApiError(409, errors.NETWORK_HAS_MEMBERS)
        self.remove(network)
        return network

    def attach(self, ref: str, sandbox: Sandbox) -> Network:
        """Make ``sandbox`` a member of the network ``ref`` (id or name); joining twice is
        harmless. 409 once the sandbox is going away.

        Example::

            networks.attach("backend", sandbox)
        """
        network = self.get(ref)
        Lifecycle.check_modifiable(sandbox)
        network.join(sandbox)
        return network

    def resolve(self, refs: Sequence[str]) -> list[Network]:
        """The networks a create request names, each by id or name (404 for any unknown).

        Example::

            networks.resolve(["backend", "net_01h..."])
        """
        return [self.get(ref) for ref in refs]

    def detach(self, ref: str, sandbox: Sandbox) -> Network:
        """Take ``sandbox`` out of the network ``ref``; 404 when it is not a member.

        Example::

            networks.detach("backend", sandbox)
        """
        network = self.get(ref)
        if network.members.pop(sandbox.id, None) is None:
            raise ApiError(404, errors.NETWORK_NOT_MEMBER)
        return network

    def leave_all(self, sandbox: Sandbox) -> None:
        """A sandbox that ended leaves every network it was in.

        Example::

            networks.leave_all(sandbox)   # when it reaches destroyed or failed
        """
        for network in self:
            network.members.pop(sandbox.id, None)
