"""The trainer's one configuration: every knob of a run, stored with the versions it produces.

Each field is declared once, with its default and what it means (:func:`option`);
``bigworld train``'s flags and their help are made from these declarations
(``agents.train.cli``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

MODES = ("outcome_only", "integrated_frozen_rm", "integrated_rm")
"""The ablation rows of RLAnything's table, in order:

- ``outcome_only``: R_i = O, the reward model is neither waited for nor trained;
- ``integrated_frozen_rm``: R_i = O + (λ/m)·Σ_j S_ij, the reward model stays as it is;
- ``integrated_rm``: integrated feedback, and the reward model learns from consistency rewards.
"""
GROUP_KEYS = ("task", "family", "distance")
KL_REFERENCES = ("start", "rollout")
WARM_START_LOSSES = ("rank", "text")


def option(default: Any, help: str, choices: tuple[str, ...] = ()) -> Any:
    """A field of :class:`TrainConfig` with its one description: ``bigworld train``'s flag of
    the same name takes its help (and its choices) from here."""
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class TrainConfig:
    """How the continual trainer learns. Defaults follow design §7 (RLAnything)."""

    # -- what is learned ---------------------------------------------------------------------
    mode: str = option("integrated_rm", "what is learned, and from what (MODES)", MODES)
    lam: float = option(1.0, "λ: weight of the reward model's mean vote in the step reward")
    votes: int = option(3, "m: judgments per step the trainer waits for (first m by vote number)")
    credit_to_go: bool = option(
        False,
        "a step's reward holds the votes of every later step too (a move the next one undoes "
        "earns nothing), not its own alone",
    )
    # -- grouping and filters (design §7) ----------------------------------------------------
    # Rollouts are compared within (task id | family | family and start distance, version):
    # "distance" puts together episodes of one family whose start was as far from the goal by
    # the oracle's plan, which a persistent world repeats far more often than a task and start.
    group_by: str = option(
        "distance",
        "rollouts compared within a task, a family, or a family and start distance",
        GROUP_KEYS,
    )
    min_group_size: int = option(2, "a group with fewer rollouts gives no advantage and is dropped")
    group_size: int = option(
        4, "a uniform group this big is ranked by its votes, or given up without"
    )
    rank_uniform_groups: bool = option(
        False, "with votes, rank a complete group that all failed or all succeeded by them"
    )
    uniform_share: float = option(
        0.0,
        "ranked uniform groups give an update at most this many samples per sample of the "
        "groups with both outcomes (0: no cap)",
    )
    per_episode: bool = option(
        False, "every episode weighs the same in an update (else every decision does)"
    )
    max_staleness: int = option(2, "waiting rollouts more versions behind than this are dropped")
    accuracy_window: tuple[float, float] = option(
        (0.2, 0.8), "tasks whose votes train the reward model"
    )
    include_abandoned: bool = option(
        False, "abandons come from outside the policy (shutdown, idle)"
    )
    judgment_wait_s: float = option(
        120.0, "an episode still short of m votes per step then is dropped"
    )
    # Exact groups (agents/train/exact.py): the trainer itself forks main at its current tick
    # G times and plays one episode of one task in each, so that a group's rollouts all start
    # from one state; they need a policy agent's token and an admin's, and mode outcome_only
    # (no reward agent judges in forks). Their groups are compared within the fork point.
    exact_groups: int = option(0, "G >= 2: learn only from exact groups of G rollouts (0: off)")
    exact_family: str | None = option(None, "exact groups draw tasks of this family (None: any)")
    # -- the loss (agents/train/loss.py) -----------------------------------------------------
    clip_eps: float = option(
        0.2, "PPO ε: a decision's (or token's) ratio new/rollout, in [1-ε, 1+ε]"
    )
    kl_beta: float = option(0.01, "β of the k3 KL estimate to the reference's log-probs")
    # The KL's reference: "start", the version the run started from (anchors successive
    # updates, which noise in the advantages would otherwise let drift), or "rollout", the
    # version that sampled (a trust region within one update: zero on its first pass).
    kl_reference: str = option(
        "start", "the KL's anchor: start (the run's first version) or rollout", KL_REFERENCES
    )
    parse_failure_advantage: float = option(
        -1.0, "a generated answer that did not parse chose nothing"
    )
    unparseable_vote_reward: float = option(-2.0, "consistency reward of a vote that did not parse")
    # Consistency alone is the paper's objective; an anchor adds supervision it does not have.
    reward_anchor: str | None = option(
        None,
        'integrated_rm: a file of labelled steps, a JSON object a line ({"prompt": a reward '
        'prompt, "verdict": 1 or -1}); each update of the reward model then takes as many '
        "rank-loss steps as it took consistency steps (times reward_anchor_steps), each on "
        "the next reward_anchor_batch of them, so that it keeps what they teach",
    )
    reward_anchor_batch: int = option(16, "labelled steps per anchoring step")
    reward_anchor_steps: int = option(1, "anchoring steps per consistency step of the judge")
    max_prompt_tokens: int = option(
        2048, "longer prompts keep their end (actions and the question)"
    )
    # -- optimisation ------------------------------------------------------------------------
    # AdamW learning rates for the tiny models (tests/agents/train/test_gradient_direction.py
    # measures the policy's); pass ~1e-5 for a real checkpoint, ~1e-4 for LoRA adapters
    lr: float = option(2e-3, "AdamW learning rate of the policy")
    reward_lr: float = option(1e-3, "AdamW learning rate of the reward model")
    weight_decay: float = option(0.01, "AdamW weight decay")
    grad_clip: float = option(1.0, "max global gradient norm")
    batch_size: int = option(8, "samples per optimiser step")
    micro_batch_size: int = option(8, "samples per forward/backward pass (gradient accumulation)")
    ppo_epochs: int = option(1, "passes over an update's samples")
    min_samples: int = option(8, "an update waits until this many policy samples are ready")
    # Short updates keep the next rollouts fresh: a random subset of the groups' samples.
    max_samples: int = option(64, "an update trains on at most this many samples (0: no limit)")
    # -- warm start (behaviour cloning on oracle-played steps, policy_version "expert") -------
    warm_start_steps: int = option(0, "optimiser steps of cloning before RL (0: none)")
    warm_start_episodes: int = option(200, "at most this many expert episodes are read for it")
    warm_start_play: int = option(
        0, "first play this many episodes on expert hints (needs --player-token)"
    )
    warm_start_loss: str = option(
        "rank", "rank: softmax over a step's actions; text: its completion", WARM_START_LOSSES
    )
    warm_start_batch: int = option(8, "demonstrated steps per cloning step (rank loss)")
    # -- versions and the loop ---------------------------------------------------------------
    keep_last: int = option(
        3, "checkpoints kept on disk per kind (the registered ones named there)"
    )
    poll_s: float = option(1.0, "wait between looks for newly ended episodes")
    max_backoff_s: float = option(30.0, "longest wait between attempts while the server is away")
    seed: int = option(0, "seeds torch, the samples an update draws and the warm start's order")
    device: str | None = option(None, "cpu or cuda; unset: cuda when available")
    # -- LoRA (peft, GPU, large models; imported only when asked for) -------------------------
    lora: bool = option(False, "train LoRA adapters (peft) instead of every weight")
    lora_rank: int = option(16, "the adapters' rank r")
    lora_alpha: int = option(32, "the adapters' scale: their update is multiplied by alpha / r")
    lora_dropout: float = option(0.0, "dropout on the adapters' input")
    lora_targets: tuple[str, ...] = option(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        "the modules that get adapters",
    )

    def __post_init__(self) -> None:
        for f in fields(self):  # a field declared with choices takes one of them
            choices, value = f.metadata["choices"], getattr(self, f.name)
            if choices and value not in choices:
                raise ValueError(f"expected {f.name} in {choices}, got {value!r}")
        if self.warm_start_play < 0 or self.warm_start_batch < 1:
            raise ValueError(
                "expected warm_start_play >= 0 and warm_start_batch >= 1, got "
                f"{self.warm_start_play}, {self.warm_start_batch}"
            )
        low, high = self.accuracy_window
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(
                f"expected accuracy_window (low, high) with 0 <= low <= high <= 1, got "
                f"{self.accuracy_window}"
            )
        if self.votes < 1 or self.min_group_size < 2 or self.group_size < self.min_group_size:
            raise ValueError(
                "expected votes >= 1 and 2 <= min_group_size <= group_size, got "
                f"{self.votes}, {self.min_group_size}, {self.group_size}"
            )
        if self.exact_groups:
            if self.exact_groups < self.min_group_size:
                raise ValueError(
                    f"expected exact_groups 0 (off) or >= min_group_size ({self.min_group_size}), "
                    f"got {self.exact_groups}"
                )
            if self.uses_votes:
                raise ValueError(
                    "exact_groups plays in forks, where no reward agent judges the steps: "
                    f"expected mode outcome_only, got {self.mode!r}"
                )
        if self.reward_anchor is not None and not self.trains_reward_model:
            raise ValueError(
                f"reward_anchor anchors a reward model in training: expected mode integrated_rm, "
                f"got {self.mode!r}"
            )
        if self.reward_anchor_batch < 1:
            raise ValueError(f"expected reward_anchor_batch >= 1, got {self.reward_anchor_batch}")
        if self.reward_anchor_steps < 1:
            raise ValueError(f"expected reward_anchor_steps >= 1, got {self.reward_anchor_steps}")
        if self.max_samples and self.max_samples < self.min_samples:
            raise ValueError(
                f"expected max_samples 0 or >= min_samples, got {self.max_samples} "
                f"< {self.min_samples}"
            )
        if self.micro_batch_size < 1 or self.batch_size < self.micro_batch_size:
            raise ValueError(
                f"expected 1 <= micro_batch_size <= batch_size, got "
                f"{self.micro_batch_size}, {self.batch_size}"
            )

    @property
    def uses_votes(self) -> bool:
        return self.mode != "outcome_only"

    @property
    def ranks_uniform_groups(self) -> bool:
        """Whether a uniform group gives samples: with votes, unless told not to."""
        return self.uses_votes and self.rank_uniform_groups

    @property
    def trains_reward_model(self) -> bool:
        return self.mode == "integrated_rm"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> TrainConfig:
        """The inverse of :meth:`to_json`; unknown keys (from newer versions) are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in body.items() if k in known}
        for name in ("accuracy_window", "lora_targets"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)
