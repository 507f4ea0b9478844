"""Which credential a request presents, of the headers CreateOS clients use.

Most clients send ``X-Api-Key``; the CLI's OAuth login sends ``X-Access-Token``, and the
TypeScript SDK documents that the control plane reads ``X-Auth-Token``, ``X-Access-Token`` and
``Authorization`` before ``X-Api-Key`` (contract §1.2). The fake takes the first of those a
request carries, in that order, and treats its value as the tenant's key:

- ``Authorization`` counts only with the ``Bearer`` scheme (another scheme, such as a proxy's
  ``Basic``, is not a CreateOS credential and is passed over);
- a credential header that is present but empty is a client's mistake: the request is refused
  (401), never answered with the next header's tenant.

Example:
    >>> presented_key({"Authorization": "Bearer skp_me", "X-Api-Key": "skp_other"})
    'skp_me'
    >>> presented_key({"X-Api-Key": "skp_me"})
    'skp_me'
"""

from __future__ import annotations

from collections.abc import Mapping

from fake_server.header_names import header_name

__all__ = ["CREDENTIAL_HEADERS", "presented_key"]

#: The headers a credential is read from, first match wins.
CREDENTIAL_HEADERS = ("X-Auth-Token", "X-Access-Token", "Authorization", "X-Api-Key")
#: The same names as aiohttp looks them up without case-folding them: presented_key runs on
#: every authenticated request.
_LOOKED_UP = tuple(header_name(name) for name in CREDENTIAL_HEADERS)


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request authenticates with, or ``None`` (refused: missing or empty).

    Example:
        >>> presented_key({"X-Access-Token": ""}) is None
        True
        >>> presented_key({"Authorization": "Basic dXNlcg==", "X-Api-Key": "skp_me"})
        'skp_me'
    """
    for name in _LOOKED_UP:
        value = headers.get(name)
        if value is None:
            continue
        if name == "Authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() != "bearer":
                continue
            value = token
        return value.strip() or None
    return None
