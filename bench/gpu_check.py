"""The GPU path in one prepared run: vLLM rollouts, an in-place weight reload, figures.

For a machine with a CUDA GPU and the ``vllm`` extra installed (no network needed):

1. saves a small randomly initialised Qwen2-architecture model (built from a config, with
   the tokenizer trained on the world's corpus) into a local folder;
2. starts a world server (SQLite, temp folder) on a free port;
3. runs rank-mode policy agents whose scoring runs in vLLM's offline engine, for a fixed
   number of steps, and reports steps/s;
4. saves perturbed weights as version 1, registers it, and times the in-place reload through
   vLLM's worker ``load_weights`` (no engine restart); checks that scores changed;
5. runs the agents again on the new version and reports steps/s and the version on steps.

Writes its figures as JSON to ``--out`` (default: $OUT/gpu_check.json when $OUT is set).

    python bench/gpu_check.py [--steps 200] [--agents 4] [--hidden 512 --layers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# vLLM's engine in this process, so that reload can hand it a function and tensors directly.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
from agents_bench import _serve  # noqa: E402

from agents.backends import Generated, LanguageModel, VllmModel  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.models.tiny import MANIFEST, ModelSpec, init_model  # noqa: E402
from agents.policy_agent import ModelPolicy, PolicyRunner, RunnerConfig  # noqa: E402


class SharedEngine:
    """One engine (vLLM's, or any LanguageModel) shared by several agents: calls are
    serialised, and timed; with a ``tokenizer`` the tokens each call processed are counted
    (prompt and candidates for ``score``, prompt and answer for ``generate``)."""

    def __init__(self, engine: LanguageModel, tokenizer: Any = None) -> None:
        self.engine, self.lock, self.tokenizer = engine, threading.Lock(), tokenizer
        self.seconds, self.tokens, self.calls = 0.0, 0, 0
        self.reload_s: list[float] = []  # one entry per version swapped in

    @property
    def version(self) -> str:
        return self.engine.version

    def _count(self, *texts: str) -> int:
        if self.tokenizer is None:
            return 0
        return sum(len(self.tokenizer(t).input_ids) for t in texts)

    def score(self, prompt: str, completions: list[str]) -> list[float]:
        with self.lock:
            started = time.perf_counter()
            out = self.engine.score(prompt, completions)
            self.seconds += time.perf_counter() - started
            self.calls += 1
        self.tokens += self._count(prompt, *completions)
        return out

    def generate(self, prompts: list[str], sampling: object) -> list[Generated]:
        with self.lock:
            started = time.perf_counter()
            out = self.engine.generate(prompts, sampling)  # type: ignore[arg-type]
            self.seconds += time.perf_counter() - started
            self.calls += 1
        self.tokens += self._count(*prompts, *(answer.text for answer in out))
        return out

    def reload(self, path: Path, version: str) -> None:
        with self.lock:
            if version != self.engine.version:
                started = time.perf_counter()
                self.engine.reload(path, version)
                self.reload_s.append(time.perf_counter() - started)


def _play(url: str, tokens: list[str], model: SharedEngine, steps: int) -> tuple[float, set[str]]:
    runners = [
        PolicyRunner(BigWorldClient(url, t), ModelPolicy(model, "rank"), RunnerConfig(poll_s=1.0))
        for t in tokens
    ]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    start = time.perf_counter()
    for t in threads:
        t.start()
    while sum(r.stats.steps for r in runners) < steps:
        time.sleep(0.05)
    wall = time.perf_counter() - start
    for r in runners:
        r.stop.set()
    for t in threads:
        t.join(timeout=60)
    return sum(r.stats.steps for r in runners) / wall, set().union(
        *(r.stats.versions for r in runners)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ["OUT"]) / "gpu_check.json" if "OUT" in os.environ else None,
    )
    args = parser.parse_args()
    assert torch.cuda.is_available(), "this check needs a CUDA GPU"
    figures: dict[str, object] = {"gpu": torch.cuda.get_device_name(0)}
    with tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(
            hidden_size=args.hidden,
            intermediate_size=3 * args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=8,
            num_key_value_heads=4,
        )
        base = init_model("policy", Path(tmp) / "v0", spec)
        figures["parameters"] = json.loads((base / MANIFEST).read_text())["parameters"]
        token = secrets.token_urlsafe(32)  # the server wants 128+ bits
        proc, url = _serve(Path(tmp) / "data", token)
        try:
            admin = BigWorldClient(url, token)
            tokens = [admin.create_agent(f"gpu{i}", "policy").token for i in range(args.agents)]
            trainer = BigWorldClient(url, admin.create_agent("trainer", "trainer").token)
            started = time.perf_counter()
            model = SharedEngine(VllmModel(base, version="0"))
            figures["engine_start_s"] = round(time.perf_counter() - started, 2)
            probe = (
                "You are in the kitchen 1.\n",
                ["look\n\\boxed{1}", "go to square 1\n\\boxed{2}"],
            )
            before = model.score(*probe)
            rate, versions = _play(url, tokens, model, args.steps)
            figures["steps_per_s_v0"], figures["versions_v0"] = round(rate, 1), sorted(versions)

            from transformers import AutoModelForCausalLM

            v1 = Path(tmp) / "v1"
            weights = AutoModelForCausalLM.from_pretrained(base)
            with torch.no_grad():
                for p in weights.parameters():
                    p.add_(0.05 * torch.randn_like(p))
            weights.save_pretrained(v1)
            trainer.register_policy(kind="policy", path=str(v1), parent=None)
            started = time.perf_counter()
            model.reload(v1, "1")
            figures["reload_s"] = round(time.perf_counter() - started, 3)
            after = model.score(*probe)
            figures["scores_changed"] = any(
                abs(a - b) > 1e-4 for a, b in zip(before, after, strict=True)
            )
            rate, versions = _play(url, tokens, model, args.steps)
            figures["steps_per_s_v1"], figures["versions_v1"] = round(rate, 1), sorted(versions)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(figures, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
