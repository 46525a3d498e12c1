"""The programmatic rewriter on go_to, the curriculum's bottom rung: easier is a hop nearer
(or, at one hop, a looser budget), harder a hop farther (or a tighter budget), and a rung is
handed out only where its target lies within its hops."""

from __future__ import annotations

from forgekit import AVATAR, fresh_world

from forge import mutate
from forge.mutate import EASIER, HARDER
from world import rng, sampling, tasks
from world.state import World


def _go_to(world: World, hops: int) -> tasks.Task:
    return sampling.sample_task(world, AVATAR, key="m", family="go_to", hops=hops)


def _propose(world: World, task: tasks.Task, way: str) -> mutate.Attempt | None:
    chosen, attempts = mutate.propose(
        world,
        task,
        AVATAR,
        way,
        parent_length=task.params["hops"],
        gen=rng.rng(world.seed, 1, "test", way),
        tries=8,
        budget=4000,
        exclude=(),
    )
    assert attempts
    return chosen


def test_easier_and_harder_go_to_change_hops_first() -> None:
    world = fresh_world()
    two = _go_to(world, 2)
    easier = _propose(world, two, EASIER)
    assert easier is not None and easier.task.family == "go_to"
    assert (easier.task.params["hops"], easier.task.params["budget"], easier.plan_length) == (
        1,
        2,
        1,
    )
    harder = _propose(world, easier.task, HARDER)
    assert harder is not None and harder.task.params["hops"] == 2 and harder.plan_length == 2


def test_without_a_nearer_target_easier_loosens_and_harder_tightens_the_budget() -> None:
    world = fresh_world()
    one = _go_to(world, 1)
    easier = _propose(world, one, EASIER)
    assert easier is not None
    assert easier.task.params == {**one.params, "budget": 4}  # same target, twice the steps
    two = _go_to(world, 2)
    # Nothing lies three hops away in the origin region alone: harder tightens the budget.
    harder = _propose(world, two, HARDER)
    assert harder is not None
    assert harder.task.params == {**two.params, "budget": 2}


def test_a_go_to_fits_only_within_its_hops() -> None:
    world = fresh_world()
    two = _go_to(world, 2)
    assert mutate.check(world, two, AVATAR, 4000) == 2
    farther = tasks.Task.make("go_to", {**two.params, "hops": 1})
    assert mutate.check(world, farther, AVATAR, 4000) is None  # two moves away: not a 1-hop
    roomy = tasks.Task.make("go_to", {**two.params, "hops": 3})
    assert mutate.check(world, roomy, AVATAR, 4000) == 2
