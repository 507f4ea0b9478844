"""How the fake reads a shell's arguments (:mod:`fake_server.bash_arguments`), each case as GNU
bash 5.2 reads it."""

from __future__ import annotations

import pytest

from fake_server.bash_arguments import BashArguments


@pytest.mark.parametrize(
    ("args", "operands", "script_index"),
    [
        (["-c", "echo hi"], ("echo hi",), 1),
        (["-lc", "echo hi", "name", "one"], ("echo hi", "name", "one"), 1),
        (["-euo", "pipefail", "-c", "s"], ("s",), 3),
        (["-o", "pipefail", "-O", "extglob", "-c", "s"], ("s",), 5),
        (["--rcfile", "/dev/null", "--init-file", "/x", "-c", "s"], ("s",), 5),
        (["--login", "--norc", "job.sh", "arg"], ("job.sh", "arg"), 2),
        (["--", "-job.sh"], ("-job.sh",), 1),
        (["-", "arg"], ("arg",), 1),
        (["-s", "arg"], ("arg",), None),  # the script comes from stdin
        (["-l"], (), None),
        ([], (), None),
        (["-c"], (), None),  # bash refuses it; the interpreter says so
    ],
)
def test_operands_and_where_the_script_is(
    args: list[str], operands: tuple[str, ...], script_index: int | None
) -> None:
    shell = BashArguments.parse(args)
    assert shell.operands == operands
    assert shell.script_index == script_index
    if script_index is not None:
        assert args[script_index] == operands[0]


def test_c_and_s_are_read_from_option_clusters_only() -> None:
    assert BashArguments.parse(["-ec", "s"]).command
    assert not BashArguments.parse(["+c", "s"]).command
    assert not BashArguments.parse(["--", "-c"]).command  # an operand, not an option
    assert BashArguments.parse(["-is"]).stdin


def test_settings_give_a_running_shell_the_options_it_would_start_with() -> None:
    shell = BashArguments.parse(["-xeo", "pipefail", "+u", "-l", "-c", "s"])
    assert shell.settings() == ["set -x", "set -e", "set -o pipefail", "set +u"]
    assert shell.shopt_settings() == []


def test_shopt_options_are_settings_of_their_own() -> None:
    # `shopt -s extglob` on the script's line would come after bash parsed that line.
    shell = BashArguments.parse(["-eO", "extglob", "-c", "s"])
    assert (shell.settings(), shell.shopt_settings()) == (["set -e"], ["shopt -s extglob"])


def test_a_missing_value_reads_as_empty() -> None:
    shell = BashArguments.parse(["-o"])
    assert (shell.operands, shell.settings()) == ((), ["set -o ''"])
