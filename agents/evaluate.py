"""``bigworld eval``: two policies compared on identical starts, from forks of one world.

A persistent world never shows two policies the same situation, so an ordinary comparison
carries the noise of different starts. Here every pair of episodes starts from one state:
the world forked twice at one tick, one agent's avatar, one task (drawn in the pair's first
fork as any episode's is, then asked for by name in the second). Pair i plays policy A in
one fork and policy B in the other. The starts differ between pairs through the agents: pair
i plays as the i-th of the agents given (in turn), each where its avatar stood at the tick.
What a pair shares cancels in its difference, so the paired interval is narrower than the
unpaired one of the same episode count, by as much as the starts decide success.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.backends import Sampling
from agents.cli import (
    add_server_options,
    add_thread_option,
    at_least,
    client_for,
    command,
    limit_threads,
    world_name,
)
from agents.client import BigWorldClient, Record
from agents.errors import ClientError, ConflictError
from world.contract import MAIN_WORLD
from world.stats import Difference, paired_difference, unpaired_difference, wilson

SCRIPTED = ("random", "explorer", "expert")


@dataclass(frozen=True)
class Pair:
    task: str  # the task's text
    fork_a: str
    fork_b: str
    success_a: bool
    success_b: bool
    steps_a: int
    steps_b: int


@command("eval")
def register_eval(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "eval",
        help="compare two policies on identical starts (forks)",
        description="Fork a world --forks times at one tick; in each pair of forks play "
        "policy A in one and policy B in the other, as one agent on one task (the agents "
        "given take the pairs in turn); print each policy's success and the paired "
        "difference with its 95%% interval, beside the unpaired interval of the same episode "
        "count. Needs an admin token (--token) to fork and policy agents' tokens "
        "(--agent-token) to play; the forks are deleted afterwards unless --keep-forks.",
    )
    parser.add_argument(
        "--policies",
        nargs=2,
        required=True,
        metavar=("A", "B"),
        help=f"each one of {', '.join(SCRIPTED)} or a model directory (played in rank mode)",
    )
    parser.add_argument(
        "--forks", type=at_least(2), required=True, help="forks to make (even: two per pair)"
    )
    parser.add_argument(
        "--world", type=world_name, default=MAIN_WORLD, help="the world to fork (default main)"
    )
    parser.add_argument(
        "--at-tick", type=at_least(0), help="the tick to fork at (default: the world's current)"
    )
    parser.add_argument("--family", help="play tasks of this family (default: any)")
    parser.add_argument(
        "--agent-token",
        dest="agent_tokens",
        action="append",
        help="a policy agent that plays both sides of a pair; give several (pair i plays as "
        "the i-th, in turn) for starts that differ between pairs (env BIGWORLD_AGENT_TOKENS, "
        "comma-separated)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the policies' random draws")
    parser.add_argument("--temperature", type=at_least(0, float), default=1.0)
    parser.add_argument("--keep-forks", action="store_true", help="do not delete the forks")
    parser.add_argument("--json", type=Path, help="also write every pair and figure here")
    add_server_options(parser)
    add_thread_option(parser)
    parser.set_defaults(run=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    if args.forks % 2:
        args.parser.error(f"expected an even --forks (two per pair), got {args.forks}")
    tokens = args.agent_tokens or [
        t for t in os.environ.get("BIGWORLD_AGENT_TOKENS", "").split(",") if t
    ]
    if not tokens:
        args.parser.error("give --agent-token: a policy agent that plays (several for variety)")
    for spec in args.policies:
        if spec not in SCRIPTED and not (Path(spec) / "config.json").is_file():
            args.parser.error(
                f"expected a policy in {SCRIPTED} or a model directory with config.json, "
                f"got {spec!r}"
            )
    admin = client_for(args)
    if args.at_tick is None:
        with client_for(args, world=args.world) as source:
            tick = source.world()["tick"]
    else:
        tick = args.at_tick
    policies = [policy_maker(spec, args, side) for side, spec in enumerate(args.policies)]
    prefix = f"eval-{secrets.token_hex(3)}"
    pairs: list[Pair] = []
    idle: set[int] = set()  # agents with no task of the family where they stood
    turn = 0
    while len(pairs) < args.forks // 2:
        if len(idle) == len(tokens):
            raise SystemExit(
                f"bigworld: no task{_of(args.family)} can be drawn where the agents' avatars "
                f"stood at tick {tick} of {args.world!r}: give another --family, --at-tick "
                "or agents"
            )
        agent, turn = turn % len(tokens), turn + 1
        if agent in idle:
            continue
        pair = play_pair(admin, args, tick, f"{prefix}-{len(pairs)}", tokens[agent], policies)
        if pair is None:
            idle.add(agent)
            continue
        pairs.append(pair)
        print(f"pair {len(pairs)}: {pair.task}: A {pair.success_a}, B {pair.success_b}")
    result = summary(args, tick, pairs)
    print(report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _of(family: str | None) -> str:
    return f" of family {family!r}" if family else ""


def policy_maker(spec: str, args: argparse.Namespace, side: int) -> Callable[[str], Any]:
    """A function of a fork's name giving the policy that plays there. A model loads once."""
    from agents import policy_agent

    seed = args.seed * 2 + side
    if spec == "random":
        return lambda world: policy_agent.RandomPolicy(seed)
    if spec == "explorer":
        return lambda world: policy_agent.ExplorerPolicy(seed)
    if spec == "expert":  # the oracle's hints are read in the fork, as admin
        return lambda world: policy_agent.ExpertPolicy(client_for(args, world=world))
    from agents.backends import TransformersModel

    limit_threads(args.threads)
    model = policy_agent.ModelPolicy(
        TransformersModel(Path(spec)), "rank", Sampling(args.temperature, 64, seed)
    )
    return lambda world: model


def play_pair(
    admin: BigWorldClient,
    args: argparse.Namespace,
    tick: int,
    name: str,
    token: str,
    policies: list[Callable[[str], Any]],
) -> Pair | None:
    """Fork twice at ``tick``; as the agent of ``token``, play A in ``name-a`` on a task
    drawn there and B in ``name-b`` on the same task. None when no task can be drawn where
    the agent stood: it has no pair to play."""
    from agents.policy_agent import PolicyRunner, RunnerConfig

    made: list[str] = []
    ended: list[Record] = []
    played, spec, text = False, None, ""
    try:
        for side, make in zip("ab", policies, strict=True):
            world = f"{name}-{side}"
            admin.fork_world(args.world, tick, world, state_hash=False)
            made.append(world)
            with client_for(args, token, world=world) as there:
                if spec is None:
                    try:
                        start = there.begin_episode(family=args.family)
                    except ConflictError as exc:
                        if exc.code == "no_task":
                            return None
                        raise
                    spec = {"family": start.task.family, "params": start.task.params}
                    text = start.task.text
                else:  # the same state: the same task can be begun, or something is wrong
                    there.begin_episode(task=spec)
                runner = PolicyRunner(  # it resumes the episode just begun
                    there, make(world), RunnerConfig(max_episodes=1, follow_versions=False)
                )
                record = runner.play_episode()
            if record is None:
                raise ClientError(f"the episode in fork {world} was ended from outside")
            ended.append(record)
        played = True
    finally:
        if not (played and args.keep_forks):
            for world in made:
                admin.delete_world(world)
    a, b = ended
    return Pair(
        text,
        made[0],
        made[1],
        bool(a["success"]),
        bool(b["success"]),
        int(a["steps"]),
        int(b["steps"]),
    )


def _rate(wins: int, n: int) -> dict[str, Any]:
    low, high = wilson(wins, n)
    return {"successes": wins, "episodes": n, "rate": wins / n, "low": low, "high": high}


def _interval(d: Difference) -> dict[str, float]:
    return {"difference": d.estimate, "low": d.low, "high": d.high, "width": d.width}


def summary(args: argparse.Namespace, tick: int, pairs: list[Pair]) -> dict[str, Any]:
    n = len(pairs)
    wins_a = sum(p.success_a for p in pairs)
    wins_b = sum(p.success_b for p in pairs)
    paired = paired_difference([(p.success_a, p.success_b) for p in pairs])
    unpaired = unpaired_difference(wins_a, n, wins_b, n)
    return {
        "world": args.world,
        "at_tick": tick,
        "family": args.family,
        "policies": {"A": args.policies[0], "B": args.policies[1]},
        "pairs": n,
        "A": _rate(wins_a, n),
        "B": _rate(wins_b, n),
        "paired": _interval(paired),
        "unpaired": _interval(unpaired),
        "narrower": 1 - paired.width / unpaired.width if unpaired.width else 0.0,
        "discordant": {
            "A_only": sum(p.success_a and not p.success_b for p in pairs),
            "B_only": sum(p.success_b and not p.success_a for p in pairs),
        },
        "played": [asdict(p) for p in pairs],
    }


def report(result: dict[str, Any]) -> str:
    def rate(side: str) -> str:
        r = result[side]
        return (
            f"{side} {result['policies'][side]}: {r['successes']}/{r['episodes']} = "
            f"{r['rate']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
        )

    def difference(name: str) -> str:
        d = result[name]
        return (
            f"{name:>8} A - B: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] "
            f"(width {d['width']:.3f})"
        )

    return "\n".join(
        (
            f"{result['pairs']} pairs of forks of {result['world']} at tick {result['at_tick']}"
            f"{_of(result['family'])}; 95% intervals",
            rate("A"),
            rate("B"),
            difference("paired"),
            difference("unpaired"),
            f"the paired interval is {100 * result['narrower']:.0f}% narrower than the unpaired "
            f"one ({result['discordant']['A_only']} pairs only A succeeded in, "
            f"{result['discordant']['B_only']} only B)",
        )
    )
