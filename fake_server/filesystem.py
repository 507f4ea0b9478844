"""An in-memory, POSIX-like filesystem for one fake sandbox.

Nothing here touches the host: files are ``bytes`` values in a dict keyed by absolute
normalised path, directories are a set of paths. There are no permissions, links or
timestamps, only what the fake's exec/file endpoints and the shell emulator need.

Example:
    >>> fs = FileSystem()
    >>> fs.write("/root/a.txt", b"hi")
    >>> fs.read(FileSystem.normalize("a.txt", "/root"))
    b'hi'
"""

from __future__ import annotations

import posixpath

__all__ = ["DEFAULT_DIRS", "FileSystem", "FsError"]

#: Directories every new filesystem starts with; ``/root`` is the default cwd.
DEFAULT_DIRS: frozenset[str] = frozenset({"/", "/tmp", "/root"})

#: ``strerror`` text for each errno the filesystem raises, as the C library spells it.
ERRNO_MESSAGES: dict[str, str] = {
    "ENOENT": "No such file or directory",
    "EISDIR": "Is a directory",
    "ENOTDIR": "Not a directory",
    "EEXIST": "File exists",
    "EFBIG": "File too large",
    "EINVAL": "Invalid argument",
    "ENOTEMPTY": "Directory not empty",
}


class FsError(Exception):
    """A filesystem operation failed; ``str(exc)`` is the C library's ``strerror`` text.

    Example:
        >>> try:
        ...     FileSystem().read("/missing")
        ... except FsError as exc:
        ...     (exc.errno_name, exc.path, str(exc))
        ('ENOENT', '/missing', 'No such file or directory')
    """

    def __init__(self, errno_name: str, path: str) -> None:
        super().__init__(ERRNO_MESSAGES[errno_name])
        self.errno_name = errno_name
        self.path = path


class FileSystem:
    """A tree of directories and byte files, with optional size caps.

    ``max_file_bytes`` caps any single file and ``max_total_bytes`` caps the sum of all
    files; a write that would exceed either raises ``FsError("EFBIG")`` and changes nothing.

    Example:
        >>> fs = FileSystem(max_file_bytes=4)
        >>> fs.mkdir("/srv/app", parents=True)
        >>> fs.write("/srv/app/x", b"abc")
        >>> fs.listdir("/srv/app"), fs.total_bytes
        (['x'], 3)
    """

    # Slots keep an idle filesystem small: the fake may hold thousands of sandboxes.
    __slots__ = ("_dirs", "_files", "_max_file_bytes", "_max_total_bytes", "_total_bytes")

    def __init__(
        self, *, max_file_bytes: int | None = None, max_total_bytes: int | None = None
    ) -> None:
        self._files: dict[str, bytes] = {}
        self._dirs: set[str] = set(DEFAULT_DIRS)
        self._max_file_bytes = max_file_bytes
        self._max_total_bytes = max_total_bytes
        self._total_bytes = 0

    @staticmethod
    def normalize(path: str, cwd: str = "/") -> str:
        """Return ``path`` as an absolute path, resolved against ``cwd`` if relative.

        ``//`` and ``.`` collapse, ``..`` pops one component and never climbs above ``/``.

        Example:
            >>> FileSystem.normalize("../../../etc//./passwd", "/root")
            '/etc/passwd'
        """
        if not path or "\0" in path or "\0" in cwd:
            raise FsError("EINVAL", path)
        joined = path if path.startswith("/") else f"{cwd}/{path}"
        parts: list[str] = []
        for part in joined.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + "/".join(parts)

    @property
    def total_bytes(self) -> int:
        """The summed size of every file, as counted against ``max_total_bytes``."""
        return self._total_bytes

    def exists(self, path: str) -> bool:
        """Whether ``path`` names a file or a directory."""
        path = self.normalize(path)
        return path in self._dirs or path in self._files

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` names a directory."""
        return self.normalize(path) in self._dirs

    def is_file(self, path: str) -> bool:
        """Whether ``path`` names a regular file."""
        return self.normalize(path) in self._files

    def read(self, path: str) -> bytes:
        """Return the content of the file at ``path``.

        Example:
            >>> FileSystem().read("/tmp")
            Traceback (most recent call last):
            ...
            fake_server.filesystem.FsError: Is a directory
        """
        path = self.normalize(path)
        if path in self._dirs:
            raise FsError("EISDIR", path)
        if path not in self._files:
            self._check_ancestors(path)
            raise FsError("ENOENT", path)
        return self._files[path]

    def write(
        self, path: str, data: bytes, *, append: bool = False, make_parents: bool = False
    ) -> None:
        """Create or replace (or with ``append``, extend) the file at ``path``.

        Example:
            >>> fs = FileSystem()
            >>> fs.write("/a/b/c", b"1", make_parents=True)
            >>> fs.write("/a/b/c", b"2", append=True)
            >>> fs.read("/a/b/c")
            b'12'
        """
        path = self.normalize(path)
        if path in self._dirs:
            raise FsError("EISDIR", path)
        old = self._files.get(path, b"")
        new = old + data if append else data
        if self._max_file_bytes is not None and len(new) > self._max_file_bytes:
            raise FsError("EFBIG", path)
        total = self._total_bytes - len(old) + len(new)
        if self._max_total_bytes is not None and total > self._max_total_bytes:
            raise FsError("EFBIG", path)
        if path not in self._files:
            parent = posixpath.dirname(path)
            if make_parents:
                self._ensure_dir(parent)
            else:
                self._require_dir(parent)
        self._files[path] = new
        self._total_bytes = total

    def mkdir(self, path: str, *, parents: bool = False) -> None:
        """Create the directory ``path``; ``parents`` acts like ``mkdir -p``.

        Example:
            >>> fs = FileSystem()
            >>> fs.mkdir("/tmp")
            Traceback (most recent call last):
            ...
            fake_server.filesystem.FsError: File exists
            >>> fs.mkdir("/tmp", parents=True)
        """
        path = self.normalize(path)
        if path in self._files:
            raise FsError("EEXIST", path)
        if path in self._dirs:
            if parents:
                return
            raise FsError("EEXIST", path)
        if parents:
            self._ensure_dir(path)
        else:
            self._require_dir(posixpath.dirname(path))
            self._dirs.add(path)

    def remove(self, path: str, *, recursive: bool = False, force: bool = False) -> None:
        """Delete the file or directory tree at ``path`` (like ``rm``, ``-r``, ``-f``).

        Example:
            >>> fs = FileSystem()
            >>> fs.remove("/nope", force=True)
            >>> fs.remove("/tmp")
            Traceback (most recent call last):
            ...
            fake_server.filesystem.FsError: Is a directory
        """
        path = self.normalize(path)
        if path in self._files:
            self._total_bytes -= len(self._files.pop(path))
            return
        if path not in self._dirs:
            if force:
                return
            raise FsError("ENOENT", path)
        if not recursive:
            raise FsError("EISDIR", path)
        if path == "/":
            # Like GNU rm's --preserve-root: wiping the whole sandbox is never intended.
            raise FsError("EINVAL", path)
        prefix = path + "/"
        for file in [f for f in self._files if f.startswith(prefix)]:
            self._total_bytes -= len(self._files.pop(file))
        self._dirs.difference_update([d for d in self._dirs if d.startswith(prefix)])
        self._dirs.discard(path)

    def rename(self, src: str, dst: str) -> None:
        """Move the file or directory ``src`` to ``dst`` (like ``rename(2)``).

        Example:
            >>> fs = FileSystem()
            >>> fs.write("/tmp/a", b"x")
            >>> fs.rename("/tmp/a", "/root/b")
            >>> fs.read("/root/b"), fs.exists("/tmp/a")
            (b'x', False)
        """
        src, dst = self.normalize(src), self.normalize(dst)
        if src == dst:
            return
        self._require_dir(posixpath.dirname(dst))
        if src in self._files:
            if dst in self._dirs:
                raise FsError("EISDIR", dst)
            self._total_bytes -= len(self._files.get(dst, b""))
            self._files[dst] = self._files.pop(src)
            return
        if src not in self._dirs:
            raise FsError("ENOENT", src)
        if src == "/" or dst.startswith(src + "/"):
            raise FsError("EINVAL", dst)
        if dst in self._files:
            raise FsError("ENOTDIR", dst)
        if dst in self._dirs and self.listdir(dst):
            raise FsError("ENOTEMPTY", dst)
        prefix = src + "/"
        self._dirs = {dst + d[len(src) :] if d.startswith(prefix) else d for d in self._dirs}
        self._dirs.discard(src)
        self._dirs.add(dst)
        self._files = {
            dst + f[len(src) :] if f.startswith(prefix) else f: data
            for f, data in self._files.items()
        }

    def listdir(self, path: str) -> list[str]:
        """Return the sorted names of the entries directly inside directory ``path``.

        Example:
            >>> FileSystem().listdir("/")
            ['root', 'tmp']
        """
        path = self.normalize(path)
        self._require_dir(path)
        prefix = "/" if path == "/" else path + "/"
        names = {
            entry[len(prefix) :]
            for entry in (*self._dirs, *self._files)
            if entry.startswith(prefix) and "/" not in entry[len(prefix) :] and entry != "/"
        }
        return sorted(names)

    def clone(self) -> FileSystem:
        """Return an independent copy (for forks and snapshots); bytes are shared safely.

        Example:
            >>> fs = FileSystem()
            >>> copy = fs.clone()
            >>> copy.write("/tmp/x", b"")
            >>> fs.exists("/tmp/x")
            False
        """
        copy = FileSystem(
            max_file_bytes=self._max_file_bytes, max_total_bytes=self._max_total_bytes
        )
        copy._files = dict(self._files)
        copy._dirs = set(self._dirs)
        copy._total_bytes = self._total_bytes
        return copy

    def _ensure_dir(self, path: str) -> None:
        """Create the normalised ``path`` and its missing ancestors, like ``mkdir -p``."""
        if path in self._dirs:
            return
        if path in self._files:
            raise FsError("ENOTDIR", path)
        self._ensure_dir(posixpath.dirname(path))
        self._dirs.add(path)

    def _require_dir(self, path: str) -> None:
        """Raise unless the normalised ``path`` is an existing directory."""
        if path in self._dirs:
            return
        if path in self._files:
            raise FsError("ENOTDIR", path)
        self._check_ancestors(path)
        raise FsError("ENOENT", path)

    def _check_ancestors(self, path: str) -> None:
        """Raise ``ENOTDIR`` if some ancestor of ``path`` is a file, as the kernel would."""
        parent = posixpath.dirname(path)
        while parent != "/":
            if parent in self._files:
                raise FsError("ENOTDIR", path)
            parent = posixpath.dirname(parent)
