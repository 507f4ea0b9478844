"""Tests of the reference lease provider and host (pytest_createos.provider, .host)."""
