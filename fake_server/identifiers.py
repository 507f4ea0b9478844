"""Seeded generation of everything the fake invents: ids, names, IPs, keys, spawn times.

One :class:`Identifiers` per server, drawn from one seed, so a seeded run (with the manual
clock) is reproducible byte for byte. Names are made of Faker's English words, drawn by the same
generator as everything else: a ``Faker()`` per fake would cost more than the rest of the fake
(about 0.8 ms, on every test's fake that names a sandbox).
"""

from __future__ import annotations

import binascii
import random
import secrets
import string
from collections.abc import Container, Sequence
from functools import cache

__all__ = ["Identifiers"]

# Crockford's base32, as ULIDs use: ids stay within [A-Za-z0-9_-] (the contract's id alphabet).
_ULID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
#: Base64's 64 digits, each mapped to the Crockford digit of its value modulo 32: every
#: Crockford digit has exactly two base64 digits, so random base64 is random Crockford.
_BASE64_TO_CROCKFORD = str.maketrans(
    string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/", _ULID_ALPHABET * 2
)
#: What keys and tokens are made of.
_KEY_ALPHABET = string.ascii_letters + string.digits
#: Each byte value to the key digit of its value modulo 62, for the 248 (4 x 62) values below
#: 248; the 8 above would make the first 8 digits likelier: they are dropped (:data:`_UNFAIR`).
_BYTE_TO_KEY_DIGIT = bytes((_KEY_ALPHABET * 5)[:256], "ascii")
_UNFAIR = bytes(range(len(_KEY_ALPHABET) * 4, 256))


@cache
def _name_words() -> Sequence[str]:
    """The words of sandbox names: Faker's English ones, imported on the first name (importing
    Faker costs more than the rest of the server's start-up)."""
    from faker.providers.lorem.en_US import Provider

    return tuple(Provider.word_list)


class Identifiers:
    """Seeded id and field generator.

    Example::

        ids = Identifiers(seed=7)
        ids.sandbox_id()   # 'sb_01j2...'
        ids.name()         # 'brave-otter-12'
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed if seed is not None else secrets.randbits(32)
        #: Made on the first draw: seeding a generator costs more than the rest of a fake's
        #: set-up, and every test's fake is reseeded for the test before it draws.
        self._random: random.Random | None = None

    @property
    def random(self) -> random.Random:
        """The seeded generator every id is drawn from (made on first use, from the latest
        seed: the same sequence as one seeded when these identifiers were made and reseeded
        since)."""
        if self._random is None:
            self._random = random.Random(self.seed)
        return self._random

    def _token(self, length: int) -> str:
        # One draw of whole 3-byte groups, base64-encoded in C (so no padding) and mapped to
        # Crockford's digits: ~1 µs an id, where a draw per character took ~6 µs (on every
        # test's tenant and every sandbox).
        size = (length + 3) // 4 * 3
        drawn = self.random.getrandbits(size * 8).to_bytes(size, "big")
        encoded = binascii.b2a_base64(drawn, newline=False).decode("ascii")
        return encoded.translate(_BASE64_TO_CROCKFORD)[:length]

    def sandbox_id(self, taken: Container[str] = ()) -> str:
        """A fresh sandbox id not in ``taken`` (ids are unique across tenants)."""
        while True:
            candidate = "sb_" + self._token(26)
            if candidate not in taken:
                return candidate

    def template_id(self) -> str:
        return "tpl_" + self._token(26)

    def process_id(self) -> str:
        return "proc_" + self._token(20)

    def network_id(self) -> str:
        return "net_" + self._token(26)

    def disk_id(self) -> str:
        return "disk_" + self._token(26)

    def tenant_id(self) -> str:
        return "usr_" + self._token(16)

    def api_key(self) -> str:
        return "skp_" + self.key_chars(32)

    def key_chars(self, length: int) -> str:
        """``length`` letters and digits, what API keys and access tokens are made of.

        Example:
            >>> len(Identifiers(seed=1).key_chars(32))
            32
        """
        # Bytes drawn at once and mapped in C, the unfair ones dropped (8 in 256): ~1 µs a key,
        # where a choice per character took ~3 µs (on every test's tenant).
        chars = ""
        while len(chars) < length:  # 16 spare bytes: a second round about once in 10^13 keys
            size = length - len(chars) + 16
            drawn = self.random.getrandbits(size * 8).to_bytes(size, "big")
            chars += drawn.translate(_BYTE_TO_KEY_DIGIT, _UNFAIR).decode("ascii")
        return chars[:length]

    def name(self) -> str:
        """A readable sandbox name within the 22-character cap, e.g. ``calm-river-42``."""
        words, draw = _name_words(), self.random
        while True:
            candidate = f"{draw.choice(words)}-{draw.choice(words)}-{draw.randrange(100)}"
            if len(candidate) <= 22 and candidate.isascii():
                return candidate.lower()

    def reseed(self, seed: int) -> None:
        """Start the sequence again from ``seed`` (the plugin does this per test, so each test
        sees the same ids whatever ran before it)."""
        self.seed = seed
        # Made again on the next draw: a test that draws nothing never pays for the seeding.
        self._random = None

    def ip(self, taken: Container[str] = ()) -> str:
        """A private IPv4 address not in ``taken`` (addresses are unique per tenant)."""
        while True:
            octets = (
                self.random.randrange(256),
                self.random.randrange(256),
                self.random.randrange(1, 255),
            )
            candidate = "10.{}.{}.{}".format(*octets)
            if candidate not in taken:
                return candidate

    def spawn_ms(self) -> float:
        return round(self.random.uniform(180.0, 900.0), 3)

    def pid(self) -> int:
        return self.random.randrange(100, 32768)
