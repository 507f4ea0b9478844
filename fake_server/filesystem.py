"""One fake sandbox's filesystem: an in-memory tree the sandbox's shell runs against.

The tree is a :class:`bashkit.FileSystem` (nothing here touches the host): the interpreters that
run a sandbox's commands mount this very object at ``/``, so a file written through the files
API is what ``cat`` reads, and what one process writes the next one sees. This class is the
fake's own view of it: POSIX-style errors (:class:`FsError` with an errno name), size caps for
uploads, a copy for forks, and the files a plausible Linux image starts with.

Example:
    >>> fs = FileSystem()
    >>> fs.write("/root/a.txt", b"hi")
    >>> fs.read(FileSystem.normalize("a.txt", "/root"))
    b'hi'
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

import bashkit

from fake_server.cold_trees import DEVICE_DIRS, LIVE, Node, pack, rooted, thaw

__all__ = [
    "DEFAULT_DIRS",
    "OS_RELEASE",
    "PROGRAM_DIRS",
    "RESERVED_MOUNTS",
    "FileSystem",
    "FsError",
    "Mount",
    "native_error",
    "programs",
]


def _names(words: str) -> list[str]:
    """The names in ``words``, one string per directory level (dozens of names, kept short)."""
    return words.split()


#: Directories every new filesystem starts with: the empty directories of a stock Ubuntu root
#: (what installers and Dockerfiles write into: ``/opt``, ``/srv``, ``/var/log``...), parents
#: before children; ``/root`` is the default cwd. ``/bin`` and ``/usr/bin`` are mount points:
#: every interpreter mounts the shared, read-only program directory there (see
#: :func:`programs`). Ubuntu's ``/var/run`` and ``/var/lock`` are links to ``/run`` and
#: ``/run/lock``; here they are directories of their own.
DEFAULT_DIRS: tuple[str, ...] = (
    *(f"/{name}" for name in _names("root tmp etc home bin sbin boot media mnt opt srv run")),
    "/run/lock",
    *(f"/usr/{name}" for name in _names("bin sbin lib include share src")),
    *(f"/usr/local/{name}" for name in _names("bin etc include lib sbin share src")),
    *(f"/var/{name}" for name in _names("backups cache lib local lock log mail opt run spool tmp")),
)
#: Directories anyone may create files in, each user deleting only their own (``chmod 1777``).
_STICKY_DIRS = frozenset({"/tmp", "/var/tmp", "/run/lock"})

#: Where every interpreter mounts the shared program directory (see :func:`programs`).
PROGRAM_DIRS: tuple[str, ...] = ("/bin", "/usr/bin")
#: Where nothing else may be mounted (a disk there would hide the programs or the devices).
RESERVED_MOUNTS: tuple[str, ...] = (*PROGRAM_DIRS, *sorted(DEVICE_DIRS))
#: A tree mounted into a sandbox at a path (an attached disk's bucket).
Mount = tuple[str, "FileSystem"]

#: The image a sandbox says it runs (``/etc/os-release``); ``uname`` agrees with it.
OS_RELEASE = b"""PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=noble
VARIANT="CreateOS sandbox (fake-createos)"
VARIANT_ID=createos-fake
"""

#: The configuration files of the image (the rest of ``/etc`` is the client's to write).
_ETC_FILES: dict[str, bytes] = {
    "/etc/os-release": OS_RELEASE,
    "/etc/passwd": b"root:x:0:0:root:/root:/bin/bash\n"
    b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "/etc/group": b"root:x:0:\nnogroup:x:65534:\n",
    "/etc/hosts": b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "/etc/shells": b"/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n",
    "/etc/timezone": b"Etc/UTC\n",
}


def _image_nodes() -> list[Node]:
    nodes = [
        Node(d, "directory", 0o1777 if d in _STICKY_DIRS else 0o755, b"") for d in DEFAULT_DIRS
    ]
    nodes += [Node(path, "file", 0o644, content) for path, content in _ETC_FILES.items()]
    return nodes


#: ``strerror`` text for each errno the filesystem raises, as the C library spells it.
ERRNO_MESSAGES: dict[str, str] = {
    "ENOENT": "No such file or directory",
    "EISDIR": "Is a directory",
    "ENOTDIR": "Not a directory",
    "EEXIST": "File exists",
    "EFBIG": "File too large",
    "EINVAL": "Invalid argument",
    "ENOTEMPTY": "Directory not empty",
    "ENAMETOOLONG": "File name too long",
    "EROFS": "Read-only file system",
    "ELOOP": "Too many levels of symbolic links",
}

#: How bashkit words its I/O errors, and the errno each means (first match wins).
_NATIVE_ERRORS: tuple[tuple[str, str], ...] = (
    ("not a directory", "ENOTDIR"),
    ("is a directory", "EISDIR"),
    ("rename file over directory", "EISDIR"),
    ("not found", "ENOENT"),
    ("directory exists", "EEXIST"),
    ("not empty", "ENOTEMPTY"),
    ("too large", "EFBIG"),
    ("filesystem full", "EFBIG"),
    ("too deep", "ENAMETOOLONG"),
    ("too long", "ENAMETOOLONG"),
    ("read-only", "EROFS"),
)


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


def native_error(exc: Exception, path: str) -> FsError:
    """The :class:`FsError` a bashkit I/O error means (``EINVAL`` when its words are unknown).

    Example:
        >>> str(native_error(RuntimeError("io error: filesystem is read-only"), "/bin/cat"))
        'Read-only file system'
    """
    text = str(exc)
    for needle, errno_name in _NATIVE_ERRORS:
        if needle in text:
            return FsError(errno_name, path)
    return FsError("EINVAL", path)


class FileSystem:
    """A tree of directories and byte files, with optional size caps on writes made here.

    ``max_file_bytes`` caps any single file and ``max_total_bytes`` the sum of all files for
    writes through this class (the files API); a write that would exceed either raises
    ``FsError("EFBIG")`` and changes nothing. Commands in the sandbox write through the
    interpreter, which caps a file at 10 MB and a sandbox at 100 MB (bashkit's own limits).

    Example:
        >>> fs = FileSystem(max_file_bytes=4)
        >>> fs.mkdir("/srv/app", parents=True)
        >>> fs.write("/srv/app/x", b"abc")
        >>> fs.listdir("/srv/app"), fs.read("/srv/app/x")
        (['x'], b'abc')
    """

    __slots__ = (
        "__weakref__",
        "_bare",
        "_cold",
        "_max_file_bytes",
        "_max_total_bytes",
        "_native",
        "_pins",
        "stuck",
    )

    def __init__(
        self,
        *,
        max_file_bytes: int | None = None,
        max_total_bytes: int | None = None,
        image: bool = True,
    ) -> None:
        self._max_file_bytes = max_file_bytes
        self._max_total_bytes = max_total_bytes
        # A tree starts cold (plain Python data): a live bashkit tree holds a runtime and
        # three file descriptors, so only the trees in use are live (see `native`).
        self._native: bashkit.FileSystem | None = None
        self._cold: list[Node] | None = _IMAGE if image else []
        #: Without the image a tree is truly empty (a disk's bucket, mounted below ``/``): no
        #: devices either, and a ``/dev`` in it is data like any other directory.
        self._bare = not image
        self._pins = 0
        #: Packing this tree failed once: it stays live as it is (see `LiveTrees.touch`).
        self.stuck = False

    @property
    def native(self) -> bashkit.FileSystem:
        """The live tree, mounted at ``/`` by every interpreter of the sandbox. Made live on
        demand; the least recently used idle trees go cold again past
        :data:`~fake_server.cold_trees.LIVE_TREES`."""
        if self._native is None:
            self._native = thaw(self._cold or [], bare=self._bare)
            self._cold = None
        LIVE.touch(self)
        return rooted(self._native)

    def pin(self) -> None:
        """Keep the tree live while an interpreter has it mounted (``unpin`` when done)."""
        self._pins += 1

    def unpin(self) -> None:
        self._pins -= 1

    @property
    def live(self) -> bool:
        """Whether the tree is live now (for tests and the memory benchmark)."""
        return self._native is not None

    def freeze(self) -> bool:
        """Turn an idle live tree back into plain data; False if it is in use."""
        if self._native is None or self._pins:
            return self._native is None
        self._cold = pack(rooted(self._native), bare=self._bare)
        self._native = None
        return True

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

    # -- queries ------------------------------------------------------------------------------

    def _kind(self, path: str) -> str | None:
        """``"file"``, ``"directory"``, ``"symlink"`` or None when nothing is there."""
        try:
            return str(self.native.stat(path)["file_type"])
        except RuntimeError:
            return None

    def exists(self, path: str) -> bool:
        """Whether ``path`` names a file or a directory."""
        return self._kind(self.normalize(path)) is not None

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` names a directory."""
        return self._kind(self.normalize(path)) == "directory"

    def is_file(self, path: str) -> bool:
        """Whether ``path`` names a regular file."""
        return self._kind(self.normalize(path)) == "file"

    def _walk_files(self, path: str) -> Iterator[tuple[str, int]]:
        """Every regular file under the directory ``path`` with its size."""
        for entry in self.native.read_dir(path):
            child = posixpath.join(path, entry["name"])
            kind = entry["metadata"]["file_type"]
            if child in DEVICE_DIRS:
                continue
            if kind == "directory":
                yield from self._walk_files(child)
            elif kind == "file":
                yield child, int(entry["metadata"]["size"])

    @property
    def total_bytes(self) -> int:
        """The summed size of every file, as counted against ``max_total_bytes``."""
        if self._native is None:
            return sum(len(n.content) for n in self._cold or [] if n.kind == "file")
        return sum(size for _, size in self._walk_files("/"))

    def read(self, path: str) -> bytes:
        """Return the content of the file at ``path``.

        Example:
            >>> FileSystem().read("/tmp")
            Traceback (most recent call last):
            ...
            fake_server.filesystem.FsError: Is a directory
        """
        path = self.normalize(path)
        try:
            return self.native.read_file(path)
        except RuntimeError as exc:
            raise native_error(exc, path) from None

    def listdir(self, path: str) -> list[str]:
        """Return the sorted names of the entries directly inside directory ``path``.

        Example:
            >>> "etc" in FileSystem().listdir("/")
            True
        """
        path = self.normalize(path)
        try:
            return sorted(entry["name"] for entry in self.native.read_dir(path))
        except RuntimeError as exc:
            raise native_error(exc, path) from None

    # -- changes ------------------------------------------------------------------------------

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
        kind = self._kind(path)
        if kind == "directory":
            raise FsError("EISDIR", path)
        old = self.native.stat(path)["size"] if kind == "file" else 0
        new_size = old + len(data) if append else len(data)
        if self._max_file_bytes is not None and new_size > self._max_file_bytes:
            raise FsError("EFBIG", path)
        cap = self._max_total_bytes
        if cap is not None and self.total_bytes - old + new_size > cap:
            raise FsError("EFBIG", path)
        if kind is None:
            self._prepare_parent(path, create=make_parents)
        try:
            if append and kind == "file":
                self.native.append_file(path, data)
            else:
                self.native.write_file(path, data)
        except RuntimeError as exc:
            raise native_error(exc, path) from None

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
        kind = self._kind(path)
        if kind == "directory" and parents:
            return
        if kind is not None:
            raise FsError("EEXIST", path)
        self._prepare_parent(path, create=parents)
        try:
            self.native.mkdir(path)
        except RuntimeError as exc:
            raise native_error(exc, path) from None

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
        kind = self._kind(path)
        if kind is None:
            if force:
                return
            raise FsError("ENOENT", path)
        if kind == "directory":
            if not recursive:
                raise FsError("EISDIR", path)
            if path == "/":
                # Like GNU rm's --preserve-root: wiping the whole sandbox is never intended.
                raise FsError("EINVAL", path)
        self.native.remove(path, recursive=recursive)

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
        source_kind = self._kind(src)
        if source_kind is None:
            raise FsError("ENOENT", src)
        self._prepare_parent(dst, create=False)
        if src == "/" or dst.startswith(src + "/"):
            raise FsError("EINVAL", dst)
        target_kind = self._kind(dst)
        if source_kind == "directory" and target_kind == "file":
            raise FsError("ENOTDIR", dst)
        if target_kind == "directory":
            if source_kind != "directory":
                raise FsError("EISDIR", dst)
            if self.native.read_dir(dst):
                raise FsError("ENOTEMPTY", dst)
            self.native.remove(dst)
        try:
            self.native.rename(src, dst)
        except RuntimeError as exc:
            raise native_error(exc, src) from None

    def _prepare_parent(self, path: str, *, create: bool) -> None:
        """Make sure ``path``'s parent is a directory, as the kernel checks it: a file on the
        way is ``ENOTDIR``, a missing directory ``ENOENT`` unless ``create`` (``mkdir -p``)."""
        parent = "/"
        for part in posixpath.dirname(path).split("/")[1:]:
            if not part:
                continue
            parent = posixpath.join(parent, part)
            kind = self._kind(parent)
            if kind == "directory" or kind == "symlink":
                continue
            if kind is not None:
                raise FsError("ENOTDIR", path)
            if not create:
                raise FsError("ENOENT", posixpath.dirname(path))
            try:
                self.native.mkdir(parent)
            except RuntimeError as exc:
                raise native_error(exc, parent) from None

    def clone(self) -> FileSystem:
        """Return an independent copy (for forks): every directory, file and mode.

        Example:
            >>> fs = FileSystem()
            >>> copy = fs.clone()
            >>> copy.write("/tmp/x", b"")
            >>> fs.exists("/tmp/x")
            False
        """
        copy = FileSystem(
            max_file_bytes=self._max_file_bytes,
            max_total_bytes=self._max_total_bytes,
            image=not self._bare,
        )
        if self._native is not None:
            copy._cold = pack(self.native, bare=self._bare)
        else:
            copy._cold = self._cold
        return copy


_IMAGE = _image_nodes()
_PROGRAMS: bashkit.FileSystem | None = None


def programs() -> bashkit.FileSystem:
    """The image's program directory, shared by every sandbox (mounted read-only at ``/bin``
    and ``/usr/bin``): one small stub per interpreter command, so ``/bin/cat`` and
    ``command -v tar`` find programs where a Linux image keeps them. Built once.

    Example:
        >>> programs().exists("/cat")
        True
    """
    global _PROGRAMS
    if _PROGRAMS is None:
        source = bashkit.Bash().fs()
        # Bare: a new tree's /dev, /home and /tmp, mounted at /bin, were `ls /bin`'s.
        tree = thaw([], bare=True)
        for entry in source.read_dir("/bin"):
            name = "/" + entry["name"]
            tree.write_file(name, source.read_file("/bin" + name))
            tree.chmod(name, 0o755)
        _PROGRAMS = tree
    return _PROGRAMS
