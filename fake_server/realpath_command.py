"""GNU ``realpath`` over the sandbox's filesystem.

The interpreter's own ``realpath`` (bashkit 0.20.1) follows no symbolic link, checks no
component's existence and ignores ``--relative-to`` for a relative directory
(``realpath --relative-to=b/c b`` printed the absolute path, GNU ``..``), so the fake answers
``realpath`` itself, as GNU coreutils does: symlinks resolved as they are met (``-P``, the
default) or after ``..`` (``-L``) or not at all (``-s``); every component but the last must exist
(``-e``: all of them, ``-m``: none); ``--relative-to`` and ``--relative-base``; ``-q``, ``-z``.
This module is pure: it takes the arguments, the working directory and the filesystem (the
interpreter's own view of it, ``BuiltinContext.fs``, mounts included).

Example::

    status, out, err = run_realpath(["--relative-to=b/c", "b"], "/root/a", ctx.fs)
    assert (status, out, err) == (0, "..\\n", "")
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any, Protocol

from fake_server.gnu_options import Failure, Options, quotef, version_text
from fake_server.namespace import MAX_SYMLINKS

__all__ = ["run_realpath"]

_OPTIONS = Options(
    long=(
        ("canonicalize-existing", "no", "e"),
        ("canonicalize-missing", "no", "m"),
        ("relative-to", "req", "relative-to"),
        ("relative-base", "req", "relative-base"),
        ("quiet", "no", "q"),
        ("strip", "no", "s"),
        ("no-symlinks", "no", "s"),
        ("zero", "no", "z"),
        ("logical", "no", "L"),
        ("physical", "no", "P"),
        ("help", "no", "help"),
        ("version", "no", "version"),
    ),
    short=dict.fromkeys("eLmPqsz", "no"),
)
_HELP = """Usage: realpath [OPTION]... FILE...
Print the resolved absolute file name;
all but the last component must exist

  -e, --canonicalize-existing  all components of the path must exist
  -m, --canonicalize-missing   no path components need exist or be a directory
  -L, --logical                resolve '..' components before symlinks
  -P, --physical               resolve symlinks as encountered (default)
  -q, --quiet                  suppress most error messages
      --relative-to=DIR        print the resolved path relative to DIR
      --relative-base=DIR      print absolute paths unless paths below DIR
  -s, --strip, --no-symlinks   don't expand symlinks
  -z, --zero                   end each output line with NUL, not newline
      --help        display this help and exit
      --version     output version information and exit
"""
_VERSION = version_text("realpath", "Padraig Brady")
#: What a component is: the first two, or why it is neither (an errno's message).
_DIRECTORY = "directory"
_FILE = "file"
_NO_SUCH = "No such file or directory"
_NOT_DIR = "Not a directory"
_LOOP = "Too many levels of symbolic links"


class FileSystem(Protocol):
    """What the command reads of the filesystem (:class:`bashkit.FileSystem`)."""

    def read_link(self, path: str) -> str: ...

    def stat(self, path: str) -> dict[str, Any]: ...


class Existence(enum.Enum):
    """Which components of a name must exist (gnulib's ``canonicalize_mode_t``)."""

    ALL = "-e"
    ALL_BUT_LAST = "default"
    NONE = "-m"


class _Unresolved(Exception):
    """A name that cannot be resolved, and why (an errno's message)."""


def run_realpath(args: list[str], cwd: str, fs: FileSystem) -> tuple[int, str, str]:
    """GNU realpath: returns (exit_code, stdout, stderr)."""
    try:
        return _Realpath(cwd, fs).run(args)
    except Failure as failure:
        return 1, "", failure.text("realpath")


class _Realpath:
    def __init__(self, cwd: str, fs: FileSystem) -> None:
        self.cwd = cwd
        self.fs = fs
        self.existence = Existence.ALL_BUT_LAST
        self.no_links = False
        self.logical = False

    def run(self, args: list[str]) -> tuple[int, str, str]:
        operands: list[str] = []
        quiet = zero = False
        relative_to: str | None = None
        relative_base: str | None = None
        for key, value in _OPTIONS.parse(args, operands):
            if key in ("e", "m"):
                self.existence = Existence.ALL if key == "e" else Existence.NONE
            elif key in ("L", "s", "P"):
                # -L and -s take the name as written first; -L then resolves the result.
                self.no_links = key != "P"
                self.logical = key == "L"
            elif key == "q":
                quiet = True
            elif key == "z":
                zero = True
            elif key == "relative-to":
                relative_to = value
            elif key == "relative-base":
                relative_base = value
            else:
                return 0, _HELP if key == "help" else _VERSION, ""
        if not operands:
            raise Failure("missing operand", usage=True)
        to, base = self._relative(relative_to, relative_base)
        status, out, err = 0, [], []
        for name in operands:
            try:
                path = self.canonical(name)
            except _Unresolved as why:
                status = 1
                if not quiet:
                    err.append(f"realpath: {quotef(name)}: {why}\n")
                continue
            if to is not None and (base is None or _below(base, path)):
                path = _relative_path(path, to)
            out.append(path + ("\0" if zero else "\n"))
        return status, "".join(out), "".join(err)

    def _relative(
        self, relative_to: str | None, relative_base: str | None
    ) -> tuple[str | None, str | None]:
        """The resolved ``--relative-to`` and ``--relative-base`` directories as GNU uses them:
        the base alone is also the directory paths are written relative to, and a directory
        to write them relative to that is not below the base leaves every path absolute."""
        if relative_to is None:
            relative_to = relative_base
        if relative_to is None:
            return None, None
        to = self._directory(relative_to)
        if relative_base is None or relative_base == relative_to:
            return to, to if relative_base is not None else None
        base = self._directory(relative_base)
        return (to, base) if _below(base, to) else (None, to)

    def _directory(self, name: str) -> str:
        """``name`` resolved, for ``--relative-to`` and ``--relative-base``: a failure ends
        the command."""
        try:
            path = self.canonical(name)
        except _Unresolved as why:
            raise Failure(f"{quotef(name)}: {why}") from None
        if self.existence is Existence.ALL and self._kind(path) != _DIRECTORY:
            raise Failure(f"{quotef(name)}: {_NOT_DIR}")
        return path

    def canonical(self, name: str) -> str:
        """``name`` absolute, without ``.``, ``..`` or (unless ``-s``) symbolic links."""
        if not name:
            raise _Unresolved(_NO_SUCH)
        path = self._resolve(name, no_links=self.no_links)
        if self.logical:
            path = self._resolve(path, no_links=False)
        return path

    def _resolve(self, name: str, *, no_links: bool) -> str:
        """gnulib's ``canonicalize_filename_mode``: each component in turn, a link's target
        put in its place, existence checked as the mode says (with ``-s``, only of the last
        component and of one that ``/``, ``/.`` or ``/..`` follows)."""
        if not name.startswith("/"):
            name = f"{self.cwd}/{name}"
        pending = deque(_components(name))
        trailing_slash = name.endswith("/")
        resolved: list[str] = []
        kind = _DIRECTORY  # of the last component resolved
        links = 0
        while pending:
            component = pending.popleft()
            if component in (".", ".."):
                if component == ".." and resolved:
                    resolved.pop()
                kind = _DIRECTORY
                continue
            resolved.append(component)
            path = "/" + "/".join(resolved)
            last = not pending
            needs_dir = pending[0] in (".", "..") if pending else trailing_slash
            checked = not no_links or needs_dir or last
            if kind != _DIRECTORY:
                kind = _NOT_DIR if kind == _FILE else kind
            elif (target := None if no_links else self._link(path)) is not None:
                links += 1
                if links <= MAX_SYMLINKS:
                    resolved.pop()
                    if target.startswith("/"):
                        resolved.clear()
                    pending.extendleft(reversed(_components(target)))
                    if last:
                        trailing_slash = target.endswith("/") or trailing_slash
                    continue
                if self.existence is not Existence.NONE:
                    raise _Unresolved(_LOOP)
                kind = _NO_SUCH  # kept as written, as GNU -m does
            else:
                kind = self._kind(path) if checked else _DIRECTORY
            problem = _NOT_DIR if kind == _FILE and needs_dir else kind
            if checked and problem in (_NO_SUCH, _NOT_DIR) and self._fails(problem, last):
                raise _Unresolved(problem)
        return "/" + "/".join(resolved)

    def _fails(self, problem: str, last: bool) -> bool:
        """Whether a component that is ``problem`` ends the resolution in this mode."""
        if self.existence is Existence.NONE:
            return False
        return not (self.existence is Existence.ALL_BUT_LAST and last and problem == _NO_SUCH)

    def _link(self, path: str) -> str | None:
        """The target of the symbolic link at ``path``; None when it is not one."""
        try:
            return self.fs.read_link(path)
        except (RuntimeError, OSError):
            return None

    def _kind(self, path: str) -> str:
        """What ``path`` is: a directory, another file, or why it is neither (the
        nearest ancestor that exists is a file: not a directory; else no such file)."""
        try:
            file_type = self.fs.stat(path)["file_type"]
        except (RuntimeError, OSError):
            parent = path.rpartition("/")[0]
            if parent and self._kind(parent) in (_FILE, _NOT_DIR):
                return _NOT_DIR
            return _NO_SUCH
        return _DIRECTORY if file_type == "directory" else _FILE


def _components(name: str) -> list[str]:
    return [part for part in name.split("/") if part]


def _below(base: str, path: str) -> bool:
    """Whether ``path`` is ``base`` or inside it (both resolved)."""
    return base == "/" or path == base or path.startswith(base + "/")


def _relative_path(path: str, directory: str) -> str:
    """``path`` written relative to ``directory`` (both resolved)."""
    parts, base = _components(path), _components(directory)
    common = 0
    while common < min(len(parts), len(base)) and parts[common] == base[common]:
        common += 1
    return "/".join([".."] * (len(base) - common) + parts[common:]) or "."
