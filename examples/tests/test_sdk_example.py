"""A plain synchronous test with the official SDK (``createos-sandbox``) against the fake.

Nothing async here: ``createos_server`` runs the fake in a background thread, so a blocking
client works unchanged.
"""

from __future__ import annotations

import createos

from pytest_createos import CreateosServer


def test_the_official_sdk_runs_a_command(createos_server: CreateosServer) -> None:
    client = createos.Client(api_key=createos_server.api_key, base_url=createos_server.url)
    with client:
        sandbox = client.create_sandbox(createos.CreateSandboxRequest(shape="s-1vcpu-1gb"))
        echoed = sandbox.run_command(createos.RunCommandRequest(command="echo", arguments=["hi"]))
        assert echoed.result.standard_output == "hi\n"
        sandbox.destroy()
    createos_server.journal.assert_requested("POST /v1/sandboxes/{id}/exec", times=1)
    createos_server.journal.assert_requested("DELETE /v1/sandboxes/{id}", times=1)
