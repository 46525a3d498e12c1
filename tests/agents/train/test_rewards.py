"""Reward and advantage arithmetic against cases worked out by hand."""

from __future__ import annotations

import math
import random

import pytest

from agents.train.rewards import (
    Rollout,
    cap_uniform,
    consistency_rewards,
    policy_advantages,
    reward_model_advantages,
    standardise,
    step_rewards,
)


def rollout(
    episode_id: int,
    outcome: int,
    votes: tuple[tuple[int, ...], ...] = (),
    *,
    steps: int | None = None,
    task: str = "t",
    version: str = "1",
    family: str = "pick",
) -> Rollout:
    return Rollout(
        episode_id, task, family, version, outcome, len(votes) if steps is None else steps, votes
    )


def found(advantages: list) -> dict[tuple[int, int], float]:
    return {(a.episode_id, a.step): a.advantage for a in advantages}


def test_step_reward_adds_the_mean_vote_and_counts_unparseable_votes_as_zero() -> None:
    r = rollout(1, -1, ((1, 1, 1), (1, -1, 0), (0, 0, 0), (-1, -1, -1)))
    assert step_rewards(r, lam=1.0, m=3, integrated=True) == pytest.approx([0.0, -1.0, -1.0, -2.0])
    # λ scales the votes only; outcome-only ignores them
    assert step_rewards(r, lam=0.5, m=3, integrated=True) == pytest.approx([-0.5, -1.0, -1.0, -1.5])
    assert step_rewards(r, lam=1.0, m=3, integrated=False) == [-1.0] * 4
    # only the first m votes count: 1 + (1/2)·(1 + 1)
    assert step_rewards(rollout(2, 1, ((1, 1, -1, -1),)), lam=1.0, m=2, integrated=True) == [2.0]


def test_standardise_uses_the_population_deviation() -> None:
    assert standardise([2.0, -4 / 3]) == pytest.approx([1.0, -1.0])
    s = math.sqrt(2)
    assert standardise([1.0, -1.0, -1.0]) == pytest.approx([s, -1 / s, -1 / s])
    assert standardise([3.0, 3.0]) == [0.0, 0.0]
    assert standardise([]) == []


def test_advantages_are_standardised_per_step_index_across_the_group() -> None:
    # A: R = [1+1, 1+0] = [2, 1]; B: R = [-1-1/3, -1+1, -1-1/3] = [-4/3, 0, -4/3]
    a = rollout(10, 1, ((1, 1, 1), (1, -1, 0)))
    b = rollout(11, -1, ((-1, -1, 1), (1, 1, 1), (-1, 0, 0)))
    advantages, tally = policy_advantages([a, b], lam=1.0, m=3)
    # step 1: [2, -4/3] → mean 1/3, std 5/3 → [1, -1]; step 2: [1, 0] → [1, -1];
    # step 3: B alone → zero advantage → dropped
    assert found(advantages) == pytest.approx(
        {(10, 1): 1.0, (11, 1): -1.0, (10, 2): 1.0, (11, 2): -1.0}
    )
    assert {(x.episode_id, x.step): x.reward for x in advantages} == pytest.approx(
        {(10, 1): 2.0, (11, 1): -4 / 3, (10, 2): 1.0, (11, 2): 0.0}
    )
    assert tally.zero_samples == 1 and tally.groups == 1 and tally.samples == 4
    assert tally.accuracies == [0.5]


def test_outcome_only_advantages_with_three_rollouts() -> None:
    rs = [rollout(1, 1, steps=1), rollout(2, -1, steps=2), rollout(3, -1, steps=1)]
    advantages, tally = policy_advantages(rs, integrated=False)
    s = math.sqrt(2)  # step 1: [1, -1, -1] → mean -1/3, std 2√2/3 → [√2, -1/√2, -1/√2]
    assert found(advantages) == pytest.approx({(1, 1): s, (2, 1): -1 / s, (3, 1): -1 / s})
    assert tally.zero_samples == 1  # step 2 of episode 2 has no one to compare with


def test_groups_split_by_task_and_version_and_the_filters_drop_what_has_no_signal() -> None:
    rs = [
        rollout(1, 1, ((1, 1, 1),), task="t"),  # t@1: one success, one failure → kept
        rollout(2, -1, ((-1, -1, -1),), task="t"),
        rollout(3, 1, ((1, 1, 1),), task="t", version="2"),  # t@2: alone → too small
        rollout(4, 1, ((1, 1, 1),), task="u"),  # u@1: all succeeded → dropped
        rollout(5, 1, ((-1, -1, -1),), task="u"),
        rollout(6, -1, ((1, 1, 1),), task="w"),  # w@1: all failed → dropped
        rollout(7, -1, ((-1, 1, 1),), task="w"),
    ]
    advantages, tally = policy_advantages(rs, integrated=False)
    assert {x.episode_id for x in advantages} == {1, 2}
    assert (tally.groups, tally.small_groups, tally.uniform_groups) == (1, 1, 2)
    # grouping by family pools the tasks: one group of six version-1 rollouts
    by_family, tally = policy_advantages(rs, by="family", integrated=False)
    assert {x.episode_id for x in by_family} == {1, 2, 4, 5, 6, 7}
    assert tally.small_groups == 1


def test_with_votes_a_group_that_all_failed_ranks_its_steps_only_when_asked() -> None:
    """Outcome-only learns nothing from a group that failed throughout; ranked by its votes
    (``rank_uniform``), the voted-up step's probability goes up and the other's down; by
    default such a group is given up with votes too."""
    failed = [
        rollout(1, -1, ((1, 1, 1), (1, 1, -1))),  # both steps voted good
        rollout(2, -1, ((-1, -1, -1), (1, 1, -1))),  # its first step voted bad
    ]
    none, tally = policy_advantages(failed, integrated=False)
    assert none == [] and tally.uniform_groups == 1
    ranked, tally = policy_advantages(failed, integrated=True, rank_uniform=True)
    assert tally.uniform_groups == 1 and tally.groups == 1
    assert found(ranked) == pytest.approx({(1, 1): 1.0, (2, 1): -1.0})  # step 2: a tie
    given_up, tally = policy_advantages(failed, integrated=True)  # the default
    assert given_up == [] and (tally.uniform_groups, tally.groups) == (1, 0)
    succeeded = [rollout(3, 1, ((1, 1, 1),)), rollout(4, 1, ((1, -1, -1),))]
    ranked = policy_advantages(succeeded, rank_uniform=True)[0]
    assert found(ranked) == pytest.approx({(3, 1): 1.0, (4, 1): -1.0})


def test_per_episode_every_episode_weighs_the_same_whatever_its_length() -> None:
    """A one-step episode and two three-step ones: weighed per decision the long ones give six
    of the seven samples; weighed per episode each episode's samples share 7/3."""
    group = [
        rollout(1, -1, ((1, 1, 1),)),
        rollout(2, -1, ((-1, -1, -1),) * 3),
        rollout(3, -1, ((1, 1, 1),) * 3),
    ]
    plain = found(policy_advantages(group, rank_uniform=True)[0])
    weighed = found(policy_advantages(group, rank_uniform=True, per_episode=True)[0])
    assert plain.keys() == weighed.keys() and len(plain) == 7
    for episode, steps in ((1, 1), (2, 3), (3, 3)):
        scales = [weighed[episode, i] / plain[episode, i] for i in range(1, steps + 1)]
        assert sum(scales) == pytest.approx(7 / 3)
        assert all(s > 0 for s in scales)  # no sign changes


def test_the_ranked_uniform_groups_share_of_an_update_is_capped() -> None:
    """Two failed groups of four, ranked by their votes (16 samples), beside one group with
    both outcomes (2 samples): a share of 1 keeps the mixed group's 2 and 2 of the 16, at
    random; a share that allows them all keeps everything as it was."""
    failed = [
        rollout(10 * g + i, -1, ((v, v, v), (-v, -v, -v)), task=t)
        for g, t in enumerate("ab")
        for i, v in enumerate((1, -1, 1, -1))
    ]
    mixed = [rollout(1, 1, ((1, 1, 1),), task="c"), rollout(2, -1, ((1, 1, 1),), task="c")]
    advantages, _ = policy_advantages(failed + mixed, rank_uniform=True)
    assert sum(a.uniform for a in advantages) == 16 and sum(not a.uniform for a in advantages) == 2
    capped = cap_uniform(advantages, 1.0, random.Random(0))
    assert [a for a in capped if not a.uniform] == [a for a in advantages if not a.uniform]
    assert sum(a.uniform for a in capped) == 2
    assert [a for a in advantages if a in capped] == capped  # the order kept
    assert cap_uniform(advantages, 8.0, random.Random(0)) == advantages


def test_min_group_size_is_respected() -> None:
    rs = [rollout(1, 1, steps=1), rollout(2, -1, steps=1)]
    assert policy_advantages(rs, integrated=False, min_group_size=3)[0] == []


def test_consistency_reward_of_each_vote() -> None:
    assert consistency_rewards(2.0, [1, -1, 0]) == [2.0, -2.0, -2.0]
    assert consistency_rewards(-0.5, [1, -1, 0], unparseable=-3.0) == [-0.5, 0.5, -3.0]


def test_reward_model_advantages_standardise_among_the_votes_of_a_step() -> None:
    # A (success): votes (1, -1, 0) → R = 1 + 0 = 1 → rewards [1, -1, -2]
    #   mean -2/3, deviations [5/3, -1/3, -4/3], std √14/3 → [5, -1, -4]/√14
    # B (failure): votes (-1, -1, -1) → R = -2 → rewards [2, 2, 2] → all zero → dropped
    a = rollout(1, 1, ((1, -1, 0),))
    b = rollout(2, -1, ((-1, -1, -1),))
    votes, tally = reward_model_advantages([a, b])
    r = math.sqrt(14)
    assert {(v.episode_id, v.step, v.vote): v.advantage for v in votes} == pytest.approx(
        {(1, 1, 0): 5 / r, (1, 1, 1): -1 / r, (1, 1, 2): -4 / r}
    )
    assert [v.reward for v in votes] == pytest.approx([1.0, -1.0, -2.0])
    assert tally.zero_samples == 3 and tally.accuracies == [0.5]


def test_only_tasks_with_accuracy_in_the_window_train_the_reward_model() -> None:
    def group(base: int, wins: int, n: int) -> list[Rollout]:
        return [
            rollout(base + i, 1 if i < wins else -1, ((1, -1, 1),), task=str(base))
            for i in range(n)
        ]

    edge = group(100, 1, 5)  # accuracy 0.2: inside (the window is closed)
    below = group(200, 1, 6)  # 0.167: outside
    top = group(300, 4, 5)  # 0.8: inside
    above = group(400, 5, 6)  # 0.833: outside
    votes, tally = reward_model_advantages(edge + below + top + above)
    tasks = {v.episode_id for v in votes}
    assert tasks == {r.episode_id for r in edge + top}
    assert tally.outside_window == 2 and sorted(tally.accuracies) == pytest.approx([0.2, 0.8])
    narrow, _ = reward_model_advantages(edge + top, window=(0.3, 0.7))
    assert narrow == []


def test_votes_must_cover_every_step() -> None:
    with pytest.raises(ValueError, match="expected votes for 2 steps"):
        step_rewards(rollout(1, 1, ((1, 1, 1),), steps=2), lam=1.0, m=3, integrated=True)


def test_credit_to_go_sums_the_votes_of_the_step_and_every_later_one() -> None:
    """Votes +1, −1, +1 (a move forward, undone, made again): to go, the first move earns
    nothing beyond the outcome, the move back −1 + 1, the last its own +1."""
    back_and_forth = rollout(1, -1, ((1, 1, 1), (-1, -1, -1), (1, 1, 1)))
    assert step_rewards(back_and_forth, lam=1.0, m=3, integrated=True, to_go=True) == (
        pytest.approx([0.0, -1.0, 0.0])
    )
    assert step_rewards(back_and_forth, lam=1.0, m=3, integrated=True) == (
        pytest.approx([0.0, -2.0, 0.0])
    )
    # λ scales, m cuts, and outcome-only ignores it as it ignores the votes
    assert step_rewards(back_and_forth, lam=0.5, m=1, integrated=True, to_go=True) == (
        pytest.approx([-0.5, -1.0, -0.5])
    )
    assert step_rewards(back_and_forth, lam=1.0, m=3, integrated=False, to_go=True) == [-1.0] * 3


def test_credit_to_go_ranks_a_move_the_next_one_undoes_below_one_that_is_kept() -> None:
    """Two failed rollouts make the same good first move; one undoes it next. Each step's
    own votes cannot tell their first moves apart; credit to go puts the kept one above."""
    undone = rollout(1, -1, ((1, 1, 1), (-1, -1, -1)))
    kept = rollout(2, -1, ((1, 1, 1), (1, 1, 1)))
    own = found(policy_advantages([undone, kept], rank_uniform=True)[0])
    assert (1, 1) not in own and (2, 1) not in own  # a tie at step 1: no signal
    to_go = found(policy_advantages([undone, kept], rank_uniform=True, to_go=True)[0])
    assert to_go[1, 1] < 0 < to_go[2, 1]
    assert to_go[1, 2] < 0 < to_go[2, 2]  # the move back is still the worse second move
