"""bigworld as a verifiers environment (needs the ``interop`` extra): each rollout is one
ordinary bigworld episode, each model turn one step.

verifiers 0.4.0 builds environments from a taskset, its tasks and an ``Env`` whose ``run``
plays the user's side of the conversation. Here the world plays it:

- a task is one episode to play: ``reset(token=..., family=...)`` on an OpenEnv session at
  ``/openenv`` begins it where the avatar stands (the world is never reset);
- each user turn is the policy prompt ``bigworld agent run`` shows (task, recent steps, the
  observation, the numbered admissible actions); the model answers ``\\boxed{k}``, which is
  one step (an answer that does not parse takes the first action, flagged as a parse failure,
  as agent run does);
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
import time
from collections.abc import Iterator
from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import Field

from agents.openenv_client import BigWorldAction, BigWorldOpenEnv
from agents.prompts import Turn, first_observation_task, parse_choice, policy_prompt
from world.contract import DEFAULT_SERVER

__all__ = ["BigWorldEnv", "BigWorldTaskset", "load_environment"]
TASKSET_ID = "bigworld-verifiers"  # the top-level module bigworld_verifiers re-exports this one

SYSTEM_PROMPT = (
    "You act in a persistent text world. Each message shows your task, what you see and the "
    "numbered actions you may take. Answer with the number of one action as \\boxed{k}."
)


class BigWorldConfig(vf.TasksetConfig):
    """Where the world is and which episodes to play."""

    url: str = DEFAULT_SERVER
    """The bigworld server (its OpenEnv endpoint is ``{url}/openenv``)."""
    token: str = ""
    """A policy agent's bearer token: its avatar plays every episode."""
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


class BigWorldEnv(vf.Env[BigWorldEnvConfig]):
    """One task, one episode: the world answers each of the model's turns with a step.
    Episodes of one token play one after another: its avatar holds one open episode."""

    def __init__(self, config: BigWorldEnvConfig) -> None:
        super().__init__(config)
        self._avatars: dict[str, asyncio.Lock] = {}  # token → its avatar's turn

    async def run(self, task: BigWorldTask, agents: Any) -> None:
        async with self._avatars.setdefault(task.data.token, asyncio.Lock()):
            await self._play(task, agents)

    async def _play(self, task: BigWorldTask, agents: Any) -> None:
        data = task.data
        async with BigWorldOpenEnv(base_url=f"{data.url}/openenv") as env:
            result = await env.reset(token=data.token, family=data.family)
            first = result.observation
            task_text = first_observation_task(first.text)
            text, admissible = first.text, first.admissible_actions
            history: list[Turn] = []
            parse_failures = 0
            async with agents.player.interaction(task) as interaction:
                prompt = policy_prompt(task_text, history, text, admissible)
                segment = await interaction.turn(prompt)
                # a terminated segment (the agent's caps) ends the episode too: closing the
                # session abandons it
                while not segment.terminated:
                    answer = segment.last_reply or ""
                    parsed = parse_choice(answer, len(admissible))
                    parse_failures += not parsed.ok
                    action = admissible[parsed.value or 0]
                    result = await env.step(
                        BigWorldAction(
                            action=action,
                            policy_version=data.policy_version,
                            prompt=prompt,
                            completion=answer,
                            parse_failed=not parsed.ok,
                            mode="generate",
                        )
                    )
                    history.append(Turn(action, result.observation.text))
                    if result.done:
                        break
                    text = result.observation.text
                    admissible = result.observation.admissible_actions
                    prompt = policy_prompt(task_text, history, text, admissible)
                    segment = await interaction.turn(prompt)
        trace = interaction.trace
        outcome = 1.0 if (result.reward or 0) > 0 else -1.0
        trace.record_reward("outcome", outcome)
        trace.info.update(
            episode_id=first.episode_id,
            steps=len(history),
            parse_failures=parse_failures,
            done=result.done,
        )
        votes = await episode_votes(data.url, data.token, first.episode_id, data.votes_wait_s)
        if votes is not None:
            trace.record_reward("votes", votes, data.lam)


async def episode_votes(url: str, token: str, episode_id: int, wait_s: float) -> float | None:
    """The mean vote (+1/-1) of the reward agents' judgments of an episode's steps, waiting up
    to ``wait_s`` for its first; None when none came."""
    deadline = time.monotonic() + wait_s
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        while True:
            answer = await http.get(f"/v1/episodes/{episode_id}")
            answer.raise_for_status()
            scores = [j["score"] for j in answer.json()["judgments"] if j["score"] is not None]
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
