"""An idle sandbox tree packed away as plain data, and which trees stay live.

A live :class:`bashkit.FileSystem` holds a runtime and three file descriptors, so only the
trees in use stay live: past :data:`LIVE_TREES` idle ones, the least recently used is packed
(:func:`pack`, a list of :class:`Node`) and made live again on its next use (:func:`thaw`).
Packing is best effort: it runs in whichever request made another tree live.

Example:
    >>> import bashkit
    >>> tree = bashkit.FileSystem()
    >>> tree.write_file("/a.txt", b"hi")
    >>> thaw(pack(tree)).read_file("/a.txt")
    b'hi'
"""

from __future__ import annotations

import functools
import logging
import posixpath
import weakref
from collections import OrderedDict
from typing import NamedTuple, Protocol

import bashkit

__all__ = [
    "DEVICE_DIRS",
    "FDS_PER_LIVE_TREE",
    "LIVE",
    "LIVE_TREES",
    "LiveTrees",
    "Node",
    "Packable",
    "live_trees",
    "pack",
    "rooted",
    "thaw",
]

log = logging.getLogger("fake_server")

#: Device files the interpreter provides in every tree (not the sandbox's data).
DEVICE_DIRS = frozenset({"/dev"})


class Packable(Protocol):
    """A tree :class:`LiveTrees` keeps (a :class:`~fake_server.filesystem.FileSystem`)."""

    #: Packing it failed once: it stays live as it is, never tried again.
    stuck: bool

    def freeze(self) -> bool:
        """Pack it if it is idle; whether it is cold now."""
        ...


def rooted(tree: bashkit.FileSystem) -> bashkit.FileSystem:
    """``tree`` with a root again if a command removed it: ``rm -rf --no-preserve-root /`` or
    ``find / -delete`` take bashkit's root itself, where Linux's root is only ever emptied.
    A root-less tree reads as an empty root, and what comes next (a command, a pack, a fork)
    finds one. One ``exists`` call (half a microsecond) on every use of the tree."""
    if not tree.exists("/"):
        tree.mkdir("/")
    return tree


class Node(NamedTuple):
    """One entry of a cold tree: parents come before their children."""

    path: str
    kind: str
    mode: int
    content: bytes | str  # a file's bytes, a symlink's target, b"" for a directory


def pack(tree: bashkit.FileSystem, path: str = "/", *, bare: bool = False) -> list[Node]:
    """``tree`` below ``path`` as plain data (every tree's own devices left out unless
    ``bare``)."""
    nodes: list[Node] = []
    for entry in tree.read_dir(path):
        child = posixpath.join(path, entry["name"])
        if child in DEVICE_DIRS and not bare:
            continue  # every live tree has its own /dev/null, /dev/urandom...
        kind = entry["metadata"]["file_type"]
        mode = int(entry["metadata"]["mode"])
        if kind == "directory":
            nodes.append(Node(child, kind, mode, b""))
            nodes.extend(pack(tree, child, bare=bare))
        elif kind == "symlink":
            nodes.append(Node(child, kind, mode, tree.read_link(child)))
        else:
            nodes.append(Node(child, kind, mode, tree.read_file(child)))
    return nodes


#: The mode bashkit gives a directory or file it creates (no ``chmod`` needed to give it)...
_NEW_MODES = {"directory": 0o755, "file": 0o644}
#: ...and what a new bashkit tree already holds, with modes of its own.
_PRESET = frozenset({"/dev", "/home", "/tmp"})


def thaw(nodes: list[Node], *, bare: bool = False) -> bashkit.FileSystem:
    """A live tree holding ``nodes`` (see :func:`pack`)."""
    tree = bashkit.FileSystem()
    # A new bashkit tree comes with /dev, /home and /tmp: a bare tree keeps none of them, any
    # other its /dev (the devices) and /home and /tmp only if they were packed (a command may
    # have removed them).
    kept = set() if bare else {"dev", *(n.path[1:] for n in nodes if n.path.count("/") == 1)}
    for entry in tree.read_dir("/"):
        if entry["name"] not in kept:
            tree.remove("/" + entry["name"], recursive=True)
    for node in nodes:
        if node.kind == "directory":
            tree.mkdir(node.path, recursive=True)
        elif node.kind == "symlink":
            tree.symlink(str(node.content), node.path)
            continue
        else:
            tree.write_file(node.path, bytes(node.content))  # type: ignore[arg-type]
        if node.mode != _NEW_MODES[node.kind] or node.path in _PRESET:
            tree.chmod(node.path, node.mode)
    return tree


#: How many idle trees stay live (each holds a runtime and three file descriptors).
LIVE_TREES = 64


class LiveTrees:
    """The live trees, least recently used first; past the limit, idle ones go cold."""

    def __init__(self) -> None:
        self._order: OrderedDict[int, weakref.ref[Packable]] = OrderedDict()

    def touch(self, fs: Packable) -> None:
        """``fs`` was used now; past :data:`LIVE_TREES`, pack the least recently used."""
        key = id(fs)
        if key in self._order:
            self._order.move_to_end(key)
            return
        self._order[key] = weakref.ref(fs, functools.partial(self._forget, key))
        if len(self._order) > LIVE_TREES:
            for old_key, ref in list(self._order.items())[: len(self._order) - LIVE_TREES]:
                tree = ref()
                if tree is None or self._pack(tree):
                    self._order.pop(old_key, None)

    @staticmethod
    def _pack(tree: Packable) -> bool:
        """Freeze ``tree`` if it is idle, best effort: this runs in whichever request made
        another tree live, so a tree that cannot be packed must not fail that request (another
        sandbox's, another tenant's). It stays live as it is, is logged once and never tried
        again; only its own sandbox's requests can meet what is wrong with it."""
        if tree.stuck:
            return False
        try:
            return tree.freeze()
        except Exception:
            tree.stuck = True
            log.exception("fake-createos: a sandbox's tree could not be packed; it stays live")
            return False

    def _forget(self, key: int, _: object) -> None:
        self._order.pop(key, None)

    def __len__(self) -> int:
        return len(self._order)


#: The process's live trees.
LIVE = LiveTrees()
#: What one live tree costs in file descriptors (its runtime's epoll and wakers).
FDS_PER_LIVE_TREE = 3


def live_trees() -> int:
    """How many trees are live now (at most :data:`LIVE_TREES` idle ones, plus those in use).

    Example:
        >>> live_trees() >= 0
        True
    """
    return len(LIVE)
