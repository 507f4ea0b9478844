"""The pytest plugin: options, the ``createos`` marker, reporting hooks and fixtures over
:mod:`fake_server`.

It is registered through the ``pytest11`` entry point, so installing the package is enough.
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
import pytest_asyncio

from pytest_createos._rewrite import leave_the_fake_unrewritten
from pytest_createos._settings import LEAK_MODES, PluginSettings, read_settings

# Every pytest run of a project that installs the plugin imports this module: the fake, its
# server and the control channels are imported by the fixtures that use them, not here.
if TYPE_CHECKING:
    from fake_server import BackgroundServer, ServerConfig
    from pytest_createos._marker import MarkerOptions
    from pytest_createos.channel import ControlChannel, Leftovers, TestTenant
    from pytest_createos.server import CreateosServer

__all__ = ["CreateosLeakWarning", "CreateosMarkerWarning"]

DEFAULT_SHAPE = "s-1vcpu-1gb"

_SEED = pytest.StashKey[int]()
_HANDLE = pytest.StashKey["CreateosServer"]()
#: Set on a test whose call failed: the sandboxes it leaves are its failure's, not a new error.
_CALL_FAILED = pytest.StashKey[bool]()


class CreateosLeakWarning(UserWarning):
    """A test left sandboxes running or paused (with ``--createos-leak-check=warn``)."""


class CreateosMarkerWarning(UserWarning):
    """A test carries ``@pytest.mark.createos`` but uses none of the fixtures it configures,
    so the marker does nothing."""


#: The fixtures the ``createos`` marker configures.
MARKED_FIXTURES = ("createos_server", "createos_aiohttp_server")
#: The fixtures built on the test's fake, whichever of :data:`MARKED_FIXTURES` it is.
BUILT_ON_THE_FAKE = (
    "createos_faults",
    "createos_journal",
    "createos_config",
    "createos_lease_params",
    "createos_kit",
)


# -- options, marker, header -------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("createos", "CreateOS fake (pytest-createos)")
    group.addoption(
        "--createos-seed",
        type=int,
        default=None,
        help="seed for ids, names and probability faults (default: random, printed in the header)",
    )
    group.addoption(
        "--createos-url",
        default=None,
        help="use an already running `fake-createos serve` at this URL",
    )
    group.addoption(
        "--createos-control-token",
        default=None,
        help="the control token of the fake at --createos-url (its --control-token)",
    )
    group.addoption(
        "--createos-leak-check",
        choices=LEAK_MODES,
        default=None,
        help="what a test that leaves sandboxes running does (default: fail)",
    )
    group.addoption(
        "--createos-no-leak-check",
        action="store_true",
        default=False,
        help="same as --createos-leak-check=off",
    )
    parser.addini("createos_seed", "default for --createos-seed", default="")
    parser.addini("createos_url", "default for --createos-url", default="")
    parser.addini("createos_control_token", "default for --createos-control-token", default="")
    parser.addini("createos_leak_check", "default for --createos-leak-check", default="fail")


_SETTINGS = pytest.StashKey[PluginSettings]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before any conftest could import the fake (see _rewrite).
    leave_the_fake_unrewritten(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "createos(seed=None, latency_ms=None, faults=(), transition_ms=None, create_ms=None, "
        "manual_clock=False, leak_check=None): configure the CreateOS fake for this test",
    )
    config.stash[_SETTINGS] = read_settings(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistSeed(), "createos-xdist-seed")


class _XdistSeed:
    """Hands the controller's seed to every worker, so one seed replays the whole run."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["createos_seed"] = node.config.stash[_SETTINGS].seed


def pytest_sessionstart(session: pytest.Session) -> None:
    settings = session.config.stash[_SETTINGS]
    if settings.url is None or hasattr(session.config, "workerinput"):
        return  # nothing to reach, or an xdist worker: its controller has checked already
    from pytest_createos._remote import remote_problem

    problem = remote_problem(settings.url, settings.control_token)
    if problem is not None:
        raise pytest.UsageError(problem)


def pytest_report_header(config: pytest.Config) -> str:
    settings = config.stash[_SETTINGS]
    where = settings.url or "in-process fake"
    return (
        f"createos: seed={settings.seed} (replay with --createos-seed={settings.seed}), "
        f"server={where}, leak-check={settings.leak_check}"
    )


def _marker_options(request: pytest.FixtureRequest) -> MarkerOptions:
    """The test's marker options, or one short setup error saying which argument is wrong."""
    from pytest_createos._marker import MarkerError, MarkerOptions

    try:
        return MarkerOptions.of(request.node)
    except MarkerError as exc:
        _setup_error(str(exc))


def _setup_error(message: str) -> NoReturn:
    """Fail the test's setup with ``message`` alone: the fixture's traceback (or the exception
    being handled) says nothing the message does not."""
    raise pytest.fail.Exception(message, pytrace=False) from None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("createos") is None:
        return
    __tracebackhide__ = True  # with -W error, the warning alone is the report
    if not {*MARKED_FIXTURES, *BUILT_ON_THE_FAKE} & set(getattr(item, "fixturenames", ())):
        # Attributed to the test's own line, where the fix is.
        item.warn(
            CreateosMarkerWarning(
                f"{item.nodeid} is marked @pytest.mark.createos but uses none of "
                f"{', '.join(MARKED_FIXTURES)} (nor a fixture built on them), so the marker "
                "does nothing: request createos_server, or remove the marker"
            )
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    handle = item.stash.get(_HANDLE, None)
    if report.failed and call.when == "call":
        item.stash[_CALL_FAILED] = True
    if handle is not None and report.failed and call.when in ("call", "setup"):
        try:
            report.sections.append(("createos", handle.report()))
        except Exception as exc:  # the report must never hide the real failure
            report.sections.append(("createos", f"(could not read the fake: {exc})"))
    return report


# -- servers -------------------------------------------------------------------------------------


class ServerPool:
    """Background fakes shared by the tests of one session (one per configuration), so the
    per-test cost is a new tenant, not a new server. Durations are the tenant's own, so one
    fake serves every test on the real clock; manual-clock fakes are never shared: a test's
    clock must not carry over into the next test."""

    def __init__(self) -> None:
        self._servers: dict[ServerConfig, BackgroundServer] = {}

    def get(self, config: ServerConfig) -> BackgroundServer:
        server = self._servers.get(config)
        if server is None:
            server = self._servers[config] = _background_fake(config).start()
        return server

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


def _background_fake(config: ServerConfig) -> BackgroundServer:
    """A fake for a thread of its own (not started yet). Its loop runs beside the tests' loops:
    on Python 3.10 an async test could hang, its context handed to that thread, unless the
    process is shielded first (see _context_shield)."""
    from fake_server import BackgroundServer, FakeCreateOS
    from pytest_createos import _context_shield

    _context_shield.shield()
    return BackgroundServer(FakeCreateOS(config))


@pytest.fixture(scope="session")
def createos_server_pool() -> Iterator[ServerPool]:
    """Session-wide pool of background fakes behind ``createos_server`` (one per configuration,
    per xdist worker). Internal; override it only to share servers differently."""
    pool = ServerPool()
    yield pool
    pool.close()


def _test_seed(request: pytest.FixtureRequest, options: MarkerOptions) -> int:
    if options.seed is not None:
        return int(options.seed)
    session_seed = request.config.stash[_SETTINGS].seed
    # Stable per test whatever runs before it, so one test replays alone.
    return zlib.crc32(f"{session_seed}:{request.node.nodeid}".encode())


def _open_handle(
    request: pytest.FixtureRequest, channel: ControlChannel, options: MarkerOptions
) -> tuple[CreateosServer, TestTenant]:
    from pytest_createos.channel import ControlError
    from pytest_createos.server import CreateosServer

    seed = _test_seed(request, options)
    try:
        tenant = channel.open_test(seed)
    except ControlError as exc:  # a shared fake gone or refusing since the session began
        _setup_error(f"createos: {exc}")
    if options.transition_ms is not None or options.create_ms is not None:
        # Per tenant, on every channel: a test times the same in process and on a shared fake.
        channel.set_durations(
            tenant.api_key, transition_ms=options.transition_ms, create_ms=options.create_ms
        )
    handle = CreateosServer(
        channel,
        api_key=tenant.api_key,
        tenant_id=tenant.tenant_id,
        seed=seed,
        gate_prefix=tenant.gate_prefix,
    )
    rules = list(options.faults)
    if options.latency_ms:
        rules.append({"action": {"type": "latency", "ms": options.latency_ms}})
    if rules:
        try:
            handle.faults.add_all(rules)
        except ControlError as exc:  # a check only the fake makes: still the marker's problem
            channel.close_test(tenant, leak_check=False)
            _setup_error(f"{request.node.nodeid}: @pytest.mark.createos(faults=...): {exc}")
    request.node.stash[_HANDLE] = handle
    return handle, tenant


def _close_handle(
    request: pytest.FixtureRequest,
    channel: ControlChannel,
    tenant: TestTenant,
    options: MarkerOptions,
) -> None:
    # The item outlives its test (pytest keeps every item until the session ends), and its
    # failure reports are made by now: left in its stash, the handle would keep the test's
    # fake (a whole one, for createos_aiohttp_server) in memory, and in every garbage
    # collection, until the session ends.
    handle = request.node.stash.get(_HANDLE, None)
    if handle is not None:
        del request.node.stash[_HANDLE]
    mode = options.leak_check or request.config.stash[_SETTINGS].leak_check
    # A test that failed never reached its own cleanup: its failure is the report to read (its
    # createos section shows the fake), not a second error for the sandboxes it left.
    failed = request.node.stash.get(_CALL_FAILED, False)
    try:
        left = channel.close_test(tenant, leak_check=mode != "off" and not failed)
    finally:
        if handle is not None:  # after the tenant: its commands have been told to stop
            handle.unregister_all()
    if left.sandboxes:
        message = _leak_message(request.node.nodeid, left, gate_prefix=tenant.gate_prefix)
        if mode == "warn":
            # At the test's own line, where the fix is (a stacklevel would name this file).
            request.node.warn(CreateosLeakWarning(message))
        else:
            pytest.fail(message, pytrace=False)


def _leak_message(nodeid: str, left: Leftovers, *, gate_prefix: str) -> str:
    """What a test that left sandboxes alive is told: which, and the gates that still held
    requests (a sandbox left running is often one whose ``DELETE`` waits at a gate the test
    never opened)."""
    names = ", ".join(f"{s['id']} ({s['status']})" for s in left.sandboxes)
    lines = [f"{nodeid} left {len(left.sandboxes)} sandbox(es) alive: {names}."]
    for gate in left.held_gates:
        held = "; ".join(f"{r['method']} {r['path']}" for r in gate["holding"])
        name = str(gate["name"]).removeprefix(gate_prefix)
        lines.append(
            f"Gate {name!r} still held {gate['held']} request(s), never let through: {held} "
            f"(release them, or gate.open(), before the test ends)."
        )
    lines.append("Destroy them in the test, or mark it @pytest.mark.createos(leak_check=False).")
    return " ".join(lines)


@pytest.fixture
def createos_server(
    request: pytest.FixtureRequest, createos_server_pool: ServerPool
) -> Iterator[CreateosServer]:
    """A running CreateOS fake with a fresh tenant for this test.

    Scope: function (the server behind it is shared by the session, per xdist worker).
    Type: :class:`pytest_createos.server.CreateosServer` — ``.url``, ``.api_key``, ``.faults``,
    ``.journal``, ``.clock``, ``.state``, ``.seed``.
    Works from sync and async tests (the server runs in a background thread). Configure it with
    ``@pytest.mark.createos(...)``; with ``--createos-url`` it uses that server instead. The
    marker's ``transition_ms`` and ``create_ms`` are the test's tenant's own on either, so a test
    times the same in process and on a shared fake; ``manual_clock=True`` there needs a fake
    started with ``--manual-clock`` (whose one clock every test using it shares).

    Example::

        def test_create(createos_server):
            with createos.Client(api_key=createos_server.api_key,
                                 base_url=createos_server.url) as client:
                sandbox = client.create_sandbox(createos.CreateSandboxRequest(shape="s-1vcpu-1gb"))
                sandbox.destroy()
    """
    from pytest_createos._remote import manual_clock_problem
    from pytest_createos.channel import HttpChannel, LocalChannel

    options = _marker_options(request)
    settings = request.config.stash[_SETTINGS]
    url = settings.url
    with ExitStack() as stack:
        channel: ControlChannel
        if url is not None:
            channel = HttpChannel(url, control_token=settings.control_token)
            problem = manual_clock_problem(channel) if options.manual_clock else None
            if problem is not None:
                _setup_error(problem)
        elif options.manual_clock:
            server = stack.enter_context(_background_fake(options.server_config()))
            channel = LocalChannel(server.fake, server.url, server)
        else:
            server = createos_server_pool.get(options.server_config())
            channel = LocalChannel(server.fake, server.url, server)
        handle, tenant = _open_handle(request, channel, options)
        yield handle
        _close_handle(request, channel, tenant, options)


@pytest_asyncio.fixture
async def createos_aiohttp_server(request: pytest.FixtureRequest) -> AsyncIterator[CreateosServer]:
    """A CreateOS fake served in the test's own event loop (by aiohttp's test server), fresh for
    this test.

    Scope: function. Type: :class:`pytest_createos.server.CreateosServer`. For async tests that
    want a single loop; gates are awaited with ``await gate.async_wait_held()``.

    Example::

        async def test_pause(createos_aiohttp_server):
            async with aiohttp.ClientSession(createos_aiohttp_server.url) as session:
                ...
    """
    from aiohttp.test_utils import TestServer

    from fake_server import FakeCreateOS
    from fake_server.http_protocol import harden_connections
    from fake_server.runner import LOOPBACK
    from pytest_createos.channel import LocalChannel

    test = getattr(request.node, "obj", None)
    if test is not None and not inspect.iscoroutinefunction(inspect.unwrap(test)):
        # Its server answers only while the test's loop runs, which a sync test's never does:
        # the test's first request would hang until its client gave up.
        _setup_error(
            f"{request.node.nodeid} is not async, and createos_aiohttp_server serves the fake on "
            "the test's own event loop, which runs only while an async test awaits: make the "
            "test `async def`, or use createos_server (it serves the fake from a thread of its "
            "own, for sync and async tests)"
        )
    options = _marker_options(request)
    fake = FakeCreateOS(options.server_config())
    # aiohttp's own test server, started here rather than through pytest-aiohttp's
    # `aiohttp_server` fixture: one async fixture to set up and tear down per test, not two.
    test_server = TestServer(fake.app(), host=LOOPBACK)
    await test_server.start_server()
    try:
        # aiohttp built the runner (start_server made it): it gains the fake's own
        # connection handling.
        assert test_server.runner is not None
        harden_connections(test_server.runner, fake)
        channel = LocalChannel(fake, str(test_server.make_url("")).rstrip("/"))
        handle, tenant = _open_handle(request, channel, options)
        yield handle
        _close_handle(request, channel, tenant, options)
        fake.reset()
    finally:
        await test_server.close()


def _the_tests_fake(request: pytest.FixtureRequest) -> CreateosServer:
    """The fake of the test that asked for ``request.fixturename``: ``createos_aiohttp_server``
    when the test (or a fixture it uses) asks for it, else ``createos_server``. Never a second
    fake beside the test's own: faults added to it would never fire, and its journal would stay
    empty."""
    used = [name for name in MARKED_FIXTURES if name in request.fixturenames]
    if len(used) > 1:
        _setup_error(
            f"{request.node.nodeid} uses both createos_server and createos_aiohttp_server (two "
            f"fakes), so {request.fixturename} cannot tell which one it is for: use one of "
            "them, or the handle's own attributes (createos_aiohttp_server.faults, .journal, "
            "ConformanceKit(createos_aiohttp_server))"
        )
    server: CreateosServer = request.getfixturevalue(used[0] if used else "createos_server")
    return server


@pytest.fixture
def createos_faults(request: pytest.FixtureRequest) -> Any:
    """Shortcut for ``createos_server.faults`` (rules scoped to this test's tenant), or for
    ``createos_aiohttp_server.faults`` in a test that uses that fake.

    Example::

        def test_retry(createos_faults):
            createos_faults.error(503, route="POST /v1/sandboxes", times=1, retry_after=1)
    """
    return _the_tests_fake(request).faults


@pytest.fixture
def createos_journal(request: pytest.FixtureRequest) -> Any:
    """Shortcut for ``createos_server.journal`` (this test's requests and events), or for
    ``createos_aiohttp_server.journal`` in a test that uses that fake.

    Example::

        def test_one_delete(createos_journal):
            ...
            createos_journal.assert_requested("DELETE /v1/sandboxes/{id}", times=1)
    """
    return _the_tests_fake(request).journal


@pytest.fixture
def createos_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A reference-provider configuration pointing at the test's fake (``createos_server``, or
    ``createos_aiohttp_server`` in a test that uses it), with no pacing and fast polling.

    Example::

        async def test_acquire(createos_provider, createos_config):
            lease = await createos_provider.acquire(company_id="c", environment_id="e",
                                                    config=createos_config)
    """
    server = _the_tests_fake(request)
    return _ProviderConfig(
        apiUrl=server.url,
        apiKey=server.api_key,
        shape=DEFAULT_SHAPE,
        requestSpacingMs=0,
        pollIntervalMs=5,
        timeoutMs=30_000,
    )


class _ProviderConfig(dict[str, Any]):
    """A provider configuration whose repr hides its API key: pytest shows a failed test's
    arguments (``createos_config``, ``createos_lease_params``), and no report carries a key."""

    def __repr__(self) -> str:
        return repr({k: "<hidden>" if k == "apiKey" else v for k, v in self.items()})


@pytest.fixture
def createos_lease_params(createos_config: dict[str, Any]) -> dict[str, Any]:
    """``company_id``, ``environment_id`` and ``config``, to splat into provider calls.

    Example::

        lease = await createos_provider.acquire(**createos_lease_params)
        await createos_provider.destroy(**createos_lease_params,
                                        provider_lease_id=lease.provider_lease_id,
                                        lease_metadata=lease.metadata)
    """
    return {"company_id": "company-test", "environment_id": "env-test", "config": createos_config}


@pytest_asyncio.fixture
async def createos_provider() -> AsyncIterator[Any]:
    """The reference :class:`~pytest_createos.provider.LeaseProvider`, shut down at teardown.

    Example::

        async def test_lifecycle(createos_provider, createos_lease_params):
            lease = await createos_provider.acquire(**createos_lease_params)
    """
    from pytest_createos.provider import LeaseProvider

    provider = LeaseProvider()
    yield provider
    await provider.shutdown()


@pytest.fixture
def createos_kit(request: pytest.FixtureRequest) -> Any:
    """The conformance kit (:class:`~pytest_createos.kit.ConformanceKit`) bound to this test's
    fake (``createos_server``, or ``createos_aiohttp_server`` in a test that uses it): race
    scenarios for a host or provider, and checks over the journal.

    Scope: function. Type: :class:`pytest_createos.kit.ConformanceKit`.

    Example::

        async def test_my_host(createos_kit, my_host):
            report = await createos_kit.run("resume-while-release-in-flight", my_host)
            report.assert_ok()
            createos_kit.assert_ok()   # every check over the whole journal
    """
    from pytest_createos.kit import ConformanceKit

    return ConformanceKit(_the_tests_fake(request))
