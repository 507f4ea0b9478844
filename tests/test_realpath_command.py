"""The fake's GNU ``realpath``, run in a sandbox's shell over a tree with symbolic links: each
expected answer is what GNU coreutils 9.1's ``realpath`` printed for the same arguments in the
same tree (made by :data:`TREE`, in ``/w``)."""

from __future__ import annotations

import pytest

from tests.test_shell import Harness

#: d/e is a directory, f a file; l -> d, l2 -> l, abs -> /w/d/e, self -> self,
#: dang -> nowhere, d/up -> ../f.
TREE = (
    "mkdir -p /w/d/e && cd /w && touch f && ln -s d l && ln -s l l2 && ln -s /w/d/e abs"
    " && ln -s self self && ln -s nowhere dang && ln -s ../f d/up"
)
NO_SUCH = "No such file or directory"

#: (arguments, stdout, stderr, status)
CASES: list[tuple[str, str, str, int]] = [
    # Symbolic links are followed, through other links and before ".." (-P, the default).
    ("l l2 l2/e/.. abs/.. d/up", "/w/d\n/w/d\n/w/d\n/w/d\n/w/f\n", "", 0),
    ("-s l l2/e/../..", "/w/l\n/w\n", "", 0),
    ("-L l/.. -P l/..", "/w\n/w\n", "", 0),
    ("-sL l/e/..", "/w/d\n", "", 0),
    # Every component but the last must exist (-e: all of them; -m: none).
    ("nope nope/ dang", "/w/nope\n/w/nope\n/w/nowhere\n", "", 0),
    ("nope/x", "", f"realpath: nope/x: {NO_SUCH}\n", 1),
    ("-e nope", "", f"realpath: nope: {NO_SUCH}\n", 1),
    ("-m nope/x f/x dang/x self/x", "/w/nope/x\n/w/f/x\n/w/nowhere/x\n/w/self/x\n", "", 0),
    (
        "f/x d/up/x f/",
        "",
        "".join(f"realpath: {n}: Not a directory\n" for n in ("f/x", "d/up/x", "f/")),
        1,
    ),
    ("-s nope/x -s nope/..", "/w/nope/x\n", f"realpath: nope/..: {NO_SUCH}\n", 1),
    ("self", "", "realpath: self: Too many levels of symbolic links\n", 1),
    ("-q nope/x f", "/w/f\n", "", 1),
    ("''", "", f"realpath: '': {NO_SUCH}\n", 1),
    # Written relative to a directory, and only below a base.
    ("--relative-to=d d/e . ..", "e\n..\n../..\n", "", 0),
    ("--relative-to d/e d --relative-to=l", ".\n", "", 0),
    ("--relative-base=d d/e .", "e\n/w\n", "", 0),
    ("--relative-to=d --relative-base=/w /w/x /etc", "../x\n/etc\n", "", 0),
    ("--relative-base=d/e --relative-to=. d/e/f d", "/w/d/e/f\n/w/d\n", "", 0),
    ("-m --relative-to=nope/x d", "../../d\n", "", 0),
    ("--relative-to=nope/x d", "", f"realpath: nope/x: {NO_SUCH}\n", 1),
    ("-e --relative-to=f d", "", "realpath: f: Not a directory\n", 1),
    # Output and usage.
    ("-z f d | tr '\\0' @", "/w/f@/w/d@", "", 0),
    ("", "", "realpath: missing operand\nTry 'realpath --help' for more information.\n", 1),
    (
        "--rel=d f",
        "",
        (
            "realpath: option '--rel=d' is ambiguous; possibilities: '--relative-to'"
            " '--relative-base'\nTry 'realpath --help' for more information.\n"
        ),
        1,
    ),
    ("-- -x", "/w/-x\n", "", 0),
]


@pytest.fixture
def shell_tree() -> str:
    return TREE


@pytest.mark.parametrize(("args", "out", "err", "status"), CASES, ids=[c[0] for c in CASES])
async def test_realpath_answers_as_gnu(
    h: Harness, args: str, out: str, err: str, status: int
) -> None:
    result = await h.sh(f"cd /w && realpath {args}")
    assert (result.out, result.err, result.status) == (out, err, status)


async def test_realpath_sees_the_program_directories(h: Harness) -> None:
    result = await h.sh("realpath -e /bin/cat /usr/bin/../bin/sort")
    assert (result.out, result.status) == ("/bin/cat\n/usr/bin/sort\n", 0)
