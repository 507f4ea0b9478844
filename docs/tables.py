"""MkDocs hook: the reference tables of the documentation, rendered from the code that declares
them, so a page can never drift from what the fake and the plugin really accept.

A page asks for a table with a comment on a line of its own, e.g. ``<!-- table: cli-flags -->``;
an unknown table name fails the build. ``mkdocs.yml`` lists this file under ``hooks``.
"""

from __future__ import annotations

import argparse
import json
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

from _pytest.config.argparsing import Parser
from mkdocs.exceptions import PluginError

from fake_server import cli, faults, openapi, sandbox_commands
from fake_server.filesystem import programs
from pytest_createos import _checks, _scenarios, plugin

__all__ = ["on_page_markdown"]

_TABLE = re.compile(r"^<!-- table: ([a-z-]+) -->$", re.MULTILINE)


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
    for name, spec in faults.ACTION_TYPES.items():
        params = ", ".join(
            _code(p) + ("" if p in spec.required else " (optional)") for p in sorted(spec.params)
        )
        rows.append((_code(name), params or "—", spec.effect))
    return _table(("`action.type`", "Parameters", "Effect"), rows)


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
            return " \\| ".join(json.dumps(value) for value in schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
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
                return "{…}" if schema.get("additionalProperties", True) is not False else "{}"
            required = set(schema.get("required", ()))
            fields = [
                f'"{key}"{"" if key in required else "?"}: {self.sketch(value, depth + 1)}'
                for key, value in properties.items()
            ]
            return "{" + ", ".join(fields) + "}"
        return str(kind or "any")

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
            rows.append(
                (
                    _code(f"{method.upper()} {path}"),
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
    """Every check the kit runs over a journal."""
    return _table(("Check", "Holds when"), ((_code(k), v) for k, v in _checks.CHECKS.items()))


# -- inside a sandbox --------------------------------------------------------------------------


def shell_commands() -> str:
    """Every program in a sandbox's ``/bin``, and the commands the fake itself adds."""
    image = sorted(entry["name"] for entry in programs().read_dir("/"))
    # The fake's commands are declared per run; a run with no registered commands lists them.
    commands = sandbox_commands.SandboxCommands(types.SimpleNamespace(registry={}), None, 0)
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
    "control-api": control_api,
    "sandbox-api": sandbox_api,
    "kit-scenarios": kit_scenarios,
    "provider-scenarios": provider_scenarios,
    "kit-checks": kit_checks,
    "shell-commands": shell_commands,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each ``<!-- table: NAME -->`` line with the table it names."""

    def render(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in TABLES:
            raise PluginError(f"docs: unknown table {name!r}; known: {', '.join(TABLES)}")
        return TABLES[name]()

    return _TABLE.sub(render, markdown)
