"""A forge cycle over simulated policies whose accuracy per task is known: proposals go the
right way, trials are decided exactly by the rule (thresholds included), nothing the oracle
cannot solve is admitted, and the same seed and history give the same decisions."""

from __future__ import annotations

import pytest
from forgekit import AVATAR, fresh_world, pooled, rollouts, sample

from forge.config import ForgeConfig
from forge.critic import Rollout
from forge.cycle import EASIER, HARDER, Suggestion, direction, run_cycle, trial_verdict
from forge.pool import PoolTask
from world import engine, oracle
from world.state import World
from world.tasks import Task

FAMILIES = ("pick_and_place", "clean_and_place", "heat_and_place", "examine_in_light", "craft")


def _solvable(world: World, task: Task) -> bool:
    found = oracle.plan(world, task, AVATAR)
    return found is not None and len(found) > 0


def test_direction_at_and_between_the_thresholds() -> None:
    config = ForgeConfig()
    assert direction(0.8, config) == HARDER and direction(1.0, config) == HARDER
    assert direction(0.2, config) == EASIER and direction(0.0, config) == EASIER
    assert direction(0.79, config) is None and direction(0.21, config) is None
    assert direction(None, config) is None


@pytest.mark.parametrize(
    ("way", "old", "new", "accepted"),
    [
        (HARDER, 0.9, 0.5, True),
        (HARDER, 0.9, 0.2, True),  # exactly alpha_low is allowed
        (HARDER, 0.9, 0.19, False),  # below alpha_low: too hard
        (HARDER, 0.9, 0.9, False),  # new == old: not harder
        (HARDER, 0.9, 0.95, False),
        (EASIER, 0.1, 0.5, True),
        (EASIER, 0.1, 0.8, True),  # exactly alpha_high is allowed
        (EASIER, 0.1, 0.81, False),  # above alpha_high: too easy
        (EASIER, 0.1, 0.1, False),  # new == old: not easier
        (EASIER, 0.0, 0.0, False),  # new == 0
    ],
)
def test_trial_rule(way: str, old: float, new: float, accepted: bool) -> None:
    ok, rule = trial_verdict(way, old, new, ForgeConfig())
    assert ok is accepted and rule


def test_new_accuracy_zero_is_rejected_even_when_alpha_low_is_zero() -> None:
    config = ForgeConfig(alpha_low=0.0)
    assert trial_verdict(HARDER, 0.9, 0.0, config)[0] is False
    assert trial_verdict(HARDER, 0.9, 0.1, config)[0] is True


def _pool(world: World) -> tuple[list[PoolTask], dict[str, float]]:
    """One task per family; a known accuracy for each."""
    made = [sample(world, family, key=family) for family in FAMILIES]
    accuracy = dict(zip([t.id for t in made], (1.0, 0.0, 0.5, 0.8, 0.2), strict=True))
    return [pooled(t) for t in made], accuracy


def test_proposals_go_the_right_way_and_pass_the_oracle(world: World) -> None:
    config = ForgeConfig(window=10, min_rollouts=5, max_proposals=10)
    pool, accuracy = _pool(world)
    history = {t.id: rollouts(t.id, accuracy[t.id], 10, start=100 * i) for i, t in enumerate(pool)}
    probe = sample(world, "pick_two_and_place")
    pool.append(pooled(probe, probe=True))
    history[probe.id] = rollouts(probe.id, 1.0, 10, start=900)  # mastered, but a probe
    result = run_cycle(world, pool, history, config, 1, dynamics=False)

    proposals = [d for d in result.decisions if d.kind in ("task.harder", "task.easier")]
    wanted = {t.id: direction(accuracy.get(t.id), config) for t in pool if t.id in accuracy}
    assert {d.task_id: d.kind for d in proposals} == {
        task_id: f"task.{way}" for task_id, way in wanted.items() if way
    }
    assert probe.id not in {d.task_id for d in proposals}
    admitted = {n.task.id: n for n in result.new_tasks}
    for decision in proposals:
        assert decision.evidence["accuracy"] == accuracy[decision.task_id]
        assert decision.evidence["rollouts"] == 10
        if decision.verdict != "proposed":
            assert decision.verdict == "unsolvable" and decision.candidate_id is None
            continue
        new = admitted[decision.candidate_id]
        assert new.parent_id == decision.task_id and new.origin in (HARDER, EASIER)
        assert _solvable(world, new.task)
        before, after = decision.evidence["parent_plan_length"], decision.evidence["plan_length"]
        assert after > before if new.origin == HARDER else after < before
    assert any(d.verdict == "proposed" for d in proposals)
    assert {n.task.id for n in result.new_tasks} == {
        d.candidate_id for d in proposals if d.verdict == "proposed"
    }
    # the critic measured every live task
    assert result.feedback[pool[2].id].accuracy == 0.5


def _trial(
    world: World, way: str, old: float, new: float, config: ForgeConfig
) -> tuple[list, list]:
    parent_task = sample(world, "pick_and_place")
    child_task = sample(world, "clean_and_place")
    parent = pooled(parent_task, accuracy=old, rollouts=10)
    child = pooled(child_task, status="pending", origin=way, parent_id=parent.id, baseline=old)
    history = {
        parent.id: rollouts(parent.id, old, 10, start=1),
        child.id: rollouts(child.id, new, config.trial_size, start=100),
    }
    result = run_cycle(world, [parent, child], history, config, 7, dynamics=False)
    return result.decisions, [(c.task_id, c.status) for c in result.changes]


@pytest.mark.parametrize(
    ("way", "old", "new", "verdict", "parent_retired"),
    [
        (HARDER, 1.0, 0.6, "accepted", True),
        (HARDER, 1.0, 0.2, "accepted", True),  # exactly alpha_low
        (HARDER, 0.8, 0.8, "rejected", False),  # new == old
        (HARDER, 1.0, 0.0, "rejected", False),  # new == 0
        (EASIER, 0.0, 0.8, "accepted", True),  # exactly alpha_high
        (EASIER, 0.2, 0.2, "rejected", False),  # new == old
        (EASIER, 0.0, 1.0, "rejected", False),  # too easy
        (EASIER, 0.0, 0.0, "rejected", False),  # new == 0
    ],
)
def test_trials_are_decided_exactly_by_the_rule(
    world: World, way: str, old: float, new: float, verdict: str, parent_retired: bool
) -> None:
    config = ForgeConfig(trial_size=5, window=10, min_rollouts=5, max_proposals=0)
    decisions, changes = _trial(world, way, old, new, config)
    trial = [d for d in decisions if d.kind == "task.trial"]
    assert len(trial) == 1 and trial[0].verdict == verdict
    assert trial[0].evidence["old_accuracy"] == old and trial[0].evidence["new_accuracy"] == new
    child, parent = trial[0].candidate_id, trial[0].task_id
    assert (child, "active" if verdict == "accepted" else "retired") in changes
    assert ((parent, "retired") in changes) is parent_retired
    assert any(d.kind == "task.retire" and d.task_id == parent for d in decisions) is parent_retired


def test_an_incomplete_trial_waits(world: World) -> None:
    config = ForgeConfig(trial_size=5, max_proposals=0)
    parent, child = sample(world, "pick_and_place"), sample(world, "clean_and_place")
    pool = [
        pooled(parent, accuracy=1.0, rollouts=10),
        pooled(child, status="pending", origin=HARDER, parent_id=parent.id, baseline=1.0),
    ]
    history = {child.id: rollouts(child.id, 0.5, 4)}
    result = run_cycle(world, pool, history, config, 1, dynamics=False)
    assert not result.decisions and not result.changes


def test_language_model_variants_are_validated_and_oracle_checked(world: World) -> None:
    config = ForgeConfig(window=10, min_rollouts=5, rewriter="language_model")
    task = sample(world, "pick_and_place")
    pool = [pooled(task)]
    history = {task.id: rollouts(task.id, 1.0, 10)}
    params = task.params
    cases = {
        "unsolvable": Suggestion(
            spec={"family": "pick_and_place", "params": {**params, "receptacle": 999_999}}
        ),
        "invalid": Suggestion(spec={"family": "fly_to_moon", "params": {}}),
        "no answer": Suggestion(error="connection refused"),
    }
    for name, suggestion in cases.items():
        result = run_cycle(
            world, pool, history, config, 1, suggestions={task.id: suggestion}, dynamics=False
        )
        (decision,) = result.decisions
        assert decision.evidence["language_model"]["error"], name
        for new in result.new_tasks:  # the programmatic rewriter stepped in
            assert decision.evidence["rewriter"] == "programmatic"
            assert new.task.id != Task.from_spec(cases["unsolvable"].spec).id
            assert _solvable(world, new.task)
    # A valid, solvable answer is admitted as the model wrote it.
    snap_variant = sample(world, "clean_and_place", key="lm")
    good = Suggestion(spec=snap_variant.spec(), summary="it keeps opening the fridge")
    result = run_cycle(world, pool, history, config, 1, suggestions={task.id: good}, dynamics=False)
    (decision,) = result.decisions
    assert decision.verdict == "proposed" and decision.candidate_id == snap_variant.id
    assert decision.evidence["rewriter"] == "language_model"
    assert decision.evidence["failure_summary_lm"] == "it keeps opening the fridge"


def test_no_solvable_variant_is_an_unsolvable_decision(world: World) -> None:
    config = ForgeConfig(window=10, min_rollouts=5, plan_budget=1)  # the oracle gives up
    task = sample(world, "pick_and_place")
    result = run_cycle(
        world, [pooled(task)], {task.id: rollouts(task.id, 1.0, 10)}, config, 1, dynamics=False
    )
    (decision,) = result.decisions
    assert decision.kind == "task.harder" and decision.verdict == "unsolvable"
    assert decision.candidate_id is None and not result.new_tasks
    assert decision.evidence["attempted"] > 0
    assert all(not a["plan_length"] for a in decision.evidence["attempts"])


def _decisions(seed: int) -> list[tuple]:
    world = fresh_world(seed)
    pool, accuracy = _pool(world)
    history = {t.id: rollouts(t.id, accuracy[t.id], 10, start=100 * i) for i, t in enumerate(pool)}
    config = ForgeConfig(window=10, min_rollouts=5, max_proposals=10)
    config = config.updated({"dynamics": {"storm_probability": 1.0, "flood_probability": 1.0}})
    out = []
    for number in (1, 2, 3):
        result = run_cycle(world, pool, history, config, number)
        world.commit()
        out += [
            (d.kind, d.verdict, d.task_id, d.candidate_id, d.evidence) for d in result.decisions
        ]
    return out


def test_same_seed_and_history_give_the_same_decisions() -> None:
    first = _decisions(11)
    assert first == _decisions(11)
    kinds = {kind for kind, *_ in first}
    assert {"task.harder", "task.easier"} <= kinds
    assert any(kind.startswith("world.") for kind in kinds)


def test_tasks_nobody_rolls_out_retire_so_the_pool_stays_bounded(world: World) -> None:
    """A live task with no rollout ended for more than ``stale_ticks`` retires (#15: the pool
    grew with every place the avatars passed, and every draw and cycle read all of it);
    probes, tasks rolled out or admitted within the window, and the go_to rung stay."""
    for _ in range(30):
        engine.heartbeat(world)
    world.commit()
    assert world.tick == 30
    config = ForgeConfig(stale_ticks=10, max_proposals=0)
    old, recent, fresh, probe, trial = (
        sample(world, family, key=family)
        for family in ("pick_and_place", "clean_and_place", "heat_and_place", "craft", "go_to")
    )
    rung_task = sample(world, "go_to", key="rung")
    pool = [
        pooled(old, created_tick=1),
        pooled(recent, created_tick=1),
        pooled(fresh, created_tick=25),
        pooled(probe, probe=True, origin="probe"),
        pooled(trial, status="pending", origin=HARDER, parent_id=old.id, created_tick=2),
        pooled(rung_task, origin=EASIER, created_tick=1),
    ]
    history = {
        old.id: [Rollout(1, old.id, AVATAR, True, "v1", 3, end_tick=19)],
        recent.id: [Rollout(2, recent.id, AVATAR, True, "v1", 3, end_tick=20)],
    }
    result = run_cycle(world, pool, history, config, 1, dynamics=False)
    retired = {c.task_id for c in result.changes if c.status == "retired"}
    assert retired == {old.id, trial.id}  # 30 - 19 > 10; the pending trial, created at 2
    stale = [d for d in result.decisions if d.kind == "task.retire"]
    assert {d.task_id for d in stale} == retired and all(d.verdict == "retired" for d in stale)
    assert {d.evidence["last_tick"] for d in stale} == {19, 2}

    never = run_cycle(world, pool, history, ForgeConfig(stale_ticks=0), 1, dynamics=False)
    assert not never.changes
