"""One forge cycle: measure every pool task, decide the trials that are complete, propose
variants of mastered and hopeless tasks, and drive the world's dynamics.

:func:`run_cycle` is a pure function of the world's current state, the pool, the rollout
history, the configuration and the cycle number (plus the language model's answers, fetched
beforehand, when one is configured): the same inputs give the same decisions. Randomness comes
from the world's counter-based generator keyed by (seed, cycle, task, purpose). It returns
what to change; the caller writes the pool, the decisions and commits the world.

The rule (design §8): a task whose accuracy is ≥ α_high gets a harder variant proposed, ≤ α_low
an easier one. With ``config.curriculum``, the easier neighbour of a hopeless task that has no
easier variant of its own family (or whose earlier easier proposal did not help) is a go_to,
and the harder neighbour of a go_to mastered at ``curriculum_hops`` is a task of the family the
curriculum came down from (see :func:`curriculum_move`). A variant must pass the oracle from the current state and becomes ``pending``
until ``trial_size`` trial rollouts decide it: a harder one is accepted only if α_low ≤ new <
old, an easier one only if old < new ≤ α_high, and in both cases new > 0. Accepted variants turn
``active`` (and their mastered or hopeless parent may retire); rejected ones retire.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forge import critic, mutate
from forge.config import ForgeConfig
from forge.critic import Feedback, Rollout, StepTrace
from forge.dynamics import evolve
from forge.pool import PoolTask, rung
from world import rng
from world.errors import TaskError, UnknownEntityError
from world.state import World
from world.tasks import Task

HARDER, EASIER = mutate.HARDER, mutate.EASIER
ATTEMPTS_IN_EVIDENCE = 6  # oracle attempts quoted in a proposal's evidence


@dataclass(frozen=True)
class Decision:
    """One forge decision, as stored in ``forge_decisions``."""

    kind: str  # task.harder | task.easier | task.trial | task.retire | task.probe | world.*
    verdict: str  # proposed | unsolvable | accepted | rejected | retired | chosen | applied
    evidence: dict[str, Any]
    task_id: str | None = None  # the task judged
    candidate_id: str | None = None  # the variant proposed or tried


@dataclass(frozen=True)
class NewTask:
    """A variant admitted to the pool as ``pending``."""

    task: Task
    origin: str  # harder | easier
    parent_id: str
    reason: str
    difficulty: int  # the oracle's plan length when admitted


@dataclass(frozen=True)
class StatusChange:
    task_id: str
    status: str  # active | retired
    reason: str


@dataclass(frozen=True)
class Suggestion:
    """What the language model said about one task, asked before the cycle."""

    spec: Any = None  # its variant, as answered (validated here)
    error: str | None = None  # why there is no spec
    summary: str | None = None  # its one-line failure summary


@dataclass
class CycleResult:
    decisions: list[Decision] = field(default_factory=list)
    new_tasks: list[NewTask] = field(default_factory=list)
    changes: list[StatusChange] = field(default_factory=list)
    feedback: dict[str, Feedback] = field(default_factory=dict)  # per active or pending task


Traces = Callable[[Sequence[int]], Mapping[int, Sequence[StepTrace]]]


def direction(accuracy: float | None, config: ForgeConfig) -> str | None:
    """HARDER at or above α_high, EASIER at or below α_low, else None (informative)."""
    if accuracy is None:
        return None
    if accuracy >= config.alpha_high:
        return HARDER
    if accuracy <= config.alpha_low:
        return EASIER
    return None


def trial_verdict(way: str, old: float, new: float, config: ForgeConfig) -> tuple[bool, str]:
    """Whether a variant's trial accuracy ``new`` admits it against its parent's ``old``."""
    if new <= 0:
        return False, f"new accuracy {new:g} is 0: nobody solves it"
    if way == HARDER:
        ok = config.alpha_low <= new < old
        rule = f"alpha_low {config.alpha_low:g} <= new {new:g} < old {old:g}"
    else:
        ok = old < new <= config.alpha_high
        rule = f"old {old:g} < new {new:g} <= alpha_high {config.alpha_high:g}"
    return ok, ("" if ok else "not ") + rule


def due(
    pool: Sequence[PoolTask], feedback: Mapping[str, Feedback], config: ForgeConfig, cycle: int
) -> list[tuple[PoolTask, str]]:
    """Active, non-probe tasks that get a proposal this cycle, most extreme first."""
    waiting = {t.parent_id for t in pool if t.status == "pending"}
    found = []
    for task in pool:
        fb = feedback.get(task.id)
        if task.status != "active" or task.probe or task.id in waiting or fb is None:
            continue
        if not fb.measured:
            continue
        if (
            task.last_proposal_cycle is not None
            and cycle - task.last_proposal_cycle < config.cooldown_cycles
        ):
            continue
        way = direction(fb.accuracy, config)
        if way is None:
            continue
        assert fb.accuracy is not None
        extreme = (
            fb.accuracy - config.alpha_high if way == HARDER else config.alpha_low - fb.accuracy
        )
        found.append((-extreme, task.id, task, way))
    found.sort(key=lambda f: f[:2])
    return [(task, way) for _, _, task, way in found[: config.max_proposals]]


def run_cycle(
    world: World,
    pool: Sequence[PoolTask],
    history: Mapping[str, Sequence[Rollout]],
    config: ForgeConfig,
    cycle: int,
    *,
    traces: Traces = lambda ids: {},
    suggestions: Mapping[str, Suggestion] | None = None,
    known: Container[str] | None = None,
    dynamics: bool = True,
) -> CycleResult:
    """Decide cycle ``cycle``. ``history`` holds each task's ended rollouts, newest first;
    ``known`` answers whether a task id is already in the pool (any status; default: ``pool``);
    ``dynamics`` False leaves the world's dynamics alone."""
    result = CycleResult()
    by_id = {t.id: t for t in pool}
    for task in pool:
        if task.status in ("active", "pending"):
            result.feedback[task.id] = critic.feedback(task.id, history.get(task.id, ()), config)
    retired = _trials(pool, by_id, history, config, result)
    retired |= _stale(pool, history, config, world.tick, result)
    candidates = [t for t in pool if t.id not in retired]
    for task, way in due(candidates, result.feedback, config, cycle):
        _propose(
            world,
            task,
            way,
            config,
            cycle,
            result,
            traces=traces,
            history=history.get(task.id, ()),
            suggestion=(suggestions or {}).get(task.id),
            known=known if known is not None else by_id,
        )
    if dynamics:
        for change in evolve(world, config.dynamics, cycle):
            result.decisions.append(Decision(change.kind, change.verdict, change.evidence))
    return result


def _trials(
    pool: Sequence[PoolTask],
    by_id: Mapping[str, PoolTask],
    history: Mapping[str, Sequence[Rollout]],
    config: ForgeConfig,
    result: CycleResult,
) -> set[str]:
    """Decide every pending task with ``trial_size`` ended rollouts; returns ids retired."""
    retired: set[str] = set()
    for task in sorted((t for t in pool if t.status == "pending"), key=lambda t: t.id):
        ended = list(reversed(history.get(task.id, ())))[: config.trial_size]  # oldest first
        if len(ended) < config.trial_size:
            continue
        new = critic.accuracy(ended) or 0.0
        parent = by_id.get(task.parent_id or "")
        old = task.baseline
        if old is None:  # no proposal on record: judge against the parent as it stands
            fb = result.feedback.get(task.parent_id or "")
            old = fb.accuracy if fb is not None and fb.accuracy is not None else 0.0
        way = HARDER if task.origin == HARDER else EASIER
        ok, rule = trial_verdict(way, old, new, config)
        evidence = {
            "direction": way,
            "old_accuracy": old,
            "new_accuracy": new,
            "trial_rollouts": len(ended),
            "trial_successes": sum(r.success for r in ended),
            "episodes": [r.episode_id for r in ended],
            "rule": rule,
            "parent_id": task.parent_id,
        }
        result.decisions.append(
            Decision(
                "task.trial", "accepted" if ok else "rejected", evidence, task.parent_id, task.id
            )
        )
        if not ok:
            result.changes.append(StatusChange(task.id, "retired", f"trial rejected: {rule}"))
            retired.add(task.id)
            continue
        result.changes.append(StatusChange(task.id, "active", f"trial accepted: {rule}"))
        if parent is not None and config.retire_parents and parent.status == "active":
            why = _retire_reason(parent, way, old, result.feedback.get(parent.id), config)
            if why:
                result.changes.append(StatusChange(parent.id, "retired", why))
                result.decisions.append(
                    Decision(
                        "task.retire",
                        "retired",
                        {"reason": why, "accuracy": old, "variant_id": task.id, "direction": way},
                        parent.id,
                        task.id,
                    )
                )
                retired.add(parent.id)
    return retired


def _stale(
    pool: Sequence[PoolTask],
    history: Mapping[str, Sequence[Rollout]],
    config: ForgeConfig,
    tick: int,
    result: CycleResult,
) -> set[str]:
    """Retire every live task that no rollout has ended for in more than ``stale_ticks`` ticks
    (counted from its newest ended rollout, or from when it joined the pool); returns their ids.

    Why: a begin whose pool has nothing near the avatar samples a fresh task, so the avatars'
    wandering adds go_to tasks at every place they pass, and the pool only grew (the soak,
    #15: 116 live tasks after 10 minutes). The draw at every begin and every cycle read the
    whole live pool, its rows and each task's rollouts, under the world lock, so every
    request that waits on the lock got slower with the hour. Kept: probes (they measure
    forgetting), the pool's go_to rung (the curriculum's draw follows it) and tasks that
    changed status this cycle. A retired task drawn again as a fresh sample still plays."""
    if not config.stale_ticks:
        return set()
    current = rung(pool)
    keep = {c.task_id for c in result.changes} | ({current.task_id} if current else set())
    stale: set[str] = set()
    for task in sorted(pool, key=lambda t: t.id):
        if task.status not in ("active", "pending") or task.probe or task.id in keep:
            continue
        ended = history.get(task.id, ())
        last = max(task.created_tick, ended[0].end_tick if ended else 0)
        if tick - last <= config.stale_ticks:
            continue
        why = f"stale: no rollout ended since tick {last} (stale_ticks {config.stale_ticks})"
        result.changes.append(StatusChange(task.id, "retired", why))
        evidence = {
            "reason": why,
            "last_tick": last,
            "tick": tick,
            "stale_ticks": config.stale_ticks,
            "was": task.status,
            "accuracy": result.feedback[task.id].accuracy,
            "rollouts": len(ended),
        }
        result.decisions.append(Decision("task.retire", "retired", evidence, task.id))
        stale.add(task.id)
    return stale


def _retire_reason(
    parent: PoolTask, way: str, old: float, now: Feedback | None, config: ForgeConfig
) -> str | None:
    """Why a parent whose variant was accepted may go: it is still mastered (harder) or
    hopeless (easier); probes never retire."""
    if parent.probe:
        return None
    current = now.accuracy if now is not None and now.measured else old
    if current is None:
        return None
    if way == HARDER and current >= config.alpha_high:
        return f"mastered (accuracy {current:g} >= alpha_high); its harder variant was accepted"
    if way == EASIER and current <= config.alpha_low:
        return f"hopeless (accuracy {current:g} <= alpha_low); its easier variant was accepted"
    return None


def _propose(
    world: World,
    parent: PoolTask,
    way: str,
    config: ForgeConfig,
    cycle: int,
    result: CycleResult,
    *,
    traces: Traces,
    history: Sequence[Rollout],
    suggestion: Suggestion | None,
    known: Container[str],
) -> None:
    fb = result.feedback[parent.id]
    avatar = fb.last_avatar
    kind = f"task.{way}"
    try:
        assert avatar is not None
        world.avatar(avatar)
    except (AssertionError, UnknownEntityError):
        return  # nobody to plan from: wait for a rollout by an avatar that exists
    task = parent.task
    now = mutate.check(world, task, avatar, config.plan_budget)
    parent_length = now if now else parent.difficulty
    failed = [r.episode_id for r in history[: config.window] if not r.success]
    found = traces(failed[: config.summary_rollouts])
    evidence: dict[str, Any] = {
        **fb.evidence(),
        "direction": way,
        "avatar": avatar,
        "parent_plan_length": parent_length,
        "failures": [critic.failure_summary(found[i]) for i in failed[: config.summary_rollouts] if i in found],
    }  # fmt: skip
    if suggestion is not None and suggestion.summary:
        evidence["failure_summary_lm"] = suggestion.summary
    if suggestion is not None and (suggestion.spec is not None or suggestion.error):
        made = _from_language_model(world, suggestion, avatar, config, known)
        evidence["language_model"] = made[1]
        if made[0] is not None:
            variant, length = made[0]
            _admit(result, parent, way, variant, length, "language_model", evidence)
            return
    if task.family == "go_to":  # a rung's difficulty is its hops, wherever the avatar stands
        parent_length = evidence["parent_plan_length"] = task.params["hops"]
    gen = rng.rng(world.seed, cycle, f"task:{parent.id}", f"forge:{way}")
    move = curriculum_move(parent, way, config)
    chosen: mutate.Attempt | None = None
    attempts: list[mutate.Attempt] = []
    if move not in (CLIMB, DESCEND):
        chosen, attempts = mutate.propose(
            world,
            task,
            avatar,
            way,
            parent_length=parent_length,
            gen=gen,
            tries=config.mutation_tries,
            budget=config.plan_budget,
            exclude=known,
        )
    solved = chosen is not None and bool(chosen.plan_length)
    if move == DESCEND or (move == DESCEND_IF_NONE and not solved):
        hops = _first_rung(world, task, avatar, parent_length, fb.accuracy, config)
        evidence["curriculum"] = {
            "move": "down to go_to",
            "hops": hops,
            "from_family": task.family,
            "why": (
                f"no easier {task.family} variant passed the oracle"
                if move == DESCEND_IF_NONE
                else f"an easier proposal for it (cycle {parent.last_proposal_cycle}) did not help"
            ),
        }
        chosen, more = (None, []) if hops is None else mutate.descend(
            world, task, avatar, hops=hops, gen=gen, tries=config.mutation_tries,
            budget=config.plan_budget, exclude=known,
        )  # fmt: skip
        attempts = more + attempts  # the curriculum's own attempts lead the evidence
    elif move == CLIMB or (move == CLIMB_IF_NONE and not solved):
        family = task.params.get("from_family", mutate.CLIMB_FAMILY)
        evidence["curriculum"] = {
            "move": f"up from go_to to {family}",
            "hops": task.params["hops"],
            "from_family": family,
            "why": (
                f"go_to mastered at {task.params['hops']} hops (top rung {config.curriculum_hops})"
                if move == CLIMB
                else "no harder go_to variant passed the oracle"
            ),
        }
        chosen, more = mutate.climb(
            world, task, avatar, gen=gen, tries=config.mutation_tries,
            budget=config.plan_budget, exclude=known,
        )  # fmt: skip
        attempts = more + attempts  # the curriculum's own attempts lead the evidence
    evidence["attempts"] = [a.evidence() for a in attempts[:ATTEMPTS_IN_EVIDENCE]]
    evidence["attempted"] = len(attempts)
    if chosen is None or not chosen.plan_length:
        evidence["why"] = (
            f"no {way} variant passed the oracle from the current state"
            if attempts
            else f"no {way} variant of this task exists near {avatar}"
        )
        result.decisions.append(Decision(kind, "unsolvable", evidence, parent.id, None))
        return
    _admit(result, parent, way, chosen.task, chosen.plan_length, "programmatic", evidence)


# How the curriculum moves a task (curriculum_move): step down to go_to at once, or only when
# the family has no easier variant; step up from go_to at once, or only when no harder go_to is.
DESCEND, DESCEND_IF_NONE, CLIMB, CLIMB_IF_NONE = (
    "descend",
    "descend_if_none",
    "climb",
    "climb_if_none",
)


def curriculum_move(parent: PoolTask, way: str, config: ForgeConfig) -> str | None:
    """Where the curriculum takes ``parent`` in direction ``way``, if anywhere.

    A hopeless task of a family other than go_to steps down to go_to when its family offers
    no easier variant, and at once when it was proposed for before (its easier variant was
    rejected, or did not make it solvable). A mastered go_to at the top rung steps up to the
    family it came down from; below the top, it does so only when no harder go_to exists."""
    if not config.curriculum:
        return None
    if way == EASIER and parent.family != "go_to":
        return DESCEND if parent.last_proposal_cycle is not None else DESCEND_IF_NONE
    if way == HARDER and parent.family == "go_to":
        return CLIMB if parent.params["hops"] >= config.curriculum_hops else CLIMB_IF_NONE
    return None


def _first_rung(
    world: World,
    task: Task,
    avatar: str,
    parent_length: int | None,
    accuracy: float | None,
    config: ForgeConfig,
) -> int | None:
    """The go_to rung a hopeless task steps down to: one hop for a task its learners never
    win (a trial that wins nothing is rejected, so the curriculum starts where a learner that
    wins nothing may win); else as many hops as the oracle's plan for it moves, at most the
    top rung and fewer than its plan is long. None when even one hop is no easier."""
    moves = 1 if not accuracy else mutate.moves(world, task, avatar, config.plan_budget) or 1
    hops = min(moves, config.curriculum_hops)
    if parent_length:
        hops = min(hops, parent_length - 1)
    return hops if hops >= 1 else None


def _admit(
    result: CycleResult,
    parent: PoolTask,
    way: str,
    variant: Task,
    length: int,
    rewriter: str,
    evidence: dict[str, Any],
) -> None:
    accuracy = evidence["accuracy"]
    reason = (
        f"{way} variant of {parent.id} (accuracy {accuracy:g} over {evidence['rollouts']} "
        f"rollouts; plan {evidence['parent_plan_length']} -> {length}), by the {rewriter} rewriter"
    )
    evidence = {
        **evidence,
        "candidate": variant.spec(),
        "plan_length": length,
        "rewriter": rewriter,
    }
    result.new_tasks.append(NewTask(variant, way, parent.id, reason, length))
    result.decisions.append(Decision(f"task.{way}", "proposed", evidence, parent.id, variant.id))


def _from_language_model(
    world: World,
    suggestion: Suggestion,
    avatar: str,
    config: ForgeConfig,
    known: Container[str],
) -> tuple[tuple[Task, int] | None, dict[str, Any]]:
    """The model's variant if it is a valid, new task the oracle can solve from here now."""
    note: dict[str, Any] = {"spec": suggestion.spec}
    if suggestion.spec is None:
        return None, {**note, "error": suggestion.error}
    try:
        variant = Task.from_spec(suggestion.spec)
    except TaskError as exc:
        return None, {**note, "error": f"not a valid task: {exc}"}
    if variant.id in known:
        return None, {**note, "error": f"task {variant.id} is already in the pool"}
    length = mutate.check(world, variant, avatar, config.plan_budget)
    note["plan_length"] = length
    if not length:
        return None, {**note, "error": "the oracle finds no plan" if length is None else "its goal already holds"}  # fmt: skip
    return (variant, length), note
