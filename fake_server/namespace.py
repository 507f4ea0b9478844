"""A sandbox's files as its commands see them: one namespace over several trees.

The sandbox's root tree, the disks mounted in it and the image's program directories (the
shared, read-only tree at ``/bin`` and ``/usr/bin``) make the namespace the interpreter runs
commands in. The files API reads and writes through the same namespace, as a real sandbox's
server reads and writes through its kernel: with ``open(2)`` and no ``O_NOFOLLOW``, so
symbolic links are followed (across mounts, up to :data:`MAX_SYMLINKS` of them), a download
of a link is its target's bytes, and an upload to a link writes its target.

Paths come in normalized (``..`` already taken lexically, as the interpreter takes it), and
each tree holds plain data: what is resolved here is the links and the mounts.

Example:
    >>> root = FileSystem()
    >>> root.write("/etc/app.conf", b"x=1")
    >>> root.native.symlink("/etc/app.conf", "/root/conf")
    >>> Namespace(root, []).read("/root/conf")
    b'x=1'
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence

import bashkit

from fake_server.filesystem import PROGRAM_DIRS, FileSystem, FsError, Mount, programs

__all__ = ["MAX_SYMLINKS", "Namespace", "locate"]

#: How many symbolic links one path may pass through before it is ``ELOOP`` (Linux's limit).
MAX_SYMLINKS = 40


def locate(root: FileSystem, mounts: Iterable[Mount], path: str) -> tuple[FileSystem, str]:
    """Which tree holds the normalized absolute ``path`` and where in it: the tree mounted
    deepest above it (its path made relative to the mount), else ``root`` itself. No link is
    followed (see :class:`Namespace` for that).

    Example:
        >>> root, disk = FileSystem(), FileSystem(image=False)
        >>> locate(root, [("/mnt/data", disk)], "/mnt/data/a/b.txt") == (disk, "/a/b.txt")
        True
        >>> locate(root, [("/mnt/data", disk)], "/mnt/database") == (root, "/mnt/database")
        True
    """
    best: Mount | None = None
    for mount in mounts:
        top = mount[0]
        if _within(path, top) and (best is None or len(top) > len(best[0])):
            best = mount
    if best is None:
        return root, path
    return best[1], _relative(path, best[0])


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def _relative(path: str, top: str) -> str:
    return "/" + path[len(top) :].lstrip("/")


class Namespace:
    """The files of one sandbox, as its commands see them (see the module's docstring).

    Example:
        >>> root = FileSystem()
        >>> Namespace(root, []).write("/usr/bin/cat", b"")
        Traceback (most recent call last):
        ...
        fake_server.filesystem.FsError: Read-only file system
    """

    __slots__ = ("_mounts", "_root")

    def __init__(self, root: FileSystem, mounts: Sequence[Mount]) -> None:
        self._root = root
        self._mounts = mounts

    # -- where a path is ---------------------------------------------------------------------

    def _tree(self, path: str) -> tuple[FileSystem | None, str]:
        """The tree holding ``path`` (None: the read-only program directory) and where in it.
        No disk is mounted at or below a program directory (they are reserved mounts), so a
        program directory is always the deepest mount above what it holds."""
        for top in PROGRAM_DIRS:
            if _within(path, top):
                return None, _relative(path, top)
        return locate(self._root, self._mounts, path)

    def _entry(self, path: str) -> tuple[str | None, str]:
        """What is at ``path`` without following it: its kind (None: nothing) and, for a
        symbolic link, its target."""
        tree, place = self._tree(path)
        native: bashkit.FileSystem = programs() if tree is None else tree.native
        try:
            kind = str(native.stat(place)["file_type"])
            return kind, str(native.read_link(place)) if kind == "symlink" else ""
        except RuntimeError:
            return None, ""

    def resolve(self, path: str, *, follow: bool = True) -> str:
        """``path`` with every symbolic link on the way replaced by what it points at, and the
        last one too when ``follow``. What is left may not exist; everything above it does
        and is a directory (else ``ENOENT``, ``ENOTDIR``; ``ELOOP`` past the link limit).

        Example:
            >>> root = FileSystem()
            >>> root.native.symlink("../etc", "/root/etc")
            >>> Namespace(root, []).resolve("/root/etc/new.conf")
            '/etc/new.conf'
        """
        done = "/"
        todo = path.split("/")[::-1]  # a stack: the next name last
        links = 0
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                done = posixpath.dirname(done)
                continue
            here = posixpath.join(done, name)
            kind, target = self._entry(here)
            if kind == "symlink" and (follow or any(todo)):
                links += 1
                if links > MAX_SYMLINKS:
                    raise FsError("ELOOP", path)
                if not target:
                    raise FsError("ENOENT", path)
                if target.startswith("/"):
                    done = "/"
                todo.extend(target.split("/")[::-1])
                continue
            if any(todo) and kind != "directory":
                raise FsError("ENOENT" if kind is None else "ENOTDIR", path)
            done = here
        return done

    # -- reads and writes --------------------------------------------------------------------

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory, or a link to one."""
        try:
            return self._entry(self.resolve(path))[0] == "directory"
        except FsError:
            return False

    def read(self, path: str) -> bytes:
        """The bytes of the file at ``path`` (through links, like ``cat``)."""
        tree, place = self._tree(self.resolve(path))
        if tree is not None:
            return tree.read(place)
        try:
            return programs().read_file(place)
        except RuntimeError:
            raise FsError("EISDIR" if programs().exists(place) else "ENOENT", path) from None

    def write(self, path: str, data: bytes, *, make_parents: bool = False) -> None:
        """Create or replace the file at ``path`` (through links, as ``open(O_CREAT)``
        writes: a dangling link's target is created). ``make_parents`` first acts like
        ``mkdir -p`` on the path's directory."""
        if make_parents:
            self._make_parents(path)
        tree, place = self._tree(self.resolve(path))
        if tree is None:
            raise FsError("EROFS", path)
        tree.write(place, data)

    def _make_parents(self, path: str) -> None:
        """``mkdir -p`` of ``path``'s directory, as the kernel sees it: links to directories
        are followed; a link to nothing is in the way (``EEXIST``, where bashkit's own
        ``mkdir -p`` would create what it points at)."""
        prefix = ""
        for name in posixpath.dirname(path).split("/"):
            if not name:
                continue
            prefix += "/" + name
            try:
                kind = self._entry(self.resolve(prefix))[0]
            except FsError as exc:
                if exc.errno_name != "ENOENT":
                    raise
                kind = None
            if kind == "directory":
                continue
            if kind is not None:
                raise FsError("ENOTDIR", path)
            here = self.resolve(prefix, follow=False)
            if self._entry(here)[0] is not None:
                raise FsError("EEXIST", prefix)
            tree, place = self._tree(here)
            if tree is None:
                raise FsError("EROFS", path)
            tree.mkdir(place)
