"""The forge as a curriculum: a family that a learner fails steps down to go_to, go_to climbs
hop by hop, and mastered at the top rung it climbs back to the family it came down from. Every
move is a logged decision whose evidence says so, and every proposal passes the oracle."""

from __future__ import annotations

import pytest
from forgekit import AVATAR, fresh_world, pooled, rollouts, sample

from forge import mutate
from forge.config import ForgeConfig
from forge.cycle import CLIMB, DESCEND, DESCEND_IF_NONE, EASIER, HARDER, curriculum_move, run_cycle
from forge.errors import ConfigError
from forge.pool import PoolTask
from world import oracle, sampling, tasks
from world.snapshot import Snapshot
from world.state import World

CONFIG = ForgeConfig(window=10, min_rollouts=5, max_proposals=10)


def _cycle(world: World, pool: list[PoolTask], accuracy: dict[str, float], number: int = 10):
    history = {t.id: rollouts(t.id, accuracy[t.id], 10, start=100 * i) for i, t in enumerate(pool)}
    return run_cycle(world, pool, history, CONFIG, number, dynamics=False)


def _go_to(world: World, hops: int, **params: object) -> tasks.Task:
    task = sampling.sample_task(world, AVATAR, key="c", family="go_to", hops=hops)
    return tasks.Task.make("go_to", {**task.params, **params})


def _plan_length(world: World, task: tasks.Task) -> int:
    found = oracle.plan(world, task, AVATAR)
    assert found is not None
    return len(found)


def test_a_family_that_fails_everything_steps_down_to_go_to_and_the_trial_accepts_it() -> None:
    world = fresh_world()
    hard = sample(world, "pick_and_place")
    # Proposed for before and still hopeless: its easier variant did not help.
    parent = pooled(hard, last_proposal_cycle=3)
    result = _cycle(world, [parent], {parent.id: 0.0})
    (decision,) = result.decisions
    assert (decision.kind, decision.verdict, decision.task_id) == (
        "task.easier",
        "proposed",
        parent.id,
    )
    (new,) = result.new_tasks
    assert new.task.family == "go_to" and new.task.params["from_family"] == "pick_and_place"
    assert decision.candidate_id == new.task.id
    assert decision.evidence["curriculum"]["move"] == "down to go_to"
    assert decision.evidence["accuracy"] == 0.0
    # A learner that wins nothing starts on the lowest rung: the right move is admissible.
    assert new.task.params["hops"] == 1 and decision.evidence["curriculum"]["hops"] == 1
    assert new.difficulty == _plan_length(world, new.task) == 1 < _plan_length(world, hard)

    child = pooled(new.task, status="pending", origin=EASIER, parent_id=parent.id, baseline=0.0)
    history = {
        parent.id: rollouts(parent.id, 0.0, 10, start=1),
        child.id: rollouts(child.id, 0.5, CONFIG.trial_size, start=100),
    }
    trial = run_cycle(world, [parent, child], history, CONFIG, 11, dynamics=False)
    verdicts = {(d.kind, d.verdict, d.candidate_id) for d in trial.decisions}
    assert ("task.trial", "accepted", child.id) in verdicts
    assert (child.id, "active") in {(c.task_id, c.status) for c in trial.changes}
    assert (parent.id, "retired") in {(c.task_id, c.status) for c in trial.changes}


def test_the_family_keeps_its_own_easier_variants_first() -> None:
    world = fresh_world()
    hard = sample(world, "clean_and_place")
    parent = pooled(hard)  # never proposed for: its family's easier variant comes first
    (decision,) = _cycle(world, [parent], {parent.id: 0.0}).decisions
    assert decision.verdict == "proposed" and "curriculum" not in decision.evidence


def test_go_to_mastered_steps_up_one_hop() -> None:
    world = fresh_world()
    one = _go_to(world, 1, from_family="heat_and_place")
    parent = pooled(one)
    result = _cycle(world, [parent], {parent.id: 1.0})
    (decision,) = result.decisions
    assert (decision.kind, decision.verdict) == ("task.harder", "proposed")
    (new,) = result.new_tasks
    assert new.task.family == "go_to" and new.task.params["hops"] == 2
    assert new.task.params["from_family"] == "heat_and_place"
    assert new.difficulty == _plan_length(world, new.task) == 2


def test_go_to_hopeless_at_one_hop_gets_a_looser_budget() -> None:
    world = fresh_world()
    one = _go_to(world, 1)
    result = _cycle(world, [pooled(one)], {one.id: 0.0})
    (new,) = result.new_tasks
    assert new.task.params == {**one.params, "budget": 2 * one.params["budget"]}


def test_go_to_mastered_at_the_top_rung_climbs_back_to_its_family() -> None:
    world = fresh_world()
    config = CONFIG.updated({"curriculum_hops": 2})
    top = _go_to(world, 2, from_family="pick_and_place")
    parent = pooled(top)
    history = {parent.id: rollouts(parent.id, 0.9, 10)}
    result = run_cycle(world, [parent], history, config, 4, dynamics=False)
    (decision,) = result.decisions
    assert (decision.kind, decision.verdict) == ("task.harder", "proposed")
    assert decision.evidence["curriculum"]["move"] == "up from go_to to pick_and_place"
    (new,) = result.new_tasks
    assert new.task.family == "pick_and_place"
    assert new.difficulty == _plan_length(world, new.task)


def test_without_the_curriculum_nothing_steps_down_to_go_to() -> None:
    world = fresh_world()
    config = CONFIG.updated({"curriculum": False})
    parent = pooled(sample(world, "pick_and_place"), last_proposal_cycle=3)
    history = {parent.id: rollouts(parent.id, 0.0, 10)}
    result = run_cycle(world, [parent], history, config, 10, dynamics=False)
    assert all(n.task.family != "go_to" for n in result.new_tasks)
    assert all("curriculum" not in d.evidence for d in result.decisions)


@pytest.mark.parametrize(
    ("family", "hops", "way", "last", "move"),
    [
        ("pick_and_place", None, EASIER, None, DESCEND_IF_NONE),
        ("craft", None, EASIER, 2, DESCEND),
        ("pick_and_place", None, HARDER, None, None),
        ("go_to", 1, EASIER, None, None),  # go_to's own easier variants
        ("go_to", 2, HARDER, None, "climb_if_none"),
        ("go_to", 3, HARDER, None, CLIMB),
    ],
)
def test_curriculum_moves(
    family: str, hops: int | None, way: str, last: int | None, move: str | None
) -> None:
    params = {"hops": hops} if hops else {}
    task = PoolTask("t", family, params, last_proposal_cycle=last)
    assert curriculum_move(task, way, ForgeConfig()) == move
    assert curriculum_move(task, way, ForgeConfig(curriculum=False)) is None


def test_curriculum_config_is_validated() -> None:
    assert (ForgeConfig().curriculum, ForgeConfig().curriculum_hops) == (True, 3)
    with pytest.raises(ConfigError, match="curriculum_hops"):
        ForgeConfig().updated({"curriculum_hops": 0})
    with pytest.raises(ConfigError, match="curriculum"):
        ForgeConfig().updated({"curriculum": "yes"})


def test_a_family_out_of_easier_variants_steps_down_to_go_to_at_once() -> None:
    world = fresh_world()
    hard = sample(world, "pick_and_place")
    parent = pooled(hard)  # never proposed for, but every easier variant is taken already
    snap = Snapshot.of(world, AVATAR, (hard.params["place"],))
    known = {parent.id, *(v.id for v in mutate.variants(snap, hard))}
    history = {parent.id: rollouts(parent.id, 0.1, 10)}
    result = run_cycle(world, [parent], history, CONFIG, 10, known=known, dynamics=False)
    (decision,) = result.decisions
    assert decision.verdict == "proposed"
    assert (
        decision.evidence["curriculum"]["why"]
        == "no easier pick_and_place variant passed the oracle"
    )
    (new,) = result.new_tasks
    assert new.task.family == "go_to" and new.task.id not in known
    # Some wins: the rung is as many hops as the family's plan moves (at most the top rung).
    moves = mutate.moves(world, hard, AVATAR, CONFIG.plan_budget)
    assert moves and new.task.params["hops"] == min(moves, CONFIG.curriculum_hops)
