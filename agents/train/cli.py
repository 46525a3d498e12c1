"""``bigworld train``: run the continual trainer against a world server.

Every field of :class:`~agents.train.config.TrainConfig` is a flag of the same name
(``--kl-beta 0.02``, ``--no-include-abandoned``), its help text and choices the field's own.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

from agents.cli import (
    add_server_options,
    add_thread_option,
    at_least,
    check_token,
    client_for,
    command,
    limit_threads,
    stop_on_signals,
)
from agents.client import BigWorldClient, RetryPolicy
from agents.train.config import TrainConfig


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """A flag per :class:`TrainConfig` field, its help and choices the field's own."""
    group = parser.add_argument_group("training configuration (TrainConfig)")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        text = f.metadata["help"].replace("%", "%%") + " (default: %(default)s)"
        if f.metadata["choices"]:
            group.add_argument(flag, choices=f.metadata["choices"], default=default, help=text)
        elif isinstance(default, bool):
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=default, help=text
            )
        elif isinstance(default, tuple):
            kind = type(default[0]) if default else str
            nargs = len(default) if f.name == "accuracy_window" else "+"
            group.add_argument(flag, type=kind, nargs=nargs, default=default, help=text)
        elif default is None:
            group.add_argument(flag, default=None, help=text)
        else:
            group.add_argument(flag, type=type(default), default=default, help=text)


def config_from(args: argparse.Namespace) -> TrainConfig:
    values: dict[str, Any] = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    for name in ("accuracy_window", "lora_targets"):
        values[name] = tuple(values[name])
    return TrainConfig(**values)


@command("train")
def register_train(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = sub.add_parser(
        "train",
        help="run the continual trainer",
        description="Follow ended, judged episodes on a world server; update the policy with "
        "integrated step-wise and outcome feedback (PPO-clip + k3 KL) and, in integrated_rm "
        "mode, the reward model with consistency feedback; save, register and prune versions "
        "that running agents reload. Runs forever unless --iterations; resumes from --out.",
    )
    train.add_argument("--policy", type=Path, required=True, help="starting policy directory")
    train.add_argument("--reward", type=Path, help="starting reward-model directory")
    train.add_argument(
        "--out", type=Path, default=Path("bigworld-train"), help="checkpoints and state"
    )
    train.add_argument("--iterations", type=at_least(1), help="stop after this many updates")
    train.add_argument("--seconds", type=at_least(0, float), help="stop after this long")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument(
        "--player-token",
        help="a policy agent's token: the warm start plays --warm-start-play episodes with it, "
        "following the oracle's hints (read with --token, a trainer's); --exact-groups plays "
        "its rollouts with it in forks, from where its avatar stands in main",
    )
    train.add_argument(
        "--fork-token",
        help="an admin's token: --exact-groups makes and deletes its forks of main with it",
    )
    add_server_options(train)
    add_thread_option(train)
    add_config_options(train)
    train.set_defaults(run=run_train)


def run_train(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        config = config_from(args)
    except ValueError as exc:  # TrainConfig's own checks, across fields
        args.parser.error(f"the training configuration's flags do not fit together: {exc}")
    if config.trains_reward_model and args.reward is None:
        args.parser.error(
            "--mode integrated_rm trains the reward model: give --reward, or another --mode"
        )
    if config.warm_start_play > 0 and args.player_token is None:
        args.parser.error("--warm-start-play plays as a policy agent: give --player-token")
    if config.exact_groups and args.fork_token is None:
        args.parser.error(
            "--exact-groups forks the world, which only an admin may: give --fork-token"
        )
    if config.exact_groups and args.player_token is None:
        args.parser.error(
            "--exact-groups plays its rollouts as a policy agent: give --player-token"
        )
    for flag, path in (("--policy", args.policy), ("--reward", args.reward)):
        if path is not None and not (path / "config.json").is_file():
            args.parser.error(f"expected a model directory with config.json at {flag}, got {path}")
    limit_threads(args.threads)
    from agents.train.trainer import Trainer  # torch loads here, on the threads just set

    client = client_for(args)
    check_token(client)
    player = client_for(args, args.player_token) if args.player_token else None
    exact = None
    if config.exact_groups:
        from agents.train.exact import ExactGroups

        check_token(client_for(args, args.fork_token))
        exact = ExactGroups(
            args.server,
            args.fork_token,
            args.player_token,
            retry=RetryPolicy(budget_s=args.retry_s),
        )
    trainer = Trainer(
        client,
        config,
        policy_dir=args.policy,
        reward_dir=args.reward,
        out=args.out,
        demonstrator=expert_player(player, client),
        exact=exact,
    )

    stop_on_signals(trainer.stop, args.seconds)
    try:
        history = trainer.run(args.iterations, progress=not args.no_progress)
    finally:
        if exact is not None:
            exact.close()  # forks a failed deletion left behind
    latest = {k: v.version for k, v in trainer.state.latest.items()}
    print(json.dumps({"updates": len(history), "latest": latest, "out": str(args.out)}))
    return 0


def expert_player(player: BigWorldClient | None, expert: BigWorldClient) -> Any:
    """Plays n episodes as the policy agent of ``player``'s token on the hints ``expert`` (a
    trainer's client) gets from ``GET /v1/episodes/{id}/expert``; None without a player."""
    if player is None:
        return None

    def play(n: int) -> None:
        from agents.policy_agent import ExpertPolicy, PolicyRunner, RunnerConfig

        PolicyRunner(player, ExpertPolicy(expert), RunnerConfig(max_episodes=n)).run()

    return play
