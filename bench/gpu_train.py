"""A few continual-trainer iterations on a GPU, with vLLM rollouts, in one prepared run.

For a machine with a CUDA GPU and the ``vllm`` extra installed (no network needed):

1. saves a small randomly initialised Qwen2-architecture model (built from a config, with
   the tokenizer trained on the world's corpus) into a local folder;
2. starts a world server (SQLite, temp folder) on a free port;
3. runs policy agents whose model calls go to one shared vLLM offline engine (``rank`` or
   ``generate`` decoding); an untrained model never finishes a task, so every other episode
   follows the oracle's hints (``GuidedPolicy``) and the rollout groups carry signal;
4. runs the trainer (PPO-clip + k3 KL, transformers on the GPU) for ``--iterations``
   updates, in one of the learning bench's arms (``--arm``, ``bench/learning.py``):
   outcome-only by default; ``integrated_oracle`` adds step votes from the oracle (a judge
   without noise), ``integrated`` from a reward model of the same size (transformers on the
   GPU, frozen), ``integrated_rm`` trains that reward model too, ``integrated_rm_forge``
   also turns the forge's cycles on (off in every other arm). Each update saves a version
   (safetensors), registers it, and the agents' engine reloads it in place (vLLM's worker
   ``load_weights``, no restart);
5. reports tokens/s of rollouts (tokens the engine processed per second inside it) and of
   training (prompt and completion tokens through the model per second of update, the
   rollout log-prob pass not counted), the time to publish a
   version (save + register) and to reload it, and the versions the agents played.

``--dry-run`` does the same on the CPU with the transformers backend and a tiny model, to
check everything but vLLM and CUDA. Writes its figures as JSON to ``--out`` (default:
$OUT/gpu_train.json when $OUT is set)::

    python bench/gpu_train.py                       # GPU: hidden 512, 4 layers, 3 updates
    python bench/gpu_train.py --dry-run --iterations 2
    python bench/gpu_train.py --arm integrated_rm   # step votes, the reward model trained
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import torch  # noqa: E402
from gpu_check import SharedEngine  # noqa: E402
from learning import ARMS, VOTED  # noqa: E402
from live import start_server  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from agents.backends import LanguageModel, Sampling, TransformersModel, VllmModel  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.models.tiny import MANIFEST, ModelSpec, init_model  # noqa: E402
from agents.policy_agent import (  # noqa: E402
    ExpertPolicy,
    GuidedPolicy,
    ModelPolicy,
    PolicyRunner,
    RunnerConfig,
)
from agents.reward_agent import HeuristicJudge, ModelJudge, RewardConfig, RewardRunner  # noqa: E402
from agents.train.config import TrainConfig  # noqa: E402
from agents.train.trainer import Trainer  # noqa: E402


def _spec(args: argparse.Namespace) -> ModelSpec:
    heads = max(2, args.hidden // 64)
    return ModelSpec(
        hidden_size=args.hidden,
        intermediate_size=3 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        seed=args.seed,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dry-run", action="store_true", help="CPU, transformers, tiny model")
    parser.add_argument("--iterations", type=int, default=3, help="trainer updates")
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--decode", choices=("rank", "generate"), default="rank")
    parser.add_argument(
        "--arm",
        choices=[arm for arm, (mode, _) in ARMS.items() if mode],
        default="outcome_only",
        help="what the trainer learns from (bench/learning.py's arms)",
    )
    parser.add_argument("--hidden", type=int, default=None, help="default 512 (dry run: 64)")
    parser.add_argument("--layers", type=int, default=None, help="default 4 (dry run: 1)")
    parser.add_argument("--family", default="examine_in_light", help="task family played")
    parser.add_argument("--step-budget", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=480.0, help="give up after this")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ["OUT"]) / "gpu_train.json" if "OUT" in os.environ else None,
    )
    args = parser.parse_args()
    args.hidden = args.hidden or (64 if args.dry_run else 512)
    args.layers = args.layers or (1 if args.dry_run else 4)
    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu_train: no CUDA GPU here; --dry-run checks the rest on the CPU")
    figures: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)",
        "backend": "transformers" if args.dry_run else "vllm",
        "decode": args.decode,
        "arm": args.arm,
    }
    with tempfile.TemporaryDirectory(prefix="bigworld-gpu-train-") as tmp:
        work = Path(tmp)
        base = init_model("policy", work / "v0", _spec(args))
        figures["parameters"] = json.loads((base / MANIFEST).read_text())["parameters"]
        server = start_server(
            work / "data",
            env={
                "BIGWORLD_STEP_BUDGET": str(args.step_budget),
                "BIGWORLD_SEED": str(args.seed),
                "BIGWORLD_LOG_LEVEL": "warning",
                "BIGWORLD_RECORD_DISTANCE": "true",  # the oracle's votes are read from it
                "BIGWORLD_FORGE_ENABLED": str(ARMS[args.arm][1]).lower(),
            },
        )
        try:
            figures.update(_run(args, server, base, work, device))
        finally:
            server.stop()
    print(json.dumps(figures, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2))
    return 0


def _run(
    args: argparse.Namespace, server: Any, base: Path, work: Path, device: str
) -> dict[str, Any]:
    admin = BigWorldClient(server.url, server.admin_token)
    trainer_client = BigWorldClient(server.url, admin.create_agent("trainer", "trainer").token)
    mode = ARMS[args.arm][0]
    reward = init_model("reward", work / "rm0", _spec(args)) if mode in VOTED else None
    config = TrainConfig(
        mode=mode,
        group_by="family",
        group_size=8,
        min_samples=8,
        # Half the episodes are the oracle's (GuidedPolicy), so a group's accuracy says which
        # episodes had ended when the trainer looked, not how hard the task is for the policy:
        # the paper's window would skip the reward model's update by that timing.
        accuracy_window=(0.0, 1.0),
        batch_size=16,
        micro_batch_size=8,
        lr=1e-5 if device == "cuda" else 1e-3,
        poll_s=0.5,
        device=device,
        seed=args.seed,
    )
    trainer = Trainer(
        trainer_client, config, policy_dir=base, reward_dir=reward, out=work / "train"
    )
    started = time.perf_counter()
    engine: LanguageModel = (
        TransformersModel(base, version="init", device="cpu")
        if args.dry_run
        else VllmModel(base, version="init", gpu_memory_utilization=0.3)
    )
    shared = SharedEngine(engine, AutoTokenizer.from_pretrained(base, local_files_only=True))
    figures: dict[str, Any] = {"engine_start_s": round(time.perf_counter() - started, 2)}
    runners = []
    for i in range(args.agents):
        policy = GuidedPolicy(
            ModelPolicy(shared, args.decode, Sampling(1.0, 24, seed=args.seed + i)),
            ExpertPolicy(trainer_client),
        )
        token = admin.create_agent(f"gpu-policy-{i}", "policy").token
        runners.append(
            PolicyRunner(
                BigWorldClient(server.url, token),
                policy,
                RunnerConfig(family=args.family, poll_s=0.5),
            )
        )
    loops = [(r.stop, r.run) for r in runners]
    judges = None
    if reward is not None:  # a reward agent votes on every step of every ended episode
        judge: Any = (
            HeuristicJudge(0.0, args.seed)
            if args.arm == "integrated_oracle"
            else ModelJudge(
                TransformersModel(reward, version="init", device=device),
                Sampling(1.0, 24, seed=args.seed),
                "rank",
            )
        )
        token = admin.create_agent("gpu-judge", "reward").token
        judges = RewardRunner(
            BigWorldClient(server.url, token), judge, RewardConfig(votes=config.votes)
        )
        loops.append((judges.stop, judges.run))
    loops.append((trainer.stop, lambda: trainer.run(args.iterations, progress=True)))
    threads = [threading.Thread(target=run, daemon=True) for _, run in loops]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = started + args.timeout_s
    newest = lambda: trainer.learners["policy"].version  # noqa: E731
    while time.perf_counter() < deadline and not (
        len(trainer.history) >= args.iterations
        and all(r.policy.version == newest() for r in runners)
    ):
        time.sleep(0.5)
    wall = time.perf_counter() - started
    for stop, _ in loops:
        stop.set()
    for thread in threads:
        thread.join(timeout=60)
    updates = trainer.history
    decisions = sum(r.policy.model.calls for r in runners)  # type: ignore[attr-defined]
    figures.update(
        {
            "wall_s": round(wall, 1),
            "finished": len(updates) >= args.iterations,
            "episodes": sum(r.stats.episodes for r in runners),
            "steps": sum(r.stats.steps for r in runners),
            "model_decisions": decisions,
            "rollout_tokens": shared.tokens,
            "rollout_engine_s": round(shared.seconds, 2),
            "rollout_tokens_per_s": round(shared.tokens / max(shared.seconds, 1e-9), 1),
            "steps_per_s": round(sum(r.stats.steps for r in runners) / wall, 2),
            "updates": [
                {
                    "update": i + 1,
                    "samples": int(u["samples"]),
                    "completion_tokens": int(u["tokens"]),
                    "tokens": int(u["seen_tokens"]),
                    "update_s": round(u["update_s"], 3),
                    "train_tokens_per_s": round(u["seen_tokens"] / max(u["update_s"], 1e-9), 1),
                    "publish_s": round(u["publish_s"], 3),
                    "loss": round(u["loss"], 4),
                    "kl": round(u["kl"], 5),
                    # integrated_rm: the reward model's update beside the policy's
                    **(
                        {"rm_samples": int(u["rm_samples"]), "rm_loss": round(u["rm_loss"], 4)}
                        if "rm_samples" in u
                        else {}
                    ),
                }
                for i, u in enumerate(updates)
            ],
            "reload_s": [round(s, 3) for s in shared.reload_s],
            "judged_episodes": judges.judged_episodes if judges is not None else 0,
            "versions_played": sorted(set().union(*(r.stats.versions for r in runners))),
            "agents_on_newest": all(r.policy.version == newest() for r in runners),
        }
    )
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
