"""The rank-mode judge: one scoring pass per step, m votes drawn from the softmax of the two
verdicts' scores, reproducible from the seed; every model judgment posted names its mode and
temperature; ``agent run --mode`` picks the judge's mode."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from live import LiveServer

from agents import commands, prompts
from agents.backends import Generated, Sampling, TransformersModel
from agents.client import BigWorldClient, Record
from agents.policy_agent import PolicyRunner, RandomPolicy, RunnerConfig
from agents.reward_agent import HeuristicJudge, ModelJudge, RewardConfig, RewardRunner
from world.schemas import AgentCreated

torch = pytest.importorskip("torch")

EPISODE: Record = {"id": 41}
STEPS: list[Record] = [
    {
        "step": s,
        "prompt": prompts.policy_prompt("put a mug in fridge 1", [], "You see a mug 1.", acts),
        "completion": prompts.rank_completion(1, acts[0]),
        "action": acts[0],
        "observation": observation,
    }
    for s, acts, observation in [
        (1, ["take mug 1", "look"], "You pick up the mug 1."),
        (2, ["go to fridge 1", "look"], "You arrive at the fridge 1."),
    ]
]


@pytest.fixture(scope="module")
def model(tiny_models: dict[str, Path]) -> TransformersModel:
    return TransformersModel(tiny_models["reward"], device="cpu")


def _verdict_scores(model: TransformersModel, step: Record) -> list[float]:
    """Each verdict's mean token log-prob after the reward prompt (the rank score), from a
    plain forward pass over prompt + verdict + eos (not through ``score``'s packed rows)."""
    prompt = prompts.reward_prompt(
        step["prompt"], step["completion"], step["action"], step["observation"]
    )
    tokenizer = model.tokenizer
    head = tokenizer(prompt).input_ids
    scores = []
    for verdict in prompts.VERDICTS:
        ids = head + tokenizer(prompts.verdict_completion(verdict)).input_ids
        ids.append(tokenizer.eos_token_id)
        with torch.no_grad():
            logits = model.model(input_ids=torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits.float(), dim=-1)
        picked = [float(logp[i - 1, ids[i]]) for i in range(len(head), len(ids))]
        scores.append(sum(picked) / len(picked))
    return scores


def test_rank_votes_follow_the_softmax_of_the_two_verdict_scores(
    model: TransformersModel,
) -> None:
    step = STEPS[0]
    good, bad = _verdict_scores(model, step)
    gap = good - bad
    assert abs(gap) > 1e-3  # the two verdicts differ, so the temperature matters
    many = 4000
    for logit in (1.5, 0.5):  # temperatures putting p(+1) near 0.82 and 0.62 (or 0.18, 0.38)
        temperature = abs(gap) / logit
        want = 1 / (1 + math.exp(-gap / temperature))
        judge = ModelJudge(model, Sampling(temperature, seed=3), "rank")
        (votes,) = judge.judge(EPISODE, [step], many)
        assert len(votes) == many
        share = sum(v.score == 1 for v in votes) / many
        assert share == pytest.approx(want, abs=0.03)  # ~4 standard deviations
        assert {v.score for v in votes} == {1, -1}  # never 0: nothing to parse
        for v in votes:
            assert v.rationale == prompts.verdict_completion(v.score)  # what the trainer scores
            assert (v.mode, v.temperature) == ("rank", temperature)
    greedy = ModelJudge(model, Sampling(0.0), "rank").judge(EPISODE, [step], 20)[0]
    assert {v.score for v in greedy} == {1 if gap > 0 else -1}


def test_rank_votes_repeat_with_the_seed_whatever_the_batch_and_differ_across_votes(
    model: TransformersModel,
) -> None:
    good, bad = _verdict_scores(model, STEPS[1])
    sampling = Sampling(temperature=abs(good - bad) / 0.5, seed=7)  # p(+1) near 0.62 or 0.38
    votes = ModelJudge(model, sampling, "rank").judge(EPISODE, STEPS, 50)
    again = ModelJudge(model, sampling, "rank").judge(EPISODE, STEPS, 50)
    assert again == votes
    assert ModelJudge(model, sampling, "rank").judge(EPISODE, STEPS[1:], 50) == votes[1:]
    assert all(len({v.score for v in step}) == 2 for step in votes)  # drawn, not copied
    other = ModelJudge(model, Sampling(sampling.temperature, seed=8), "rank")
    assert other.judge(EPISODE, STEPS, 50) != votes


class Counting:
    """Wraps a model to count the calls a judge makes."""

    def __init__(self, inner: TransformersModel) -> None:
        self.inner, self.version = inner, inner.version
        self.scored: list[Sequence[str]] = []

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        raise AssertionError("a rank judge only scores")

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        self.scored.append(list(completions))
        return self.inner.score(prompt, completions)

    def reload(self, path: Path, version: str) -> None:
        raise AssertionError("not reloaded here")


def test_a_rank_judge_scores_each_step_once_on_the_two_verdicts(model: TransformersModel) -> None:
    counting = Counting(model)
    ModelJudge(counting, Sampling(1.0), "rank").judge(EPISODE, STEPS, 3)
    verdicts = [prompts.verdict_completion(v) for v in prompts.VERDICTS]
    assert counting.scored == [verdicts] * len(STEPS)


class Recorder:
    """A client serving one episode and recording the judgments posted to it."""

    def __init__(self) -> None:
        self.posted: list[Record] = []

    def episode(self, episode_id: int | str) -> Record:
        return {**EPISODE, "distance": 3, "judgments": [], "steps": STEPS}

    def post_judgments(self, episode_id: int | str, judgments: list[Record]) -> Record:
        self.posted.extend(judgments)
        return {"accepted": len(judgments)}


@pytest.mark.parametrize("mode", ["rank", "generate"])
def test_every_model_judgment_posted_names_its_mode_and_temperature(
    model: TransformersModel, mode: str
) -> None:
    recorder = Recorder()
    judge = ModelJudge(model, Sampling(0.7, max_new_tokens=4, seed=1), mode)
    runner = RewardRunner(recorder, judge, RewardConfig(votes=2))  # type: ignore[arg-type]
    assert runner.judge_episode(EPISODE["id"]) == 4
    assert [(j["step"], j["vote"]) for j in recorder.posted] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for j in recorder.posted:
        assert (j["mode"], j["temperature"]) == (mode, 0.7)
        assert j["model_version"] == model.version
        if mode == "rank":
            assert j["rationale"] == prompts.verdict_completion(j["score"])


def test_a_scripted_judge_posts_no_mode_or_temperature() -> None:
    recorder = Recorder()
    runner = RewardRunner(recorder, HeuristicJudge(), RewardConfig(votes=2))  # type: ignore[arg-type]
    assert runner.judge_episode(EPISODE["id"]) == 4
    assert not any({"mode", "temperature"} & set(j) for j in recorder.posted)


def test_a_live_server_stores_the_rank_judges_mode_and_temperature(
    model: TransformersModel,
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
) -> None:
    player = make_agent()
    with BigWorldClient(server.url, player.token) as client:
        PolicyRunner(client, RandomPolicy(0), RunnerConfig(max_episodes=1)).run()
    (episode,) = (e["id"] for e in admin.episodes(agent=player.id))
    judge = ModelJudge(model, Sampling(2.0, seed=0), "rank")
    with BigWorldClient(server.url, make_agent("reward").token) as reward:
        RewardRunner(reward, judge, RewardConfig(votes=2)).judge_episode(episode)
    stored = admin.episode(episode)["judgments"]
    assert stored and {(j["mode"], j["temperature"]) for j in stored} == {("rank", 2.0)}
    assert all(j["rationale"] == prompts.verdict_completion(j["score"]) for j in stored)


def _runner(*argv: str) -> RewardRunner:
    parser = argparse.ArgumentParser()
    commands.register_agent(parser.add_subparsers())
    args = parser.parse_args(["agent", "run", "--role", "reward", "--token", "t", *argv])
    runner = commands.build_runner(args)
    assert isinstance(runner, RewardRunner)
    return runner


def test_agent_run_judges_in_rank_mode_unless_told_to_generate(
    tiny_models: dict[str, Path],
) -> None:
    model = ("--backend", "transformers", "--model", str(tiny_models["reward"]), "--device", "cpu")
    judge = _runner(*model, "--temperature", "0.5").judge
    assert isinstance(judge, ModelJudge)
    assert (judge.mode, judge.sampling.temperature) == ("rank", 0.5)
    judge = _runner(*model, "--mode", "generate").judge
    assert isinstance(judge, ModelJudge) and judge.mode == "generate"
    assert isinstance(_runner("--backend", "heuristic").judge, HeuristicJudge)


def test_a_judge_far_behind_lists_only_its_backlog_window() -> None:
    """3,000 episodes short of votes: the first listing reads them all, and from then on each
    listing starts ``backlog`` ids before the newest one seen, however many are left behind."""

    class Lister(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.short = list(range(1, 3001))
            self.listed: list[int] = []

        def episodes(self, **filters: Any) -> Iterator[Record]:
            after = int(filters.get("cursor") or 0)
            rows = [{"id": i} for i in self.short if i > after]
            self.listed.append(len(rows))
            return iter(rows)

    lister = Lister()
    runner = RewardRunner(lister, HeuristicJudge(), RewardConfig(votes=2, backlog=100))  # type: ignore[arg-type]
    runner.judge_episode = lambda episode_id: 0  # type: ignore[method-assign, assignment]
    assert runner.run_once() == 3000
    lister.short += [3001, 3002]
    assert runner.run_once() == 102
    assert lister.listed == [3000, 102]
