"""A bridge program that misbehaves on purpose, one way per mode (``program.py <mode>``).

It speaks the protocol as a host (``acquire``, ``release``, ``resume``, ``run``, ``shutdown``)
until its mode says otherwise (``provider`` speaks it as a provider). Nothing here waits on
time: every answer is triggered by a request (or a ``cancel`` notification), so the tests that
drive it are deterministic.

``acquire`` creates a real sandbox on the fake, through ``CREATEOS_API_URL`` and
``CREATEOS_API_KEY``, so the kit's scenarios can run against it; ``run`` answers with the
two variables, to show they arrived.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import urllib.request
from typing import Any

HOST_METHODS = ["acquire", "release", "resume", "run", "shutdown"]
PROVIDER_METHODS = ["acquire", "resume", "release", "destroy", "execute", "shutdown"]


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def create_sandbox() -> str:
    request = urllib.request.Request(
        os.environ["CREATEOS_API_URL"] + "/v1/sandboxes",
        data=json.dumps({"shape": "s-1vcpu-1gb"}).encode(),
        headers={"X-Api-Key": os.environ["CREATEOS_API_KEY"], "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.load(response)["data"]["id"])


def answer(mode: str, request: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one request as ``mode`` gives it (``None``: none now)."""
    id_, method, params = request["id"], request["method"], request["params"]
    if mode == "provider":  # answers config["answer"], else a lease that echoes the params
        echo = {"provider_lease_id": "sb_1", "metadata": params}
        return {"id": id_, "result": params["config"].get("answer", echo)}
    if method == "acquire":
        return {"id": id_, "result": create_sandbox()}
    if method == "run" and mode == "huge":  # a line beyond the kit's limit on each stream
        log("y" * 17 * 2**20)
        log("after the long line")
        sys.stdout.write("z" * 17 * 2**20 + "\n")
        sys.stdout.flush()
        return None
    if method == "run" and mode == "chatty":
        for number in range(1, 151):
            log(f"line {number}")
        log("x" * 5_000)
    if method == "run":
        env = {"url": os.environ.get("CREATEOS_API_URL"), "key": os.environ.get("CREATEOS_API_KEY")}
        return {"id": id_, "result": env}
    if method == "resume" and mode in ("hang", "late"):
        log(f"resume #{id_}: holding it")
        return None  # "late" answers once the kit gives up (see main)
    if method == "resume" and mode == "refuse":  # the "lease" is the error to answer with
        return {"id": id_, "error": params["lease"]}
    if method == "resume" and mode == "crash":
        log("resume: something went badly wrong")
        os._exit(3)
    if method == "resume" and mode == "garbage":
        log("resume: about to misbehave")
        sys.stdout.write("resuming lease now...\n")
        sys.stdout.flush()
        return None
    if method == "resume" and mode == "unknown-id":
        return {"id": id_ + 100, "result": params["lease"]}
    if method == "resume" and mode == "no-result":
        return {"id": id_, "answer": params["lease"]}
    return {"id": id_, "result": params.get("lease")}


def main() -> None:
    mode = sys.argv[1]
    if mode == "silent":
        sys.stdin.read()  # never announces itself
        return
    if mode == "exit-at-start":
        log("cannot load my configuration")
        sys.exit(1)
    methods = HOST_METHODS[:-1] if mode == "no-shutdown" else HOST_METHODS
    if mode == "provider-hello":
        methods = ["acquire", "resume"]
    if mode == "provider":
        methods = PROVIDER_METHODS
    send({"bridge": 2 if mode == "bad-hello" else 1, "methods": methods})
    if mode == "deaf":
        threading.Event().wait()  # never reads a request: the kit's writes back up
    held: list[dict[str, Any]] = []
    for line in sys.stdin:  # bounded by stdin: the kit closes it
        request = json.loads(line)
        if request["method"] == "cancel":
            if mode == "late":  # the kit gave up on it: answer now, too late
                send({"id": request["params"]["id"], "result": "too late"})
            continue
        if mode == "out-of-order" and request["method"] == "resume":
            held.append(request)
            if len(held) == 2:  # answer the second first
                for each in reversed(held):
                    send({"id": each["id"], "result": each["params"]["lease"]})
                held.clear()
            continue
        reply = answer(mode, request)
        if reply is not None:
            send(reply)
    if mode == "linger":
        threading.Event().wait()  # ignores the end of its stdin: the kit must kill it


if __name__ == "__main__":
    main()
