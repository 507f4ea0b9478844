"""The conformance kit: does your host or provider let cleanup finish before resume?

A downstream *host* (the scheduler code that calls a lease provider) adapts itself to the small
:class:`Host` protocol; the kit then builds each race with gates on the fake -- never with
sleeps -- lets the host act, and judges what reached the fake by its journal:

- ``resume-while-release-in-flight``: resume while the host's own release is held mid-flight;
- ``resume-after-failed-release``: the release's answer is lost while its effect happened;
- ``resume-unconfirmed-lease``: a command's process start is lost, then release and resume;
- ``concurrent-resumes``: two resumes of one released lease at once;
- ``resume-refused-for-now``: the resume is refused with 409, then 429 with ``Retry-After``;
- ``shutdown-during-run``: ``shutdown()`` while a command runs (hosts that have one).

The journal checks (:func:`check_all` and one function per check) work on their own too, and
:class:`HostConformance` / :class:`ProviderConformance` turn everything into tests by
subclassing.

A host built on a lease provider should get it through :meth:`ConformanceKit.watch`: the kit
then also sees the calls the provider refuses itself, before any request reaches the fake
(``CleanupPendingError`` while the lease's cleanup is in flight), and ``retries-back-off``
catches a host that hammers them.

Example::

    from pytest_createos.kit import HostConformance

    class TestMyHost(HostConformance):
        @pytest.fixture
        def host(self, createos_server):
            return MyHostAdapter(url=createos_server.url, api_key=createos_server.api_key)

    class TestMyProviderHost(HostConformance):
        @pytest.fixture
        def host(self, createos_kit, createos_provider, createos_lease_params):
            provider = createos_kit.watch(createos_provider)
            return MyHostAdapter(MyScheduler(provider, **createos_lease_params))
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import pytest

from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._checks import (
    CHECKS,
    DEFAULT_MAX_ATTEMPTS_PER_SECOND,
    WORK,
    LeaseOutcome,
    Violation,
    check_all,
    check_backoff,
    check_no_leaks,
    check_no_orphan_processes,
    check_no_resume_during_cleanup,
    check_no_work_on_closing,
    check_refusals_retried,
    check_resumed_or_replaced,
    check_resumes_serialised,
    check_retry_after,
    check_unconfirmed_destroyed,
)
from pytest_createos._explore import (
    DEFAULT_MAX_SCHEDULES,
    DEFAULT_MAX_STEPS,
    WORKLOADS,
    ExploreError,
    ExploreReport,
    HostFactory,
    RunReport,
    Workload,
    explore,
    release,
    replay,
    resume,
    run,
    shutdown,
)
from pytest_createos._explore.reference import lease_params, reference_host
from pytest_createos._explore.remote import DEFAULT_EXPLORE_SETTLE_S
from pytest_createos._explore.runner import DEFAULT_HORIZON_S
from pytest_createos._explore.testclass import HostExploration
from pytest_createos._host_protocol import Host, LeaseHostAdapter, ProgramOutput, ShutdownHost
from pytest_createos._scenario_run import ConformanceError, ScenarioReport, violations_text
from pytest_createos._scenarios import (
    PROVIDER_SCENARIOS,
    SCENARIOS,
    Scenario,
    find_scenario,
    play,
)
from pytest_createos._watch import ProviderCall, WatchedProvider
from pytest_createos.host import LeaseProviderLike
from pytest_createos.server import CreateosServer

__all__ = [
    "CHECKS",
    "PROVIDER_SCENARIOS",
    "SCENARIOS",
    "WORKLOADS",
    "ConformanceError",
    "ConformanceKit",
    "ExploreError",
    "ExploreReport",
    "Host",
    "HostConformance",
    "HostExploration",
    "HostFactory",
    "LeaseHostAdapter",
    "LeaseOutcome",
    "ProgramOutput",
    "ProviderCall",
    "ProviderConformance",
    "RunReport",
    "Scenario",
    "ScenarioReport",
    "ShutdownHost",
    "Violation",
    "Workload",
    "check_all",
    "check_backoff",
    "check_no_leaks",
    "check_no_orphan_processes",
    "check_no_resume_during_cleanup",
    "check_no_work_on_closing",
    "check_refusals_retried",
    "check_resumed_or_replaced",
    "check_resumes_serialised",
    "check_retry_after",
    "check_unconfirmed_destroyed",
    "lease_params",
    "reference_host",
    "release",
    "resume",
    "run",
    "shutdown",
]

ProviderT = TypeVar("ProviderT")

#: How long the kit gives a host to show its hand (send a request, or return) before it
#: concludes that the host is waiting. A host that behaves never depends on it.
DEFAULT_SETTLE_S = 0.2
#: How long any one host call may take once the kit has let everything through.
DEFAULT_TIMEOUT_S = 10.0
#: The Retry-After (whole seconds, as the service sends it) of the kit's rate-limited answers:
#: a client that honours it waits that long in real time, so it is the shortest there is.
DEFAULT_RETRY_AFTER_S = 1
#: What the kit runs on a lease to learn which sandbox it points at.
PROBE_COMMAND = "echo createos-kit"
#: Statuses in the middle of a transition (the kit waits them out where a scenario needs to).
_MOVING = frozenset({"creating", "pausing", "resuming", "destroying", "forking"})
_POLL_S = 0.005


# -- the kit ------------------------------------------------------------------------------------


class ConformanceKit:
    """The scenarios and checks, bound to one test's fake (what ``createos_kit`` gives you).

    ``settle_s`` is how long the kit waits for a host to show its hand before concluding that
    it is waiting (a host that behaves never depends on it); ``timeout_s`` bounds every host
    call once the kit has let everything through; ``max_attempts_per_second`` is the backoff
    check's limit; ``probe_command`` is what the kit runs on a lease to see where it points;
    ``retry_after_s`` is the ``Retry-After`` its rate-limited answers send (whole seconds).
    Every call of a provider handed out by :meth:`watch` is recorded in :attr:`calls`.

    Example::

        async def test_my_host_waits_for_its_release(createos_kit, my_host):
            report = await createos_kit.run("resume-while-release-in-flight", my_host)
            report.assert_ok()

        async def test_my_own_race(createos_kit, my_host):
            ...  # drive my_host through a race of your own
            createos_kit.assert_ok(keep=[sandbox_still_in_use])
    """

    def __init__(
        self,
        server: CreateosServer,
        *,
        settle_s: float = DEFAULT_SETTLE_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts_per_second: float = DEFAULT_MAX_ATTEMPTS_PER_SECOND,
        probe_command: str = PROBE_COMMAND,
        retry_after_s: int = DEFAULT_RETRY_AFTER_S,
    ) -> None:
        self.server = server
        self.retry_after_s = retry_after_s
        self.settle_s = settle_s
        self.timeout_s = timeout_s
        self.max_attempts_per_second = max_attempts_per_second
        self.probe_command = probe_command
        #: Every call of a provider this kit watches, in the order the calls ended.
        self.calls: list[ProviderCall] = []
        self._entries: list[Entry] = []
        self._seen = 0

    def watch(self, provider: ProviderT) -> ProviderT:
        """``provider`` as the kit watches it: build your host on what this returns, and every
        call the host makes to it (``acquire``, ``resume``, ``release``, ``destroy``,
        ``execute``, ...) is recorded in :attr:`calls` with how it ended and when. The checks
        then see the calls the provider refuses before sending anything, which the fake's
        journal cannot: a host retrying a ``CleanupPendingError`` 1 ms apart fails
        ``retries-back-off``. Anything but the provider's coroutine methods is passed through
        unchanged (``isinstance`` checks on it do not hold, though).

        Example::

            @pytest.fixture
            def host(createos_kit, createos_provider, createos_lease_params):
                provider = createos_kit.watch(createos_provider)
                return LeaseHostAdapter(LeaseHost(provider, **createos_lease_params))
        """
        # The stand-in forwards every attribute, so it serves wherever the provider would.
        return cast(ProviderT, WatchedProvider(provider, self.calls))

    # -- scenarios ------------------------------------------------------------------------------

    async def run(self, scenario: str | Scenario, host: Host[Any]) -> ScenarioReport:
        """Play one of :data:`SCENARIOS` against ``host`` and judge it.

        Sandboxes the scenario leaves alive are destroyed afterwards (after the verdict), so
        the plugin's leak check does not report them a second time.

        Example::

            report = await createos_kit.run("resume-after-failed-release", host)
            assert report.ok, report.format()
        """
        return await self._play(find_scenario(SCENARIOS, scenario), host)

    async def run_provider(
        self,
        scenario: str | Scenario,
        provider: LeaseProviderLike,
        params: Mapping[str, Any],
    ) -> ScenarioReport:
        """Play one of :data:`PROVIDER_SCENARIOS` against a provider with ``params``
        (``company_id``, ``environment_id``, ``config``, as ``createos_lease_params``).

        Example::

            report = await createos_kit.run_provider(
                "resume-while-release-in-flight", my_provider, createos_lease_params)
            report.assert_ok()
        """
        return await self._play(find_scenario(PROVIDER_SCENARIOS, scenario), provider, params)

    async def _play(self, scenario: Scenario, *subject: Any) -> ScenarioReport:
        """:func:`play`, with what the subject's programs wrote meanwhile in the report."""
        marks = [(s, s.output_mark()) for s in subject if isinstance(s, ProgramOutput)]
        report = await play(self, scenario, *subject)
        for source, mark in marks:
            output = source.output_since(mark)
            if output:
                report.output[source.name] = output
        return report

    # -- the schedule explorer ----------------------------------------------------------------

    async def explore(
        self,
        make_host: HostFactory,
        workload: str | Workload,
        *,
        strategy: str = "exhaustive",
        max_steps: int = DEFAULT_MAX_STEPS,
        max_schedules: int = DEFAULT_MAX_SCHEDULES,
        depth: int = 3,
        seed: int = 0,
        horizon_s: float = DEFAULT_HORIZON_S,
        settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
    ) -> ExploreReport:
        """Run ``workload`` (a :class:`Workload` or the name of one of :data:`WORKLOADS`)
        under many schedules, each on a fresh host from ``make_host(kit)`` (an async context
        manager), and judge every run with the checks. The first failing run is shrunk to the
        shortest schedule that still fails; :meth:`ExploreReport.assert_ok` shows its timeline
        and schedule string, which :meth:`replay` runs again.

        ``strategy`` is ``"exhaustive"`` (every order of the race's first ``max_steps``
        decisions, orders that differ only on different sandboxes run once) or ``"pct"``
        (``max_schedules`` random runs, each finding a bug of ``depth`` ordering constraints
        with a known probability, from ``seed``). At most ``max_schedules`` runs either way.
        Host sleeps due within ``horizon_s`` are the host's next move (virtual time makes
        them free); later timers are timeouts. Needs a fake with a manual clock
        (``manual_clock=True``). On the test's own loop (``createos_aiohttp_server``) the
        explorer sees when the host has settled; against a fake it reaches over HTTP
        (``createos_server``, ``--createos-url``) it waits until nothing has changed at the
        fake for ``settle_s`` real seconds, which every step costs.

        Example::

            @pytest.mark.createos(manual_clock=True)
            async def test_explore(createos_aiohttp_server):
                kit = ConformanceKit(createos_aiohttp_server)
                report = await kit.explore(reference_host(), "release-resume")
                report.assert_ok()
        """
        return await explore(
            self,
            make_host,
            workload,
            strategy=strategy,
            max_steps=max_steps,
            max_schedules=max_schedules,
            depth=depth,
            seed=seed,
            horizon_s=horizon_s,
            settle_s=settle_s,
        )

    async def replay(
        self,
        make_host: HostFactory,
        schedule: str,
        *,
        workloads: Sequence[Workload] = (),
        horizon_s: float = DEFAULT_HORIZON_S,
        settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
    ) -> RunReport:
        """Run one schedule string (``"<workload>: <step> > <step> > ..."``, as an
        exploration prints it) on a fresh host: the same steps in the same order, then the
        default (oldest step first). ``workloads`` are your own workloads the schedule may
        name. :class:`ExploreError` if the host no longer sends what the schedule names.
        ``horizon_s`` and ``settle_s`` as for :meth:`explore` (use the exploration's).

        Example::

            report = await kit.replay(make_host, "release-resume: POST L1/pause > GET L1")
            assert report.failed_checks == {"no-resume-during-cleanup"}
        """
        return await replay(
            self,
            make_host,
            schedule,
            workloads=workloads,
            horizon_s=horizon_s,
            settle_s=settle_s,
        )

    # -- checks over this test's journal --------------------------------------------------------

    def journal(self) -> Journal:
        """This test's journal as it is now.

        Example::

            assert createos_kit.journal().requests(route="POST /v1/sandboxes/{id}/resume")
        """
        self._refresh()
        return Journal.of(self._entries)

    def _refresh(self) -> None:
        # Only this tenant's entries that are new since the last look cross the channel.
        for data in self.server.channel.journal(since=self._seen, tenant=self.server.tenant_id):
            entry = Entry.from_json(data)
            self._seen = max(self._seen, entry.seq)
            self._entries.append(entry)

    def check(
        self,
        *,
        outcomes: Sequence[LeaseOutcome] = (),
        keep: Iterable[str] | None = None,
        unconfirmed: Mapping[str, int] | None = None,
    ) -> list[Violation]:
        """:func:`check_all` over this test's journal as it is now.

        ``keep`` lists the sandboxes still in use on purpose (the leases your test or host
        still holds): every other sandbox created in this test that is not destroyed by now
        is reported by ``no-leaked-sandbox``. ``outcomes`` are what your ``resume()`` calls
        handed back (:class:`LeaseOutcome`; their final sandboxes are kept when ``keep`` is
        not given) and ``unconfirmed`` maps sandboxes to the journal ticket at which their
        process cleanup became unconfirmed. The fault rules that answer with a
        ``Retry-After`` (see :meth:`retry_after_rules`) say how long a retry must wait.

        Example::

            assert createos_kit.check(keep=[lease_sandbox]) == []
        """
        return check_all(
            self.journal(),
            outcomes=outcomes,
            keep=keep,
            unconfirmed=unconfirmed,
            max_attempts_per_second=self.max_attempts_per_second,
            calls=self.calls,
            retry_after=self.retry_after_rules(),
        )

    def retry_after_rules(self) -> dict[str, float]:
        """The test's fault rules that answer with a ``Retry-After`` now, by id, with its
        seconds: what ``retry-after-honoured`` holds the journal to (a rule removed since is
        not known any more).

        Example::

            createos_server.faults.error(429, route="DELETE /v1/sandboxes/{id}", retry_after=1)
            assert list(createos_kit.retry_after_rules().values()) == [1.0]
        """
        return {
            rule["id"]: float(rule["action"]["retry_after"])
            for rule in self.server.faults.rules
            if rule["action"].get("retry_after") is not None
        }

    def assert_ok(
        self,
        *,
        outcomes: Sequence[LeaseOutcome] = (),
        keep: Iterable[str] | None = None,
        unconfirmed: Mapping[str, int] | None = None,
    ) -> None:
        """Raise :class:`ConformanceError` if :meth:`check` finds anything.

        A sandbox your test still uses at this point (a lease it has not released or
        destroyed yet) is a leak unless it is listed in ``keep``; the error says so.

        Example::

            lease = await host.acquire()
            ...  # your own race
            createos_kit.assert_ok(keep=[lease.provider_lease_id])  # still in use on purpose
        """
        found = self.check(outcomes=outcomes, keep=keep, unconfirmed=unconfirmed)
        if not found:
            return
        message = violations_text(text.CHECK_HEADER.format(count=len(found)), found)
        leaked = [v.sandbox for v in found if v.check == text.NO_LEAKED_SANDBOX]
        if leaked:
            message += "\n" + text.KEEP_HINT.format(sandboxes=leaked)
        raise ConformanceError(message, found)

    # -- journal helpers ---------------------------------------------------------------------

    def mark(self) -> int:
        """The journal's newest ticket now; entries recorded later have a larger ``seq``.

        Example::

            mark = createos_kit.mark()
            lease = await host.acquire()
            [sandbox] = createos_kit.created_since(mark)
        """
        self._refresh()
        return self._seen

    def _since(self, mark: int) -> list[Entry]:
        self._refresh()
        return [entry for entry in self._entries if entry.seq > mark]

    def created_since(self, mark: int) -> list[str]:
        """Sandboxes created after ``mark``, oldest first (see :meth:`mark`)."""
        return [
            entry.sandbox
            for entry in self._since(mark)
            if entry.kind == "transition" and entry.before is None and entry.sandbox is not None
        ]

    def work_since(self, mark: int) -> list[str]:
        """Sandboxes that received work (exec, files, processes) after ``mark``, in order.

        Example::

            mark = createos_kit.mark()
            await host.run(lease, "true")
            assert createos_kit.work_since(mark) == [sandbox]
        """
        return [
            entry.sandbox
            for entry in self._since(mark)
            if entry.kind == "request"
            and entry.sandbox is not None
            and (entry.method, entry.route) in WORK
        ]

    def changes_since(self, mark: int) -> int:
        """How many requests other than reads (``GET``) were answered after ``mark``: while
        this grows, the host is still acting."""
        return sum(1 for e in self._since(mark) if e.kind == "request" and e.method != "GET")

    async def wait_still(self, sandbox: str) -> None:
        """Wait (up to ``timeout_s``) until ``sandbox`` is not in the middle of a transition.

        Example::

            await host.release(lease)
            await createos_kit.wait_still(sandbox)   # paused (or destroyed) by now
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        # The fake's state lives on another loop (or server): there is no event to wait on.
        while self._status(sandbox) in _MOVING and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(_POLL_S)

    def _status(self, sandbox: str) -> str | None:
        for view in self.server.state:
            if view["id"] == sandbox:
                return str(view["status"])
        return None

    def destroy_created_since(self, mark: int) -> None:
        """Force every sandbox created after ``mark`` that is still alive to ``destroyed``
        (through the control API, so the journal shows no request for it)."""
        created = set(self.created_since(mark))
        for view in self.server.live_sandboxes():
            if view["id"] in created:
                self.server.faults.set_status(view["id"], "destroyed")


# -- test classes -------------------------------------------------------------------------------


class HostConformance:
    """Subclass it and provide a ``host`` fixture (a :class:`Host`); every scenario becomes a
    test, ``test_host_scenario[<scenario>]``.

    Build the host from ``createos_server`` (``.url``, ``.api_key``) or ``createos_config`` /
    ``createos_lease_params``; a host on a lease provider gets it through
    ``createos_kit.watch(provider)`` (see :meth:`ConformanceKit.watch`), so that the kit also
    sees the calls the provider refuses itself. The tests are asyncio tests (pytest-asyncio);
    an async ``host`` fixture needs ``@pytest_asyncio.fixture`` unless ``asyncio_mode = auto``.

    Example::

        import pytest_asyncio
        from pytest_createos.kit import HostConformance

        class TestMyHost(HostConformance):
            @pytest_asyncio.fixture
            async def host(self, createos_server):
                async with MyHost(createos_server.url, createos_server.api_key) as host:
                    yield host
    """

    @pytest.mark.asyncio
    @pytest.mark.parametrize("scenario", [scenario.name for scenario in SCENARIOS])
    async def test_host_scenario(
        self, scenario: str, host: Host[Any], createos_kit: ConformanceKit
    ) -> None:
        report = await createos_kit.run(scenario, host)
        if report.skipped is not None:
            pytest.skip(report.skipped)
        report.assert_ok()


class ProviderConformance:
    """Subclass it and provide a ``provider`` fixture (with the hooks of
    :class:`~pytest_createos.host.LeaseProviderLike`); every provider scenario becomes a test
    for each way a release cleans up, ``test_provider_scenario[release-deletes-<scenario>]``
    and ``[release-pauses-<scenario>]`` (the config's ``reuseLease`` false, then true: a lease
    kept warm is paused on release, and resumed while that pause may still be in flight).
    Override ``provider_params`` if your provider takes another configuration than
    ``createos_lease_params`` (it then decides what runs).

    Example::

        import pytest_asyncio
        from pytest_createos.kit import ProviderConformance

        class TestMyProvider(ProviderConformance):
            @pytest_asyncio.fixture
            async def provider(self):
                async with MyProvider() as provider:
                    yield provider
    """

    @pytest.fixture(params=[False, True], ids=["release-deletes", "release-pauses"])
    def provider_params(
        self, request: pytest.FixtureRequest, createos_lease_params: dict[str, Any]
    ) -> Mapping[str, Any]:
        """``company_id``, ``environment_id`` and ``config`` for every provider call, with
        ``reuseLease`` false and then true."""
        config = {**createos_lease_params["config"], "reuseLease": request.param}
        return {**createos_lease_params, "config": config}

    @pytest.mark.asyncio
    @pytest.mark.parametrize("scenario", [scenario.name for scenario in PROVIDER_SCENARIOS])
    async def test_provider_scenario(
        self,
        scenario: str,
        provider: LeaseProviderLike,
        provider_params: Mapping[str, Any],
        createos_kit: ConformanceKit,
    ) -> None:
        report = await createos_kit.run_provider(scenario, provider, provider_params)
        report.assert_ok()
