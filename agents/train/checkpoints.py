"""The trainer's files: one checkpoint directory per update, and its resumable state.

Layout under the run's ``out`` directory::

    out/
      state.json                 cursor, pending episodes, latest versions (written atomically)
      optimizer-policy.pt        AdamW state of the policy (and -reward for the reward model)
      policy-000003/             a Hugging Face checkpoint (safetensors) + bigworld.json
      reward-000003/

``bigworld.json`` in each checkpoint names its kind, registered version, parent version, the
update's figures and the run's whole config, so a version explains itself without the server.
Only the last ``keep_last`` checkpoints of each kind stay on disk.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.models.tiny import MANIFEST

STATE = "state.json"


@dataclass
class Version:
    """A model version the trainer knows: registered ``version`` (None before registering)."""

    version: str | None
    path: str
    parent: str | None = None


@dataclass
class TrainerState:
    """Everything a restarted trainer needs besides the weights."""

    iteration: int = 0  # updates done by this run
    cursor: str | None = None  # the last episode_ended event id read
    pending: dict[int, float] = field(default_factory=dict)  # ended, not yet ready
    waiting: list[int] = field(default_factory=list)  # ready, waiting for their group
    warm_started: bool = False
    latest: dict[str, Version] = field(default_factory=dict)  # kind → newest version
    first: dict[str, str] = field(default_factory=dict)  # kind → the starting weights' version

    def to_json(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "cursor": self.cursor,
            "pending": {str(k): v for k, v in self.pending.items()},
            "waiting": self.waiting,
            "warm_started": self.warm_started,
            "latest": {k: vars(v) for k, v in self.latest.items()},
            "first": self.first,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> TrainerState:
        return cls(
            iteration=int(body.get("iteration", 0)),
            cursor=body.get("cursor"),
            pending={int(k): float(v) for k, v in (body.get("pending") or {}).items()},
            waiting=[int(e) for e in body.get("waiting") or ()],
            warm_started=bool(body.get("warm_started", False)),
            latest={k: Version(**v) for k, v in (body.get("latest") or {}).items()},
            first={k: str(v) for k, v in (body.get("first") or {}).items()},
        )


def write_json(path: Path, body: Any) -> None:
    """Write ``body`` so that a crash leaves either the old file or the new one, whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True))
    os.replace(tmp, path)


def load_state(out: Path) -> TrainerState | None:
    path = out / STATE
    return TrainerState.from_json(json.loads(path.read_text())) if path.exists() else None


def save_state(out: Path, state: TrainerState) -> None:
    write_json(out / STATE, state.to_json())


def checkpoint_dir(out: Path, kind: str, iteration: int) -> Path:
    return out / f"{kind}-{iteration:06d}"


def save_checkpoint(
    model: Any, tokenizer: Any, out: Path, kind: str, iteration: int, manifest: dict[str, Any]
) -> Path:
    """Save weights (safetensors) and tokenizer into a fresh directory, then its manifest.

    The directory is written under a temporary name and renamed, so an agent that reloads
    from a registered path never sees half a checkpoint."""
    final = checkpoint_dir(out, kind, iteration)
    tmp = final.with_name(final.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    write_json(tmp / MANIFEST, {"kind": kind, **manifest})
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def annotate(path: Path, **fields: Any) -> None:
    """Add fields (the registered version) to a checkpoint's manifest."""
    manifest = json.loads((path / MANIFEST).read_text())
    write_json(path / MANIFEST, {**manifest, **fields})


def prune(out: Path, kind: str, keep_last: int, protect: set[str] | None = None) -> list[Path]:
    """Delete all but the newest ``keep_last`` checkpoints of ``kind``; returns those deleted.

    Paths in ``protect`` (the versions in use) are never deleted."""
    protect = {str(Path(p).resolve()) for p in protect or ()}
    mine = sorted(p for p in out.glob(f"{kind}-[0-9]*") if p.is_dir() and p.name[-1].isdigit())
    doomed = [p for p in mine[: max(0, len(mine) - keep_last)] if str(p.resolve()) not in protect]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed
