"""Build, save and load policy and reward models.

``init_model`` builds a tiny Qwen2-architecture causal LM from a config (no weights are
downloaded) with a tokenizer trained on the world's corpus; ``load_model`` loads it, or any
local Hugging Face checkpoint, through the same ``from_pretrained`` path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from agents.models.tokenizer import DEFAULT_VOCAB_SIZE, train_tokenizer

KINDS = ("policy", "reward")
_LOADING = threading.Lock()
MAX_PROMPT_TOKENS = 2048  # longer prompts keep their end (the actions and the question)
MANIFEST = "bigworld.json"  # kind, version and the spec a model directory was built from


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a tiny model. The defaults give about half a million parameters."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    vocab_size: int = DEFAULT_VOCAB_SIZE
    seed: int = 0  # weight initialisation


def init_model(kind: str, out: Path, spec: ModelSpec = ModelSpec()) -> Path:
    """Build a tiny model of ``kind`` and its tokenizer into ``out``; returns ``out``."""
    if kind not in KINDS:
        raise ValueError(f"expected kind in {KINDS}, got {kind!r}")
    tokenizer = train_tokenizer(vocab_size=spec.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    manifest = {
        "kind": kind,
        "version": None,
        "spec": asdict(spec),
        "parameters": model.num_parameters(),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return out


def manifest_version(path: Path) -> str:
    """The registry version a model directory was saved as ("0" for a fresh tiny model or a
    checkpoint from elsewhere)."""
    manifest = Path(path) / MANIFEST
    if not manifest.exists():
        return "0"
    version = json.loads(manifest.read_text()).get("version")
    return "0" if version is None else str(version)


def load_model(path: Path, device: str = "cpu") -> tuple[Any, PreTrainedTokenizerBase]:
    """Load a model directory (ours or any local Hugging Face checkpoint), offline.

    The model is typed ``Any``: transformers' annotations do not type a loaded model's
    methods (``generate``, ``to``) as callable."""
    with _LOADING:  # from_pretrained builds on a process-wide meta-device context: one at a time
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        model = model.to(device)
    model.eval()
    return model, tokenizer


def encode_candidates(
    tokenizer: PreTrainedTokenizerBase,
    prompt: str,
    completions: Sequence[str],
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
) -> tuple[list[int], list[list[int]]]:
    """A rank decision's ids as agents score it and the trainer trains it: the prompt's last
    ``max_prompt_tokens`` ids, and each candidate completion's ids + end-of-sequence."""
    eos = tokenizer.eos_token_id
    rows = [tokenizer(c).input_ids + [eos] for c in completions]
    return tokenizer(prompt).input_ids[-max_prompt_tokens:], rows


def candidate_logprobs(model: Any, prompt: list[int], rows: list[list[int]]) -> torch.Tensor:
    """The summed log-prob of each row of token ids as the prompt's continuation, (len(rows),),
    from one forward pass; with gradients when grad mode is on.

    The rows are packed after the prompt in one sequence. A 4-D attention mask lets a row's
    tokens see the prompt and that row's own earlier tokens only, and their positions go on
    from the prompt's end, so each row is scored as if it alone followed the prompt."""
    if not prompt or not all(rows):
        raise ValueError("expected a non-empty prompt and non-empty rows")
    device = model.device
    length = len(prompt) + sum(len(r) for r in rows)
    owner = [-1] * len(prompt)  # the row each position belongs to; -1: the prompt
    source, targets = [], []  # where each row token is predicted from, and the token
    positions = list(range(len(prompt)))
    for k, row in enumerate(rows):
        start = len(owner)
        owner += [k] * len(row)
        positions += range(len(prompt), len(prompt) + len(row))
        source += [len(prompt) - 1] + list(range(start, start + len(row) - 1))
        targets += row
    ids = torch.tensor([prompt + [t for r in rows for t in r]], device=device)
    seg = torch.tensor(owner, device=device)
    index = torch.arange(length, device=device)
    visible = (index[None, :] <= index[:, None]) & (
        (seg[None, :] == seg[:, None]) | (seg[None, :] < 0)
    )
    logits = model(
        input_ids=ids,
        position_ids=torch.tensor([positions], device=device),
        attention_mask=visible[None, None],
        logits_to_keep=torch.tensor(source, device=device),  # the predicting positions only
    ).logits[0]  # (len(targets), V)
    chosen = torch.log_softmax(logits.float(), dim=-1)
    per_token = chosen[
        torch.arange(len(targets), device=device), torch.tensor(targets, device=device)
    ]
    return torch.zeros(len(rows), device=device).index_add(0, seg[len(prompt) :], per_token)


def candidate_scores(model: Any, prompt: list[int], rows: list[list[int]]) -> torch.Tensor:
    """Rank mode's score of each row: its mean token log-prob, (len(rows),). A rank-mode
    policy samples from ``softmax(scores / T)``; the trainer trains exactly that."""
    lengths = torch.tensor([len(r) for r in rows], device=model.device, dtype=torch.float)
    return candidate_logprobs(model, prompt, rows) / lengths


def load_weights(model: PreTrainedModel, path: Path) -> None:
    """Copy the weights saved in ``path`` into ``model`` in place (same architecture).

    Reads the safetensors shards directly: unlike ``from_pretrained`` this is safe to run in
    several threads at once, and the module (and anything holding it) stays the same object.
    """
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(Path(path).glob("*.safetensors")):
        state.update(load_file(shard, device=str(model.device)))
    if not state:
        raise FileNotFoundError(f"expected *.safetensors weights in {path}, found none")
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise ValueError(
            f"weights in {path} do not fit: missing {missing}, unexpected {unexpected}"
        )
