"""A world's dynamics versions (world.rules.Versions): the binary searches answer as the scans
they replaced did, and publishing keeps the order in force."""

from __future__ import annotations

import dataclasses
import json
import random

from world.rules import RulesVersion, Versions


def _scan_at(versions: list[RulesVersion], tick: int) -> RulesVersion:
    """WorldMeta.version_at before: the last version from a tick up to ``tick``, in order."""
    current = versions[0]
    for version in versions:
        if version.since_tick <= tick:
            current = version
    return current


def test_searches_answer_as_the_scans_did() -> None:
    rng = random.Random(7)
    for _ in range(300):
        published: list[RulesVersion] = [RulesVersion()]
        versions = Versions(published)
        for number in range(2, rng.randint(2, 40)):
            # ticks repeat, and some are published dated before others already in force
            version = RulesVersion(version=number, since_tick=rng.randint(0, 200))
            published.append(version)
            published.sort(key=lambda v: v.since_tick)  # publish_version's stable sort, before
            versions = versions.published(version)
        assert list(versions) == published
        assert versions.next_number == max(v.version for v in published) + 1
        for tick in range(-1, 205):
            assert versions.at(tick) is _scan_at(published, tick)
            assert versions.until(tick) == Versions(v for v in published if v.since_tick <= tick)
        for _ in range(20):
            start, end = sorted(rng.sample(range(-5, 210), 2))
            scanned = sorted({v.since_tick for v in published if start < v.since_tick < end})
            assert versions.changes_between(start, end) == scanned


def test_the_later_published_of_two_for_one_tick_is_in_force() -> None:
    first, second = RulesVersion(version=2, since_tick=10), RulesVersion(version=3, since_tick=10)
    versions = Versions([RulesVersion()]).published(first).published(second)
    assert versions.at(10) is second and versions.at(9).version == 1


def test_the_sums_stop_early_only_while_no_rate_is_negative() -> None:
    versions = Versions([RulesVersion()])
    assert versions.spoils_only and versions.regrows_only
    spoiling_back = versions.published(RulesVersion(version=2, since_tick=5, spoil_rate=-0.1))
    assert not spoiling_back.spoils_only and spoiling_back.regrows_only
    shrinking = versions.published(RulesVersion(version=2, since_tick=5, regrow_rate=-0.1))
    assert shrinking.spoils_only and not shrinking.regrows_only


def test_a_versions_row_is_its_asdict_and_reads_back() -> None:
    version = RulesVersion(
        version=4, since_tick=9, discovered=("bread",), prices={"apple": 1.5}, cause="market"
    )
    assert version.row() == dataclasses.asdict(version)
    assert RulesVersion.from_row(json.loads(json.dumps(version.row()))) == version
    assert Versions([RulesVersion(), version]).rows() == [RulesVersion().row(), version.row()]
