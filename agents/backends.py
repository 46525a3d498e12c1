"""Language-model backends shared by the policy and the reward agents.

A backend turns prompts into completions. Two operations cover both decoding modes:
``generate`` (free text, for real checkpoints) and ``score`` (each candidate completion's mean
token log-likelihood, for ``rank``-mode policies and judges). Heavy libraries
(torch, transformers, vllm) are imported only by the backend that needs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

DECODING_MODES = ("rank", "generate")  # how a model chooses: score candidates, or write text
MAX_SENT_IDS = 1024  # the server takes a generated answer's token ids up to this many


def sent_ids(token_ids: tuple[int, ...] | None) -> dict[str, list[int]]:
    """The ``completion_ids`` field of a step or judgment body: the ids a generated answer
    sampled, where the backend knows them and they are few enough to send."""
    if token_ids is None or len(token_ids) > MAX_SENT_IDS:
        return {}
    return {"completion_ids": list(token_ids)}


@dataclass(frozen=True)
class Generated:
    """A generated answer: its text, and the token ids sampled where the backend knows them.

    Decoded text does not always encode back to the ids it came from, so the trainer trains
    ``token_ids`` when the step carries them. An answer that ended on its own keeps its end
    token (as text and as the last id); one cut at ``max_new_tokens`` has none."""

    text: str
    token_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Sampling:
    """Decoding settings: temperature 0 means greedy; ``n`` answers are drawn per prompt."""

    temperature: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    n: int = 1


class LanguageModel(Protocol):
    """What the agents need from a model. ``version`` names the weights in use."""

    version: str

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        """``sampling.n`` answers per prompt, prompt by prompt (``len(prompts) * n`` in all)."""
        ...

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        """Each completion's rank-mode score after ``prompt``: its mean log-probability per
        token (natural log). Summed, an untrained model's scores differ by ~8 nats per token
        of length, so a short action such as ``look`` would win nearly every draw."""
        ...

    def reload(self, path: Path, version: str) -> None:
        """Swap in new weights without restarting the process."""
        ...


class TransformersModel:
    """A causal LM from a local directory, on CPU or GPU, through transformers."""

    def __init__(self, path: Path, version: str | None = None, device: str | None = None) -> None:
        import torch

        from agents.models.tiny import load_model, manifest_version

        self._torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model, self.tokenizer = load_model(path, self.device)
        self.version = version if version is not None else manifest_version(path)

    def reload(self, path: Path, version: str) -> None:
        from agents.models.tiny import load_weights

        load_weights(self.model, path)  # in place: same module, new weights
        self.version = version

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        """All prompts in one batch (left-padded), ``sampling.n`` answers each, prompt by
        prompt; greedy decoding gives one answer, repeated."""
        torch = self._torch
        torch.manual_seed(sampling.seed)
        batch = self.tokenizer(
            list(prompts), return_tensors="pt", padding=True, padding_side="left"
        ).to(self.device)
        sample = sampling.temperature > 0
        with torch.no_grad():
            generated = self.model.generate(
                **batch,
                max_new_tokens=sampling.max_new_tokens,
                do_sample=sample,
                temperature=sampling.temperature if sample else None,
                top_k=None,
                num_return_sequences=sampling.n if sample else 1,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
            )
        eos = self.tokenizer.eos_token_id
        answers = []
        for row in generated[:, batch.input_ids.shape[1] :].tolist():
            # a row runs to the batch's longest answer: what follows its end is padding
            ids = row[: row.index(eos) + 1] if eos in row else row
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
            if ids and ids[-1] == eos:
                text += str(self.tokenizer.eos_token)
            answers.append(Generated(text, tuple(ids)))
        return [a for a in answers for _ in range(1 if sample else sampling.n)]

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        """Each completion's mean token log-prob, in one forward pass (``candidate_scores``)."""
        from agents.models.tiny import candidate_scores, encode_candidates

        ids, rows = encode_candidates(self.tokenizer, prompt, completions)
        with self._torch.no_grad():
            scores = candidate_scores(self.model, ids, rows)
        return [float(x) for x in scores]


class OpenAIServerModel:
    """A model served by an OpenAI-compatible server (vLLM's, say), reached by URL."""

    def __init__(self, url: str, model: str, version: str = "init", timeout: float = 60.0) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout)
        self.model = model
        self.version = version

    def reload(self, path: Path, version: str) -> None:
        # vLLM's server reloads weights through its own admin endpoint when started with
        # --enable-sleep-mode/--load-format; here the server is asked to load the new path.
        self.http.post("/v1/load_lora_adapter", json={"lora_name": version, "lora_path": str(path)})
        self.model, self.version = version, version

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        """Text only: the server's token ids are not asked for, so the trainer re-tokenises."""
        body = {
            "model": self.model,
            "prompt": list(prompts),
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "seed": sampling.seed,
            "n": sampling.n,
        }
        reply = self.http.post("/v1/completions", json=body)
        reply.raise_for_status()
        choices = sorted(reply.json()["choices"], key=lambda c: c["index"])
        return [Generated(c["text"]) for c in choices]

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [prompt + c for c in completions],
            "max_tokens": 1,
            "echo": True,
            "logprobs": 0,
        }
        reply = self.http.post("/v1/completions", json=body)
        reply.raise_for_status()
        scores = []
        for choice in sorted(reply.json()["choices"], key=lambda c: c["index"]):
            logprobs = choice["logprobs"]
            offsets, values = logprobs["text_offset"], logprobs["token_logprobs"]
            mine = [
                v
                for o, v in zip(offsets, values, strict=False)
                if o >= len(prompt) and v is not None
            ]
            scores.append(sum(mine) / max(1, len(mine)))
        return scores


class VllmModel:
    """vLLM's offline engine on a GPU; weights reload in place through the worker's
    weight-update path (``collective_rpc`` → ``load_weights``)."""

    def __init__(
        self, path: Path, version: str = "init", gpu_memory_utilization: float = 0.3
    ) -> None:
        from vllm import LLM

        self.llm = LLM(
            model=str(path), gpu_memory_utilization=gpu_memory_utilization, enforce_eager=True
        )
        self.version = version

    def reload(self, path: Path, version: str) -> None:
        from safetensors.torch import load_file

        weights = {}
        for shard in sorted(Path(path).glob("*.safetensors")):
            weights.update(load_file(shard))
        items = list(weights.items())

        def load(worker: Any) -> int:
            worker.model_runner.model.load_weights(weights=items)
            return len(items)

        self.llm.collective_rpc(load)
        self.version = version

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        from vllm import SamplingParams

        params = SamplingParams(
            n=sampling.n,
            temperature=sampling.temperature,
            max_tokens=sampling.max_new_tokens,
            seed=sampling.seed,
        )
        outs = self.llm.generate(list(prompts), params, use_tqdm=False)
        tokenizer = self.llm.get_tokenizer()
        answers = []
        for out in outs:
            for answer in out.outputs:
                ids = list(answer.token_ids)
                # stopped by the end token (not a stop string): it is the answer's last id
                ended = answer.finish_reason == "stop" and answer.stop_reason is None
                if ended and (not ids or ids[-1] != tokenizer.eos_token_id):
                    ids.append(tokenizer.eos_token_id)
                text = answer.text + (tokenizer.eos_token if ended else "")
                answers.append(Generated(text, tuple(ids)))
        return answers

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, prompt_logprobs=0)
        tokenizer = self.llm.get_tokenizer()
        start = len(tokenizer(prompt).input_ids)
        scores = []
        for out in self.llm.generate([prompt + c for c in completions], params, use_tqdm=False):
            entries = out.prompt_logprobs[start:]
            ids = out.prompt_token_ids[start:]
            mine = [entry[i].logprob for entry, i in zip(entries, ids, strict=False) if entry]
            scores.append(sum(mine) / max(1, len(mine)))
        return scores


def softmax_sample(
    scores: Sequence[float], temperature: float, draw: float
) -> tuple[int, list[float]]:
    """Sample an index from softmax(scores / temperature) with a uniform ``draw`` in [0, 1)."""
    if temperature <= 0:
        best = max(range(len(scores)), key=scores.__getitem__)
        return best, [1.0 if i == best else 0.0 for i in range(len(scores))]
    top = max(scores)
    weights = [math.exp((s - top) / temperature) for s in scores]
    total = sum(weights)
    probs = [w / total for w in weights]
    acc = 0.0
    for i, p in enumerate(probs):
        acc += p
        if draw < acc:
            return i, probs
    return len(probs) - 1, probs
