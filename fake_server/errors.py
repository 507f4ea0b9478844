"""The API's errors and every user-facing error message, in one place.

Handlers and the lifecycle model raise :class:`ApiError`; the HTTP layer renders it as a JSend
envelope with the right status. Messages mirror the real service's wording where it is known
(see the contract), so clients that match on text keep working.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError"]

# Authentication and routing
INVALID_API_KEY = "missing or invalid API key"
ROUTE_NOT_FOUND = "route not found"
METHOD_NOT_ALLOWED = "method not allowed"
ADMIN_ONLY = "administrator credentials required"
CONTROL_HOST_REFUSED = (
    "the control API answers only requests addressed to a loopback host"
    " (start the fake with --allow-remote to lift this)"
)
CONTROL_ORIGIN_REFUSED = "the control API does not answer web pages from other origins"
CONTROL_TOKEN_REQUIRED = "the control API needs this fake's control token in X-Control-Token"
#: Per-tenant settings are changed only by a caller that holds the tenant's key.
CONTROL_TENANT_KEY = "name your own tenant with its API key in X-Api-Key"
TENANT_NOT_FOUND = "tenant not found"
#: A per-tenant setting for a key the fake has not seen: say how a key gets its tenant.
CONTROL_TENANT_UNKNOWN = (
    "tenant not found: no tenant has this X-Api-Key yet; POST /_fake/tenants with"
    ' {"api_key": <key>} makes it (without --strict, so does any /v1 request with the key)'
)

# Request bodies and parameters
INVALID_JSON = "request body must be valid JSON"
BODY_NOT_OBJECT = "request body must be a JSON object"
BODY_TOO_LARGE = "request body too large"
REQUEST_UNPARSABLE = "malformed HTTP request: its request line or a header could not be parsed"
HTTP2_DECLINED = "HTTP/2 is not spoken here: send HTTP/1.1"
BODY_STALLED = "request body stalled: none of it arrived for {seconds:g} s"
BODY_UNREADABLE = "request body could not be read as sent (does its Content-Encoding match it?)"
UNKNOWN_FIELD = "unknown field"
JSON_TOO_DEEP = "request body nests deeper than {depth} levels"
JSON_NOT_TEXT = "request body holds a string that is not valid Unicode text (a lone surrogate)"
JSON_NOT_FINITE = "request body holds a number that is not finite (NaN, Infinity or out of range)"
JSON_INT_RANGE = "request body holds an integer outside the 64-bit range"

# Sandboxes
SANDBOX_NOT_FOUND = "sandbox not found"
UNKNOWN_SHAPE = "unknown shape"
UNKNOWN_ROOTFS = "unknown rootfs"
REGION_MISMATCH = "region does not match this server"
TUNNEL_UPGRADE_REQUIRED = "a tunnel needs the header Upgrade: tcp-tunnel"
TUNNEL_NOTHING_LISTENS = "nothing listens on port {port} in the sandbox"
TEMPLATE_NOT_FOUND = "template not found"
TEMPLATE_NOT_READY = "template is not ready (status {status})"
TEMPLATE_NAME_TAKEN = "a template with this name already exists"
TEMPLATE_NAME_INVALID = (
    "must be 1-63 characters of lower-case letters, digits, dots, dashes and underscores, "
    "starting with a letter or digit"
)
DOCKERFILE_TOO_LARGE = "must be at most {limit} bytes"
NAME_TAKEN = "a sandbox with this name already exists"
NAME_INVALID = "must be 1-22 characters of letters, digits and '-'"
AUTO_PAUSE_RANGE = "must be between 60 and 86400"
BANDWIDTH_QUOTA = "cannot be set on create"
ENV_NAME_INVALID = "environment variable names must match [A-Za-z_][A-Za-z0-9_]*"
ENV_UNDECLARED = "env overrides may only use keys declared when the sandbox was created"
#: A sandbox that is not running refuses exec, files, processes and its desktop; the answer
#: says what would get it running (the paused one is the real service's wording).
NOT_RUNNING = "sandbox is {status}; {remedy} before {action}"
NOT_RUNNING_GONE = "sandbox is {status} and cannot run again; create a new one"
CANNOT_PAUSE = "sandbox is {status}; only a running sandbox can be paused"
CANNOT_RESUME = "sandbox is {status}; only a paused or errored sandbox can be resumed"
CANNOT_FORK = "sandbox is {status}; only a paused sandbox can be forked"
CANNOT_MODIFY = "sandbox is {status}; it can no longer be modified"
RESIZE_NOT_LARGER = "disk_mib must be larger than the current disk size"

# Networks, disks and bandwidth
RESOURCE_NAME_INVALID = (
    "must be 1-63 characters of lower-case letters, digits and '-', starting with a letter or digit"
)
NETWORK_NOT_FOUND = "network not found"
NETWORK_NAME_TAKEN = "a network with this name already exists"
NETWORK_HAS_MEMBERS = "network has members; detach its sandboxes first"
NETWORK_NOT_MEMBER = "sandbox is not attached to this network"
DISK_NOT_FOUND = "disk not found"
DISK_NAME_TAKEN = "a disk with this name already exists"
DISK_KIND = "must be s3"
DISK_ATTACHED = "disk is attached to a sandbox; detach it first"
DISK_NOT_RUNNING = "sandbox is {status}; disks attach only to a running sandbox"
MOUNT_PATH_TAKEN = "mount path is taken by (or nests with) another disk of this sandbox"
MOUNT_PATH_RESERVED = "must not be /, nor where the image keeps its programs or devices"
SUB_PATH_UNSUPPORTED = "is not supported by the fake: mount the disk's root"
NO_CREDIT = "insufficient credit"

# Exec, files and processes
CMD_REQUIRED = "is required"
PATH_REQUIRED = "path query parameter is required"
PATH_NOT_ABSOLUTE = "path must be absolute"
CWD_NOT_ABSOLUTE = "must be an absolute path"
PATH_INVALID = "path must not contain NUL bytes, control characters or invisible characters"
PATH_TOO_DEEP = "path must not be more than {depth} directories deep"
PATH_TOO_LONG = "path must be at most {path_bytes} bytes long, each name in it at most {name_bytes}"
FILE_NOT_FOUND = "file not found"
FILE_IS_DIRECTORY = "path is a directory"
#: The image's program directories are mounted read-only: the shell cannot write them either.
FILE_READ_ONLY = "path is on a read-only file system (the image's programs at /bin and /usr/bin)"
PATH_NAMES_DIRECTORY = "path ends in /: it names a directory, not a file"
FILE_TOO_LARGE = "file exceeds the maximum upload size"
PROCESS_NOT_FOUND = "process not found"
PROCESS_STDIN_CLOSED = "process stdin is already closed"
PROCESS_EXITED = "process has exited"
EXEC_SANDBOX_GONE = "the sandbox stopped while the command ran"
EXEC_OUTPUT_TOO_LARGE = (
    "output limit exceeded: the command wrote more than {cap} bytes and was stopped"
)
EXEC_STREAM_OVERRUN = (
    "output_offset_expired: the client fell more than {cap} bytes behind the command's output"
)
PROCESS_NOT_PTY = "process is not a pty"
PROCESS_IS_PTY = "stdin close is not supported for pty processes"
SIGNAL_INVALID = "signal must be one of {allowed}"
OUTPUT_EVICTED = "output_offset_expired"
WAIT_TIMEOUT = "process did not exit before timeout_ms"
INPUT_INVALID = "data_base64 must be standard padded base64"
INPUT_TOO_LARGE = "input larger than {cap} bytes (decoded): split it over several calls"
PROCESS_STDIN_FULL = (
    "the process has {unread} bytes of input it has not read yet, and holds at most {cap}: "
    "send the rest once it reads"
)

# Access tokens
ACCESS_TOKEN_ENABLED = "an access token is already enabled for this sandbox; rotate it instead"
ACCESS_TOKEN_NOT_FOUND = "access token not found"
DELEGATED_FORBIDDEN = (
    "a sandbox access token may only run commands, files, processes and the desktop"
    " of its own sandbox"
)

# Computer use
NO_DESKTOP = "sandbox rootfs {rootfs} has no desktop; create it from a desktop rootfs ({desktops})"
SCREEN_NOT_FOUND = "screen not found"
SCREENS_FULL = "all {count} screens exist; delete one first"
PRIMARY_SCREEN = "screen-0 is the primary screen and cannot be deleted"
WINDOW_NOT_FOUND = "window not found"
NO_ACTIVE_WINDOW = "no window is active"

# Faults and rate limits
RATE_LIMITED = "rate limit exceeded"
INJECTED_ERROR = "injected error"


# -- the control API's gates --------------------------------------------------------------------
OUTCOME_NEEDS_REQUEST = "an outcome applies to one held request: give `request` too"
REQUEST_WITH_COUNT = "release one held request (`request`) or many (`count`, `open`), not both"
#: ``DELETE /_fake/faults/{rule}`` (and the plugin's ``faults.remove``) for an id no rule has.
RULE_NOT_FOUND = "fault rule not found"
HELD_REQUEST_NOT_FOUND = "no request {request} is held at this gate (never held, or gone on)"


class ApiError(Exception):
    """An error answered in the API's JSend envelope.

    4xx answers are ``{"status": "fail", ...}``, 5xx answers ``{"status": "error", ...}``; both
    carry ``message`` and a numeric ``code`` (the HTTP status), which is what the official SDK
    reads first. ``data`` carries field-keyed validation details when there are any; a ``fail``
    without them carries its message there too, as the real service's does (the TypeScript SDK
    reads only ``data``).

    Example::

        raise ApiError(404, SANDBOX_NOT_FOUND)
        raise ApiError(400, "invalid request", data={"shape": UNKNOWN_SHAPE})
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        data: dict[str, Any] | str | None = None,
        headers: dict[str, str] | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.data = data
        self.headers = headers or {}
        #: The connection cannot be trusted after this answer (e.g. a body it could not read).
        self.close = close

    def envelope(self) -> dict[str, Any]:
        """The JSend body for this error."""
        body: dict[str, Any] = {
            "status": "fail" if self.status < 500 else "error",
            "message": self.message,
            "code": self.status,
        }
        if self.data is not None:
            body["data"] = self.data
        elif self.status < 500:
            body["data"] = self.message
        return body

    @classmethod
    def invalid(cls, field: str, problem: str) -> ApiError:
        """A 400 naming the offending field, e.g. ``ApiError.invalid("shape", UNKNOWN_SHAPE)``."""
        return cls(400, f"{field}: {problem}", data={field: problem})

    @classmethod
    def conflict(cls, template: str, status: str) -> ApiError:
        """A 409 for an operation the sandbox's current status does not allow."""
        return cls(409, template.format(status=status))
