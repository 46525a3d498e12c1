"""The family contract, checked for every registered family: its candidates near an avatar
make valid tasks with a text, the oracle's plan for one of them reaches the family's goal when
it is played in the world, and its neighbours are specs of registered families."""

from __future__ import annotations

import math

import pytest

from world import oracle
from world.errors import TaskError
from world.families import DRAWN_FAMILIES, FAMILIES, REGISTRY, get_family
from world.sampling import sample_task
from world.snapshot import Snapshot
from world.tasks import Task, goal_met


def test_the_registry_lists_each_family_once_under_its_name() -> None:
    assert FAMILIES == tuple(REGISTRY)
    assert all(REGISTRY[name].name == name for name in FAMILIES)
    walks = ("go_to", "follow", "trail", "waymark")
    assert DRAWN_FAMILIES == tuple(name for name in FAMILIES if name not in walks)
    assert get_family("go_to") is REGISTRY["go_to"]
    with pytest.raises(TaskError, match="expected a family in"):
        get_family("juggle")


@pytest.mark.parametrize("name", FAMILIES)
def test_a_family_keeps_its_contract(sim, name: str) -> None:
    family = get_family(name)
    sim.join("b", "Bob")  # cooperate needs someone to hand things to
    with sim.tx() as world:
        task = sample_task(world, "a", key="contract", family=name)
        snap = Snapshot.of(world, "a")
        made = [Task.make(name, params) for params in family.candidates(snap, 1)]
        assert task in made
        assert all(t.text == family.describe(t.params) and t.text for t in made)
        assert math.isfinite(family.estimate(snap, task.params))
        specs = list(family.neighbours(snap, task.params))
        assert specs and all(spec["family"] in REGISTRY for spec in specs)
        assert not goal_met(world, task, "a")
        found = oracle.plan(world, task, "a")
    assert found is not None and found.actions
    for action in found.actions:
        assert sim.step("a", action).observation != "Nothing happens."
    with sim.tx() as world:
        assert goal_met(world, task, "a")


@pytest.mark.parametrize("name", ["go_to", "follow", "trail", "waymark"])
@pytest.mark.parametrize("seed", [3, 7, 11])
def test_a_family_that_reads_no_things_plans_alike_from_the_place_graph_alone(
    make_sim, seed: int, name: str
) -> None:
    """go_to's, follow's, trail's and waymark's draws copy the places alone (``reads_things``): their candidates
    and plans must be those a full snapshot gives, wherever the avatar stands and whoever
    stands near it."""
    walks = ["go_to", "follow", "trail", "waymark"]
    assert [n for n in FAMILIES if not get_family(n).reads_things] == walks
    family = get_family(name)
    sim = make_sim(seed)
    sim.join("a", "Alice")
    sim.join("b", "Bob")
    with sim.tx() as world:
        for x, y in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            world.region(x, y)
    planned = 0
    for walk in range(5):
        with sim.tx() as world:
            full = Snapshot.of(world, "a")
            bare = Snapshot.of(world, "a", things=False)
        assert full.things and not bare.things and bare.places == full.places
        for hops in (1, 2, 3):
            made = list(family.candidates(full, hops))
            assert list(family.candidates(bare, hops)) == made
            planned += len(made)
            for params in made:
                assert family.plan(bare, params, oracle.DEFAULT_BUDGET) == family.plan(
                    full, params, oracle.DEFAULT_BUDGET
                )
        moves = [a for a in sim.observe("a").admissible if a.startswith("go to")]
        sim.step("a", moves[walk % len(moves)])
    assert planned >= 5


def test_a_transaction_asks_the_store_for_each_region_once(make_sim) -> None:
    """A begin's draw snapshots the avatar's neighbourhood for every candidate it checks; a
    neighbour found absent is not asked for again in the transaction, and one generated later
    in the transaction is seen by the next snapshot."""
    sim = make_sim(7)
    sim.join("a", "Alice")
    with sim.tx() as world:
        world.region(1, 0)
    loads: list[tuple[int, int]] = []
    load = sim.backend.load_region

    def counted(rx: int, ry: int):  # type: ignore[no-untyped-def]
        loads.append((rx, ry))
        return load(rx, ry)

    sim.backend.load_region = counted  # type: ignore[method-assign]
    with sim.tx() as world:
        first = Snapshot.of(world, "a", things=False)
        assert sorted(first.regions) == ["0,0", "1,0"]
        assert sorted(set(loads)) == [(-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)]
        asked = len(loads)
        assert Snapshot.of(world, "a", things=False).regions == first.regions
        assert len(loads) == asked
        world.region(-1, 0)
        assert sorted(Snapshot.of(world, "a", things=False).regions) == ["-1,0", "0,0", "1,0"]
