"""The reference tables committed in docs/ are exactly what ``docs/tables.py`` renders from the
code now: a change to a declaration (a flag, a route, a scenario...) that was not followed by
``python docs/tables.py`` fails here, as it fails the MkDocs build.

``docs/`` is not a package; the module is loaded from its file, as MkDocs loads a hook.
"""

from __future__ import annotations

import importlib.util
import re
import types
from pathlib import Path

import pytest

from fake_server.filesystem import programs

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _load_tables() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_tables", DOCS / "tables.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tables = _load_tables()
PAGES = sorted(DOCS.rglob("*.md"))
WITH_TABLES = [page for page in PAGES if "<!-- table: " in page.read_text()]
#: The flags' page as it should be (whether or not the committed one is): the tests of the
#: mechanism below do not fail along with the first test when a table is stale.
CLI = tables.refresh((DOCS / "cli.md").read_text())[0]


def _edited(text: str) -> str:
    """``text`` with one cell of its first flag's row changed by hand."""
    row = next(line for line in text.splitlines() if line.startswith("| `--"))
    return text.replace(row, row.removesuffix(" |") + ", edited |", 1)


@pytest.mark.parametrize("page", WITH_TABLES, ids=lambda page: page.relative_to(DOCS).as_posix())
def test_every_committed_table_is_what_the_code_declares(page: Path) -> None:
    text = page.read_text()
    fresh, stale = tables.refresh(text)
    assert not stale, f"docs/{page.name}: stale {stale}; run `{tables.COMMAND}` and commit"
    assert fresh == text


def test_every_table_is_on_a_page() -> None:
    used = {name for page in WITH_TABLES for name in tables._OPEN.findall(page.read_text())}
    assert used == set(tables.TABLES)


def test_a_changed_cell_is_stale_and_regenerating_restores_it() -> None:
    fresh, stale = tables.refresh(_edited(CLI))
    assert stale == ["cli-flags"]
    assert fresh == CLI


def test_a_lone_opening_marker_gets_its_table_and_closing_marker() -> None:
    text = "# Flags\n\n<!-- table: kit-checks -->\n\nAfter.\n\n<!-- table: cli-flags -->\n"
    fresh, stale = tables.refresh(text)
    assert stale == ["kit-checks", "cli-flags"]
    assert fresh.startswith("# Flags\n\n<!-- table: kit-checks -->\n\n| Check | Holds when |")
    assert "| `no-leaked-sandbox` |" in fresh
    assert "\n\n<!-- /table -->\n\nAfter.\n\n<!-- table: cli-flags -->\n\n| Flag |" in fresh
    assert fresh.endswith("\n\n<!-- /table -->\n")
    assert tables.refresh(fresh) == (fresh, [])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- table: cli-flag -->\n", "unknown table 'cli-flag'; known: cli-flags, "),
        ("<!-- table: Cli-Flags -->\n", "unknown table 'Cli-Flags'"),
        ("Text.\n<!-- /table -->\n", "closing marker <!-- /table --> without its opening"),
        (CLI + "<!-- /table -->\n", "closing marker <!-- /table --> without its opening"),
    ],
)
def test_an_unknown_table_or_a_stray_closing_marker_is_refused(text: str, message: str) -> None:
    with pytest.raises(tables.TableError, match=re.escape(message)):
        tables.refresh(text)


def _page(uri: str) -> types.SimpleNamespace:
    """What the hook reads of MkDocs' page: its file's path under docs/."""
    return types.SimpleNamespace(file=types.SimpleNamespace(src_uri=uri))


def test_the_hook_fails_the_build_on_a_stale_table_naming_page_table_and_command() -> None:
    pytest.importorskip("mkdocs", reason="the hook runs in MkDocs; the docs extra installs it")
    from mkdocs.exceptions import PluginError

    assert tables.on_page_markdown(CLI, page=_page("cli.md"), config=None, files=None) == CLI
    with pytest.raises(PluginError) as failed:
        tables.on_page_markdown(_edited(CLI), page=_page("cli.md"), config=None, files=None)
    assert str(failed.value) == (
        "docs/cli.md: the table cli-flags is not what the code declares now (stale, or edited"
        " by hand); run `python docs/tables.py` and commit the pages it changes"
    )
    with pytest.raises(PluginError, match=r"^docs/x\.md: unknown table 'nope'"):
        tables.on_page_markdown("<!-- table: nope -->\n", page=_page("x.md"))


def test_the_command_rewrites_stale_pages_and_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    current = tmp_path / "docs" / "cli.md"
    current.write_text(CLI)
    stale = tmp_path / "docs" / "sub" / "new.md"
    stale.write_text("# New\n\n<!-- table: kit-scenarios -->\n")
    monkeypatch.setattr(tables, "DOCS", tmp_path / "docs")

    assert tables.main() == 0
    assert capsys.readouterr().out == "docs/sub/new.md: kit-scenarios\n"
    assert tables.refresh(stale.read_text()) == (stale.read_text(), [])
    assert current.read_text() == CLI

    assert tables.main() == 0
    assert capsys.readouterr().out == "every table is up to date\n"

    stale.write_text("<!-- table: nope -->\n")
    assert tables.main() == 1
    assert capsys.readouterr().err.startswith("docs/sub/new.md: unknown table 'nope'")


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_no_code_span_holds_a_pipe(name: str) -> None:
    # In a table, GitHub splits a cell at a bare `|` even inside backticks and shows `\|` as
    # `|`, while MkDocs shows the backslash of `\|` inside backticks: neither renders both.
    spans = re.findall(r"`[^`]*`", tables.TABLES[name]())
    assert [span for span in spans if "|" in span] == []


def test_the_shell_commands_list_the_programs_and_no_directory() -> None:
    listed = tables.shell_commands().split("\n\n")[0].split(": ", 1)[1]
    names = {entry["name"]: entry["metadata"]["file_type"] for entry in programs().read_dir("/")}
    assert {name: names[name] for name in re.findall(r"`([^`]+)`", listed)} == {
        name: "file" for name, kind in names.items() if kind == "file"
    }


def test_the_fields_exec_accepts_and_ignores_are_in_its_row() -> None:
    exec_row = next(
        line
        for line in tables.sandbox_api().splitlines()
        if line.startswith("| `POST /v1/sandboxes/{id}/exec?stream=` |")
    )
    assert '"cwd"?, "timeout"?, "timeout_ms"?: accepted and ignored}`' in exec_row


def test_the_kits_table_names_every_check_a_report_can_name() -> None:
    # A provider's failures all name provider-refuses-resume, which the table left out.
    from pytest_createos import _kit_messages as text

    table = tables.kit_checks()
    checks = (text.PROVIDER_REFUSES_RESUME, text.PROVIDER_REFUSAL_LIFTED, text.HOST_FINISHES)
    for check in (*checks, text.SCENARIO, text.NO_WORK_ON_CLOSING):
        assert f"| `{check}` |" in table


def test_a_body_whose_alternatives_are_its_required_fields_shows_its_fields() -> None:
    # The process body read "any or any": its anyOf only says it needs cmd or pty.
    row = next(
        line
        for line in tables.sandbox_api().splitlines()
        if line.startswith("| `POST /v1/sandboxes/{id}/processes` |")
    )
    assert '{"cmd"?: string or null, "args"?:' in row
    assert '("cmd" or "pty" required)' in row
