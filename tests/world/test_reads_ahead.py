"""A step's read made ahead (``world.store.records._Ahead``) follows the writes of the steps
before it: after random moves of avatars and things, what it still holds is what a read of the
tables would give now (its crowd's count and the first avatars by id, its goal's receptacle's
things), and it leaves out only what it cannot follow."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from world.store.backend import AVATAR_COLUMNS, CROWD
from world.store.known import Moved
from world.store.models import EpisodeRow, TaskRow
from world.store.records import _THING_NAMES, SPARE, StepRead, _Ahead

ME, HERE, GOAL, RECEPTACLE = "m-me", "p-here", "p-goal", 7
PLACES = (HERE, "p-there", GOAL)
LIMIT = 3
# ids whose order is Python's: upper case before lower, punctuation by code point
IDS = [f"{p}{n:02d}" for p in ("A", "a", "b-", "b_", "Z") for n in range(8)]


def _avatar(avatar_id: str, place: str) -> dict[str, Any]:
    return {"id": avatar_id, "name": avatar_id.upper(), "place": place, "capacity": 4, "attrs": {}}


def _thing(thing_id: int, place: str | None, container: int | None) -> dict[str, Any]:
    row = dict.fromkeys(_THING_NAMES)
    return row | {"id": thing_id, "type": "item", "kind": "apple", "num": 1, "attrs": {}} | {
        "place": place, "container": container, "tick": 0
    }  # fmt: skip


def _crowd(avatars: dict[str, dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """The crowd beside ME as a read of the table gives it now (every one listed)."""
    others = sorted((a for a in avatars.values() if a["place"] == HERE), key=lambda a: a["id"])
    return len(others), others


def _inside(things: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in things.values() if t["place"] == GOAL and t["container"] == RECEPTACLE]


def _read(avatars: dict[str, dict[str, Any]], things: dict[int, dict[str, Any]]) -> StepRead:
    count, others = _crowd(avatars)
    listed = [{**a, CROWD.name: count} for a in others[: LIMIT + SPARE]]
    me = [*_avatar(ME, HERE).values(), *(None for _ in _THING_NAMES)]
    assert len(me) == len(AVATAR_COLUMNS) + len(_THING_NAMES)
    return StepRead(
        EpisodeRow(id=1, avatar_id=ME),
        TaskRow(id="t", params={"place": GOAL, "receptacle": RECEPTACLE}),
        None,
        around=[me],
        crowd=(LIMIT, listed),
        contents=(GOAL, RECEPTACLE, _inside(things)),
    )


@pytest.mark.parametrize("ordered", [True, False])
def test_a_read_made_ahead_holds_what_the_tables_hold_after_random_writes(ordered: bool) -> None:
    rng = random.Random(5)
    seen: Counter[str] = Counter()
    for _trial in range(200):
        avatars = {i: _avatar(i, rng.choice(PLACES)) for i in rng.sample(IDS, rng.randint(0, 30))}
        things = {
            n: _thing(n, GOAL, rng.choice([RECEPTACLE, None, 9])) for n in range(rng.randint(0, 6))
        }
        ahead: _Ahead | None = _Ahead.of(_read(avatars, things), ordered)
        for _write in range(rng.randint(1, 12)):
            assert ahead is not None
            moved, written = [], []
            for _ in range(rng.randint(0, 2)):  # avatars: move, stay (a row change), or join
                avatar_id = rng.choice(IDS)
                stood = avatars[avatar_id]["place"] if avatar_id in avatars else None
                row = _avatar(avatar_id, rng.choice(PLACES)) | {"attrs": {"n": _write}}
                avatars[avatar_id] = row
                moved.append(Moved(stood, row))
            for _ in range(rng.randint(0, 2)):  # things: into or out of the receptacle, or gone
                thing_id = rng.randrange(8)
                if thing_id in things and rng.random() < 0.2:
                    del things[thing_id]
                    written.append(thing_id)
                else:
                    thing = _thing(thing_id, rng.choice(PLACES), rng.choice([RECEPTACLE, None]))
                    things[thing_id] = thing
                    written.append(thing)
            ahead = ahead.after(moved, written)
            assert ahead is not None  # ME is never written
            read = ahead.read
            if read.crowd is None:
                seen["crowd left out"] += 1
                ahead = _Ahead.of(_read(avatars, things), ordered)  # its step read it again
                continue
            seen["crowd kept"] += 1
            count, others = _crowd(avatars)
            limit, listed = read.crowd
            assert limit == LIMIT
            assert len(listed) >= min(LIMIT, count)
            assert listed == [{**a, CROWD.name: count} for a in others[: len(listed)]]
            assert read.contents is not None
            inside = sorted(read.contents[2], key=lambda t: t["id"])
            assert inside == sorted(_inside(things), key=lambda t: t["id"])
    assert seen["crowd kept"] > seen["crowd left out"], seen
    assert seen["crowd left out"] > 0 or ordered, seen  # unordered: an avatar that comes


def test_an_avatar_that_comes_is_listed_only_where_ids_order_as_python() -> None:
    avatars = {i: _avatar(i, HERE) for i in ("a01", "a03")}
    comes = Moved("p-there", _avatar("a02", HERE))
    ordered = _Ahead.of(_read(avatars, {}), True).after([comes], [])
    assert ordered is not None and ordered.read.crowd is not None
    assert [a["id"] for a in ordered.read.crowd[1]] == ["a01", "a02", "a03"]
    assert {a[CROWD.name] for a in ordered.read.crowd[1]} == {3}
    unordered = _Ahead.of(_read(avatars, {}), False).after([comes], [])
    assert unordered is not None and unordered.read.crowd is None
    leaves = Moved(HERE, _avatar("a01", "p-there"))  # leaving needs no order
    left = _Ahead.of(_read(avatars, {}), False).after([leaves], [])
    assert left is not None and left.read.crowd == (LIMIT, [_avatar("a03", HERE) | {"crowd": 1}])


def test_a_crowd_whose_listed_avatars_left_is_left_out_where_more_stand_there() -> None:
    avatars = {i: _avatar(i, HERE) for i in IDS[: LIMIT + SPARE + 2]}
    ahead: _Ahead | None = _Ahead.of(_read(avatars, {}), True)
    for avatar_id in IDS[: SPARE + 1]:  # the first listed leave, one by one
        assert ahead is not None and ahead.read.crowd is not None
        ahead = ahead.after([Moved(HERE, _avatar(avatar_id, "p-there"))], [])
    assert ahead is not None and ahead.read.crowd is None  # 2 listed of 4 there: read again
