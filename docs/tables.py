"""The reference tables of the documentation, rendered from the code that declares them, so a
page can never drift from what the fake and the plugin really accept.

A page holds each table between two HTML comments on lines of their own (invisible on GitHub,
in an editor's preview and on the site)::

    <!-- table: cli-flags -->

    | Flag | Meaning |
    ...

    <!-- /table -->

The table between them is generated, committed, and never edited by hand: ``python
docs/tables.py`` rewrites every page's tables from the code and names the pages it changed. A
lone opening comment (a new table) gets its table and its closing comment the same way.

As the MkDocs hook (``mkdocs.yml`` lists this file under ``hooks``), it fails the build on a
stale table or an unknown table name; the project's suite (``tests/test_doc_tables.py``)
checks every page the same way. The suite runs without MkDocs, so only the hook imports it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from _pytest.config.argparsing import Parser

from fake_server import cli, fault_rules, gates, openapi, sandbox_commands
from fake_server.filesystem import programs
from fake_server.registered_commands import CommandRegistry
from pytest_createos import _checks, _kit_messages, _scenarios, plugin
from pytest_createos.kit import WORKLOADS

__all__ = ["COMMAND", "TABLES", "TableError", "main", "on_page_markdown", "refresh"]

#: What a contributor runs to bring every page's tables up to date.
COMMAND = "python docs/tables.py"
#: The folder of the pages.
DOCS = Path(__file__).resolve().parent


def _row(*cells: str) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = [_row(*header), _row(*(["---"] * len(header)))]
    lines += [_row(*row) for row in rows]
    return "\n".join(lines)


def _code(text: object) -> str:
    return f"`{text}`"


# -- the standalone server and the plugin's options -------------------------------------------


def _serve_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["serve"]  # type: ignore[no-any-return]
    raise LookupError("fake-createos has no serve command")


def cli_flags() -> str:
    """Every flag of ``fake-createos serve``, from its argparse declaration."""
    rows = []
    for action in _serve_parser()._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = ", ".join(action.option_strings)
        if action.choices:
            flag += " {" + ",".join(map(str, action.choices)) + "}"
        elif action.nargs != 0:
            flag += " " + (action.metavar or action.dest.upper())
        help_text = (action.help or "") % {"default": action.default}
        rows.append((_code(flag), help_text))
    return _table(("Flag", "Meaning"), rows)


def plugin_options() -> str:
    """Every command-line option and ini key the plugin adds, from ``pytest_addoption``."""
    parser = Parser(processopt=None, _ispytest=True)  # private, but what pytest itself builds
    plugin.pytest_addoption(parser)
    rows = []
    for group in parser._groups:
        for option in group.options:
            names = option.names()
            attrs = option.attrs()
            flag = ", ".join(names)
            if attrs.get("choices"):
                flag += " {" + ",".join(attrs["choices"]) + "}"
            elif attrs.get("default") is not False:  # a flag's default is False
                flag += " " + names[0].lstrip("-").split("-")[-1].upper()
            rows.append((_code(flag), attrs.get("help", "")))
    for name, (help_text, _type, default) in parser._inidict.items():
        shown = f" (default `{default}`)" if default not in ("", None) else ""
        rows.append((f"ini `{name}`", f"{help_text}{shown}"))
    return _table(("Option", "Meaning"), rows)


# -- faults ------------------------------------------------------------------------------------


def fault_actions() -> str:
    """Every ``action.type`` a rule accepts, its parameters and its effect."""
    rows = []
    for name, spec in fault_rules.ACTION_TYPES.items():
        params = ", ".join(
            _code(p) + ("" if p in spec.required else " (optional)") for p in sorted(spec.params)
        )
        rows.append((_code(name), params or "—", spec.effect))
    return _table(("`action.type`", "Parameters", "Effect"), rows)


def release_outcomes() -> str:
    """What a held request released with each ``outcome`` does."""
    rows = [("`proceed` (or none)", "the request goes on as if it had not been held")]
    rows += [(_code(name), effect) for name, effect in gates.OUTCOMES.items()]
    return _table(("`outcome`", "What the request does"), rows)


# -- the HTTP API, from the OpenAPI document --------------------------------------------------


class _Schemas:
    """Renders JSON schemas of the OpenAPI document as short type sketches."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.components: dict[str, Any] = document["components"]["schemas"]
        self.used: list[str] = []

    def sketch(self, schema: dict[str, Any], depth: int = 0) -> str:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in self.used:
                self.used.append(name)
            return name
        if "const" in schema:
            return json.dumps(schema["const"])
        if "enum" in schema:
            return " or ".join(json.dumps(value) for value in schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema and "properties" not in schema:
                return " or ".join(self.sketch(part, depth) for part in schema[key])
        if "allOf" in schema:
            return " & ".join(self.sketch(part, depth) for part in schema["allOf"])
        kind = schema.get("type")
        if isinstance(kind, list):
            return " or ".join(self.sketch({**schema, "type": k}, depth) for k in kind)
        if kind == "array":
            return "[" + self.sketch(schema.get("items", {}), depth) + ", …]"
        if kind == "object":
            properties: dict[str, Any] = schema.get("properties", {})
            if not properties:
                values = schema.get("additionalProperties", True)
                if values is False:
                    return "{}"
                if not isinstance(values, dict):
                    return "{…}"
                # A map (environment variables): what its keys are and what it may hold.
                keys = "NAME" if "propertyNames" in schema else "string"
                sketch = "{" + f"{keys}: {self.sketch(values, depth + 1)}, …" + "}"
                described = schema.get("description", "").rstrip(".")
                return f"{sketch} ({described[:1].lower()}{described[1:]})" if described else sketch
            required = set(schema.get("required", ()))
            fields = [
                f'"{key}"{"" if key in required else "?"}: {self.sketch(value, depth + 1)}'
                for key, value in properties.items()
            ]
            fields += map(self._ignored, schema.get("patternProperties", {}).items())
            # Alternatives of an object are which of its fields it needs (a process: cmd or pty).
            needs = [part.get("required", []) for part in schema.get("anyOf", ())]
            needed = " or ".join(" and ".join(f'"{name}"' for name in names) for names in needs)
            return "{" + ", ".join(fields) + "}" + (f" ({needed} required)" if needed else "")
        return str(kind or "any")

    @staticmethod
    def _ignored(pattern_and_schema: tuple[str, dict[str, Any]]) -> str:
        """Fields the fake accepts and ignores: ``api_schema`` matches them by a pattern of
        their names, ``^(cwd|timeout)$``, which reads here as the names."""
        pattern, schema = pattern_and_schema
        names = re.fullmatch(r"\^\(([\w|]+)\)\$", pattern)
        if names is None:
            raise ValueError(f"docs/tables.py cannot sketch the key pattern {pattern!r}")
        keys = ", ".join(f'"{name}"?' for name in names.group(1).split("|"))
        return f"{keys}: {schema['description'].rstrip('.').lower()}"

    def components_table(self) -> str:
        rows = []
        done = 0
        while done < len(self.used):  # sketching a component may name further components
            name = self.used[done]
            rows.append((_code(name), _code(self.sketch(self.components[name]))))
            done += 1
        return _table(("Schema", "Shape"), rows)


def _api_table(prefix: str) -> str:
    document = openapi.document()
    schemas = _Schemas(document)
    rows = []
    for path, item in document["paths"].items():
        if not path.startswith(prefix):
            continue
        for method, operation in item.items():
            if method == "parameters":
                continue
            body = operation.get("requestBody", {}).get("content", {})
            sent = ", ".join(
                _code(schemas.sketch(content["schema"])) if "json" in media else media
                for media, content in body.items()
            )
            ok = operation["responses"].get("200", {}).get("content", {})
            answer = []
            for media, content in ok.items():
                data = content["schema"].get("properties", {}).get("data")
                answer.append(_code(schemas.sketch(data)) if data else media)
            errors = sorted(code for code in operation["responses"] if code != "200")
            # The query parameters it reads, named after the path as a client writes them.
            parameters = [*item.get("parameters", []), *operation.get("parameters", [])]
            query = "&".join(f"{p['name']}=" for p in parameters if p.get("in") == "query")
            rows.append(
                (
                    _code(f"{method.upper()} {path}" + (f"?{query}" if query else "")),
                    operation["summary"],
                    sent or "—",
                    ", ".join(answer) or "—",
                    ", ".join(errors),
                )
            )
    table = _table(("Route", "What it does", "Body", "`data` of the answer", "Errors"), rows)
    return table + "\n\nThe schemas named above:\n\n" + schemas.components_table()


def control_api() -> str:
    """Every control route (``/_fake/...``) with what it takes and the shape of its answer."""
    return _api_table("/_fake/")


def sandbox_api() -> str:
    """Every ``/v1`` route the fake serves."""
    return _api_table("/v1/")


# -- the conformance kit -----------------------------------------------------------------------


def _scenario_table(scenarios: Iterable[_scenarios.Scenario]) -> str:
    return _table(("Scenario", "The race"), ((_code(s.name), s.summary) for s in scenarios))


def kit_scenarios() -> str:
    """The host scenarios ``HostConformance`` plays."""
    return _scenario_table(_scenarios.SCENARIOS)


def provider_scenarios() -> str:
    """The provider scenarios ``ProviderConformance`` plays."""
    return _scenario_table(_scenarios.PROVIDER_SCENARIOS)


def kit_checks() -> str:
    """Every check a kit report may name: those run over the journal, then those made of the
    calls themselves."""
    rows = [(_code(k), v, "the journal") for k, v in _checks.CHECKS.items()]
    rows += [(_code(k), v, "the calls") for k, v in _kit_messages.CALL_CHECKS.items()]
    return _table(("Check", "Holds when", "Judged from"), rows)


def explorer_workloads() -> str:
    """The workloads the schedule explorer races: their calls, started together."""
    rows = []
    for workload in WORKLOADS:
        calls = " ∥ ".join(_code(op.describe()) for op in workload.ops)
        if workload.released:
            leases = ", ".join(f"L{lease + 1}" for lease in workload.released)
            calls += f" ({leases} released first)"
        rows.append((_code(workload.name), calls, workload.summary))
    return _table(("Workload", "Calls (∥: at once)", "What it looks for"), rows)


# -- inside a sandbox --------------------------------------------------------------------------


def shell_commands() -> str:
    """Every program in a sandbox's ``/bin``, and the commands the fake itself adds."""
    # Files only: the program tree also holds a fresh filesystem's empty dev, home and tmp.
    image = sorted(
        entry["name"]
        for entry in programs().read_dir("/")
        if entry["metadata"]["file_type"] == "file"
    )
    # The fake's commands are declared per run; a run with no registered commands lists them.
    shell = types.SimpleNamespace(registry=CommandRegistry())
    commands = sandbox_commands.SandboxCommands(shell, None, 0)
    added = sorted(
        name
        for name in (*commands.builtins(), *commands.live_commands())
        if not name.startswith("__")
    )
    return (
        f"**The interpreter's programs ({len(image)})**, in `/bin` and `/usr/bin`: "
        + ", ".join(_code(name) for name in image)
        + f"\n\n**Commands the fake adds or replaces ({len(added)})**: "
        + ", ".join(_code(name) for name in added)
    )


TABLES: dict[str, Callable[[], str]] = {
    "cli-flags": cli_flags,
    "plugin-options": plugin_options,
    "fault-actions": fault_actions,
    "release-outcomes": release_outcomes,
    "control-api": control_api,
    "sandbox-api": sandbox_api,
    "kit-scenarios": kit_scenarios,
    "explorer-workloads": explorer_workloads,
    "provider-scenarios": provider_scenarios,
    "kit-checks": kit_checks,
    "shell-commands": shell_commands,
}


# -- the tables on the pages -------------------------------------------------------------------

# Any name, so that a misspelt one is refused rather than left as a bare comment.
_OPEN = re.compile(r"^<!-- table: (\S+) -->$", re.MULTILINE)
_CLOSE = re.compile(r"^<!-- /table -->$", re.MULTILINE)


class TableError(ValueError):
    """A page asks for a table nobody declares, or its markers do not pair up."""


def _block(name: str) -> str:
    """The table ``name`` between its two markers, as a page commits it."""
    if name not in TABLES:
        raise TableError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
    return f"<!-- table: {name} -->\n\n{TABLES[name]()}\n\n<!-- /table -->"


def refresh(text: str) -> tuple[str, list[str]]:
    """A page's text with every table regenerated, and the names of those that were stale.

    A table's block runs from its opening marker to the first closing marker before the next
    opening one; an opening marker with no closing one before the next table (or the page's
    end) is a table not generated yet, so stale. A closing marker outside a block is refused.
    """
    openings = list(_OPEN.finditer(text))
    closings = [found.end() for found in _CLOSE.finditer(text)]
    parts: list[str] = []
    stale: list[str] = []
    paired: set[int] = set()
    done = 0  # how much of the text is in parts
    for number, opening in enumerate(openings):
        limit = openings[number + 1].start() if number + 1 < len(openings) else len(text)
        inside = [end for end in closings if opening.end() < end <= limit]
        end = inside[0] if inside else opening.end()
        paired.add(end)
        fresh = _block(opening.group(1))
        if text[opening.start() : end] != fresh:
            stale.append(opening.group(1))
        parts += [text[done : opening.start()], fresh]
        done = end
    if set(closings) - paired:
        raise TableError("a closing marker <!-- /table --> without its opening one")
    return "".join(parts) + text[done:], stale


def on_page_markdown(markdown: str, *, page: Any, **_: Any) -> str:
    """The page as committed, once every table on it is what the code declares now."""
    # Imported here: the suite imports this module without MkDocs installed. An error rather
    # than a warning: `mkdocs build -q` drops warnings before strict mode counts them.
    from mkdocs.exceptions import PluginError

    where = f"docs/{page.file.src_uri}"
    try:
        stale = refresh(markdown)[1]
    except TableError as error:
        raise PluginError(f"{where}: {error}") from error
    if stale:
        names = ", ".join(stale)
        which = f"the table {names} is" if len(stale) == 1 else f"the tables {names} are"
        raise PluginError(
            f"{where}: {which} not what the code declares now (stale, or edited by hand);"
            f" run `{COMMAND}` and commit the pages it changes"
        )
    return markdown


def main() -> int:
    """Regenerate every page's tables in place; print each page changed, and its tables."""
    changed = 0
    for path in sorted(DOCS.rglob("*.md")):
        where = path.relative_to(DOCS.parent).as_posix()
        text = path.read_text()
        try:
            fresh, stale = refresh(text)
        except TableError as error:
            print(f"{where}: {error}", file=sys.stderr)
            return 1
        if stale:
            path.write_text(fresh)
            changed += 1
            print(f"{where}: {', '.join(stale)}")
    if not changed:
        print("every table is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
