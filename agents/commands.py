"""``bigworld agent run`` and ``bigworld model init``: the agent processes' command lines."""

from __future__ import annotations

import argparse
import json
import logging
import os
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

ROLES = ("policy", "reward")
BACKENDS = ("random", "explorer", "expert", "heuristic", "transformers", "vllm", "vllm-server")


@command("model")
def register_model(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    model = sub.add_parser("model", help="build tiny models", description="Build models locally.")
    verbs = model.add_subparsers(dest="verb", required=True, metavar="VERB")
    init = verbs.add_parser(
        "init",
        help="build a tiny model and tokenizer from the world's vocabulary",
        description="Build a tiny Qwen2-architecture model and a tokenizer trained on the "
        "world's own texts, saved with save_pretrained (nothing is downloaded).",
    )
    init.add_argument("--kind", choices=("policy", "reward"), required=True)
    init.add_argument("--out", type=Path, required=True, help="directory to write")
    init.add_argument("--hidden-size", type=at_least(1), default=128)
    init.add_argument("--layers", type=at_least(1), default=2)
    init.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    init.set_defaults(run=run_model_init)


def run_model_init(args: argparse.Namespace) -> int:
    from agents.models.tiny import ModelSpec, init_model

    spec = ModelSpec(hidden_size=args.hidden_size, num_hidden_layers=args.layers, seed=args.seed)
    out = init_model(args.kind, args.out, spec)
    print(json.dumps(json.loads((out / "bigworld.json").read_text())))
    return 0


@command("agent")
def register_agent(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = sub.add_parser("agent", help="run agents", description="Run policy and reward agents.")
    verbs = agent.add_subparsers(dest="verb", required=True, metavar="VERB")
    run = verbs.add_parser(
        "run",
        help="run a policy or reward agent until stopped",
        description="Run a policy agent (plays episodes) or a reward agent (judges steps) "
        "against a world server until stopped (SIGTERM/Ctrl-C abandon the open episode).",
    )
    run.add_argument("--role", choices=ROLES, required=True)
    run.add_argument("--backend", choices=BACKENDS, required=True)
    run.add_argument("--model", type=Path, help="model directory (transformers, vllm)")
    run.add_argument(
        "--mode",
        choices=("rank", "generate"),
        default="rank",
        help="decoding: rank scores the candidates (a policy's actions, a judge's two verdicts) "
        "and samples from their softmax, what a tiny model keeps up with; generate samples free "
        "text ending in \\boxed{}, for real checkpoints (default %(default)s)",
    )
    run.add_argument("--temperature", type=at_least(0, float), default=1.0)
    run.add_argument("--max-new-tokens", type=at_least(1), default=64)
    run.add_argument("--votes", type=at_least(1), default=3, help="judgments per step (reward)")
    run.add_argument(
        "--batch-steps", type=at_least(1), default=8, help="steps judged in one model call (reward)"
    )
    run.add_argument(
        "--noise", type=at_least(0, float), default=0.0, help="vote flip rate (heuristic)"
    )
    run.add_argument(
        "--family",
        help="ask for tasks of this family (policy; one of any family when none is near)",
    )
    run.add_argument("--episodes", type=at_least(1), help="stop after this many episodes (policy)")
    run.add_argument(
        "--step-interval",
        type=at_least(0, float),
        default=0.0,
        help="at least this many seconds from one step's request to the next (policy; a steady "
        "pace, e.g. for a soak at a constant load; default 0: as fast as it can)",
    )
    run.add_argument(
        "--at-once",
        type=at_least(1),
        help="play up to this many episodes at once as this one agent, each turn's steps sent "
        "in one batch (policy; the agent's max_open_episodes, set by an admin, caps it; "
        "default: one at a time)",
    )
    run.add_argument("--seconds", type=at_least(0, float), help="stop after this long")
    run.add_argument(
        "--poll", type=at_least(0, float), default=5.0, help="seconds between version checks"
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    run.add_argument(
        "--expert-token",
        default=os.environ.get("BIGWORLD_EXPERT_TOKEN"),
        help="trainer/admin token for the expert backend (env BIGWORLD_EXPERT_TOKEN)",
    )
    run.add_argument("--vllm-url", help="OpenAI-compatible server URL (vllm-server backend)")
    run.add_argument("--vllm-model", help="model name at that server")
    add_server_options(run)
    add_thread_option(run)
    run.set_defaults(run=run_agent)


def _model(args: argparse.Namespace) -> Any:
    from agents import backends

    if args.backend == "vllm-server":
        return backends.OpenAIServerModel(
            _need(args, args.vllm_url, "--vllm-url", "the OpenAI-compatible server's URL"),
            args.vllm_model or "default",
        )
    path = _need(args, args.model, "--model", "a model directory (bigworld model init --out)")
    if not (path / "config.json").is_file():
        args.parser.error(f"expected a model directory with config.json at --model, got {path}")
    limit_threads(args.threads)
    if args.backend == "transformers":
        return backends.TransformersModel(path, device=args.device)
    return backends.VllmModel(path)


def _need(args: argparse.Namespace, value: Any, flag: str, what: str) -> Any:
    """``value``, or misuse: this backend needs ``flag``."""
    if value is None:
        args.parser.error(f"backend {args.backend} needs {flag}: give {what}")
    return value


def build_runner(args: argparse.Namespace) -> Any:
    """The runner that ``agent run`` would start, without starting it."""
    from agents import backends, policy_agent, reward_agent

    client = client_for(args)
    sampling = backends.Sampling(args.temperature, args.max_new_tokens, args.seed)
    if args.role == "policy":
        policy: Any
        if args.backend == "random":
            policy = policy_agent.RandomPolicy(args.seed)
        elif args.backend == "explorer":
            policy = policy_agent.ExplorerPolicy(args.seed)
        elif args.backend == "expert":
            what = "a trainer's or admin's token, or set BIGWORLD_EXPERT_TOKEN"
            expert = _need(args, args.expert_token, "--expert-token", what)
            policy = policy_agent.ExpertPolicy(client_for(args, expert))
        elif args.backend == "heuristic":
            args.parser.error(
                "backend heuristic judges steps, it cannot play: give --role reward, or a "
                "policy backend (random, explorer, expert, transformers, vllm, vllm-server)"
            )
        else:
            policy = policy_agent.ModelPolicy(_model(args), args.mode, sampling)
        config = policy_agent.RunnerConfig(
            family=args.family,
            poll_s=args.poll,
            max_episodes=args.episodes,
            step_interval_s=args.step_interval,
        )
        if args.at_once:
            return policy_agent.FleetRunner(client, policy, config, args.at_once)
        return policy_agent.PolicyRunner(client, policy, config)
    judge: Any
    if args.backend == "heuristic":
        judge = reward_agent.HeuristicJudge(args.noise, args.seed)
    elif args.backend in ("random", "explorer", "expert"):
        args.parser.error(
            f"backend {args.backend} plays, it cannot judge: give --role policy, or a reward "
            "backend (heuristic, transformers, vllm, vllm-server)"
        )
    else:
        judge = reward_agent.ModelJudge(_model(args), sampling, args.mode)
    return reward_agent.RewardRunner(
        client,
        judge,
        reward_agent.RewardConfig(
            votes=args.votes, batch_steps=args.batch_steps, reload_poll_s=args.poll
        ),
    )


def run_agent(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    runner = build_runner(args)
    check_token(runner.client)

    stop_on_signals(runner.stop, args.seconds)
    result = runner.run()
    if result is not None:
        print(
            json.dumps({k: sorted(v) if isinstance(v, set) else v for k, v in vars(result).items()})
        )
    return 0
