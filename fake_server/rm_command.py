"""GNU ``rm`` over the sandbox's filesystem.

The interpreter's own ``rm`` (bashkit 0.20.1) removes whatever it is given: ``rm -rf /`` and
``rm -rf /tmp/..`` took the sandbox's root itself (a tree Linux never leaves without a root),
``-v`` printed nothing and ``-d`` refused every directory. The fake answers ``rm`` itself, as GNU
coreutils 9 does: ``-r`` refuses ``/`` (``--preserve-root``, the default; ``--no-preserve-root``
empties it, and the root itself stays) and a last component ``.`` or ``..``; ``-d`` removes empty
directories; ``-v`` says what it removed; ``-f`` ignores missing files and never prompts; ``-i``,
``-I`` and ``--interactive`` prompt as GNU's does, the answers read from the command's piped
input (without any, every answer is no, as at the end of input). ``--one-file-system`` is
accepted: a sandbox has one file system. This module is pure: it takes the arguments, the working
directory, the piped input and the filesystem (the interpreter's view, mounts included).

Example::

    status, out, err = run_rm(["-rv", "build"], "/root", None, ctx.fs)
"""

from __future__ import annotations

import posixpath
from collections import deque
from typing import Any, Protocol

from fake_server.filesystem import FileSystem as Tree
from fake_server.filesystem import native_error
from fake_server.gnu_options import Failure, Options, quotef, version_text

__all__ = ["run_rm"]

_OPTIONS = Options(
    long=(
        ("force", "no", "f"),
        ("interactive", "opt", "interactive"),
        ("one-file-system", "no", "one-file-system"),
        ("no-preserve-root", "no", "no-preserve-root"),
        ("preserve-root", "opt", "preserve-root"),
        ("recursive", "no", "r"),
        ("dir", "no", "d"),
        ("verbose", "no", "v"),
        ("help", "no", "help"),
        ("version", "no", "version"),
    ),
    short=dict.fromkeys("fiIrRdv", "no"),
)
_HELP = """Usage: rm [OPTION]... [FILE]...
Remove (unlink) the FILE(s).

  -f, --force           ignore nonexistent files and arguments, never prompt
  -i                    prompt before every removal
  -I                    prompt once before removing more than three files, or
                          when removing recursively; less intrusive than -i,
                          while still giving protection against most mistakes
      --interactive[=WHEN]  prompt according to WHEN: never, once (-I), or
                          always (-i); without WHEN, prompt always
      --one-file-system  when removing a hierarchy recursively, skip any
                          directory that is on a file system different from
                          that of the corresponding command line argument
      --no-preserve-root  do not treat '/' specially
      --preserve-root[=all]  do not remove '/' (default);
                              with 'all', reject any command line argument
                              on a separate device from its parent
  -r, -R, --recursive   remove directories and their contents recursively
  -d, --dir             remove empty directories
  -v, --verbose         explain what is being done
      --help        display this help and exit
      --version     output version information and exit

By default, rm does not remove directories.  Use the --recursive (-r or -R)
option to remove each listed directory, too, along with all of its contents.

To remove a file whose name starts with a '-', for example '-foo',
use one of these commands:
  rm -- -foo

  rm ./-foo

Note that if you use rm to remove a file, it might be possible to recover
some of its contents, given sufficient expertise and/or time.  For greater
assurance that the contents are truly unrecoverable, consider using shred(1).
"""
_VERSION = version_text("rm", "Paul Rubin, David MacKenzie, Richard M. Stallman,\nand Jim Meyering")
#: ``--interactive=WHEN``: what each WHEN means (GNU's argmatch table, its order).
_WHEN = {"never": "never", "no": "never", "none": "never", "once": "once"}
_WHEN |= {"always": "always", "yes": "always"}
_WHEN_HELP = (
    "Valid arguments are:\n  - \u2018never\u2019, \u2018no\u2019, \u2018none\u2019\n"
    "  - \u2018once\u2019\n  - \u2018always\u2019, \u2018yes\u2019"
)
#: The file types' names in ``-i`` prompts.
_KINDS = {"file": "regular file", "symlink": "symbolic link", "directory": "directory"}


class FileSystem(Protocol):
    """What the command uses of the filesystem (:class:`bashkit.FileSystem`)."""

    def stat(self, path: str) -> dict[str, Any]: ...

    def read_link(self, path: str) -> str: ...

    def read_dir(self, path: str) -> list[dict[str, Any]]: ...

    def remove(self, path: str, recursive: bool = False) -> None: ...


def run_rm(args: list[str], cwd: str, stdin: str | None, fs: FileSystem) -> tuple[int, str, str]:
    """``rm ARGS`` in ``cwd``: its exit status, stdout and stderr.

    Example::

        assert run_rm(["-r", "/"], "/", None, fs)[0] == 1   # refused: --preserve-root
    """
    try:
        return _Rm(cwd, stdin, fs).run(args)
    except Failure as failure:
        return 1, "", failure.text("rm")


def _quoted(name: str) -> str:
    """gnulib's ``quoteaf``: as ``quotef``, but always in quotation marks."""
    text = quotef(name)
    return text if text[:1] in ("'", '"') else f"'{text}'"


class _Rm:
    def __init__(self, cwd: str, stdin: str | None, fs: FileSystem) -> None:
        self.cwd = cwd
        self.fs = fs
        self.answers = deque((stdin or "").splitlines())
        self.force = self.recursive = self.empty_dirs = self.verbose = False
        self.interactive = "never"
        self.preserve_root = True
        self.out: list[str] = []
        self.err: list[str] = []
        self.failed = False

    def run(self, args: list[str]) -> tuple[int, str, str]:
        operands: list[str] = []
        prompt_once = False
        for key, value in _OPTIONS.parse(args, operands):
            if key == "f":
                self.force, self.interactive, prompt_once = True, "never", False
            elif key in ("i", "I", "interactive"):
                when = "always" if key == "i" else "once" if key == "I" else _when(value)
                self.force = False
                self.interactive = "never" if when == "once" else when
                prompt_once = when == "once"
            elif key in ("r", "R"):
                self.recursive = True
            elif key == "d":
                self.empty_dirs = True
            elif key == "v":
                self.verbose = True
            elif key == "no-preserve-root":
                self.preserve_root = False
            elif key == "preserve-root":
                if value not in (None, "all"):
                    raise Failure(f"unrecognized --preserve-root argument: {_quoted(value)}")
                self.preserve_root = True
            elif key in ("help", "version"):
                return 0, _HELP if key == "help" else _VERSION, ""
        if not operands:
            if self.force:
                return 0, "", ""
            raise Failure("missing operand", usage=True)
        if prompt_once and (self.recursive or len(operands) > 3):
            count = f"{len(operands)} argument{'s' if len(operands) > 1 else ''}"
            how = " recursively" if self.recursive else ""
            if not self.ask(f"rm: remove {count}{how}? "):
                return 0, "", "".join(self.err)
        for name in operands:
            self.operand(name)
        return int(self.failed), "".join(self.out), "".join(self.err)

    def operand(self, name: str) -> None:
        """Remove one command-line operand, after GNU's refusals."""
        path = Tree.normalize(name, self.cwd) if name else ""
        last = name.rstrip("/").rpartition("/")[2]
        if self.recursive and last in (".", ".."):
            self.fail(f"refusing to remove '.' or '..' directory: skipping {_quoted(name)}")
            return
        if self.recursive and self.preserve_root and path == "/":
            same = "" if name == "/" else " (same as '/')"
            self.fail(f"it is dangerous to operate recursively on {_quoted(name)}{same}")
            self.fail("use --no-preserve-root to override this failsafe")
            return
        kind = self.kind(path) if path else None
        if kind is None:
            if not self.force:
                self.fail(f"cannot remove {_quoted(name)}: No such file or directory")
            return
        if kind != "directory":
            self.remove(name, path, kind)
        elif self.recursive:
            self.tree(name, path)
        elif self.empty_dirs:
            if self.entries(name, path):
                self.fail(f"cannot remove {_quoted(name)}: Directory not empty")
            else:
                self.remove(name, path, kind)
        else:
            self.fail(f"cannot remove {_quoted(name)}: Is a directory")

    def tree(self, name: str, path: str) -> bool:
        """Remove the directory ``path`` and everything in it, depth first; whether it went.
        The root itself stays (Linux never removes it): ``--no-preserve-root`` empties it."""
        entries = self.entries(name, path)
        if entries is None:
            return False
        if entries and not self.asked(f"descend into directory {_quoted(name)}"):
            return False
        emptied = True
        for child, kind in entries:
            shown = f"{name.rstrip('/')}/{child}" if name.rstrip("/") else f"/{child}"
            full = posixpath.join(path, child)
            if kind == "directory":
                emptied = self.tree(shown, full) and emptied
            else:
                emptied = self.remove(shown, full, kind) and emptied
        return path != "/" and emptied and self.remove(name, path, "directory")

    def remove(self, name: str, path: str, kind: str) -> bool:
        """Remove one file, link or empty directory (after ``-i``'s question); whether it went."""
        what = _KINDS.get(kind, "file")
        if self.interactive == "always" and kind == "file" and not self.fs.stat(path).get("size"):
            what = "regular empty file"
        if not self.asked(f"remove {what} {_quoted(name)}"):
            return False
        try:
            self.fs.remove(path)
        except RuntimeError as exc:
            self.fail(f"cannot remove {_quoted(name)}: {native_error(exc, path)}")
            return False
        if self.verbose:
            what = "directory " if kind == "directory" else ""
            self.out.append(f"removed {what}{_quoted(name)}\n")
        return True

    def entries(self, name: str, path: str) -> list[tuple[str, str]] | None:
        """The names and kinds in directory ``path``, or None (said) when it cannot be read."""
        try:
            listed = self.fs.read_dir(path)
        except RuntimeError as exc:
            self.fail(f"cannot remove {_quoted(name)}: {native_error(exc, path)}")
            return None
        return [(entry["name"], str(entry["metadata"]["file_type"])) for entry in listed]

    def kind(self, path: str) -> str | None:
        """What ``path`` names itself, a link not followed (the interpreter's ``stat``
        follows one), or None when nothing is there."""
        try:
            self.fs.read_link(path)
            return "symlink"
        except RuntimeError:
            pass
        try:
            return str(self.fs.stat(path)["file_type"])
        except RuntimeError:
            return None

    def asked(self, question: str) -> bool:
        """Whether to go on: with ``-i``, the answer to ``rm: QUESTION?`` on stderr (yes when
        the next line of input starts with ``y`` or ``Y``); without, yes."""
        return self.interactive != "always" or self.ask(f"rm: {question}? ")

    def ask(self, prompt: str) -> bool:
        self.err.append(prompt)
        return bool(self.answers) and self.answers.popleft()[:1] in ("y", "Y")

    def fail(self, message: str) -> None:
        self.failed = True
        self.err.append(f"rm: {message}\n")


def _when(value: str | None) -> str:
    """What ``--interactive=WHEN`` asks for (``always`` without a WHEN), as GNU's argmatch."""
    if value is None:
        return "always"
    found = {_WHEN[word] for word in _WHEN if word.startswith(value)} if value else set()
    if value in _WHEN:
        return _WHEN[value]
    if len(found) != 1:
        problem = "invalid" if not found else "ambiguous"
        raise Failure(
            f"{problem} argument \u2018{value}\u2019 for \u2018--interactive\u2019\n{_WHEN_HELP}",
            usage=True,
        )
    return found.pop()
