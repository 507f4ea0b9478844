"""The shell corpus (:mod:`tests.shell_corpus`) against the fake: every script, run the ways
clients run scripts — a buffered ``/exec`` without ``stdin``, one with ``stdin``, a managed
process fed through ``POST …/input`` then closed, and an interactive shell (a managed
``/bin/bash`` without a script) sent the script itself as its input, in one piece or line by
line, then closed — must end with bash's exit status, print exactly bash's stdout, and write to
stderr exactly when bash did.

What bash answered is ``tests/shell_corpus/expected.json`` (regenerate it after editing the
scripts); the differences that are the interpreter's own, not the fake's, are listed in
:data:`KNOWN_DIFFERENCES` and expected to fail, so that an interpreter that fixes one shows.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fake_server import FakeCreateOS, ServerConfig
from tests.shell_corpus.corpus import Expected, Outcome, load_expected, load_scripts

BASH_VERSION, EXPECTED = load_expected()
#: How a client runs a script: ``/exec`` without stdin, ``/exec`` with it, a managed process,
#: and an interactive shell sent the script in one ``POST …/input`` or one per line.
MODES = ("exec", "exec-stdin", "process", "repl", "repl-lines")
EVERY_WAY = MODES
NO_STDIN = ("exec",)
PROCESS = ("process",)
REPL = ("repl", "repl-lines")
#: A script run by bash -c: bash -s, given the script as its input, answers some errors
#: otherwise (exit status 1 where bash -c exits 127).
SCRIPT = ("exec", "exec-stdin", "process")
MANAGED = (*PROCESS, *REPL)

# Why the fake answers otherwise than bash: the interpreter's own bugs (bashkit 0.20.1, each
# seen with a bare ``bashkit.Bash()`` too), and what docs/shell.md lists as unlike bash.
_UMASK = "bashkit: umask is not applied to new files (always 644)"
_EXPANSION_ERROR = (
    "bashkit: set -u on an unset variable, or ${v:?}, exits 1, not 127 (as bash -s does)"
)
_OCTAL = "bashkit: a variable's value 010 is decimal in $(( )), not octal (a literal 010 is)"
_PATH = "bashkit: its commands ignore PATH (PATH=/nonexistent; ls still runs)"
_BC = "bashkit: bc computes in floating point, and prints 0.33 where GNU bc prints .33"
_SOURCE_STDIN = "bashkit: source /dev/stdin finds no such file"
_READ_ARRAY_EOF = "bashkit: read -a at EOF leaves one empty element, bash none"
_EXEC_TRAP = "bashkit: exec runs the EXIT trap (bash's shell is replaced, and runs none)"
_HEREDOC_JOIN = (
    "bashkit: in a here-document that expands, a line ended by a backslash-newline is not"
    " joined to the next before the delimiter is looked for (the fake's interactive shell"
    " joins them for it)"
)
_ZERO = (
    "the fake: $0 of the script is bash, not the path the client gave (/bin/bash): bashkit"
    " 0.20.1 sets $0 only in a nested shell (which loses exec's redirections and BASH_VERSINFO)"
)
_SHOWS = (
    "the fake: declare -F lists a managed process's (and an interactive shell's) live-input"
    " wrappers (a function cannot stand in for declare: what it declared would be its locals)"
)
_UNWRAPPED = (
    "the fake: in a managed process, a quoted \\NAME gets none of the live input (the alias"
    " that calls its wrapper is skipped)"
)
_EXEC_UNWRAPPED = (
    "the fake: in a managed process, a command exec runs (exec cat, exec bash) gets none of the"
    " live input (an interactive shell's does; a shell the script starts without exec does too)"
)
_WRAPPED_PIPE = (
    "the fake: in a managed process, `yes | head` also says on stderr that yes hit its limit"
    " (head is a wrapper function there, and bashkit runs a pipe's writer to its end before a"
    " function reads it)"
)
# Found by the agent- entries (what coding agents run); each seen with a bare bashkit.Bash().
_LS_LONG = (
    "bashkit: ls -l has no `total` line, link count, owner or group (mode, size, YYYY-MM-DD"
    " HH:MM, name), and ls -a lists no . and .."
)
_LS_OPTIONS = "bashkit: ls -r and -S are not implemented (an error, nothing listed)"
_DIFF_OPTIONS = "bashkit: diff has no -r, -w, -b, -U N or --label (an invalid option, exit 2)"
_DIFF_HUNKS = (
    "bashkit: diff -u writes a one-line range as `-1,1` (GNU: `-1`) and no"
    " `\\ No newline at end of file`"
)
_DIFF_MISSING = "bashkit: diff with a missing file exits 1 (GNU: 2, trouble)"
_PATCH_NEW_DIR = (
    "bashkit: patch that creates a file in a missing directory ends the whole script (io error:"
    " parent directory not found, status 1); GNU patch makes the directory"
)
_PATCH_OFFSET = (
    "bashkit: patch applies a hunk only at its own line, with no offset or fuzz, and says why it"
    " failed on stderr, not GNU's `Hunk #1 FAILED at 1.` on stdout"
)
_PATCH_I = "bashkit: patch has no -i FILE"
_ZIP_Q = "bashkit: zip and unzip have no -q, unzip no -p"
_ZCAT = "bashkit: there is no zcat (gunzip -c is there)"
_ENV_EXPORTS = "bashkit: SHLVL and _ are not exported (env does not list them)"
_SED_DIRECTORY = "bashkit: sed reading a directory exits 2 (GNU: 4, an I/O error)"
_FILE_COLUMNS = "bashkit: file does not pad several names to one column (`e:     empty`)"
_STAT_EMPTY = "bashkit: stat %F says `regular file` of an empty file (GNU: `regular empty file`)"
#: (corpus entry, modes) -> why the fake answers otherwise than bash there.
KNOWN_DIFFERENCES: dict[tuple[str, tuple[str, ...]], str] = {
    ("sync-lease-file", EVERY_WAY): _UMASK,
    ("misc-umask", EVERY_WAY): _UMASK,
    ("strict-nounset", SCRIPT): _EXPANSION_ERROR,
    ("param-error", SCRIPT): _EXPANSION_ERROR,
    ("param-error-script", SCRIPT): _EXPANSION_ERROR,
    ("arith-comparison-strings", EVERY_WAY): _OCTAL,
    ("env-path-lookup", EVERY_WAY): _PATH,
    ("misc-bc", EVERY_WAY): _BC,
    ("stdin-source-dev-stdin", EVERY_WAY): _SOURCE_STDIN,
    ("stdin-read-a", NO_STDIN): _READ_ARRAY_EOF,
    ("heredoc-delimiter-continued", SCRIPT): _HEREDOC_JOIN,
    ("heredoc-line-continued-into-delimiter", SCRIPT): _HEREDOC_JOIN,
    ("heredoc-dash-delimiter-continued", SCRIPT): _HEREDOC_JOIN,
    ("misc-dollar-zero-and-args", EVERY_WAY): _ZERO,
    ("stdin-declare-f-empty", MANAGED): _SHOWS,
    ("stdin-quoted-names", PROCESS): _UNWRAPPED,
    ("misc-yes-head", MANAGED): _WRAPPED_PIPE,
    ("misc-exec-exit-trap", EVERY_WAY): _EXEC_TRAP,
    ("lines-exec-bash-exit-trap", SCRIPT): _EXEC_TRAP,
    ("lines-exec-bash", PROCESS): _EXEC_UNWRAPPED,
    ("lines-exec-bash-login-in-dir", PROCESS): _EXEC_UNWRAPPED,
    ("lines-exec-shell-by-path", PROCESS): _EXEC_UNWRAPPED,
    ("lines-exec-sh", PROCESS): _EXEC_UNWRAPPED,
    ("lines-exec-cat", PROCESS): _EXEC_UNWRAPPED,
    ("agent-ls-1-and-a", EVERY_WAY): _LS_LONG,
    ("agent-ls-la-perms-names", EVERY_WAY): _LS_LONG,
    ("agent-ls-l-columns", EVERY_WAY): _LS_LONG,
    ("agent-ls-la-total-line", EVERY_WAY): _LS_LONG,
    ("agent-ls-lh-size", EVERY_WAY): _LS_LONG,
    ("agent-ls-S-by-size", EVERY_WAY): _LS_OPTIONS,
    ("agent-ls-r-reverse", EVERY_WAY): _LS_OPTIONS,
    ("agent-diff-u-labels", EVERY_WAY): _DIFF_OPTIONS,
    ("agent-diff-r-dirs", EVERY_WAY): _DIFF_OPTIONS,
    ("agent-diff-rq", EVERY_WAY): _DIFF_OPTIONS,
    ("agent-diff-ignore-whitespace", EVERY_WAY): _DIFF_OPTIONS,
    ("agent-diff-U0", EVERY_WAY): _DIFF_OPTIONS,
    ("agent-diff-u-one-line-hunk", EVERY_WAY): _DIFF_HUNKS,
    ("agent-diff-u-no-newline-at-eof", EVERY_WAY): _DIFF_HUNKS,
    ("agent-diff-missing-file", EVERY_WAY): _DIFF_MISSING,
    ("agent-patch-new-file", EVERY_WAY): _PATCH_NEW_DIR,
    ("agent-patch-offset", EVERY_WAY): _PATCH_OFFSET,
    ("agent-patch-dry-run-fails", EVERY_WAY): _PATCH_OFFSET,
    ("agent-patch-i-file", EVERY_WAY): _PATCH_I,
    ("agent-archive-zip-unzip", EVERY_WAY): _ZIP_Q,
    ("agent-archive-zcat", EVERY_WAY): _ZCAT,
    ("agent-env-names", EVERY_WAY): _ENV_EXPORTS,
    ("agent-view-directory-as-file", EVERY_WAY): _SED_DIRECTORY,
    ("agent-view-file-type", EVERY_WAY): _FILE_COLUMNS,
    ("agent-view-stat-format", EVERY_WAY): _STAT_EMPTY,
    ("agent-marker-not-found-merged", EVERY_WAY): _ZERO,
    ("agent-missing-pytest-tail", EVERY_WAY): _ZERO,
    ("agent-missing-cargo-merged", EVERY_WAY): _ZERO,
}
#: Seconds one script may take in the fake before the test gives up on it.
RUN_TIMEOUT_S = 30
KEY = {"X-Api-Key": "skp_shell_corpus"}


def _known(name: str, mode: str) -> str | None:
    for (known_name, modes), reason in KNOWN_DIFFERENCES.items():
        if known_name == name and mode in modes:
            return reason
    return None


def _cases() -> Iterator[Any]:
    for expected in EXPECTED:
        for mode in MODES:
            if mode == "repl-lines" and "\n" not in expected.entry.script:
                continue  # one line: sent in one piece, as in the "repl" mode
            reason = _known(expected.entry.name, mode)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(expected, mode, id=f"{expected.entry.name}[{mode}]", marks=marks)


class Sandboxes:
    """One fake served over HTTP on a loop of its own, for the whole module: each script gets
    a sandbox of its own (a fresh filesystem), deleted after it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0))
        self.client: TestClient[Any, Any] = self.loop.run_until_complete(self._open())

    async def _open(self) -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = TestClient(TestServer(self.fake.app()), headers=KEY)
        await client.start_server()
        return client

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()

    def run(self, expected: Expected, mode: str) -> Outcome:
        """What the fake answers for the entry run the ``mode`` way."""
        return self.loop.run_until_complete(
            asyncio.wait_for(self._in_a_sandbox(expected, mode), RUN_TIMEOUT_S)
        )

    async def _data(self, method: str, path: str, *, exited_ok: bool = False, **body: Any) -> Any:
        """The ``data`` of a successful answer; with ``exited_ok``, a 409 too (input to a
        process that already ended, as a client that sends its stdin must tolerate)."""
        response = await self.client.request(method, path, json=body or None)
        answer = await response.json()
        if exited_ok and response.status == 409:
            return None
        assert response.status == 200, answer
        return answer["data"]

    async def _in_a_sandbox(self, expected: Expected, mode: str) -> Outcome:
        sandbox = (await self._data("POST", "/v1/sandboxes", shape="s-1vcpu-1gb"))["id"]
        try:
            base = f"/v1/sandboxes/{sandbox}"
            entry = expected.entry
            argv: dict[str, Any] = {"cmd": "/bin/bash", "args": ["-lc", entry.script]}
            if mode == "process":
                return await self._process(base, argv, [entry.given_stdin])
            if mode in REPL:
                script = entry.script_input
                inputs = script.splitlines(keepends=True) if mode == "repl-lines" else [script]
                return await self._process(base, {"cmd": "/bin/bash"}, inputs)
            if mode == "exec-stdin":
                argv["stdin"] = entry.given_stdin
            result = (await self._data("POST", f"{base}/exec", **argv))["result"]
            return Outcome(result["exit_code"], result["stdout"], result["stderr"])
        finally:
            await self._data("DELETE", f"/v1/sandboxes/{sandbox}")

    async def _process(self, base: str, argv: dict[str, Any], inputs: list[str]) -> Outcome:
        """A managed process sent ``inputs``, one ``POST …/input`` each, then closed."""
        process = (await self._data("POST", f"{base}/processes", **argv))["process_id"]
        path = f"{base}/processes/{process}"
        for stdin in inputs:
            data = base64.b64encode(stdin.encode()).decode()
            await self._data("POST", f"{path}/input", exited_ok=True, data_base64=data)
        await self._data("POST", f"{path}/stdin/close", exited_ok=True)
        response = await self.client.get(f"{path}/connect")
        assert response.status == 200
        output: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        async for line in response.content:
            frame = json.loads(line)
            if frame["type"] == "data":
                output[frame["stream"]] += base64.b64decode(frame["data_base64"])
            elif frame["type"] == "exit":
                status = frame["exit_code"]
                break
        else:
            raise AssertionError("the process's stream ended without an exit frame")
        return Outcome(status, output["stdout"].decode(), output["stderr"].decode())


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[Sandboxes]:
    world = Sandboxes()
    yield world
    world.close()


@pytest.mark.parametrize(("expected", "mode"), list(_cases()))
def test_the_fake_answers_as_bash(sandboxes: Sandboxes, expected: Expected, mode: str) -> None:
    if mode in REPL:
        bash = expected.script_on_stdin
    else:
        bash = expected.without_stdin if mode == "exec" else expected.with_stdin
    fake = sandboxes.run(expected, mode)
    assert fake.compared() == bash.compared(), (
        f"script: {expected.entry.script!r}\nbash ({BASH_VERSION}) stderr: {bash.stderr!r}\n"
        f"fake stderr: {fake.stderr!r}"
    )


def test_the_answers_are_those_of_the_scripts() -> None:
    answered = [expected.entry for expected in EXPECTED]
    assert answered == load_scripts(), "run `python -m tests.shell_corpus.regenerate`"


def test_every_known_difference_names_a_corpus_entry() -> None:
    names = {expected.entry.name for expected in EXPECTED}
    for name, modes in KNOWN_DIFFERENCES:
        assert name in names
        assert set(modes) <= set(MODES)
