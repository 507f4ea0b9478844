"""Which commands read their stdin, told from argv as the GNU tools tell it: every rule of
fake_server.stdin_readers, each with cases where the answer must be no."""

from __future__ import annotations

import pytest

from fake_server.live_input import FED, WRAPPER_PREFIX, prelude, wrappers
from fake_server.stdin_readers import STDIN_READERS, Effect, Syntax, reads_stdin


def cases(*lines: str) -> list[tuple[str, list[str]]]:
    """``"head -n 3"`` as ``("head", ["-n", "3"])`` (plain words, no quoting needed)."""
    return [(line.split()[0], line.split()[1:]) for line in lines]


# -- operands ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    cases(
        "wc -c",
        "sort",
        "uniq -c",
        "base64 -d",
        "sha256sum",
        "sha1sum",
        "md5sum",
        "cksum",
        "tac",
        "rev",
        "nl",
        "fold",
        "od -c",
        "xxd",
        "paste",
        "shuf",
        "cat -n",
        "base32",
    ),
)
def test_no_file_operand_reads_stdin(name: str, args: list[str]) -> None:
    assert reads_stdin(name, args)


@pytest.mark.parametrize(
    ("name", "args"),
    cases(
        "wc -c /etc/os-release",
        "sort a b",
        "sha256sum /etc/hostname",
        "cat /etc/hostname",
        "tac notes",
        "paste a b",
        "shuf lines.txt",
    ),
)
def test_a_file_operand_means_no_stdin(name: str, args: list[str]) -> None:
    assert not reads_stdin(name, args)


@pytest.mark.parametrize(
    ("name", "args"),
    cases("wc -c -", "cat /etc/hostname -", "paste a - b", "sha256sum - x", "sort -- -"),
)
def test_a_dash_operand_is_stdin(name: str, args: list[str]) -> None:
    assert reads_stdin(name, args)


@pytest.mark.parametrize(
    ("name", "args"),
    cases("cat /dev/stdin", "wc -l /dev/stdin", "grep -f /dev/stdin notes", "xargs -a /dev/stdin"),
)
def test_dev_stdin_is_stdin_too(name: str, args: list[str]) -> None:
    # `cat /dev/stdin` in a managed process printed nothing of the input sent to it.
    assert reads_stdin(name, args)


def test_commands_outside_the_table_are_left_alone() -> None:
    assert not reads_stdin("ls", [])
    assert not reads_stdin("python3", ["-"])
    assert not reads_stdin("", [])


@pytest.mark.parametrize(("name", "args"), cases("wc --help", "grep --version", "sort -n --help"))
def test_help_and_version_read_nothing(name: str, args: list[str]) -> None:
    assert not reads_stdin(name, args)


def test_help_as_an_option_value_or_after_double_dash_is_not_help() -> None:
    assert reads_stdin("grep", ["-e", "--help"])
    assert not reads_stdin("cat", ["--", "--help"])  # a file named --help


# -- options and their values --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("head", ["-n", "3"], True),
        ("head", ["-n3"], True),
        ("head", ["--lines=3"], True),
        ("head", ["--lines", "3"], True),
        ("head", ["-n", "3", "file"], False),
        ("head", ["--lines", "3", "file"], False),
        ("head", ["-c", "3"], True),
        ("cut", ["-d", ",", "-f", "1"], True),
        ("cut", ["-d", ",", "-f", "1", "data.csv"], False),
        ("sort", ["-k", "2", "-t", ":"], True),
        ("sort", ["-k", "2", "-t", ":", "/etc/passwd"], False),
        ("sort", ["-o", "out.txt"], True),  # -o names the output
        ("uniq", ["-f", "1", "-s", "2"], True),
        ("tac", ["-s", ","], True),
        ("nl", ["-s", ":", "-w", "3"], True),
        ("fold", ["-w", "5"], True),
        ("od", ["-A", "x", "-t", "x1"], True),
        ("base64", ["-w", "0"], True),
        ("cksum", ["-a", "md5"], True),
    ],
)
def test_option_values_are_not_operands(name: str, args: list[str], expected: bool) -> None:
    assert reads_stdin(name, args) is expected


def test_combined_short_flags_take_the_rest_or_the_next_argument_as_value() -> None:
    assert reads_stdin("sort", ["-rn"])
    assert reads_stdin("sort", ["-rnk", "2"])  # -k's value is the next argument
    assert reads_stdin("sort", ["-rnk2"])  # or the rest of the cluster
    assert not reads_stdin("sort", ["-rnk2", "file"])
    assert reads_stdin("grep", ["-ie", "x"])


def test_double_dash_ends_options() -> None:
    assert not reads_stdin("wc", ["--", "-c"])  # a file named -c
    assert not reads_stdin("grep", ["--", "-x", "file"])
    assert reads_stdin("grep", ["--", "-x"])  # the pattern -x


def test_legacy_count_forms() -> None:
    assert reads_stdin("head", ["-5"])
    assert reads_stdin("tail", ["-5"])
    assert not reads_stdin("head", ["-5", "file"])
    assert reads_stdin("tail", ["+5"])
    assert not reads_stdin("tail", ["+5", "file"])
    assert not reads_stdin("tail", ["x", "+5"])  # the count only comes first: here a file
    assert not reads_stdin("head", ["+5"])  # head has no + form: a file


def test_a_value_that_is_a_dash_is_not_stdin() -> None:
    assert not reads_stdin("cut", ["-d", "-", "-f", "1", "file"])
    assert not reads_stdin("paste", ["-d", "-", "file"])


def test_an_unknown_valued_option_errs_towards_not_reading() -> None:
    # "--frobnicate 3" is not in the table: 3 looks like a file, so the command runs as before
    # rather than waiting for input it may never read.
    assert not reads_stdin("wc", ["--frobnicate", "3"])


# -- leading operands that are not files ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("grep", ["foo"], True),
        ("grep", ["foo", "/etc/hostname"], False),
        ("grep", ["foo", "-"], True),
        ("grep", ["-e", "foo"], True),
        ("grep", ["-e", "foo", "file"], False),
        ("grep", ["--regexp=foo", "file"], False),
        ("grep", ["-f", "patterns"], True),
        ("grep", ["-f", "patterns", "file"], False),
        ("grep", ["-f", "-", "file"], True),  # the patterns come from stdin
        ("grep", ["-m", "1", "foo"], True),
        ("grep", ["-A1", "foo"], True),
        ("grep", ["-5", "foo"], True),
        ("grep", [], False),  # no pattern: a usage error, nothing read
        ("egrep", ["a|b"], True),
        ("fgrep", ["a", "file"], False),
        ("sed", ["s/a/b/"], True),
        ("sed", ["-n", "1p", "file"], False),
        ("sed", ["-e", "s/a/b/", "file"], False),
        ("sed", ["-e", "s/a/b/"], True),
        ("sed", ["--expression=p", "-n"], True),
        ("sed", ["-f", "script.sed"], True),
        ("sed", ["-f", "script.sed", "file"], False),
        ("sed", ["-E", "s/a/b/", "-"], True),
        ("awk", ["{print}"], True),
        ("awk", ["{print}", "file"], False),
        ("awk", ["-F", ":", "{print $1}"], True),
        ("awk", ["-F:", "{print $1}", "/etc/passwd"], False),
        ("awk", ["-v", "x=1", "{print x}"], True),
        ("awk", ["-f", "prog.awk"], True),
        ("awk", ["-f", "prog.awk", "file"], False),
        ("awk", ["{print}", "x=1"], True),  # an assignment, not a file
        ("awk", ["{print}", "x=1", "file"], False),
        ("awk", ["{print}", "-"], True),
        ("jq", [".a"], True),
        ("jq", [".a", "data.json"], False),
        ("jq", ["-r", ".a"], True),
        ("jq", ["--arg", "name", "value", ".a"], True),  # --arg takes two values
        ("jq", ["--arg", "name", "value", ".a", "data.json"], False),
        ("jq", ["--argjson", "n", "1", "--slurpfile", "s", "f.json", ".a"], True),
        ("jq", ["--indent", "4", "."], True),
        ("jq", ["-f", "prog.jq"], True),
        ("jq", ["--from-file", "prog.jq", "data.json"], False),
        ("jq", [".", "--args", "a", "b"], True),  # after --args, operands are strings
        ("jq", ["--args", ".", "a", "b"], True),
        ("jq", [".", "data.json", "--args", "a"], False),
        ("jq", [], True),  # the filter . when stdin is not a terminal
        ("jq", ["-c"], True),
        ("jq", ["-n", "1"], False),
        ("jq", ["-nr", "1"], False),
    ],
)
def test_leading_operands_that_are_not_files(name: str, args: list[str], expected: bool) -> None:
    assert reads_stdin(name, args) is expected


# -- commands that always, or never, read stdin --------------------------------------------------


def test_tr_always_reads_stdin_once_it_has_its_sets() -> None:
    assert reads_stdin("tr", ["a-z", "A-Z"])
    assert reads_stdin("tr", ["-d", "x"])
    assert not reads_stdin("tr", [])  # a usage error


def test_tee_operands_are_outputs() -> None:
    assert reads_stdin("tee", [])
    assert reads_stdin("tee", ["-a", "/tmp/log", "/tmp/copy"])


def test_xargs_reads_stdin_unless_given_an_argument_file() -> None:
    assert reads_stdin("xargs", ["echo"])
    assert reads_stdin("xargs", ["-n", "1", "-I", "{}", "echo", "{}"])
    assert reads_stdin("xargs", ["-0"])
    assert not reads_stdin("xargs", ["-a", "list", "echo"])
    assert not reads_stdin("xargs", ["--arg-file=list", "echo"])
    assert not reads_stdin("xargs", ["--arg-file", "list"])
    assert reads_stdin("xargs", ["-a", "-"])
    # Options end at the command: this -a is grep's.
    assert reads_stdin("xargs", ["grep", "-a", "x"])
    assert reads_stdin("xargs", ["-i{}", "echo"])  # -i's value is attached or absent


def test_in_place_and_operand_modes_read_no_stdin() -> None:
    assert not reads_stdin("sed", ["-i", "s/a/b/", "file"])
    assert not reads_stdin("sed", ["-i", "s/a/b/"])  # sed: no input files
    assert not reads_stdin("sed", ["-i.bak", "s/a/b/", "file"])
    assert not reads_stdin("sed", ["--in-place=.bak", "s/a/b/", "file"])
    assert not reads_stdin("sed", ["-ni", "p", "file"])
    assert reads_stdin("sed", ["-n", "p"])
    assert not reads_stdin("shuf", ["-e", "a", "b"])
    assert not reads_stdin("shuf", ["-i", "1-10"])
    assert not reads_stdin("shuf", ["--input-range=1-10"])
    assert reads_stdin("shuf", ["-n", "1"])
    assert reads_stdin("shuf", ["-rn", "1"])  # -r repeats: a flag


def test_recursive_grep_without_files_searches_the_working_directory() -> None:
    assert not reads_stdin("grep", ["-r", "foo"])
    assert not reads_stdin("grep", ["-rn", "foo"])
    assert not reads_stdin("grep", ["--recursive", "foo"])
    assert reads_stdin("grep", ["-r", "foo", "-"])


def test_two_operand_commands_read_only_their_first() -> None:
    assert reads_stdin("uniq", [])
    assert not reads_stdin("uniq", ["in.txt"])
    assert not reads_stdin("uniq", ["in.txt", "-"])  # - is the output: stdout
    assert reads_stdin("uniq", ["-", "out.txt"])
    assert not reads_stdin("xxd", ["in.bin", "out.hex"])
    assert reads_stdin("xxd", ["-", "out.hex"])


def test_xxd_options_are_words() -> None:
    assert reads_stdin("xxd", ["-ps"])
    assert not reads_stdin("xxd", ["-ps", "file"])  # -ps is one flag, not -p -s FILE
    assert reads_stdin("xxd", ["-c", "8"])
    assert reads_stdin("xxd", ["-cols", "8"])
    assert reads_stdin("xxd", ["--cols", "8"])
    assert not reads_stdin("xxd", ["-c8", "file"])
    assert not reads_stdin("xxd", ["-l", "16", "file"])
    assert reads_stdin("xxd", ["-r", "-p"])
    assert not reads_stdin("xxd", ["file", "-c", "8"])  # options end at the first operand


# -- the table and the functions made from it ----------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("command cat", True),
        ("command -p wc -l", True),
        ("command cat /etc/hostname", False),
        ("command -v cat", False),
        ("command -pV cat", False),
        ("command ls", False),
        ("command", False),
        ("env cat", True),
        ("env A=1 B=2 sort -r", True),
        ("env -i - A=1 cat -n", True),
        ("env -u HOME -uPATH --unset LANG --chdir /tmp cat", True),
        ("env -C /tmp -- cat", True),
        ("env command env tr a b", True),
        ("env /usr/bin/cat", True),
        ("command /bin/sort -r", True),
        ("env /tmp/cat", False),
        ("env cat notes", False),
        ("env A=1", False),
        ("env", False),
        ("env -S cat", False),
        ("env --split-string=cat", False),
        ("env --help cat", False),
    ],
)
def test_a_runner_reads_stdin_when_its_command_does(line: str, expected: bool) -> None:
    name, *args = line.split()
    assert reads_stdin(name, args) is expected


def test_the_table_covers_the_common_stdin_readers() -> None:
    expected = {"wc", "sort", "uniq", "head", "tail", "cut", "tr", "tee", "grep", "sed", "awk"}
    expected |= {"jq", "xargs", "base64", "sha256sum", "sha1sum", "md5sum", "cksum", "tac"}
    expected |= {"rev", "nl", "fold", "od", "xxd", "paste", "shuf", "cat"}
    assert expected <= set(STDIN_READERS)


def test_a_script_option_must_take_a_value() -> None:
    with pytest.raises(ValueError, match="-e has a value"):
        Syntax(effects={"-e": Effect.SCRIPT})
    assert Syntax(values="e", effects={"-e": Effect.SCRIPT}).takes_value("-e")


def test_wrappers_skip_registered_names_and_share_one_runner() -> None:
    functions = wrappers(skip={"jq", "cat"})
    names = [function.split("(", 1)[0] for function in functions]
    assert names[:2] == ["__fake_run", "__fake_shell"]
    assert set(names[2:]) == {WRAPPER_PREFIX + name for name in FED} - {
        WRAPPER_PREFIX + "jq",
        WRAPPER_PREFIX + "cat",
    }
    assert '__fake_live_wc() { __fake_run wc "$@"; }' in functions
    assert any(function.startswith("__fake_live_cat()") for function in wrappers())


def test_the_path_functions_come_with_a_script_that_spells_a_path() -> None:
    assert "/bin/cat()" not in prelude([], "cat | wc -l")
    assert "/usr/bin/cat()" in prelude([], "/usr/bin/cat | wc -l")
    assert "/bin/cat()" in prelude([])  # an interactive shell's commands are not known yet
