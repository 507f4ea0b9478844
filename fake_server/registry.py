"""A tenant's named account-level resources (networks, disks): by id, by name, in creation
order, looked up by either.

The API names a network or a disk by its id or by its name wherever it takes one (``GET
/v1/disks/{ref}``, ``{"id": "<network id or name>"}``). The two never clash: every id holds a
``_`` (``net_…``, ``disk_…``), which the name rule does not allow.

Example::

    networks: Registry[Network] = Registry(errors.NETWORK_NOT_FOUND, errors.NETWORK_NAME_TAKEN)
    networks.check_new_name("backend")          # 400 for a bad name, 409 for a taken one
    networks.add(network)
    networks.get("backend") is networks.get(network.id)   # True
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from fake_server import errors
from fake_server.errors import ApiError

__all__ = ["NAME_PATTERN", "Named", "Registry", "check_name"]

#: The disk name rule of the contract (§9), used for networks too: the contract gives networks
#: no rule of their own, and the same DNS-label-like names fit both.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class Named(Protocol):
    """What a registry holds: anything with an id and a name."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=Named)


def check_name(name: str | None) -> str:
    """``name`` if it follows :data:`NAME_PATTERN`, else a 400 naming the field.

    Example:
        >>> check_name("scratch-1")
        'scratch-1'
    """
    if name is None:
        raise ApiError.invalid("name", "is required")
    if not NAME_PATTERN.match(name):
        raise ApiError.invalid("name", errors.RESOURCE_NAME_INVALID)
    return name


class Registry(Generic[_T]):
    """Resources of one kind in one tenant, by id (creation order) and by name."""

    def __init__(self, not_found: str, name_taken: str) -> None:
        self._not_found = not_found
        self._name_taken = name_taken
        self._by_id: dict[str, _T] = {}
        self._names: dict[str, str] = {}

    def check_new_name(self, name: str | None) -> str:
        """A valid name no resource here holds (409 otherwise)."""
        name = check_name(name)
        if name in self._names:
            raise ApiError(409, self._name_taken)
        return name

    def add(self, item: _T) -> _T:
        self._by_id[item.id] = item
        self._names[item.name] = item.id
        return item

    def get(self, ref: str) -> _T:
        """The resource with this id, else with this name; 404 when neither (also for another
        tenant's: existence is not disclosed)."""
        item = self._by_id.get(ref)
        if item is None:
            item_id = self._names.get(ref)
            item = self._by_id.get(item_id) if item_id is not None else None
        if item is None:
            raise ApiError(404, self._not_found)
        return item

    def remove(self, item: _T) -> None:
        self._by_id.pop(item.id, None)
        if self._names.get(item.name) == item.id:
            del self._names[item.name]

    def page(self, *, limit: int, offset: int) -> tuple[list[_T], int]:
        """One page in creation order, and the total."""
        items = list(self._by_id.values())
        return items[offset : offset + limit], len(items)

    def __iter__(self) -> Iterator[_T]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)
