"""Exact groups (agents/train/exact.py): the trainer plays G rollouts of one task from one
state in G forks of main, against the session's live server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from agents import cli
from agents.client import BigWorldClient
from agents.policy_agent import Decision
from agents.prompts import rank_completion
from agents.train.config import TrainConfig
from agents.train.exact import ExactGroups
from agents.train.rewards import Rollout, group_rollouts, policy_advantages
from agents.train.trainer import Trainer
from world.schemas import AgentCreated

G = 3


@pytest.fixture(scope="module")
def server(own_server):
    """This module's own server: the go_to episodes it plays would change other modules' draws."""
    return own_server


def exact_config(**overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "mode": "outcome_only",
        "exact_groups": G,
        "exact_family": "go_to",
        "device": "cpu",
        "seed": 3,
    }
    return TrainConfig(**{**values, **overrides})  # type: ignore[arg-type]


def fork_names(admin: BigWorldClient) -> set[str]:
    return {w["name"] for w in admin.worlds()}


class Oracle:
    """A scripted player for the fork it plays in: the oracle's action (``right``) or any other
    (``right=False``), recorded as a rank-mode choice of ``version`` at temperature 1."""

    has_weights = False

    def __init__(self, expert: BigWorldClient, version: str, right: bool) -> None:
        self.expert, self.version, self.right = expert, version, right

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        hint = self.expert.expert(episode_id).get("action")
        wrong = [a for a in admissible if a != hint]
        action = hint if self.right and hint in admissible else (wrong or list(admissible))[0]
        k = list(admissible).index(action)
        return Decision(
            k, action, prompt, rank_completion(k + 1, action), mode="rank", temperature=1.0
        )

    def reload(self, path: Path, version: str) -> None:
        """Scripted."""


@pytest.fixture
def oracle_first(server) -> Iterator[Callable[[str, int, str, Path], Oracle]]:
    """A player factory: the first fork's rollout follows the oracle, the others never do,
    so that a group's outcomes differ."""
    clients: list[BigWorldClient] = []

    def make(fork: str, index: int, version: str, path: Path) -> Oracle:
        clients.append(BigWorldClient(server.url, server.admin_token, world=fork))
        return Oracle(clients[-1], version, right=index == 0)

    yield make
    for client in clients:
        client.close()


def test_one_round_plays_one_task_from_one_state_and_leaves_no_fork(
    server, admin: BigWorldClient, agent: AgentCreated, tiny_models: dict[str, Path]
) -> None:
    exact = ExactGroups(server.url, server.admin_token, agent.token)
    forks_before, tick = fork_names(admin), admin.world()["tick"]
    config = exact_config()
    rounds = [
        exact.play(config, path=tiny_models["policy"], version="init", stop=threading.Event())
        for _ in range(2)
    ]
    exact.close()

    assert admin.world()["tick"] == tick  # main never moved
    assert fork_names(admin) == forks_before  # every fork deleted
    keys = []
    for episodes in rounds:
        assert episodes is not None and len(episodes) == G
        first_prompts = {e.steps[0].prompt for e in episodes}  # task text and step-0 observation
        assert len(first_prompts) == 1
        rollouts = [e.rollout for e in episodes]
        assert len({r.task_id for r in rollouts}) == 1 and f"@{tick}/" in rollouts[0].task_id
        assert all(r.episode_id < 0 for r in rollouts)
        assert all(
            s.policy_version == "init" and s.decoding == ("rank", 1.0)
            for e in episodes
            for s in e.steps
        )
        groups = group_rollouts(rollouts, "task")
        assert list(groups.values()) == [rollouts]  # exactly this group
        keys.append(rollouts[0].task_id)
    all_ids = [e.rollout.episode_id for episodes in rounds if episodes for e in episodes]
    assert len(set(all_ids)) == 2 * G  # trainer-unique
    assert keys[0] != keys[1]  # two rounds at one tick never share a group
    assert exact.figures.played == 2 and exact.figures.rollouts == 2 * G


def exact_trainer(
    client: BigWorldClient,
    exact: ExactGroups,
    models: dict[str, Path],
    tmp_path: Path,
    **overrides: object,
) -> Trainer:
    """A trainer that learns from the exact groups ``exact`` plays, without a reward model."""
    return Trainer(
        client,
        exact_config(**overrides),
        policy_dir=models["policy"],
        reward_dir=None,
        out=tmp_path / "train",
        exact=exact,
    )


def test_a_mixed_exact_group_is_what_the_update_trains_on(
    server,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    models: dict[str, Path],
    oracle_first,
    tmp_path: Path,
) -> None:
    player, trainer_agent = make_agent("policy"), make_agent("trainer")
    exact = ExactGroups(server.url, server.admin_token, player.token, make_policy=oracle_first)
    tick = admin.world()["tick"]
    with BigWorldClient(server.url, trainer_agent.token) as client:
        trainer = exact_trainer(client, exact, models, tmp_path, min_samples=1)
        assert trainer.config.group_by == "task"  # an exact group is its fork point's
        first = trainer.learners["policy"].version
        assert trainer.collect() == G
        rollouts = [e.rollout for e in trainer.waiting.values()]
        assert sorted(r.success for r in rollouts) == [False] * (G - 1) + [True]
        advantages, tally = policy_advantages(rollouts, integrated=False, by="task")
        assert tally.groups == 1 and advantages
        assert {a.episode_id for a in advantages} == {r.episode_id for r in rollouts}

        metrics = trainer.update()
        assert metrics is not None and metrics["groups"] == 1 and metrics["exact_mixed"] == 1
        assert not trainer.waiting
        assert trainer.learners["policy"].version != first  # a new version, registered
        latest = client.latest_policy("policy")
        assert str(latest["version"]) == trainer.learners["policy"].version
    exact.close()
    assert admin.world()["tick"] == tick


def test_a_uniform_exact_group_is_dropped_at_once(
    server, make_agent, models: dict[str, Path], tmp_path: Path
) -> None:
    def never(fork: str, index: int, version: str, path: Path) -> Oracle:
        return Oracle(BigWorldClient(server.url, server.admin_token, world=fork), version, False)

    exact = ExactGroups(server.url, server.admin_token, make_agent().token, make_policy=never)
    with BigWorldClient(server.url, make_agent("trainer").token) as client:
        trainer = exact_trainer(client, exact, models, tmp_path, exact_groups=2)
        assert trainer.collect() == 2
        assert not trainer.waiting and trainer.feed.dropped == 2
        assert trainer.update() is None


def test_exact_groups_of_synthetic_rounds_never_merge() -> None:
    """Two rounds of one task at one tick and version stay two groups; each mixed one trains."""
    rollouts = [
        Rollout(-(4 * r + i + 1), f"g3-ab12-{r}@7/task-1", "go_to", "2", 1 if i == 0 else -1, 2)
        for r in range(2)
        for i in range(4)
    ]
    groups = group_rollouts(rollouts, "task")
    assert [len(g) for g in groups.values()] == [4, 4]
    advantages, tally = policy_advantages(rollouts, integrated=False, by="task")
    assert tally.groups == 2 and len(advantages) == 16


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"mode": "integrated_rm"}, "expected mode outcome_only"),
        ({"exact_groups": 1}, "expected exact_groups 0 (off) or >= min_group_size (2), got 1"),
        ({"exact_groups": -1}, "expected exact_groups 0 (off) or >= min_group_size (2), got -1"),
    ],
)
def test_exact_groups_refuse_what_they_cannot_do(overrides: dict, says: str) -> None:
    with pytest.raises(ValueError, match=r".*") as raised:
        TrainConfig(**{"mode": "outcome_only", "exact_groups": 4, **overrides})
    assert says in str(raised.value)


def test_a_trainer_with_exact_groups_needs_their_player(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="an admin's token to fork with"):
        Trainer(None, exact_config(), policy_dir=tmp_path, reward_dir=None, out=tmp_path)  # type: ignore[arg-type]


EXACT = ("train", "--policy", "{tmp}", "--mode", "outcome_only", "--exact-groups", "4")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            (*EXACT, "--token", "t", "--player-token", "p"),
            "--exact-groups forks the world, which only an admin may: give --fork-token",
        ),
        (
            (*EXACT, "--token", "t", "--fork-token", "a"),
            "--exact-groups plays its rollouts as a policy agent: give --player-token",
        ),
        (
            ("train", "--policy", "{tmp}", "--exact-groups", "4", "--token", "t"),
            "exact_groups plays in forks, where no reward agent judges the steps: expected mode "
            "outcome_only, got 'integrated_rm'",
        ),
    ],
)
def test_exact_groups_misuse_on_the_command_line(
    argv: tuple[str, ...], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err.strip().splitlines()[-1], err


def test_the_flag_has_its_comment_as_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--exact-groups EXACT_GROUPS G >= 2: learn only from exact groups" in text
    assert "--fork-token" in text and "--exact-family" in text
