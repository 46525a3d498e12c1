"""Rewards and advantages of RLAnything's loop (design §7), as pure functions over numbers.

Policy: step i of a rollout with outcome O ∈ {−1, +1} and votes S_ij ∈ {−1, 0, +1} (0: the
reward model's answer did not parse) earns ``R_i = O + (λ/m)·Σ_j S_ij`` (outcome-only: R_i = O),
or with credit to go (``to_go``) ``R_i = O + (λ/m)·Σ_{k≥i} Σ_j S_kj``: the votes of the step and
of every step after it, so that a step is credited with what the rest of the episode made of
it, and a move voted good that the next move undoes earns nothing.
Rollouts are grouped by (task, policy version) — or, in a world that never resets, where the
same task rarely meets the same start twice, by (family, the oracle's plan length at the start,
policy version): like is compared with like. R is standardised at each step index across the
group's rollouts that reached it. Groups too small to compare and samples whose advantage is
zero are dropped, and so are groups whose rollouts all succeeded or all failed, unless asked to
rank them by their votes (``rank_uniform``). Where outcomes are sparse most groups fail
throughout, so ranking them gives the votes far more samples than the groups with a success;
on go_to_4 that made even the oracle's votes lose to outcome-only, and giving them up did not
(docs/benchmarks/closed-loop.md).

Reward model: vote j on step i earns ``R_i·S_ij`` with the step's own R_i, never credit to go
(a vote judges its step; an unparseable vote earns −2), standardised
among the m votes of that step; only groups whose accuracy lies in the window contribute.

Standardising uses the population standard deviation (divide by n); a set of values whose
deviation is below :data:`EPS` standardises to zeros (no signal, so nothing to learn).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate

from agents.train.config import GROUP_KEYS, TrainConfig

EPS = 1e-6


@dataclass(frozen=True)
class Rollout:
    """One finished episode as the trainer sees it, reduced to numbers.

    ``votes[i]`` holds the m votes on step i+1 (empty when votes are not used)."""

    episode_id: int
    task_id: str
    family: str
    policy_version: str
    outcome: int  # +1 success, −1 failure
    steps: int
    votes: tuple[tuple[int, ...], ...] = ()
    start_distance: int | None = None  # the oracle's plan length when the episode began

    @property
    def success(self) -> bool:
        return self.outcome > 0


@dataclass(frozen=True)
class Advantage:
    """The advantage of the policy's answer at ``step`` (1-based) of an episode."""

    episode_id: int
    step: int
    reward: float  # R_i before standardising
    advantage: float
    uniform: bool = False  # from a group that all succeeded or all failed, ranked by votes


@dataclass(frozen=True)
class VoteAdvantage:
    """The advantage of the reward model's vote number ``vote`` (0-based) on a step."""

    episode_id: int
    step: int
    vote: int
    reward: float  # R_i·S_ij, or the unparseable reward
    advantage: float


@dataclass
class Tally:
    """What the filters kept and dropped, for the trainer's figures."""

    groups: int = 0  # groups that gave samples
    small_groups: int = 0  # fewer rollouts than the minimum
    uniform_groups: int = 0  # all succeeded or all failed (policy; kept when ranked by votes)
    outside_window: int = 0  # accuracy outside the window (reward model)
    zero_samples: int = 0  # advantage zero
    samples: int = 0
    accuracies: list[float] = field(default_factory=list)


def standardise(values: Sequence[float]) -> list[float]:
    """(x − mean) / std with the population std; all zeros when the values barely differ."""
    n = len(values)
    if n == 0:
        return []
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    if std < EPS:
        return [0.0] * n
    return [(v - mean) / std for v in values]


def step_rewards(
    rollout: Rollout, *, lam: float, m: int, integrated: bool, to_go: bool = False
) -> list[float]:
    """R_i for every step of ``rollout``: ``O + (λ/m)·Σ_j S_ij``, or ``O`` when not integrated;
    ``to_go``: the votes summed over step i and every later step.

    Only the first m votes of a step count; an unparseable vote (0) adds nothing."""
    if not integrated:
        return [float(rollout.outcome)] * rollout.steps
    if len(rollout.votes) != rollout.steps:
        raise ValueError(
            f"expected votes for {rollout.steps} steps of episode {rollout.episode_id}, "
            f"got {len(rollout.votes)}"
        )
    credit = [lam / m * sum(votes[:m]) for votes in rollout.votes]
    if to_go:
        credit = list(accumulate(reversed(credit)))[::-1]
    return [rollout.outcome + c for c in credit]


def consistency_rewards(
    step_reward: float, votes: Sequence[int], unparseable: float = -2.0
) -> list[float]:
    """Each vote's reward ``R_i·S_ij``; a vote that did not parse (0) earns ``unparseable``."""
    return [step_reward * s if s != 0 else unparseable for s in votes]


def group_key(rollout: Rollout, by: str = "task") -> tuple[str, str]:
    """What makes rollouts comparable (``by``: task | family | distance), and their version."""
    if by == "task":
        return rollout.task_id, rollout.policy_version
    if by == "family":
        return rollout.family, rollout.policy_version
    if by == "distance":
        return f"{rollout.family}@{rollout.start_distance}", rollout.policy_version
    raise ValueError(f"expected by in {GROUP_KEYS}, got {by!r}")


def group_rollouts(
    rollouts: Iterable[Rollout], by: str = "task"
) -> dict[tuple[str, str], list[Rollout]]:
    """Rollouts keyed by :func:`group_key`, in the order they came."""
    groups: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
    for r in rollouts:
        groups[group_key(r, by)].append(r)
    return dict(groups)


def policy_advantages(
    rollouts: Iterable[Rollout],
    *,
    lam: float = 1.0,
    m: int = 3,
    integrated: bool = True,
    by: str = "task",
    min_group_size: int = 2,
    rank_uniform: bool = False,
    per_episode: bool = False,
    to_go: bool = False,
) -> tuple[list[Advantage], Tally]:
    """Step-index standardised advantages of the policy's answers, after the filters.

    ``rank_uniform``: whether a group that all succeeded or all failed gives samples, ranked
    by its votes (``integrated`` only; outcome-only every reward in it is the same). ``per_episode``: scale each advantage by
    ``(samples / episodes) / (the episode's samples)``, so that every episode weighs the same
    in the update whatever its length, and the update's total weight is unchanged. ``to_go``:
    each step's reward holds the votes of the steps after it (:func:`step_rewards`)."""
    out: list[Advantage] = []
    tally = Tally()
    for group in group_rollouts(rollouts, by).values():
        if len(group) < min_group_size:
            tally.small_groups += 1
            continue
        wins = sum(r.success for r in group)
        uniform = wins in (0, len(group))
        if uniform:
            tally.uniform_groups += 1
            if not (rank_uniform and integrated):
                continue
        tally.groups += 1
        tally.accuracies.append(wins / len(group))
        rewards = [step_rewards(r, lam=lam, m=m, integrated=integrated, to_go=to_go) for r in group]
        for i in range(max(len(rs) for rs in rewards)):
            reached = [(r, rs[i]) for r, rs in zip(group, rewards, strict=True) if i < len(rs)]
            for (r, reward), adv in zip(reached, standardise([x for _, x in reached]), strict=True):
                if abs(adv) < EPS:
                    tally.zero_samples += 1
                    continue
                out.append(Advantage(r.episode_id, i + 1, reward, adv, uniform))
    tally.samples = len(out)
    if per_episode and out:
        counts = Counter(a.episode_id for a in out)
        share = len(out) / len(counts)
        out = [replace(a, advantage=a.advantage * share / counts[a.episode_id]) for a in out]
    return out, tally


def cap_uniform(advantages: list[Advantage], share: float, rng: random.Random) -> list[Advantage]:
    """At most ``share`` samples of ranked uniform groups per sample of the groups with both
    outcomes, drawn at random, the latter all kept, in the order given. Ranked, a group that
    all failed standardises its steps among themselves, so a step that moved closer and failed
    weighs as much as a winning one, and such groups outnumber those with a success where
    outcomes are sparse: uncapped, on go_to_4 the oracle's votes taught moves far from the goal
    and none of the winning moves (docs/benchmarks/closed-loop.md, run l)."""
    uniform = [i for i, a in enumerate(advantages) if a.uniform]
    allowed = int(share * (len(advantages) - len(uniform)))
    if len(uniform) <= allowed:
        return advantages
    dropped = set(uniform) - set(rng.sample(uniform, allowed))
    return [a for i, a in enumerate(advantages) if i not in dropped]


def configured_advantages(
    rollouts: Iterable[Rollout], config: TrainConfig, rng: random.Random
) -> tuple[list[Advantage], Tally]:
    """The policy's advantages as ``config`` asks for them (:func:`policy_advantages` with its
    knobs, then :func:`cap_uniform` where it caps ranked uniform groups): what an update of
    the trainer trains on, before it draws at most ``max_samples`` of them."""
    advantages, tally = policy_advantages(
        rollouts,
        lam=config.lam,
        m=config.votes,
        integrated=config.uses_votes,
        by=config.group_by,
        min_group_size=config.min_group_size,
        rank_uniform=config.ranks_uniform_groups,
        per_episode=config.per_episode,
        to_go=config.credit_to_go,
    )
    if config.uniform_share > 0:
        advantages = cap_uniform(advantages, config.uniform_share, rng)
    return advantages, tally


def reward_model_advantages(
    rollouts: Iterable[Rollout],
    *,
    lam: float = 1.0,
    m: int = 3,
    by: str = "task",
    window: tuple[float, float] = (0.2, 0.8),
    unparseable: float = -2.0,
) -> tuple[list[VoteAdvantage], Tally]:
    """Advantages of the reward model's votes, standardised among the m votes of each step,
    from groups whose accuracy (share of successful rollouts) lies in ``window``."""
    out: list[VoteAdvantage] = []
    tally = Tally()
    low, high = window
    for group in group_rollouts(rollouts, by).values():
        accuracy = sum(r.success for r in group) / len(group)
        if not low <= accuracy <= high:
            tally.outside_window += 1
            continue
        tally.groups += 1
        tally.accuracies.append(accuracy)
        for r in group:
            rewards = step_rewards(r, lam=lam, m=m, integrated=True)
            for i, (reward, votes) in enumerate(zip(rewards, r.votes, strict=True)):
                earned = consistency_rewards(reward, votes[:m], unparseable)
                for j, (x, adv) in enumerate(zip(earned, standardise(earned), strict=True)):
                    if abs(adv) < EPS:
                        tally.zero_samples += 1
                        continue
                    out.append(VoteAdvantage(r.episode_id, i + 1, j, x, adv))
    tally.samples = len(out)
    return out, tally
