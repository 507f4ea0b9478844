"""The provider scenarios that refuse a lifecycle request for now (409, or 429 with a
Retry-After): the reference provider passes them (see ``TestReferenceProvider``), and each
provider that gets a refusal wrong is caught by the check made for its bug."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import aiohttp
import pytest

from pytest_createos import _kit_messages as text
from pytest_createos._client import RATE_LIMIT_RETRIES, CreateosClient
from pytest_createos.errors import TransitionError
from pytest_createos.host import LeaseHost
from pytest_createos.kit import ConformanceKit, LeaseHostAdapter, ScenarioReport
from pytest_createos.provider import LeaseProvider
from pytest_createos.provider.config import _Settings
from pytest_createos.server import CreateosServer
from tests.kit.test_scenarios import REFUSAL_SCENARIOS, a_sandbox, lease_params

CONFLICT, RATE_LIMITED = REFUSAL_SCENARIOS


class SubmitOnceProvider(LeaseProvider):
    """Submits a pause or resume once. A 409 on it raises (``fatal``), or is taken as accepted,
    and then it polls for a transition nothing started, until its deadline."""

    fatal = True
    deadline_s = 0.3

    async def _transition(
        self,
        client: CreateosClient,
        sandbox_id: str,
        desired: Literal["running", "paused"],
        cfg: _Settings,
    ) -> None:
        action = "resume" if desired == "running" else "pause"
        if await self._get_status(client, sandbox_id) != desired:
            await client.json(
                "POST",
                client.path("sandboxes", sandbox_id, action),
                f"{action} sandbox",
                body={},
                tolerate=frozenset() if self.fatal else frozenset({409}),
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        # The sandbox's status lives in the fake: polling it is all a provider can do.
        while (status := await self._get_status(client, sandbox_id)) != desired:
            if loop.time() >= deadline:
                raise TransitionError(desired, status, retryable=True)
            await asyncio.sleep(cfg.poll_s)


class HopefulProvider(SubmitOnceProvider):
    """Takes a 409 on its submit as accepted."""

    fatal = False


class RateLimitClient(CreateosClient):
    """Sends a request answered 429 again at once (``patient`` false), or never."""

    patient: bool | None = False

    def _rate_limit_wait(self, response: aiohttp.ClientResponse, attempt: int) -> float | None:
        if self.patient is None or response.status != 429 or attempt >= RATE_LIMIT_RETRIES:
            return None
        return 0.0


class GivingUpClient(RateLimitClient):
    patient = None


class RateLimitProvider(LeaseProvider):
    """Ignores Retry-After: sends a request answered 429 again at once."""

    client_type: type[RateLimitClient] = RateLimitClient

    def _client(self, cfg: _Settings) -> CreateosClient:
        super()._client(cfg)  # opens the session
        assert self._session is not None
        return self.client_type(
            self._session,
            self._pacer,
            api_url=cfg.api_url,
            api_key=cfg.api_key,
            spacing_s=cfg.request_spacing_ms / 1000,
            timeout_s=cfg.timeout_s,
        )


class GivingUpProvider(RateLimitProvider):
    """Fails the call at the first 429."""

    client_type = GivingUpClient


async def run(
    kit: ConformanceKit, scenario: str, provider: LeaseProvider, params: dict[str, Any]
) -> ScenarioReport:
    async with provider:
        return await kit.run_provider(scenario, provider, params)


@pytest.mark.parametrize(
    ("scenario", "provider", "status"),
    [(CONFLICT, SubmitOnceProvider, 409), (RATE_LIMITED, GivingUpProvider, 429)],
)
async def test_a_provider_failing_on_a_refusal_is_caught(
    scenario: str,
    provider: type[LeaseProvider],
    status: int,
    createos_kit: ConformanceKit,
    createos_lease_params: dict[str, Any],
) -> None:
    report = await run(createos_kit, scenario, provider(), createos_lease_params)
    assert report.failed_checks == {"resumed-or-replaced", "refusals-retried"}, report.format()
    lost, abandoned = sorted(report.violations, key=lambda v: v.check != "resumed-or-replaced")
    sandbox = lost.sandbox
    assert lost.what == (
        f"{sandbox}: resume() gave back no usable lease: resume() raised "
        f"CreateosApiError: CreateOS resume sandbox failed: HTTP {status}."
    )
    assert lost.fix == text.PROVIDER_RESUMED_FIX
    assert abandoned.what.startswith(
        f"{sandbox}: POST /v1/sandboxes/{sandbox}/resume was refused for now with HTTP {status} "
    )
    assert abandoned.what.endswith("and never sent again; the sandbox was left paused.")
    assert abandoned.fix == text.REFUSALS_RETRIED_FIX


async def test_a_provider_waiting_out_a_refused_resume_is_caught(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    # It polls a paused sandbox that nothing resumes, until its own deadline.
    report = await run(createos_kit, CONFLICT, HopefulProvider(), createos_lease_params)
    assert report.failed_checks == {"resumed-or-replaced", "refusals-retried"}, report.format()
    lost = next(v for v in report.violations if v.check == "resumed-or-replaced")
    assert lost.what.endswith(
        "raised TransitionError: CreateOS sandbox did not reach running: status paused."
    )


@pytest.mark.parametrize("reuse", [False, True], ids=["release-deletes", "release-pauses"])
async def test_a_provider_ignoring_retry_after_is_caught(
    reuse: bool, createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    params = lease_params(createos_lease_params, reuse)
    report = await run(createos_kit, RATE_LIMITED, RateLimitProvider(), params)
    assert report.failed_checks == {"retry-after-honoured"}, report.format()
    # The resume's retry, and the release's: its delete, or its pause (the lease kept warm).
    cleanup = "pause" if reuse else ""
    resumed, released = sorted(report.violations, key=lambda v: "resume was" not in v.what)
    sandbox = resumed.sandbox
    assert resumed.what.startswith(
        f"{sandbox}: POST /v1/sandboxes/{sandbox}/resume was answered HTTP 429 with "
        "Retry-After: 1, and sent again 0."
    )
    assert f"/v1/sandboxes/{sandbox}{'/' if reuse else ''}{cleanup} was answered" in released.what
    assert resumed.fix == released.fix == text.RETRY_AFTER_FIX
    assert [entry.status for entry in resumed.entries] == [429, 200]


# -- hosts ----------------------------------------------------------------------------------------

HOST_SCENARIO = "resume-refused-for-now"


@pytest.mark.parametrize("reuse", [False, True], ids=["release-deletes", "release-pauses"])
async def test_a_host_ignoring_retry_after_is_caught(
    reuse: bool, createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with RateLimitProvider() as provider:
        host = LeaseHost(provider, **lease_params(createos_lease_params, reuse))
        report = await createos_kit.run(HOST_SCENARIO, LeaseHostAdapter(host))
    assert report.failed_checks == {"retry-after-honoured"}, report.format()
    (early,) = report.violations
    # Kept warm, the lease's resume is rate-limited; deleted, the fresh lease's create is.
    request = f"POST /v1/sandboxes/{early.sandbox}/resume" if reuse else "POST /v1/sandboxes"
    assert early.what.startswith(
        f"{early.sandbox or '(no sandbox)'}: {request} was answered HTTP 429 with Retry-After: 1"
    )


async def test_a_host_failing_on_a_refused_resume_is_caught(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with SubmitOnceProvider() as provider:
        host = LeaseHost(provider, **lease_params(createos_lease_params, True))
        report = await createos_kit.run(HOST_SCENARIO, LeaseHostAdapter(host))
    # The lease it gave up on is left paused, and nothing it handed back refers to it.
    assert report.failed_checks == {
        "resumed-or-replaced",
        "refusals-retried",
        "no-leaked-sandbox",
    }, report.format()


# -- a test's own journal -------------------------------------------------------------------------


async def test_the_kits_check_holds_retries_to_the_tests_own_rules(
    createos_server: CreateosServer, createos_kit: ConformanceKit
) -> None:
    async with a_sandbox(createos_server) as (session, sandbox):
        createos_server.faults.error(
            429, route="DELETE /v1/sandboxes/{id}", sandbox=sandbox, times=1, retry_after=1
        )
        assert list(createos_kit.retry_after_rules().values()) == [1.0]
        for expected in (429, 200):  # the second at once, not a second later
            async with session.delete(f"/v1/sandboxes/{sandbox}") as deleted:
                assert deleted.status == expected
                assert deleted.headers.get("Retry-After") == ("1" if expected == 429 else None)
    (early,) = createos_kit.check()
    assert early.check == "retry-after-honoured"
    assert early.what.startswith(f"{sandbox}: DELETE /v1/sandboxes/{sandbox} was answered HTTP 429")
