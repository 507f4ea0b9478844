"""A downstream project for the plugin's black-box tests (pytester): an ini as a user writes
one, and helpers its tests call the fake with."""

from __future__ import annotations

import pytest

HELPERS = """
import json, urllib.request

def call(server, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method,
        headers={"X-Api-Key": server.api_key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())

def create(server):
    return call(server, "POST", "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})[1]["data"]["id"]
"""


def make_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """``pytester`` set up as a project whose tests can ``from helpers import call, create``."""
    pytester.makepyfile(helpers=HELPERS)
    # The plugin is imported already in this process, so inline runs cannot rewrite it.
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = ignore::pytest.PytestAssertRewriteWarning\n"
    )
    return pytester
