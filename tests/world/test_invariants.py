"""Property: long random action sequences by several avatars never break the world's invariants.

No thing is in two places (exactly one of place/holder, a container stands in the same place),
no thing vanishes except through a rule that consumes it (an accepted ``eat`` or ``craft``, as
the step's own feedback and ``state`` event say), inventories stay within capacity, and
quantities and stocks stay positive.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from world import engine
from world.rules import default_rules
from world.state import MemoryBackend, World

AVATARS = (("a", "Alice"), ("b", "Bob"), ("c", "Cleo"))
NONSENSE = ("take moon 1 from sky 1", "eat stove 1", "put well 1 on ground 1", "give coin 1 to alice",
            "craft wagon", "go to nowhere", "gather tree 1 with coin 1")  # fmt: skip

# One move: which avatar acts, and a number in [0, 1) choosing among its admissible actions
# (or, when ``nonsense`` is drawn, a well-formed action that is usually impossible).
moves = st.lists(
    st.tuples(st.integers(0, len(AVATARS) - 1), st.floats(0, 1, exclude_max=True),
              st.sampled_from((None,) * 9 + NONSENSE)),
    min_size=40,
    max_size=150,
)  # fmt: skip


def check_invariants(backend: MemoryBackend) -> None:
    things, avatars = backend.things, backend.avatars
    for thing in things.values():
        assert (thing.place is None) != (thing.holder is None), thing.row()
        if thing.holder is not None:
            assert thing.holder in avatars and thing.container is None, thing.row()
            assert thing.kind == "object", thing.row()  # receptacles and resources never move
        if thing.container is not None:
            host = things.get(thing.container)
            assert host is not None and host.kind == "receptacle", thing.row()
            assert host.place == thing.place, thing.row()
        if thing.kind == "object":
            assert int(thing.attrs.get("quantity", 1)) >= 1, thing.row()
            assert 0.0 <= float(thing.attrs.get("fresh", 0.0)) <= 100.0, thing.row()
            assert int(thing.attrs.get("durability", 0)) >= 0, thing.row()
        if thing.kind == "resource":
            assert 0.0 <= float(thing.attrs["stock"]), thing.row()
    for avatar in avatars.values():
        held = backend.load_inventory(avatar.id)
        assert len(held) <= default_rules().avatar_capacity, avatar.id
        assert sorted(t.id for t in held) == sorted(
            t.id for t in things.values() if t.holder == avatar.id
        )
        assert avatar.place in backend.places
    for place, ids in backend._at_place.items():  # noqa: SLF001 - the index must match the rows
        assert ids == {t.id for t in things.values() if t.place == place}, place


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), script=moves)
def test_random_play_keeps_invariants(seed: int, script: list) -> None:
    backend = MemoryBackend(seed)
    world = World(backend)
    for avatar_id, name in AVATARS:
        world.add_avatar(avatar_id, name)
    world.commit()
    check_invariants(backend)
    for index, pick, nonsense in script:
        avatar_id = AVATARS[index][0]
        world = World(backend)
        options = engine.observe(world, avatar_id).admissible
        world.commit()
        text = nonsense or options[int(pick * len(options))]
        before = set(backend.things)
        newest = backend.meta.next_thing_id
        world = World(backend)
        result = engine.step(world, avatar_id, text)
        changes = world.commit()
        check_invariants(backend)

        gone = before - set(backend.things)
        assert gone == changes.removed, text
        if gone:
            assert result.accepted and verb_of(text) in ("eat", "craft", "trade"), (text, gone)
            assert result.observation.startswith(("You eat the ", "You craft ", "You trade "))
            assert backend.events[-1].kind == "state"
            assert backend.events[-1].payload["removed"] == sorted(gone)
        born = set(backend.things) - before
        assert all(i >= newest for i in born), "ids are never reused"
        generated = {r.key for r in changes.regions}
        made = {i for i in born if not _in_regions(backend.things[i].place, generated)}
        if made:
            assert result.accepted and verb_of(text) in ("gather", "craft", "trade"), (text, made)
            assert all(backend.things[i].holder == avatar_id for i in made)


def verb_of(text: str) -> str:
    return text.split()[0]


def _in_regions(place: str | None, keys: set[str]) -> bool:
    return place is not None and place.split(":")[0] in keys


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), script=moves)
def test_eating_and_crafting_account_for_every_unit(seed: int, script: list) -> None:
    """Units of things held by avatars only change by the rules that make or consume them."""
    backend = MemoryBackend(seed)
    world = World(backend)
    world.add_avatar("a", "Alice")
    world.commit()
    for _index, pick, _nonsense in script:
        world = World(backend)
        options = engine.observe(world, "a").admissible
        world.commit()
        text = options[int(pick * len(options))]
        newest = backend.meta.next_thing_id
        units_before = _units(backend, newest)
        world = World(backend)
        result = engine.step(world, "a", text)
        world.commit()
        units_after = _units(backend, newest)  # things of regions generated now do not count
        if verb_of(text) in ("eat", "craft", "gather") and result.accepted:
            continue
        if verb_of(text) == "trade" and result.accepted:
            # "You trade N TYPE for 1 ITEM at ...": N units of TYPE go, one ITEM comes (onto an
            # old stack, which counts here, or as a new thing, which does not).
            given, rest = result.observation.split(" ", 3)[2:]
            gave, got = rest.split(" for 1 ", 1)
            wanted = got.split(" at the ", 1)[0]
            units_before[gave] -= int(given)
            units_after.pop(wanted, None)
            units_before.pop(wanted, None)
            assert {k: v for k, v in units_after.items() if v} == {
                k: v for k, v in units_before.items() if v
            }, text
            continue
        assert units_after == units_before, text


def _units(backend: MemoryBackend, below: int) -> dict[str, int]:
    totals: dict[str, int] = {}
    for thing in backend.things.values():
        if thing.kind == "object" and thing.id < below:
            totals[thing.type] = totals.get(thing.type, 0) + int(thing.attrs.get("quantity", 1))
    return totals
