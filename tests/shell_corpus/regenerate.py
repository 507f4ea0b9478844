"""Write ``expected.json``: what GNU bash answers for every script of ``scripts.txt``.

Each script runs as ``/bin/bash --norc --noprofile -c SCRIPT`` in a fresh empty directory that is
also its ``$HOME``, with the sandbox's base environment (:data:`fake_server.shell.BASE_ENV`)
plus ``LC_ALL=C``, umask 022, no terminal, once with stdin ``/dev/null`` and once with its stdin
through a pipe; and as ``/bin/bash --norc --noprofile -s`` with the script itself on its stdin
(what an interactive shell, a process without a script, is sent), where a command that reads
stdin reads the script's next lines. That directory's path is written as
:data:`~tests.shell_corpus.corpus.HOME` in what bash printed, where the fake runs the script.

Usage (from the repository's root, with bash 5.2 on PATH or named)::

    python -m tests.shell_corpus.regenerate [--bash /path/to/bash]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fake_server.shell import BASE_ENV
from tests.shell_corpus.corpus import EXPECTED, HOME, Entry, load_scripts

#: The shell's name as clients give it (``{"cmd": "/bin/bash", "args": ["-lc", SCRIPT]}``): a
#: script's ``$0``.
ARGV0 = "/bin/bash"
#: A script that runs longer than this is not a corpus script.
TIMEOUT_S = 20


def bash_version(bash: str) -> str:
    """``bash --version``'s first line, e.g. ``GNU bash, version 5.2.15(1)-release (…)``."""
    return subprocess.run(
        [bash, "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]


def run(bash: str, options: list[str], stdin: str | None) -> dict[str, object]:
    """What bash answers run with ``options`` (``-c SCRIPT`` or ``-s``) given ``stdin`` (None:
    ``/dev/null``)."""
    with tempfile.TemporaryDirectory(prefix="shell-corpus-") as directory:
        env = {**BASE_ENV, "HOME": directory, "LC_ALL": "C"}
        done = subprocess.run(
            [ARGV0, "--norc", "--noprofile", *options],
            executable=bash,
            cwd=directory,
            env=env,
            input=None if stdin is None else stdin.encode(),
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=TIMEOUT_S,
            umask=0o022,
            start_new_session=True,  # no controlling terminal, as in a pipe process
        )

        def text(data: bytes) -> str:
            return data.decode().replace(directory, HOME)

        return {"status": done.returncode, "stdout": text(done.stdout), "stderr": text(done.stderr)}


def answers(bash: str, entry: Entry) -> dict[str, object]:
    return {
        "name": entry.name,
        "script": entry.script,
        "stdin": entry.stdin,
        "without_stdin": run(bash, ["-c", entry.script], None),
        "with_stdin": run(bash, ["-c", entry.script], entry.given_stdin),
        "script_on_stdin": run(bash, ["-s"], entry.script_input),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bash", default=shutil.which("bash"), help="the bash to ask")
    options = parser.parse_args()
    version = bash_version(options.bash)
    if "version 5.2" not in version:
        parser.error(f"the corpus's answers come from GNU bash 5.2, not {version!r}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        entries = list(pool.map(lambda entry: answers(options.bash, entry), load_scripts()))
    document = {"bash_version": version, "entries": entries}
    Path(EXPECTED).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(entries)} entries from {version} -> {EXPECTED}")


if __name__ == "__main__":
    main()
