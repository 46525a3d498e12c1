"""Continual-learning metrics, as pure functions over plain history records (design §9).

No SQL and no HTTP here: ``server/analysis.py`` reads the records, these functions turn
them into figures, and both ``GET /v1/metrics/learning`` and ``bigworld report`` call
:func:`measure`, the one function that hands a session to the store's queries. Every function takes records in any order and sorts what it needs.

Shared conventions (see also ``server/analysis.py``): an ended episode succeeded or not
(abandoned counts as a failure) and counts at its end tick; "in order" is begin order
``(begin_tick, id)``; a success rate is ``None`` where there are no episodes to rate.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from server.analysis import (
    HORIZON_WINDOWS,
    Decision,
    EpisodeOutcome,
    EpisodeVotes,
    ForgedTask,
    History,
    Outcome,
    Scope,
    StepVotes,
    load_history,
)
from world.dynamics import segments
from world.store import read_world
from world.values import WorldMeta

DEFAULT_WINDOW = 10  # N: episodes per window for forgetting, transfer and world changes
TARGET_BUCKETS = 40  # buckets over the range when the caller names no bucket size
MAX_BUCKETS = 5000  # buckets one answer may span per series


def rate(successes: int, episodes: int) -> float | None:
    return successes / episodes if episodes else None


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _in_order(episodes: Iterable[EpisodeOutcome]) -> list[EpisodeOutcome]:
    return sorted(episodes, key=lambda e: (e.begin_tick, e.id))


def _window_rate(episodes: Sequence[EpisodeOutcome]) -> float | None:
    return rate(sum(e.success for e in episodes), len(episodes))


# -- bucket size -----------------------------------------------------------------------------
def nice_bucket(span: int, target: int = TARGET_BUCKETS) -> int:
    """A round bucket size (1, 2 or 5 times a power of ten) giving about ``target`` buckets
    over ``span`` ticks; at least 1."""
    want = max(1, -(-span // target))
    size = 1
    while True:
        for step in (1, 2, 5):
            if size * step >= want:
                return size * step
        size *= 10


def choose_bucket(first_tick: int, last_tick: int, requested: int | None) -> int:
    """The bucket size for ticks ``first_tick..last_tick``: ``requested`` if given (a
    ``ValueError`` if it would cut the range into more than ``MAX_BUCKETS`` buckets), else a
    round size giving about ``TARGET_BUCKETS``."""
    if requested is None:
        return nice_bucket(max(1, last_tick - first_tick + 1))
    spanned = max(0, last_tick // requested - first_tick // requested) + 1
    if spanned > MAX_BUCKETS:
        raise ValueError(
            f"expected at most {MAX_BUCKETS} buckets over ticks {first_tick}..{last_tick}, "
            f"got {spanned} of {requested} ticks; ask for a larger bucket_ticks or a tick range"
        )
    return requested


# -- success over time -----------------------------------------------------------------------
@dataclass(frozen=True)
class Rate:
    """Ended episodes, how many succeeded, and the share (``None`` without episodes)."""

    episodes: int
    successes: int
    success_rate: float | None


@dataclass(frozen=True)
class BucketRate:
    """Success in ticks ``tick_start <= end_tick < tick_end``: overall when ``family`` and
    ``policy_version`` are both ``None``, else for that family or that version."""

    tick_start: int
    tick_end: int
    family: str | None
    policy_version: str | None
    episodes: int
    successes: int
    success_rate: float


def success_over_time(outcomes: Iterable[Outcome], bucket_ticks: int) -> list[BucketRate]:
    """Average success per bucket of ``bucket_ticks`` end ticks: overall rows, then one row per
    family, then one per known policy version (episodes without a version count only in the
    overall and family rows). Buckets without episodes have no row."""
    counts: dict[tuple[int, int, str | None], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        start = o.end_tick // bucket_ticks * bucket_ticks
        keys = [(start, 0, None), (start, 1, o.family)]
        if o.policy_version is not None:
            keys.append((start, 2, o.policy_version))
        for key in keys:
            counts[key][0] += o.episodes
            counts[key][1] += o.episodes if o.success else 0
    rows = []
    for (start, kind, name), (episodes, successes) in sorted(
        counts.items(), key=lambda item: (item[0][1], item[0][2] or "", item[0][0])
    ):
        rows.append(
            BucketRate(
                tick_start=start,
                tick_end=start + bucket_ticks,
                family=name if kind == 1 else None,
                policy_version=name if kind == 2 else None,
                episodes=episodes,
                successes=successes,
                success_rate=successes / episodes,
            )
        )
    return rows


def totals(outcomes: Iterable[Outcome], by: str) -> dict[str, Rate]:
    """Success per ``family`` or per ``policy_version`` over all the outcomes given."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        key = o.family if by == "family" else o.policy_version
        if key is None:
            continue
        counts[key][0] += o.episodes
        counts[key][1] += o.episodes if o.success else 0
    return {k: Rate(n, s, rate(s, n)) for k, (n, s) in sorted(counts.items())}


# -- forgetting ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskForgetting:
    task_id: str
    episodes: int
    best_earlier: float | None
    current: float | None
    forgetting: float | None


@dataclass(frozen=True)
class Forgetting:
    probe_tasks: int
    mean: float | None
    tasks: list[TaskForgetting] = field(default_factory=list)


def forgetting(
    probe_tasks: Sequence[str], episodes: Iterable[EpisodeOutcome], window: int
) -> Forgetting:
    """Forgetting on the probe set (Chaudhry et al.'s ``max_{l<k} a_l - a_k``, with windows of
    episodes as the evaluation points).

    Per probe task, its ended episodes in order are cut into windows of ``window`` episodes
    counted back from the newest: ``current`` is the success rate of the newest window (of
    fewer episodes if the task has fewer), ``best_earlier`` the highest rate among the earlier
    *complete* windows, and ``forgetting = best_earlier - current`` (negative when the task is
    done better now than ever before). ``None`` where a task has no episodes, or no complete
    earlier window. ``mean`` is over the tasks with a value.
    """
    by_task: dict[str, list[EpisodeOutcome]] = defaultdict(list)
    for e in episodes:
        by_task[e.task_id].append(e)
    rows = []
    for task_id in probe_tasks:
        ordered = _in_order(by_task.get(task_id, ()))
        current = _window_rate(ordered[-window:])
        earlier = [
            _window_rate(ordered[end - window : end])
            for end in range(len(ordered) - window, window - 1, -window)
        ]
        best = max((r for r in earlier if r is not None), default=None)
        value = best - current if best is not None and current is not None else None
        rows.append(TaskForgetting(task_id, len(ordered), best, current, value))
    return Forgetting(len(rows), _mean(r.forgetting for r in rows), rows)


# -- forward transfer ------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskTransfer:
    task_id: str
    origin: str
    parent_id: str | None
    created_tick: int
    episodes: int  # of its first ``window`` ended episodes that exist
    success: float | None
    parent_episodes: int
    parent_success: float | None
    transfer: float | None


@dataclass(frozen=True)
class ForwardTransfer:
    forged_tasks: int
    mean: float | None
    tasks: list[TaskTransfer] = field(default_factory=list)


def forward_transfer(
    tasks: Sequence[ForgedTask], episodes: Iterable[EpisodeOutcome], window: int
) -> ForwardTransfer:
    """Forward transfer to forged tasks: how well what was learnt carries to a variant before
    it is practised.

    Per forged task (origin harder or easier) created at tick c from parent P: ``success`` is
    its success rate over its first ``window`` ended episodes, ``parent_success`` P's rate over
    its last ``window`` episodes that ended by tick c (P's level when the variant was made), and
    ``transfer = success - parent_success``: near 0 when the skill carries over whole, negative
    for a harder variant that is learnt anew. ``None`` where either side has no episodes.
    ``mean`` is over tasks with a value, and can be read per origin from ``tasks``.
    """
    by_task: dict[str, list[EpisodeOutcome]] = defaultdict(list)
    for e in _in_order(episodes):
        by_task[e.task_id].append(e)
    rows = []
    for task in sorted(tasks, key=lambda t: (t.created_tick, t.id)):
        first = by_task.get(task.id, [])[:window]
        parent = [
            e for e in by_task.get(task.parent_id or "", []) if e.end_tick <= task.created_tick
        ][-window:]
        own, before = _window_rate(first), _window_rate(parent)
        rows.append(
            TaskTransfer(
                task_id=task.id,
                origin=task.origin,
                parent_id=task.parent_id,
                created_tick=task.created_tick,
                episodes=len(first),
                success=own,
                parent_episodes=len(parent),
                parent_success=before,
                transfer=own - before if own is not None and before is not None else None,
            )
        )
    return ForwardTransfer(len(rows), _mean(r.transfer for r in rows), rows)


# -- world changes ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ChangeEffect:
    decision_id: int
    tick: int
    kind: str
    success_before: float | None
    adaptation_episodes: int | None
    recovery_episodes: int | None
    episodes_after: int


def change_effects(
    changes: Iterable[Decision], episodes: Iterable[EpisodeOutcome], window: int
) -> list[ChangeEffect]:
    """Adaptation and recovery after each world change (a ``world.*`` decision at tick t).

    ``success_before``: the success rate of the last ``window`` episodes (in order) that began
    before t and ended by t. Episodes still running at t see both worlds and are left out. After
    the change, follow the episodes begun at or after t in order, at most
    ``HORIZON_WINDOWS * window`` of them; after the k-th, the rolling success rate is that of
    the last ``window`` episodes (topped up with the ones before the change while k < window).
    ``adaptation_episodes``: the first k whose rolling rate is below ``success_before`` (how
    soon the change shows), ``None`` if it never drops. ``recovery_episodes``: the first k after
    that drop whose rolling rate is back at ``success_before`` or above, ``None`` if it never
    comes back within the horizon, and 0 when it never dropped. All three are ``None`` without
    episodes before the change.
    """
    ordered = _in_order(episodes)
    begins = [e.begin_tick for e in ordered]
    horizon = HORIZON_WINDOWS * window
    effects = []
    for change in sorted(changes, key=lambda c: (c.tick, c.id)):
        cut = bisect_left(begins, change.tick)
        before: list[EpisodeOutcome] = []
        for i in range(cut - 1, -1, -1):
            if len(before) == window:
                break
            if ordered[i].end_tick <= change.tick:
                before.insert(0, ordered[i])
        after = ordered[cut : cut + horizon]
        level = _window_rate(before)
        drop = recovery = None
        if level is not None:
            seen = list(before)
            for k, episode in enumerate(after, start=1):
                seen.append(episode)
                rolling = _window_rate(seen[-window:])
                assert rolling is not None
                if drop is None and rolling < level:
                    drop = k
                elif drop is not None and rolling >= level:
                    recovery = k
                    break
            if drop is None:
                recovery = 0
        effects.append(
            ChangeEffect(change.id, change.tick, change.kind, level, drop, recovery, len(after))
        )
    return effects


# -- the reward model ------------------------------------------------------------------------
@dataclass(frozen=True)
class AccuracyBucket:
    tick_start: int
    tick_end: int
    episodes: int
    outcome_accuracy: float


@dataclass(frozen=True)
class RewardModel:
    judged_steps: int
    votes: int
    step_accuracy: float | None
    judged_episodes: int
    outcome_accuracy: float | None
    over_time: list[AccuracyBucket] = field(default_factory=list)


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def step_accuracy(votes: Iterable[StepVotes]) -> tuple[int, float | None]:
    """(votes, accuracy). A vote is right when its sign agrees with whether the step reduced the
    oracle's plan distance: +1 for a step with ``after < before``, -1 for one without (the plan
    got no shorter). An unparseable vote (0) is never right."""
    total = right = 0
    for v in votes:
        total += v.votes
        right += v.votes if _sign(v.score) == (1 if v.after < v.before else -1) else 0
    return total, rate(right, total)


def outcome_accuracy(votes: Iterable[EpisodeVotes]) -> tuple[int, float | None]:
    """(episodes, accuracy). An episode's votes agree with its outcome when the sign of their
    sum (so of their mean) is the outcome's (+1 success, -1 failure); a zero sum never agrees."""
    total = right = 0
    for v in votes:
        total += v.episodes
        right += v.episodes if _sign(v.vote_sum) == v.outcome else 0
    return total, rate(right, total)


def outcome_accuracy_over_time(
    votes: Iterable[EpisodeVotes], bucket_ticks: int
) -> list[AccuracyBucket]:
    """:func:`outcome_accuracy` per bucket of end ticks; buckets without judged episodes have
    no row."""
    buckets: dict[int, list[EpisodeVotes]] = defaultdict(list)
    for v in votes:
        buckets[v.end_tick // bucket_ticks * bucket_ticks].append(v)
    rows = []
    for start, group in sorted(buckets.items()):
        episodes, accuracy = outcome_accuracy(group)
        assert accuracy is not None
        rows.append(AccuracyBucket(start, start + bucket_ticks, episodes, accuracy))
    return rows


def reward_model(
    votes: Sequence[StepVotes],
    judged_steps: int,
    episodes: Sequence[EpisodeVotes],
    bucket_ticks: int,
) -> RewardModel:
    n_votes, steps = step_accuracy(votes)
    n_episodes, outcomes = outcome_accuracy(episodes)
    return RewardModel(
        judged_steps=judged_steps,
        votes=n_votes,
        step_accuracy=steps,
        judged_episodes=n_episodes,
        outcome_accuracy=outcomes,
        over_time=outcome_accuracy_over_time(episodes, bucket_ticks),
    )


# -- everything ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearningMetrics:
    """The answer of ``GET /v1/metrics/learning`` (design §9)."""

    tick: int
    bucket_ticks: int
    window: int
    episodes: int
    average_success: float | None
    success_over_time: list[BucketRate]
    families: dict[str, Rate]
    versions: dict[str, Rate]
    forgetting: Forgetting
    forward_transfer: ForwardTransfer
    world_changes: list[ChangeEffect]
    reward_model: RewardModel


def learning_metrics(history: History, *, bucket_ticks: int, window: int) -> LearningMetrics:
    episodes = sum(o.episodes for o in history.outcomes)
    successes = sum(o.episodes for o in history.outcomes if o.success)
    return LearningMetrics(
        tick=history.tick,
        bucket_ticks=bucket_ticks,
        window=window,
        episodes=episodes,
        average_success=rate(successes, episodes),
        success_over_time=success_over_time(history.outcomes, bucket_ticks),
        families=totals(history.outcomes, "family"),
        versions=totals(history.outcomes, "policy_version"),
        forgetting=forgetting(history.probe_tasks, history.probe_episodes, window),
        forward_transfer=forward_transfer(history.forged_tasks, history.transfer_episodes, window),
        world_changes=change_effects(history.world_changes, history.change_episodes, window),
        reward_model=reward_model(
            history.step_votes, history.judged_steps, history.episode_votes, bucket_ticks
        ),
    )


# -- seasons ---------------------------------------------------------------------------------
def season_changes(meta: WorldMeta, until: int) -> list[tuple[int, str]]:
    """(tick, season) for every tick in ``(0, until]`` where the season changes, under the
    dynamics versions in force (a drift of ``season_length`` moves later changes)."""
    changes: list[tuple[int, str]] = []
    previous: str | None = None
    for start, _end, _version, season in segments(meta, 0, until + 1):
        if previous is not None and season != previous:
            changes.append((start, season))
        previous = season
    return changes


# -- the one bridge to the store -------------------------------------------------------------
def measure(
    session: Session, scope: Scope, *, bucket_ticks: int | None = None, window: int = DEFAULT_WINDOW
) -> LearningMetrics:
    """Read the history in ``scope`` with the store's analysis queries and compute every
    metric (the route and the report both call this; the SQL stays in the store).
    ``bucket_ticks`` ``None`` picks a round size; raises ``ValueError`` for too many buckets."""
    tick = read_world(session).meta.tick
    first = scope.from_tick if scope.from_tick is not None else 0
    last = min(scope.to_tick, tick) if scope.to_tick is not None else tick
    bucket = choose_bucket(first, max(first, last), bucket_ticks)
    history = load_history(
        session=session, scope=scope, tick=tick, bucket_ticks=bucket, window=window
    )
    return learning_metrics(history, bucket_ticks=bucket, window=window)
