"""Seeded identifiers: their shapes, their alphabets, and that a seed replays them."""

from __future__ import annotations

import collections
import random
import re
import string
from collections.abc import Callable

import pytest

from fake_server.identifiers import Identifiers

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"

#: Each kind of id: how to draw it, its prefix, and how many Crockford digits follow.
IDS: dict[str, tuple[Callable[[Identifiers], str], str, int]] = {
    "sandbox": (Identifiers.sandbox_id, "sb_", 26),
    "template": (Identifiers.template_id, "tpl_", 26),
    "process": (Identifiers.process_id, "proc_", 20),
    "network": (Identifiers.network_id, "net_", 26),
    "disk": (Identifiers.disk_id, "disk_", 26),
    "tenant": (Identifiers.tenant_id, "usr_", 16),
}


@pytest.mark.parametrize("kind", IDS)
def test_an_id_is_its_prefix_then_crockford_digits(kind: str) -> None:
    draw, prefix, length = IDS[kind]
    ids = Identifiers(seed=3)
    for _ in range(200):
        assert re.fullmatch(re.escape(prefix) + f"[{CROCKFORD}]{{{length}}}", draw(ids))


def test_every_crockford_digit_turns_up_in_every_position() -> None:
    # 3,000 ids put ~94 of each digit in each position: a digit that never shows (or shows
    # far too often) is a mapping that lost values, as a wrong translation table would.
    ids = Identifiers(seed=11)
    drawn = [ids.sandbox_id()[len("sb_") :] for _ in range(3000)]
    for position in range(26):
        counts = dict.fromkeys(CROCKFORD, 0)
        for token in drawn:
            counts[token[position]] += 1
        assert min(counts.values()) > 40, (position, counts)
        assert max(counts.values()) < 160, (position, counts)


def test_keys_are_32_letters_and_digits_covering_the_alphabet() -> None:
    ids = Identifiers(seed=5)
    keys = [ids.api_key() for _ in range(500)]
    for key in keys:
        assert re.fullmatch(r"skp_[A-Za-z0-9]{32}", key)
    assert set("".join(key[4:] for key in keys)) == set(string.ascii_letters + string.digits)


def test_a_seed_replays_the_same_ids_and_reseeding_starts_over() -> None:
    def draws(ids: Identifiers) -> list[str]:
        return [ids.tenant_id(), ids.api_key(), ids.sandbox_id(), ids.process_id()]

    first, second = Identifiers(seed=42), Identifiers(seed=42)
    assert draws(first) == draws(second)
    assert draws(first) != draws(Identifiers(seed=43))
    again = draws(first)
    first.reseed(42)
    assert draws(first) == draws(Identifiers(seed=42)) != again


def test_a_sandbox_id_skips_the_ones_taken() -> None:
    taken = {Identifiers(seed=9).sandbox_id()}
    assert Identifiers(seed=9).sandbox_id(taken) not in taken


def test_every_key_digit_is_equally_likely() -> None:
    # 64,000 digits put ~1,032 on each of the 62; a byte-to-digit map that kept the 8 byte
    # values above 4 x 62 would give its first 8 digits a quarter more (~1,290).
    ids = Identifiers(seed=13)
    counts = collections.Counter(ids.key_chars(64_000))
    assert set(counts) == set(string.ascii_letters + string.digits)
    assert max(counts.values()) < 1_170, counts.most_common(3)
    assert min(counts.values()) > 900, counts.most_common()[-3:]


class _UnfairFirst(random.Random):
    """A generator whose first draw is all 0xff bytes: each one a value key digits drop."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.draws = 0

    def getrandbits(self, k: int, /) -> int:
        self.draws += 1
        return (1 << k) - 1 if self.draws == 1 else super().getrandbits(k)


def test_a_key_draws_again_for_the_bytes_it_dropped() -> None:
    ids = Identifiers(seed=2)
    ids._random = generator = _UnfairFirst(2)
    key = ids.api_key()
    assert re.fullmatch(r"skp_[A-Za-z0-9]{32}", key)
    assert generator.draws == 2


def test_reseeding_before_the_first_draw_replays_the_new_seed() -> None:
    # The generator is made on the first draw: a reseed before it must still count.
    ids = Identifiers(seed=1)
    ids.reseed(2)
    fresh = Identifiers(seed=2)
    assert [ids.api_key(), ids.sandbox_id()] == [fresh.api_key(), fresh.sandbox_id()]
    assert ids.seed == 2


def test_names_are_two_english_words_and_a_number_that_a_seed_replays() -> None:
    from faker.providers.lorem.en_US import Provider

    words = {word.lower() for word in Provider.word_list}
    names = [Identifiers(seed=5).name() for _ in range(2)]
    assert names[0] == names[1]  # the same seed, the same name
    ids = Identifiers(seed=6)
    drawn = [ids.name() for _ in range(300)]
    assert len(set(drawn)) > 250  # not one name over and over
    for name in drawn:
        first, second, number = name.split("-")
        assert {first, second} <= words
        assert 0 <= int(number) < 100
        assert len(name) <= 22
        assert name == name.lower()


def test_naming_a_sandbox_builds_no_faker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Faker() costs ~0.8 ms, more than the rest of a fake: every test's fresh fake that
    # named a sandbox built one.
    import faker

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Faker was built")

    monkeypatch.setattr(faker.Faker, "__init__", refuse)
    assert re.fullmatch(r"[a-z]+-[a-z]+-\d{1,2}", Identifiers(seed=3).name())


def test_a_reseed_seeds_no_generator_until_the_next_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seeding costs ~25k instructions: a test that draws nothing after its reseed skips it.
    seeded: list[object] = []
    real_seed = random.Random.seed

    def counting_seed(self: random.Random, *args: object, **kwargs: object) -> None:
        seeded.append(args)
        real_seed(self, *args, **kwargs)  # type: ignore[arg-type]

    ids = Identifiers(seed=1)
    before = ids.sandbox_id()
    monkeypatch.setattr(random.Random, "seed", counting_seed)
    ids.reseed(1)
    assert seeded == []
    assert ids.sandbox_id() == before  # the draw after it replays the seed
    assert seeded == [(1,)]
