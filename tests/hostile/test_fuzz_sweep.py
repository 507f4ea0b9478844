"""A bounded sweep of generated bad requests over every route of the OpenAPI document, against
a fake served as users serve it: no 5xx, every error in the envelope, no API key echoed, and
the fake readable afterwards. Seeded, so a failure replays; about 2,000 requests."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from fake_server import FakeCreateOS, ServerConfig, serve
from fake_server.openapi import document

REQUESTS = 2000
SEED = 20261204
SECRET = "skp_fuzz_secret_key_0123456789"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
#: Answers that are not JSON when they succeed.
NOT_JSON_ON_SUCCESS = re.compile(r"/files$|/connect$|/exec$|^/_fake/$")
#: Strings that have broken parsers, paths and encoders before.
NASTY = [
    "",
    " ",
    "\x00",
    "\ud800",
    "\u202e\u200b",
    "..",
    "../../etc/passwd",
    "%00",
    "%0a",
    "a" * 5000,
    "/" + "/".join(["d"] * 300),
    "😀" * 50,
    "-1",
    "1e999",
    "NaN",
    "null",
    SECRET,
]
NUMBERS: list[Any] = [0, -1, 1, 2**63, -(2**63) - 1, 10**40, 1.5, -0.0, True, None, 1e308]


def nasty_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(6)
    if choice == 0 or depth > 3:
        return rng.choice(NASTY)
    if choice == 1:
        return rng.choice(NUMBERS)
    if choice == 2:
        return [nasty_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if choice == 3:
        return {rng.choice(NASTY + FIELDS): nasty_value(rng, depth + 1) for _ in range(3)}
    if choice == 4:
        return rng.choice(FIELDS)
    return {}


QUERY_NAMES = ["path", "after", "timeout_ms", "limit", "offset", "stream", "since", "tenant"]
#: Field names the API knows: a generated body often uses the right name with a wrong value.
FIELDS = [
    "shape", "name", "envs", "egress", "cmd", "args", "stdin", "env", "stream", "cwd", "pty",
    "rows", "cols", "data_base64", "signal", "disk_mib", "seconds", "api_key", "seed", "status",
    "stuck", "fail_to", "mode", "path", "match", "action", "rules", "count", "open", "id",
]  # fmt: skip


def raw_body(rng: random.Random) -> bytes:
    choice = rng.randrange(8)
    if choice == 0:
        return b""
    if choice == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if choice == 2:
        return b"[" * 2000 + b"]" * 2000
    if choice == 3:
        return b'{"shape": ' + rng.choice([b"NaN", b"Infinity", b"1e999", b"9" * 500]) + b"}"
    if choice == 4:
        return b'{"a": "\\ud800"}'
    body = {rng.choice(FIELDS): nasty_value(rng) for _ in range(rng.randrange(1, 5))}
    return json.dumps(body).encode()


def fill(template: str, rng: random.Random, ids: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ids and rng.random() < 0.6:
            return ids[name]
        return quote(rng.choice(NASTY), safe="", errors="surrogatepass")

    return re.sub(r"\{(\w+)\}", value, template)


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeCreateOS, str]]:
    fake = FakeCreateOS(ServerConfig(seed=SEED, transition_ms=0, api_keys=(SECRET,)))
    async with serve(fake) as url:
        yield fake, url


async def test_generated_bad_requests_never_break_the_fake(
    served: tuple[FakeCreateOS, str],
) -> None:
    fake, url = served
    rng = random.Random(SEED)
    templates = [
        (path, method.upper())
        for path, operations in document()["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    ]
    timeout = aiohttp.ClientTimeout(total=10, sock_read=2)
    problems: list[str] = []
    statuses: Counter[int] = Counter()
    async with aiohttp.ClientSession(url, timeout=timeout) as session:

        async def setup_ids() -> dict[str, str]:
            headers = {"X-Api-Key": SECRET}
            async with session.post(
                "/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}, headers=headers
            ) as r:
                sandbox = (await r.json())["data"]["id"]
            processes = f"/v1/sandboxes/{sandbox}/processes"
            async with session.post(
                processes, json={"cmd": "echo", "args": ["x"]}, headers=headers
            ) as r:
                process = (await r.json())["data"]["process_id"]
            return {"id": sandbox, "pid": process, "ip": "10.0.0.1", "rule": "rule_1", "name": "g"}

        ids = await setup_ids()
        for number in range(REQUESTS):
            template, method = rng.choice(templates)
            if rng.random() < 0.2:
                method = rng.choice(METHODS)
            path = fill(template, rng, ids)
            query = {rng.choice(QUERY_NAMES): rng.choice(NASTY)}
            headers = {
                "X-Api-Key": SECRET
                if rng.random() < 0.8
                else rng.choice([*NASTY[:3], SECRET + "x"])
            }
            headers = {key: value for key, value in headers.items() if "\x00" not in value}
            if rng.random() < 0.3:
                headers["Content-Type"] = rng.choice(["application/json", "text/plain", "x/y"])
            body = raw_body(rng)
            try:
                async with session.request(
                    method, path, params=query, data=body, headers=headers
                ) as response:
                    answer = await response.read()
            except (aiohttp.ClientPayloadError, TimeoutError, aiohttp.ServerTimeoutError):
                continue  # a live stream cut by our read timeout: not an answer to judge
            except aiohttp.ClientResponseError as exc:
                # A request line too long to parse gets a 400 with its envelope: the fake cannot
                # know such a request's method, and aiohttp's client refuses a body after HEAD.
                if method != "HEAD" or exc.status != 400:
                    raise
                statuses[exc.status] += 1
                continue
            finally:
                fake.faults.clear()  # a generated rule must not fault the next request
            statuses[response.status] += 1
            where = f"#{number} {method} {path[:80]}"
            if response.status >= 500:
                problems.append(f"{where}: {response.status} {answer[:200]!r}")
            if SECRET.encode() in answer and "/_fake/" not in path:
                problems.append(f"{where}: the key came back")
            if response.status >= 400 and method != "HEAD":
                try:
                    envelope = json.loads(answer)
                    assert envelope["status"] in ("fail", "error")
                    assert envelope["code"] == response.status
                except (ValueError, KeyError, AssertionError, TypeError):
                    problems.append(f"{where}: {response.status} not enveloped: {answer[:120]!r}")
        assert problems == [], problems[:10]
        # The sweep really reached the handlers: answered, and not all with the same refusal.
        assert sum(statuses.values()) >= REQUESTS * 0.95
        assert statuses[200] > 50
        assert {400, 401, 404, 405} <= set(statuses)
        for path in ("/v1/sandboxes", "/_fake/state", "/_fake/faults", "/_fake/journal"):
            async with session.get(path, headers={"X-Api-Key": SECRET}) as response:
                assert response.status == 200, (path, await response.text())
