"""Every scenario of the conformance kit, against each host: one subclass per host.

The robust host (in Python and in JavaScript) and the reference host pass; the naive host fails
every scenario, which the strict xfail turns into a passing suite that breaks the day the kit
stops catching it.
"""

from __future__ import annotations

from typing import Any

import pytest
from example_hosts import NaiveHost, RobustHost

from pytest_createos.bridge import SubprocessHost
from pytest_createos.kit import ConformanceError, HostConformance, LeaseHostAdapter


class TestRobustHost(HostConformance):
    @pytest.fixture
    def host(self, robust_host: RobustHost) -> RobustHost:
        return robust_host


class TestRobustHostDeletingOnRelease(HostConformance):
    @pytest.fixture
    def host(self, robust_host: RobustHost) -> RobustHost:
        robust_host.keep_warm = False
        return robust_host


class TestNodeRobustHost(HostConformance):
    """node/robust_host.mjs, driven over the kit's bridge protocol."""

    @pytest.fixture
    def host(self, node_robust_host: SubprocessHost) -> SubprocessHost:
        return node_robust_host


class TestReferenceHost(HostConformance):
    @pytest.fixture
    def host(self, reference_host: LeaseHostAdapter) -> LeaseHostAdapter:
        return reference_host


@pytest.mark.xfail(raises=ConformanceError, reason="the naive host races cleanup", strict=True)
class TestNaiveHost(HostConformance):
    @pytest.fixture
    def host(self, naive_host: NaiveHost) -> Any:
        return naive_host
