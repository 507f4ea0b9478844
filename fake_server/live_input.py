"""A managed process's live input: the bash functions and aliases (its *prelude*) that hand
what ``POST …/input`` sends to ``read``, ``mapfile``, ``cat`` and the other commands that read
stdin, when they would read the process's own stdin (:mod:`fake_server.stdin_readers` tells
which, from their arguments).

The prelude runs in the process's interpreter ahead of its script, in a run of its own: an
alias applies only from the next line the interpreter reads.

Example::

    await shell.execute(run, interpreter, prelude(shell.registry.names(), script))
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Collection, Container, Iterable, Sequence

from fake_server.bash_arguments import BashArguments, BashOption
from fake_server.filesystem import PROGRAM_DIRS, programs
from fake_server.live_introspection import FUNCTIONS as INTROSPECTION
from fake_server.stdin_readers import RUNNERS, STDIN_READERS

__all__ = [
    "FED",
    "LIVE_MARK",
    "PIPED_READ",
    "READ_FUNCTION",
    "SHELLS",
    "WRAPPER_PREFIX",
    "alias_values",
    "aliases",
    "by_path",
    "function_names",
    "nested_shell",
    "prelude",
    "wrappers",
]

#: Builtins that read stdin into an array: a managed process's live input reaches them too.
_ARRAY_READERS = ("mapfile", "readarray")
#: The live-input ``read``: the process's next line when it reads the process's own stdin, the
#: builtin otherwise.
READ_FUNCTION = (
    'read() { if __fake_stdin_is_process "$@"; then local __fake_line __fake_status;'
    ' __fake_line=$(__fake_read "$@"); __fake_status=$?;'
    ' builtin read "$@" <<<"$__fake_line"; return $__fake_status;'
    ' else builtin read "$@"; fi; }'
)
#: A pipe into ``read`` (``cmd | while IFS= read -r line``, ``cmd | { read a; read b; }``): a
#: script (and each command of an interactive shell) with one gets the interpreter's own
#: ``read``, not :data:`READ_FUNCTION`: bashkit 0.20.1 loses all but the first line of a pipe
#: behind a function named ``read`` when ``cmd`` writes in pieces (a function, a group, ``seq``,
#: ``cat``, the fake's own wrappers).
PIPED_READ = re.compile(
    r"(?<!\|)\|(?!\|)&?\s*[({]?\s*(?:(?:while|until)\s+(?:!\s*)?)?(?:IFS=\S*\s+)?read\b"
)
#: The shells a script starts (``bash -c 'cat'``, ``sh -s``): their commands read the live input
#: too (see :func:`nested_shell`).
SHELLS = ("bash", "sh")
#: The commands a wrapper feeds: those that read stdin, those that run one (``env cat``,
#: ``command cat``), and the shells.
FED = (*STDIN_READERS, *RUNNERS, *SHELLS)
#: What a wrapper is called: not its command's name, which an alias maps to it. bashkit 0.20.1
#: hands a function named ``cat``, ``grep`` or ``tr`` at the end of a pipe no input at all when
#: the pipe starts with a group, a function, a subshell or a builtin such as ``seq`` or ``cat``
#: (``seq 3 | grep 2`` printed nothing in a managed process).
WRAPPER_PREFIX = "__fake_live_"
#: A shell variable set (never exported) where the wrappers are defined: see :func:`aliases`.
LIVE_MARK = "__fake_live"
#: What every wrapper runs: the command fed by the process's live input when it would read it there
#: (through a redirection: behind a pipe from the fake's ``__fake_cat``, bashkit 0.20.1's
#: ``/dev/stdin`` reads nothing), else the command unchanged. One shared function keeps the
#: wrappers short: the prelude is parsed at every process start. ``"$@"`` names the command itself
#: (no function has its name), never through ``command``: for ``command NAME`` (or ``builtin``, or
#: a path) the interpreter holds the whole output and hands it over at the end, so a follower saw
#: nothing until then, each 4 KiB of it cost ~17 us more, and past 32 MB the run failed.
_RUNNER = '__fake_run() { if __fake_feeds "$@"; then "$@" < <(__fake_cat); else "$@"; fi; }'
#: A plain ``cat`` streams the input as it comes (``__fake_cat`` is a cat); with options or files
#: it gets the input through a redirection, as every other reader does. A quoted ``\cat`` is never
#: an alias.
_CAT = (
    f'{WRAPPER_PREFIX}cat() {{ if __fake_feeds cat "$@"; then if [ $# -eq 0 ] || [ "$*" = - ];'
    ' then __fake_cat; else \\cat "$@" < <(__fake_cat); fi; else \\cat "$@"; fi; }'
)


#: What a shell's wrapper runs: the shell as :func:`nested_shell` writes it when it reads the
#: process's own stdin (from ``__fake_shell_argv``), else the shell unchanged.
_SHELL = (
    '__fake_shell() { if __fake_stdin_is_process; then eval "$(__fake_shell_argv "$@")";'
    ' else "$@"; fi; }'
)


def wrappers(skip: Container[str] = ()) -> list[str]:
    """The bash functions that feed the commands of :data:`FED` (but those in ``skip``) a
    managed process's live input when they would read it as their stdin: each
    (``__fake_live_NAME``, which an alias ``NAME`` calls) asks ``__fake_feeds NAME ARGS...``
    (the caller reads the process's own stdin and
    :func:`~fake_server.stdin_readers.reads_stdin` says yes), then runs
    ``NAME ARGS... < <(__fake_cat)``, or the command unchanged; a shell's asks
    :func:`nested_shell`.

    Example:
        >>> functions = wrappers(skip={"cat"})
        >>> functions[2]
        '__fake_live_wc() { __fake_run wc "$@"; }'
        >>> any(function.startswith("__fake_live_cat()") for function in functions)
        False
    """
    functions = [_RUNNER, _SHELL]
    for name in FED:
        if name in skip:
            continue
        runner = "__fake_shell" if name in SHELLS else "__fake_run"
        functions.append(
            _CAT if name == "cat" else f'{WRAPPER_PREFIX}{name}() {{ {runner} {name} "$@"; }}'
        )
    return functions


def by_path(names: Iterable[str]) -> list[str]:
    """The bash functions that make each of ``names`` that is a program (``/bin/cat``,
    ``/usr/bin/cat``) call its wrapper when run by its path, which no alias can name: bash
    (outside its POSIX mode) looks a name with a slash up among the functions too.

    Example:
        >>> by_path(["cat", "command"])
        ['/bin/cat() { __fake_live_cat "$@"; }', '/usr/bin/cat() { __fake_live_cat "$@"; }']
    """
    return [
        f'{directory}/{name}() {{ {WRAPPER_PREFIX}{name} "$@"; }}'
        for name in names
        if name in _program_names()
        for directory in PROGRAM_DIRS
    ]


def _alias_value(name: str) -> str:
    return f"${{{LIVE_MARK}:+{WRAPPER_PREFIX}}}{name}"


@functools.cache
def _program_names() -> frozenset[str]:
    return frozenset(entry["name"] for entry in programs().read_dir("/"))


def aliases(names: Iterable[str]) -> list[str]:
    """The lines that make each of ``names`` call its wrapper (``__fake_live_NAME``) in the
    shell that runs a managed process's script, and the plain command in a shell it starts
    (``bash -c``, ``sh -c``, ``find -exec sh -c``). They apply from the next line the
    interpreter reads, so they go ahead of a script, not on its first line.

    bashkit 0.20.1 reads a nested ``bash -c``'s script with its parent's aliases, and gives the
    nested shell none of the functions: an alias of the wrapper itself made
    ``sh -c 'grep x f'`` "command not found". So each alias names its wrapper through
    :data:`LIVE_MARK`, a variable set here and not exported, which a nested shell does not
    have (unless :func:`nested_shell` gives it the prelude): there the alias yields the
    command's own name.

    Example:
        >>> aliases(["cat"])[1:]
        ['__fake_live=1', "builtin alias 'cat=${__fake_live:+__fake_live_}cat'"]
    """
    pairs = " ".join(shlex.quote(f"{name}={_alias_value(name)}") for name in names)
    # The builtins themselves: in a managed process, alias and shopt are functions that show
    # the script's own aliases and setting (see fake_server.live_introspection).
    return ["builtin shopt -s expand_aliases", f"{LIVE_MARK}=1", f"builtin alias {pairs}"]


def prelude(registered: Collection[str], script: str | None = None) -> str:
    """What a managed process runs ahead of its ``script`` (None: an interactive shell's
    commands): functions that hand its live stdin to ``read``, ``mapfile``, the commands that
    read stdin (:data:`~fake_server.stdin_readers.STDIN_READERS`), the shells and the
    ``registered`` commands when they read the process's own stdin (not a pipe or a file); the
    latter through aliases of their names (see :data:`WRAPPER_PREFIX`) and functions of their
    paths. No ``read`` function for a ``script`` that pipes into ``read`` (see
    :data:`PIPED_READ`).

    Example:
        >>> text = prelude(["python3"], "read -r x")
        >>> "read() {" in text, "'python3=${__fake_live:+__fake_live_}python3'" in text
        (True, True)
    """
    # On one line: an error inside a function names the line it was defined on.
    return "; ".join([*_functions(registered, script), *aliases(_wrapped(registered))]) + "\n"


def nested_shell(name: str, args: list[str], registered: Collection[str]) -> str:
    """What runs shell ``name`` with ``args`` where it reads a managed process's own stdin
    (bash text, for ``eval``): with ``-c SCRIPT``, SCRIPT after the prelude, on its first line
    (bashkit 0.20.1 hands a nested shell none of its parent's functions, and the script's line
    numbers stay its own); a shell that reads its script from stdin (``-s``, no operand) fed
    the input; a script file as it is.

    Example:
        >>> nested_shell("sh", ["-s"], [])
        '\\\\sh -s < <(__fake_cat)'
        >>> text = nested_shell("bash", ["-ec", "cat"], [])
        >>> text.startswith("\\\\bash -ec '__fake_run() {"), text.endswith("; cat'")
        (True, True)
    """
    shell = BashArguments.parse(args)
    index = shell.script_index
    if shell.command and index is not None:
        script = args[index]
        # The aliases too, for the shells it starts in turn: bashkit 0.20.1 reads a nested
        # shell's script with its parent's aliases, and gives the shell itself none.
        lines = [*_functions(registered, script), *aliases(_wrapped(registered))]
        options, traced = _untraced(shell.options)
        if traced:
            lines.append(f"set -{traced}")  # from here on, so that the prelude is not traced
        args = [*options, "; ".join([*lines, script]), *args[index + 1 :]]
    # Quoted, never an alias (and no function has its name).
    line = " ".join(["\\" + name, *map(shlex.quote, args)])
    return f"{line} < <(__fake_cat)" if not shell.command and index is None else line


def _untraced(options: Sequence[BashOption]) -> tuple[list[str], str]:
    """Bash ``options`` as argv words, without ``-x`` and ``-v`` (which would trace or echo the
    prelude), and which of the two they held."""
    kept: list[str] = []
    traced = ""
    for option in options:
        letters = option.letters
        if option.word.startswith("-") and letters:
            traced += "".join(letter for letter in "xv" if letter in letters)
            letters = "".join(letter for letter in letters if letter not in "xv")
            if not letters:
                continue
            option = option._replace(word=f"-{letters}")
        kept.extend(option.words())
    return kept, "".join(sorted(set(traced)))


def _flagged(registered: Collection[str]) -> list[str]:
    """The fake's own commands that read the process's input themselves when told so (a
    registered command's ctx.stdin; the command timeout or setsid runs)."""
    return [*registered, "timeout", "setsid"]


def _wrapped(registered: Collection[str]) -> list[str]:
    """The names that call a wrapper: the fed commands (those not registered) and the fake's
    commands that read the input themselves."""
    return [*(name for name in FED if name not in registered), *_flagged(registered)]


def _functions(registered: Collection[str], script: str | None) -> list[str]:
    """The prelude's functions, one a line (see :func:`prelude`), for ``script`` (None: an
    interactive shell's commands)."""
    lines = wrappers(skip=registered)
    if script is None or not PIPED_READ.search(script):
        lines.append(READ_FUNCTION)
    # mapfile and readarray fill a variable, so they cannot sit at the end of a pipe (a
    # subshell): they read the input to its end through a redirection instead.
    for name in _ARRAY_READERS:
        lines.append(
            f'{name}() {{ if __fake_stdin_is_process "$@"; then builtin {name} "$@"'
            f' < <(__fake_cat); else builtin {name} "$@"; fi; }}'
        )
    # Named, not run through `command`, which makes the interpreter hold the output until the
    # end; quoted, never an alias (a nested shell parses these with the aliases defined).
    flagged = _flagged(registered)
    for name in flagged:
        lines.append(
            f"{WRAPPER_PREFIX}{name}() {{ if __fake_stdin_is_process; then"
            f' __FAKE_LIVE_STDIN=1 \\{name} "$@"; else \\{name} "$@"; fi; }}'
        )
    if script is None or any(f"{directory}/" in script for directory in PROGRAM_DIRS):
        # Only for a script that names a program by its path: they are most of the functions,
        # and a shell the script starts parses them all again (~0.2 ms).
        lines += by_path(_wrapped(registered))
    lines += INTROSPECTION
    return lines


def alias_values(registered: Collection[str]) -> dict[str, str]:
    """The prelude's aliases, name -> value.

    Example:
        >>> alias_values([])["cat"]
        '${__fake_live:+__fake_live_}cat'
    """
    return {name: _alias_value(name) for name in _wrapped(registered)}


def function_names(registered: Collection[str]) -> set[str]:
    """The names of the prelude's functions (``read`` too, which a script that pipes into
    ``read`` does not get).

    Example:
        >>> {"read", "/bin/cat", "__fake_live_cat", "type"} <= function_names([])
        True
    """
    return {line.partition("()")[0] for line in _functions(registered, None)}
