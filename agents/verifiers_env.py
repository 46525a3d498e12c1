"""bigworld as a verifiers environment (needs the ``interop`` extra): each rollout is one
ordinary bigworld episode, each model turn one step.

verifiers 0.4.0 builds environments from a taskset, its tasks and an ``Env`` whose ``run``
plays the user's side of the conversation. Here the world plays it, over the REST API:

- a task is one episode to play, begun (``POST /v1/episodes``, of ``family``) where one of
  the token's agent's avatars stands (the world is never reset);
- each user turn is the policy prompt ``bigworld agent run`` shows (task, recent steps, the
  observation, the numbered admissible actions); the model answers ``\\boxed{k}``, which is
  one step (an answer that does not parse takes the first action, flagged as a parse failure,
  as agent run does); an interaction that ends before its episode abandons the episode;
- verifiers plays rollouts concurrently: a token plays as many episodes at once as its agent
  may hold open (``max_open_episodes``, which an admin sets; 1 by default), and the steps its
  concurrent rollouts take go to the world together, in ``POST /v1/steps`` batches
  (:class:`agents.client.StepBatcher`);
- rewards: ``outcome``, the episode's (+1 succeeded, -1 failed), and, where reward agents
  judged its steps, ``votes``: the mean of their votes (each +1 or -1) over the judged steps,
  weighted ``lam`` (design §7's ``R = O + λ·mean S``). Judges vote after an episode ends, so
  the environment waits up to ``votes_wait_s`` for them (0: it looks once and does not wait).

Run it with verifiers' own evaluation entry point, the model behind any OpenAI-compatible
endpoint::

    PATH="$PWD/.venv/bin:$PATH" vf-eval bigworld-verifiers \\
        --env.taskset.url http://127.0.0.1:8000 --env.taskset.token "$BIGWORLD_TOKEN" \\
        --env.taskset.family go_to --env.taskset.episodes 4 -m my-model \\
        --client.base-url http://127.0.0.1:8001/v1 --client.api-key-var OPENAI_API_KEY \\
        --no-push --no-rich

or build it in Python with :func:`load_environment`. The model's turns run through verifiers'
``null`` harness (a plain chat loop) in a local subprocess, which ``uv`` prepares: it must be
on ``PATH``. No sandbox is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from agents.client import AsyncBigWorldClient, StepBatcher
from agents.errors import ConflictError
from agents.prompts import Turn, parse_choice, policy_prompt
from world.contract import DEFAULT_SERVER
from world.schemas import StepOut

__all__ = ["BigWorldEnv", "BigWorldTaskset", "load_environment"]
TASKSET_ID = "bigworld-verifiers"  # the top-level module bigworld_verifiers re-exports this one

SYSTEM_PROMPT = (
    "You act in a persistent text world. Each message shows your task, what you see and the "
    "numbered actions you may take. Answer with the number of one action as \\boxed{k}."
)


class BigWorldConfig(vf.TasksetConfig):
    """Where the world is and which episodes to play."""

    url: str = DEFAULT_SERVER
    """The bigworld server."""
    token: str = ""
    """A policy agent's bearer token: its avatars play every episode."""
    family: str | None = "go_to"
    """The task family each episode asks for (None: the forge's choice)."""
    episodes: int = Field(8, ge=1)
    """How many episodes the taskset holds (each task is one episode to play)."""
    policy_version: str = "verifiers"
    """The version the world records on each step."""
    lam: float = 1.0
    """λ: the weight of the reward agents' mean vote beside the outcome."""
    votes_wait_s: float = Field(0.0, ge=0.0)
    """How long to wait after an episode for reward agents' votes (0: look once, no wait)."""


class BigWorldData(vf.TaskData):
    url: str
    token: str
    family: str | None
    policy_version: str
    lam: float
    votes_wait_s: float


class BigWorldTask(vf.Task[BigWorldData]):
    pass


class BigWorldTaskset(vf.Taskset[BigWorldTask, BigWorldConfig]):
    def load(self) -> Iterator[BigWorldTask]:
        config = self.config
        if not config.token:
            raise ValueError("expected --env.taskset.token <a policy agent's bearer token>")
        for idx in range(config.episodes):
            yield BigWorldTask(
                BigWorldData(
                    name=f"bigworld-{config.family or 'any'}#{idx}",
                    prompt=None,  # the episode's first observation is the first user turn
                    system_prompt=SYSTEM_PROMPT,
                    url=config.url.rstrip("/"),
                    token=config.token,
                    family=config.family,
                    policy_version=config.policy_version,
                    lam=config.lam,
                    votes_wait_s=config.votes_wait_s,
                ),
                config.task,
            )


class BigWorldEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(
        harness={"id": "null"},  # type: ignore[arg-type]  # narrowed to its config by id
        runtime=vf.SubprocessConfig(),
    )


class _Player:
    """One token's client; its concurrent rollouts' steps, sent together; and its seats, as
    many as its agent may hold open episodes (read once, on the first rollout)."""

    def __init__(self, url: str, token: str) -> None:
        self.client = AsyncBigWorldClient(url, token)
        self.batcher = StepBatcher(self.client)
        self._seats: asyncio.Semaphore | None = None
        self._reading = asyncio.Lock()

    async def seats(self) -> asyncio.Semaphore:
        async with self._reading:
            if self._seats is None:
                self._seats = asyncio.Semaphore((await self.client.me()).max_open_episodes)
        return self._seats


class BigWorldEnv(vf.Env[BigWorldEnvConfig]):
    """One task, one episode: the world answers each of the model's turns with a step. A
    token plays as many episodes at once as its agent may hold open; its concurrent rollouts'
    steps go to the world in batches."""

    def __init__(self, config: BigWorldEnvConfig) -> None:
        super().__init__(config)
        self._players: dict[tuple[str, str], _Player] = {}  # (url, token) → its player

    async def run(self, task: BigWorldTask, agents: Any) -> None:
        data = task.data
        player = self._players.get((data.url, data.token))
        if player is None:
            player = self._players[(data.url, data.token)] = _Player(data.url, data.token)
        async with await player.seats():  # released as the episode ends
            trace, episode_id = await self._play(task, agents, player)
        votes = await episode_votes(player.client, episode_id, data.votes_wait_s)
        if votes is not None:
            trace.record_reward("votes", votes, data.lam)

    async def stop(self) -> None:
        """Close the players' clients."""
        for player in self._players.values():
            await player.client.aclose()
        self._players.clear()

    async def _play(self, task: BigWorldTask, agents: Any, player: _Player) -> tuple[vf.Trace, int]:
        """Play the task's episode; its trace (its outcome and info recorded) and its id."""
        data = task.data
        start = await player.client.begin_episode(family=data.family)
        text, admissible = start.observation, start.admissible_actions
        history: list[Turn] = []
        parse_failures = 0
        result: StepOut | None = None
        try:
            async with agents.player.interaction(task) as interaction:
                prompt = policy_prompt(start.task.text, history, text, admissible)
                segment = await interaction.turn(prompt)
                while not segment.terminated:  # the agent's caps end the interaction early
                    answer = segment.last_reply or ""
                    parsed = parse_choice(answer, len(admissible))
                    parse_failures += not parsed.ok
                    action = admissible[parsed.value or 0]
                    record = {
                        "policy_version": data.policy_version,
                        "prompt": prompt,
                        "completion": answer,
                        "parse_failed": not parsed.ok,
                        "mode": "generate",
                    }
                    result = await player.batcher.step(
                        start.episode_id, len(history) + 1, action, record
                    )
                    history.append(Turn(action, result.observation))
                    if result.done:
                        break
                    text, admissible = result.observation, result.admissible_actions
                    prompt = policy_prompt(start.task.text, history, text, admissible)
                    segment = await interaction.turn(prompt)
        finally:
            if result is None or not result.done:  # the interaction ended first, or failed
                with contextlib.suppress(ConflictError):  # it ended meanwhile
                    await player.client.abandon(start.episode_id)
        trace = interaction.trace
        trace.record_reward("outcome", 1.0 if result is not None and result.success else -1.0)
        trace.info.update(
            episode_id=start.episode_id,
            steps=len(history),
            parse_failures=parse_failures,
            done=result is not None and result.done,
        )
        return trace, start.episode_id


async def episode_votes(
    client: AsyncBigWorldClient, episode_id: int, wait_s: float
) -> float | None:
    """The mean vote (+1/-1) of the reward agents' judgments of an episode's steps, waiting up
    to ``wait_s`` for its first; None when none came."""
    deadline = time.monotonic() + wait_s
    while True:
        judgments = (await client.episode(episode_id))["judgments"]
        scores = [j["score"] for j in judgments if j["score"] is not None]
        if scores:
            return sum(scores) / len(scores)
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.5)


def load_environment(
    url: str,
    token: str,
    family: str | None = "go_to",
    episodes: int = 8,
    **taskset: Any,
) -> BigWorldEnv:
    """The environment over the world at ``url``, played by the policy agent of ``token``:
    ``episodes`` tasks, each one episode of ``family``. Further keyword arguments are the
    taskset's other settings (``policy_version``, ``lam``, ``votes_wait_s``)."""
    config = BigWorldEnvConfig(
        taskset={  # type: ignore[arg-type]  # narrowed to BigWorldConfig by its id
            "id": TASKSET_ID,
            "url": url,
            "token": token,
            "family": family,
            "episodes": episodes,
            **taskset,
        }
    )
    env = vf.load_environment(config)
    assert isinstance(env, BigWorldEnv)
    return env
