"""The fake's GNU ``rm``, run in a sandbox's shell: each expected answer is what GNU coreutils
9.1's ``rm`` printed for the same command in the same tree (made by :data:`TREE`, in ``/w``;
``rm -rf /`` is refused by GNU's, so it was safe to ask)."""

from __future__ import annotations

import pytest

from tests.test_shell import Harness

#: d/e/g, f, empty and full (one byte) are files; l -> /tmp; x is an empty directory.
TREE = "mkdir -p /w/d/e /w/x && cd /w && touch f d/e/g empty && printf x > full && ln -s /tmp l"
NO_SUCH = "No such file or directory"
USAGE = "Try 'rm --help' for more information.\n"
FAILSAFE = "rm: use --no-preserve-root to override this failsafe\n"

#: (script, stdout, stderr, status): the script runs in /w.
CASES: list[tuple[str, str, str, int]] = [
    # Refusals: the root, a last component "." or "..", a directory without -r.
    ("rm -rf /", "", f"rm: it is dangerous to operate recursively on '/'\n{FAILSAFE}", 1),
    (
        "rm -r // /w/f",
        "",
        f"rm: it is dangerous to operate recursively on '//' (same as '/')\n{FAILSAFE}",
        1,
    ),
    ("rm -r .", "", "rm: refusing to remove '.' or '..' directory: skipping '.'\n", 1),
    ("rm -rf d/..", "", "rm: refusing to remove '.' or '..' directory: skipping 'd/..'\n", 1),
    ("rm .", "", "rm: cannot remove '.': Is a directory\n", 1),
    ("rm d", "", "rm: cannot remove 'd': Is a directory\n", 1),
    ("rm -d d", "", "rm: cannot remove 'd': Directory not empty\n", 1),
    # Missing files, -f, operands.
    ("rm nope", "", f"rm: cannot remove 'nope': {NO_SUCH}\n", 1),
    ("rm -f nope; rm -f", "", "", 0),
    ("rm", "", f"rm: missing operand\n{USAGE}", 1),
    (
        "rm 'a b' \"it's\"",
        "",
        f"rm: cannot remove 'a b': {NO_SUCH}\nrm: cannot remove \"it's\": {NO_SUCH}\n",
        1,
    ),
    # -v says what went, depth first; a link goes, not what it names.
    (
        "rm -v f l && rm -rv d && rm -dv x && ls /tmp >/dev/null",
        "removed 'f'\nremoved 'l'\nremoved 'd/e/g'\nremoved directory 'd/e'\n"
        "removed directory 'd'\nremoved directory 'x'\n",
        "",
        0,
    ),
    # -i asks before each removal, -I once; answers come from the input.
    (
        "printf 'n\\ny\\n' | rm -i empty full; ls empty; test -e full || echo gone",
        "empty\ngone\n",
        "rm: remove regular empty file 'empty'? rm: remove regular file 'full'? ",
        0,
    ),
    ("rm -I a b c d", "", "rm: remove 4 arguments? ", 0),
    ("echo n | rm -rI d; ls d", "e\n", "rm: remove 1 argument recursively? ", 0),
    # Usage errors.
    (
        "rm --interactive=bogus f",
        "",
        "rm: invalid argument \u2018bogus\u2019 for \u2018--interactive\u2019\n"
        "Valid arguments are:\n  - \u2018never\u2019, \u2018no\u2019, \u2018none\u2019\n"
        f"  - \u2018once\u2019\n  - \u2018always\u2019, \u2018yes\u2019\n{USAGE}",
        1,
    ),
    (
        "rm --no-preserve-root=x f",
        "",
        f"rm: option '--no-preserve-root' doesn't allow an argument\n{USAGE}",
        1,
    ),
    ("rm --preserve-root=foo f", "", "rm: unrecognized --preserve-root argument: 'foo'\n", 1),
    ("rm -x", "", f"rm: invalid option -- 'x'\n{USAGE}", 1),
]


@pytest.fixture
def shell_tree() -> str:
    return TREE


@pytest.mark.parametrize(("script", "out", "err", "status"), CASES, ids=[c[0] for c in CASES])
async def test_rm_answers_as_gnu(h: Harness, script: str, out: str, err: str, status: int) -> None:
    result = await h.sh(f"cd /w && {script}")
    assert (result.out, result.err, result.status) == (out, err, status)
    assert h.fs.is_dir("/w")  # whatever was refused, the tree keeps its root and the rest


async def test_no_preserve_root_empties_the_root_and_keeps_it(h: Harness) -> None:
    result = await h.sh("rm -rf --no-preserve-root / 2>/dev/null; echo $?; ls -A /; echo hi")
    # The image's programs are mounted read-only: they stay, and rm says it failed.
    assert (result.out, result.status) == ("1\nbin\nusr\nhi\n", 0)
    assert h.fs.listdir("/") == ["bin", "usr"]  # where they are mounted
