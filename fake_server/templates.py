"""Templates: images a tenant builds from a Dockerfile, and sandboxes start from.

A build runs the Dockerfile for real, in the sandbox shell over a fresh filesystem: each
``RUN`` is a ``/bin/sh -c`` command, ``ENV``/``ARG`` set its variables, ``WORKDIR`` its
directory. Its output is the build log. A template waits ``pending`` as long as a create takes
on the fake's clock (the tenant's own durations when it has them), is ``building`` while its
steps run, and ends ``ready`` or ``failed`` (a step exited non-zero, or the Dockerfile cannot
be built: the log says which). A ready template's files are what sandboxes created from it
start with, and what its ``ENV`` set and its last ``WORKDIR`` stay with the image
(:class:`~fake_server.image_config.ImageConfig`): the environment and the default directory of
every command they run.

Example::

    template = service.create(tenant, TemplateSpec("py", "FROM devbox:1\\nRUN mkdir /srv"))
    ...   # once ready:
    files, image = service.start_from(tenant, template.id)   # a copy, for a new sandbox
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fake_server import dockerfile, errors
from fake_server.catalog import DEFAULT_ROOTFS, ROOTFS
from fake_server.clock import Clock, isoformat
from fake_server.dockerfile import DockerfileError, Step
from fake_server.errors import ApiError
from fake_server.filesystem import FileSystem, FsError
from fake_server.identifiers import Identifiers
from fake_server.image_config import ImageConfig
from fake_server.lifecycle import Durations
from fake_server.shell import BASE_ENV, Invocation, Shell
from fake_server.tenants import Tenant

log = logging.getLogger("fake_server")

__all__ = [
    "BASE_IMAGE_BYTES",
    "LOG_CAP_BYTES",
    "MAX_DOCKERFILE_BYTES",
    "TEMPLATE_NAME",
    "Template",
    "TemplateService",
    "TemplateSpec",
    "TemplateStatus",
]

#: Template names: lower-case letters, digits, dots, dashes and underscores, 1-63 long.
TEMPLATE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
MAX_DOCKERFILE_BYTES = 64 << 10
#: Log bytes a build keeps; past them one line says the rest was dropped.
LOG_CAP_BYTES = 1 << 20
#: What the base image weighs in ``ext4_size_bytes`` before the build's own files.
BASE_IMAGE_BYTES = 512 << 20
_MIB = 1 << 20
#: A sandbox's own init starts it: how a container would start is of no use to it.
_IGNORED_NOTE = " ---> ignored: a sandbox runs its own init, not the image's"


class TemplateStatus(str, enum.Enum):
    PENDING = "pending"
    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class TemplateSpec:
    """A create request, already type-checked."""

    name: str
    dockerfile: str
    base: str | None = None


@dataclass(frozen=True)
class _LogLine:
    at: datetime
    level: str
    line: str


@dataclass(eq=False)
class Template:
    """One template of one tenant, and its build's log."""

    id: str
    name: str
    base: str
    dockerfile: str
    created_at: datetime
    status: TemplateStatus = TemplateStatus.PENDING
    built_at: datetime | None = None
    ext4_size_bytes: int = 0
    #: What sandboxes created from it start with (once ready): its files, its ENV and WORKDIR.
    files: FileSystem | None = None
    image: ImageConfig | None = None
    #: Deleted (or its tenant dropped) while it was building.
    cancelled: bool = False
    log: list[_LogLine] = field(default_factory=list)
    _log_bytes: int = 0
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.cancelled or self.status in (TemplateStatus.READY, TemplateStatus.FAILED)

    def view(self, *, dockerfile: bool = False) -> dict[str, Any]:
        """The TemplateView (the Dockerfile only when asked for: ``?include=dockerfile``)."""
        view: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "base": self.base,
            "status": self.status.value,
            "ext4_size_bytes": self.ext4_size_bytes,
            "created_at": isoformat(self.created_at),
        }
        if self.built_at is not None:
            view["built_at"] = isoformat(self.built_at)
        if dockerfile:
            view["dockerfile"] = self.dockerfile
        return view

    def text(self) -> str:
        """The log so far, as ``GET …/logs`` answers it."""
        return "".join(entry.line + "\n" for entry in self.log)

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        """Every log frame so far, then each new one as it comes, then the ``final`` frame.

        Example::

            async for frame in template.follow():
                print(frame["line"] if not frame["final"] else frame["status"])
        """
        sent = 0
        while True:
            while sent < len(self.log):
                entry = self.log[sent]
                sent += 1
                yield {
                    "ts": isoformat(entry.at),
                    "level": entry.level,
                    "line": entry.line,
                    "attempt": 1,
                    "final": False,
                }
            if self.finished:
                status = "cancelled" if self.cancelled else self.status.value
                yield {"final": True, "status": status, "attempt": 1}
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def say(self, at: datetime, level: str, line: str) -> None:
        """Add a log line (the log is capped: see :data:`LOG_CAP_BYTES`)."""
        if self._log_bytes >= LOG_CAP_BYTES:
            return
        self._log_bytes += len(line) + 1
        if self._log_bytes >= LOG_CAP_BYTES:
            level, line = "warn", f"log truncated: a build keeps {LOG_CAP_BYTES} bytes of log"
        self.log.append(_LogLine(at, level, line))
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def end(self, status: TemplateStatus, at: datetime) -> None:
        self.status = status
        if status is TemplateStatus.READY:
            self.built_at = at
        self._wake()

    def cancel(self, at: datetime) -> None:
        """The build stopped before its end: followers get a ``cancelled`` final frame."""
        self.say(at, "warn", "build cancelled")
        self.cancelled = True
        self._wake()


class _LogSink:
    """A build step's output, line by line into the template's log."""

    def __init__(self, template: Template, clock: Clock, level: str) -> None:
        self._template = template
        self._clock = clock
        self._level = level
        self._partial = b""

    def write(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self._say(line)

    def flush(self) -> None:
        if self._partial:
            self._say(self._partial)
            self._partial = b""

    def _say(self, line: bytes) -> None:
        self._template.say(self._clock.wall(), self._level, line.decode("utf-8", "replace"))


class TemplateService:
    """Create, build, read and delete templates; give sandboxes their files."""

    def __init__(
        self,
        clock: Clock,
        ids: Identifiers,
        shell: Shell,
        *,
        durations_of: Callable[[Tenant], Durations],
    ) -> None:
        self.clock = clock
        self.ids = ids
        self.shell = shell
        self._durations_of = durations_of
        #: Builds in flight, by template id.
        self._builds: dict[str, asyncio.Task[None]] = {}

    # -- create and build ----------------------------------------------------------------------

    def create(self, tenant: Tenant, spec: TemplateSpec) -> Template:
        """A new ``pending`` template whose build starts on its own (a running loop is needed).

        Example::

            service.create(tenant, TemplateSpec("web", "FROM devbox:1\\nRUN echo hi"))
        """
        tenant.check_credit()  # a build costs: credit-gated, as the contract says
        if not TEMPLATE_NAME.match(spec.name):
            raise ApiError.invalid("name", errors.TEMPLATE_NAME_INVALID)
        if any(template.name == spec.name for template in tenant.templates.values()):
            raise ApiError(409, errors.TEMPLATE_NAME_TAKEN)
        base = spec.base or DEFAULT_ROOTFS
        if base not in ROOTFS:
            raise ApiError.invalid("base", errors.UNKNOWN_ROOTFS)
        if not spec.dockerfile.strip():
            raise ApiError.invalid("dockerfile", "is required")
        if len(spec.dockerfile.encode()) > MAX_DOCKERFILE_BYTES:
            raise ApiError.invalid(
                "dockerfile", errors.DOCKERFILE_TOO_LARGE.format(limit=MAX_DOCKERFILE_BYTES)
            )
        template = Template(
            id=self.ids.template_id(),
            name=spec.name,
            base=base,
            dockerfile=spec.dockerfile,
            created_at=self.clock.wall(),
        )
        tenant.templates[template.id] = template
        build = asyncio.get_running_loop().create_task(
            self._build(template, self._durations_of(tenant))
        )
        self._builds[template.id] = build
        build.add_done_callback(lambda _: self._builds.pop(template.id, None))
        return template

    async def _build(self, template: Template, durations: Durations) -> None:
        # Queued as long as a create takes: a manual clock holds it there until advanced.
        await self.clock.sleep(durations.create)
        template.status = TemplateStatus.BUILDING
        say = template.say
        say(self.clock.wall(), "info", f"building {template.name} on {template.base} (attempt 1)")
        try:
            steps = dockerfile.parse(template.dockerfile)
            built = await self._run_steps(template, steps)
            size = None if built is None else BASE_IMAGE_BYTES + built[0].total_bytes
        except (DockerfileError, FsError) as exc:
            built, size = None, None
            say(self.clock.wall(), "error", f"error: {exc}")
        except Exception as exc:
            # A fault of the fake's, not of the Dockerfile: the build still ends (its followers
            # with it) and says why, rather than stay `building` under a task nobody awaits.
            log.exception("fake-createos: template %s: the build failed in the fake", template.id)
            built, size = None, None
            say(self.clock.wall(), "error", f"error: internal error in the fake: {exc!r}")
        if built is None or size is None:
            template.end(TemplateStatus.FAILED, self.clock.wall())
            return
        files, template.image = built
        template.files = files
        template.ext4_size_bytes = -(-size // _MIB) * _MIB
        say(self.clock.wall(), "info", f"template {template.id} ready")
        template.end(TemplateStatus.READY, self.clock.wall())

    async def _run_steps(
        self, template: Template, steps: list[Step]
    ) -> tuple[FileSystem, ImageConfig] | None:
        """Run ``steps`` over a fresh filesystem: it and the image's ENV and WORKDIR, or None
        when a step failed (logged)."""
        files = FileSystem()
        # ARG values are the build's alone; ENV values stay in the image (and win over an ARG
        # of the same name, as in Docker).
        args: dict[str, str] = {}
        image_env: dict[str, str] = {}
        cwd = "/root"
        for number, step in enumerate(steps, start=1):
            template.say(self.clock.wall(), "info", f"Step {number}/{len(steps)} : {step}")
            # What the step's `$VAR`s see: the base image's variables (PATH...), then the
            # build's, as in Docker (`ENV PATH=/opt/x/bin:$PATH` extends the image's PATH).
            seen = {**BASE_ENV, **args, **image_env}
            if step.instruction in dockerfile.IGNORED:
                template.say(self.clock.wall(), "info", _IGNORED_NOTE)
            elif step.instruction in dockerfile.REFUSED:
                raise DockerfileError(
                    f"line {step.line}: {step.instruction} needs a build context, and the API "
                    "uploads only the Dockerfile (write files with RUN instead)"
                )
            elif step.instruction in ("ENV", "ARG"):
                try:
                    found = dockerfile.assignments(step.argument)
                except ValueError as exc:
                    raise DockerfileError(f"line {step.line}: {exc}") from None
                values = {name: dockerfile.expand(value, seen) for name, value in found.items()}
                (image_env if step.instruction == "ENV" else args).update(values)
            elif step.instruction == "WORKDIR":
                cwd = FileSystem.normalize(dockerfile.expand(step.argument, seen) or "/", cwd)
                files.mkdir(cwd, parents=True)
            elif step.instruction == "RUN":
                env = {**args, **image_env}
                code = await self._run(template, files, step, cwd=cwd, env=env)
                if code:
                    template.say(
                        self.clock.wall(),
                        "error",
                        f"error: the command '{step.argument}' returned a non-zero code: {code}",
                    )
                    return None
        return files, ImageConfig(image_env, cwd)

    async def _run(
        self, template: Template, files: FileSystem, step: Step, *, cwd: str, env: dict[str, str]
    ) -> int:
        stdout = _LogSink(template, self.clock, "info")
        stderr = _LogSink(template, self.clock, "error")
        invocation = Invocation(
            "/bin/sh",
            ["-c", dockerfile.shell_form(step.argument)],
            fs=files,
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            # A build reaches nothing outside the fake (the simulated network included).
            egress=[],
            hostname="buildkit",
        )
        try:
            return await self.shell.run(invocation)
        finally:
            stdout.flush()
            stderr.flush()

    # -- read -----------------------------------------------------------------------------------

    def get(self, tenant: Tenant, ref: str) -> Template:
        """A template by id or name, or 404 (also for another tenant's)."""
        template = tenant.template(ref)
        if template is None:
            raise ApiError(404, errors.TEMPLATE_NOT_FOUND)
        return template

    def page(self, tenant: Tenant, *, limit: int, offset: int) -> tuple[list[Template], int]:
        """One page of the tenant's templates, oldest first, and how many there are."""
        templates = list(tenant.templates.values())
        return templates[offset : offset + limit], len(templates)

    def start_from(self, tenant: Tenant, rootfs: str) -> tuple[FileSystem, ImageConfig]:
        """What a new sandbox starts from: a copy of a ready template's files, and its image's
        environment and working directory. 404 for a template the tenant does not have (or
        deleted), 409 while it is not ready. ``rootfs`` is its id or name."""
        template = self.get(tenant, rootfs)
        if template.files is None or template.image is None:
            raise ApiError(409, errors.TEMPLATE_NOT_READY.format(status=template.status.value))
        return template.files.clone(), template.image

    # -- delete ---------------------------------------------------------------------------------

    def delete(self, tenant: Tenant, ref: str) -> None:
        """Forget a template (a build in flight stops); sandboxes made from it keep their files."""
        template = self.get(tenant, ref)
        del tenant.templates[template.id]
        self._stop(template)

    def forget_tenant(self, tenant: Tenant) -> None:
        """Stop a dropped tenant's builds."""
        for template in tenant.templates.values():
            self._stop(template)

    def _stop(self, template: Template) -> None:
        build = self._builds.pop(template.id, None)
        if build is not None:
            build.cancel()
            template.cancel(self.clock.wall())

    async def wait_stopped(self) -> None:
        """Stop every build and wait until each has ended (before a loop closes)."""
        builds = list(self._builds.values())
        for build in builds:
            build.cancel()
        if builds:
            await asyncio.wait(builds)
