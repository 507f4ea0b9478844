"""What a managed process's script sees of the fake's live-input wrappers
(:mod:`fake_server.live_input`): what bash would answer without them, wherever a function can
stand in for the builtin that would show them.

The wrappers are functions, and the aliases that call them need ``expand_aliases``, which a
non-interactive bash leaves off. So in a managed process ``alias``, ``unalias``, ``type`` and
``shopt`` are functions too (:data:`FUNCTIONS`), which ask :class:`Introspection` what to run:

* ``alias`` lists and finds the script's own aliases only;
* ``shopt expand_aliases`` is the script's own setting: off (on in an interactive shell on a
  terminal) until the script turns it on, and until then the aliases it defines are kept aside,
  so that they do not expand, as in bash;
* ``type NAME`` (``-t``, ``-a``, ``-p``...) answers as if the fake had no alias or function
  named NAME.

``declare -f``/``-F``, ``typeset``, ``compgen -A function`` and ``set -x`` still show them: a
function cannot stand in for ``declare`` (what it declared would be its own locals).

Example::

    view = Introspection({"cat": "${__fake_live:+__fake_live_}cat"}, {"read"}, expand=False)
    bash = bashkit.Bash(custom_builtins=view.builtins())
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection, Mapping

import bashkit

__all__ = ["FUNCTIONS", "Introspection"]

#: The builtins that would show the wrappers, each a function that runs what
#: :class:`Introspection` says (bash text; it sets ``__fake_status`` where the builtin fails).
FUNCTIONS = [
    f'{name}() {{ local __fake_status=0; eval "$(__fake_{name} "$@")"; return $__fake_status; }}'
    for name in ("alias", "unalias", "type", "shopt")
]
_OPTION = "expand_aliases"
#: bash's alias names: no slash, quote, ``$``, backquote, ``=`` or metacharacter.
_ALIAS_NAME = re.compile(r"[^/\s'\"$`=|&;()<>\\]+")
_Builtin = Callable[[bashkit.BuiltinContext], bashkit.BuiltinResult]


class Introspection:
    """One interpreter's answers: ``aliases`` are the fake's (name -> value), ``functions`` the
    names of its functions (besides those starting ``__fake_``); ``expand`` is the script's
    ``expand_aliases`` to start with."""

    def __init__(
        self, aliases: Mapping[str, str], functions: Collection[str], *, expand: bool
    ) -> None:
        self.aliases = dict(aliases)
        self.functions = functions
        self.expand = expand
        #: The script's aliases defined while its expand_aliases was off, by name.
        self.aside: dict[str, str] = {}

    def add_alias(self, name: str, value: str) -> None:
        """Count alias ``name`` (``value``) as the fake's too, as an interactive shell's own.

        Example::

            view.add_alias("exec", "exec ")
        """
        self.aliases[name] = value

    def builtins(self) -> dict[str, _Builtin]:
        """The builtins the :data:`FUNCTIONS` call."""
        return {
            "__fake_alias": self._alias,
            "__fake_unalias": self._unalias,
            "__fake_type": self._type,
            "__fake_shopt": self._shopt,
            "__fake_alias_list": self._alias_list,
            "__fake_shopt_list": self._shopt_list,
            "__fake_set_aside": self._set_aside,
        }

    # -- alias and unalias ---------------------------------------------------------------------

    def _alias(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        flags, names = _split(list(ctx.argv))
        if flags - {"-p"}:
            return _text([_run("builtin alias", *ctx.argv)])
        lines = ["builtin alias -p | __fake_alias_list"] if flags or not names else []
        for arg in names:
            name, equals, value = arg.partition("=")
            if not equals:
                if name in self.aside:
                    shown = _listed(name, self.aside[name])
                    lines.append(f"printf '%s\\n' {shlex.quote(shown)}")
                else:
                    lines.append(self._unaliased(name, _run("builtin alias", name)))
            elif self.expand or not _ALIAS_NAME.fullmatch(name):
                lines.append(_run("builtin alias", arg))
            else:
                self.aside[name] = value
        return _text(lines)

    def _unalias(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        flags, names = _split(list(ctx.argv))
        if flags - {"-a"}:
            return _text([_run("builtin unalias", *ctx.argv)])
        lines = []
        if flags:
            self.aside.clear()
            lines.append('eval "$(builtin alias -p | __fake_set_aside drop)"')
        for name in names:
            if self.aside.pop(name, None) is None:
                lines.append(self._unaliased(name, _run("builtin unalias", name)))
        return _text(lines)

    def _unaliased(self, name: str, command: str) -> str:
        """``command`` run as if the fake's alias ``name`` did not exist (when it does)."""
        ours = self.aliases.get(name)
        if ours is None:
            return command
        shown = shlex.quote(_listed(name, ours))
        restore = _words("builtin alias", f"{name}={ours}")
        return (
            f'if [ "$(builtin alias {shlex.quote(name)} 2>/dev/null)" = {shown} ]; then'
            f" builtin unalias {shlex.quote(name)}; {command}; {restore}; else {command}; fi"
        )

    def _ours(self, name: str, entry: str) -> bool:
        """Whether ``alias -p``'s ``entry`` is the fake's alias ``name``."""
        ours = self.aliases.get(name)
        return ours is not None and entry == _listed(name, ours)

    def _alias_list(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``builtin alias -p``'s list on stdin: the fake's aliases out, those set aside in."""
        entries = {
            name: entry for name, entry in _entries(ctx.stdin or "") if not self._ours(name, entry)
        }
        entries.update((name, _listed(name, value)) for name, value in self.aside.items())
        return bashkit.BuiltinResult(stdout="".join(entries[n] + "\n" for n in sorted(entries)))

    def _set_aside(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``builtin alias -p``'s list on stdin: the bash that removes the script's aliases,
        which are kept aside unless told to ``drop`` them."""
        keep = list(ctx.argv) != ["drop"]
        lines = []
        for name, entry in _entries(ctx.stdin or ""):
            if self._ours(name, entry):
                continue
            if keep:
                self.aside[name] = shlex.split(entry.partition("=")[2])[0]
            lines.append(f"builtin unalias {shlex.quote(name)}")
        return _text(lines)

    # -- type ------------------------------------------------------------------------------

    def _type(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        args = list(ctx.argv)
        options = []
        while args and args[0].startswith("-") and args[0] != "-":
            option = args.pop(0)
            if option == "--":
                break
            options.append(option)
        if not args:
            return _text([_run("builtin type", *options)])
        lines = []
        for name in args:
            if name in self.aliases or name in self.functions or name.startswith("__fake_"):
                # -f: no function lookup; expand_aliases off: no alias lookup.
                lines.append(
                    "builtin shopt -u expand_aliases; "
                    + _run("builtin type", "-f", *options, "--", name)
                    + "; builtin shopt -s expand_aliases"
                )
            else:
                lines.append(_run("builtin type", *options, "--", name))
        return _text(lines)

    # -- shopt -----------------------------------------------------------------------------

    def _shopt(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        flags, names = _split(list(ctx.argv))
        letters = "".join(flag[1:] for flag in flags)
        if "o" in letters or not set(letters) <= set("supq"):
            return _text([_run("builtin shopt", *ctx.argv)])
        given = [f"-{letters}"] if letters else []
        if not names:
            listing = _words("builtin shopt", *given)
            return _text([f"{listing} | __fake_shopt_list {letters or '-'}"])
        lines = []
        for name in names:
            if name != _OPTION:
                lines.append(_run("builtin shopt", *given, name))
            elif "s" in letters or "u" in letters:
                lines.append(self._expand("s" in letters))
            else:
                if not self.expand:
                    lines.append("__fake_status=1")
                if "q" not in letters:
                    lines.append(f"printf '%s\\n' {shlex.quote(self._shown('p' in letters))}")
        return _text(lines)

    def _expand(self, on: bool) -> str:
        """The bash that turns the script's ``expand_aliases`` on or off."""
        self.expand = on
        if not on:
            return 'eval "$(builtin alias -p | __fake_set_aside)"'
        aside, self.aside = self.aside, {}
        if not aside:
            return ":"
        return "builtin alias " + " ".join(shlex.quote(f"{n}={v}") for n, v in aside.items())

    def _shown(self, as_command: bool) -> str:
        """How ``shopt`` shows the script's ``expand_aliases``."""
        if as_command:
            return f"shopt {'-s' if self.expand else '-u'} {_OPTION}"
        return f"{_OPTION:<15}\t{'on' if self.expand else 'off'}"

    def _shopt_list(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``builtin shopt``'s list on stdin (``FLAGS`` as given, ``-`` for none): the
        interpreter's ``expand_aliases`` (always on) shown as the script's."""
        letters = ctx.argv[0] if ctx.argv else "-"
        if "q" in letters:
            return bashkit.BuiltinResult()
        lines = [line for line in (ctx.stdin or "").splitlines() if _name(line) != _OPTION]
        listed = not ("s" in letters and not self.expand) and not ("u" in letters and self.expand)
        if listed:
            shown = self._shown("p" in letters)
            after = next((i for i, line in enumerate(lines) if _name(line) > _OPTION), len(lines))
            lines.insert(after, shown)
        return bashkit.BuiltinResult(stdout="".join(line + "\n" for line in lines))


def _split(args: list[str]) -> tuple[set[str], list[str]]:
    """A builtin's options (``-p``) and its operands."""
    flags: set[str] = set()
    while args and args[0].startswith("-") and args[0] != "-":
        option = args.pop(0)
        if option == "--":
            break
        flags.add(option)
    return flags, args


def _words(command: str, *args: str) -> str:
    """``command ARGS`` as bash text."""
    return " ".join([command, *map(shlex.quote, args)])


def _run(command: str, *args: str) -> str:
    """``command ARGS`` as bash text that notes its failure."""
    return f"{_words(command, *args)} || __fake_status=$?"


def _text(lines: list[str]) -> bashkit.BuiltinResult:
    return bashkit.BuiltinResult(stdout="".join(line + "\n" for line in lines))


def _listed(name: str, value: str) -> str:
    """An alias as ``alias -p`` lists it."""
    return f"alias {name}='" + value.replace("'", "'\\''") + "'"


def _entries(listing: str) -> list[tuple[str, str]]:
    """``alias -p``'s entries (name, text); a value may span lines."""
    entries: list[tuple[str, str]] = []
    for line in listing.splitlines():
        if line.startswith("alias ") and "=" in line:
            entries.append((line[len("alias ") :].partition("=")[0], line))
        elif entries:
            name, entry = entries[-1]
            entries[-1] = (name, f"{entry}\n{line}")
    return entries


def _name(line: str) -> str:
    """The option a ``shopt`` list line shows (``NAME  \\ton``, ``shopt -s NAME``)."""
    words = line.split()
    return words[2] if words[:1] == ["shopt"] and len(words) > 2 else (words or [""])[0]
