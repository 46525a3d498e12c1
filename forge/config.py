"""The forge's one configuration: every threshold, window, trial size and probability.

It is persisted as JSON in ``forge_state.config`` and changed at run time by a validated
partial update (``PATCH /v1/forge/config``): :meth:`ForgeConfig.updated` either returns a whole
new configuration or raises :class:`~forge.errors.ConfigError` listing every problem, so a
bad update changes nothing.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from forge.dynamics import DynamicsConfig
from forge.errors import ConfigError

REWRITERS = ("programmatic", "language_model")
# Bounds of the integer fields: beyond them a value is a mistake (and would overflow SQL).
INT_RANGES = {
    "window": (1, 10_000),
    "min_rollouts": (1, 10_000),
    "summary_rollouts": (0, 100),
    "trial_size": (1, 10_000),
    "max_proposals": (0, 1_000),
    "cooldown_cycles": (0, 1_000_000),
    "mutation_tries": (1, 1_000),
    "plan_budget": (1, 1_000_000),
    "probe_every": (0, 1_000_000),
    "probes_per_family": (0, 100),
    "draw_tries": (0, 100),
    "curriculum_hops": (1, 100),
    "stale_ticks": (0, 2**62),
}
MAX_FLOAT = 1e6  # weights and timeouts above this are mistakes


@dataclass(frozen=True)
class ForgeConfig:
    """How the critic measures, when the forge adapts, and how episode begins draw tasks.

    Accuracy is succeeded / ended rollouts (abandoned ones count as failures, outcome −1).
    """

    # -- critic feedback
    alpha_low: float = 0.2  # accuracy at or below this: hopeless, propose an easier variant
    alpha_high: float = 0.8  # accuracy at or above this: mastered, propose a harder variant
    window: int = 16  # most recent ended rollouts of a task its accuracy is measured over
    min_rollouts: int = 4  # rollouts in the window before a task's accuracy counts as measured
    summary_rollouts: int = 2  # failed rollouts summarised in a proposal's evidence
    # -- adaptation (one forge cycle)
    trial_size: int = 8  # ended rollouts of a pending variant that decide its trial
    retire_parents: bool = True  # retire a mastered or hopeless task once its variant is accepted
    max_proposals: int = 2  # proposals per cycle at most (the most extreme tasks first)
    cooldown_cycles: int = 5  # cycles after a proposal before the same task is proposed for again
    # a live non-probe task with no rollout ended (and not created) in this many ticks retires:
    # fresh samples near every place the avatars pass would otherwise keep the pool growing,
    # and the draw and every cycle read the whole live pool under the world lock; 0: never
    stale_ticks: int = 2000
    mutation_tries: int = 8  # variants the oracle plans per proposal at most
    plan_budget: int = 4000  # oracle search budget per plan, in proposals and draws alike
    rewriter: str = "programmatic"  # "programmatic", or "language_model" (falls back to it)
    # -- the curriculum (forge.mutate.descend / climb): a hopeless family's easiest task steps
    # down to go_to (fewer hops, down to one), and go_to mastered at curriculum_hops steps back up
    curriculum: bool = True
    curriculum_hops: int = 3  # the top go_to rung: mastered there, the family comes back
    # -- the draw at episode begin (runs inside the world lock: keep it cheap)
    probe_every: int = 10  # every k-th drawn begin draws a probe task; 0: never
    probes_per_family: int = 2  # the first tasks sampled per family form the fixed probe set
    fresh_probability: float = 0.1  # chance that a drawn begin samples a fresh task for the pool
    draw_tries: int = 4  # pool tasks the oracle checks per begin before a fresh one is sampled
    weight_informative: float = 4.0  # draw weight: accuracy inside (alpha_low, alpha_high)
    weight_unmeasured: float = 2.0  # draw weight: fewer than min_rollouts measured
    weight_settled: float = 1.0  # draw weight: mastered or hopeless (still re-measured)
    # -- the optional language model (OpenAI-compatible HTTP endpoint; never loaded here)
    lm_url: str | None = None  # base URL, e.g. "http://127.0.0.1:8001/v1"; None: not used
    lm_model: str = "default"  # model name sent with each request
    lm_timeout_s: float = 10.0  # seconds per request
    lm_summaries: bool = False  # also ask it for a one-line failure summary per proposal
    # -- world dynamics (forge.dynamics)
    dynamics: DynamicsConfig = field(default_factory=DynamicsConfig)

    def __post_init__(self) -> None:
        problems = _check_types(self, "") or self._check_ranges()
        if problems:
            raise ConfigError(problems)

    def _check_ranges(self) -> list[str]:
        problems = []
        if not 0.0 <= self.alpha_low < self.alpha_high <= 1.0:
            problems.append(
                f"expected 0 <= alpha_low < alpha_high <= 1, got {self.alpha_low}, "
                f"{self.alpha_high}"
            )
        for name, (low, high) in INT_RANGES.items():
            if not low <= getattr(self, name) <= high:
                problems.append(f"expected {name} in [{low}, {high}], got {getattr(self, name)}")
        if self.min_rollouts > self.window:
            problems.append(f"expected min_rollouts <= window ({self.window})")
        if not 0.0 <= self.fresh_probability <= 1.0:
            problems.append(f"expected fresh_probability in [0, 1], got {self.fresh_probability}")
        for name in ("weight_informative", "weight_unmeasured", "weight_settled", "lm_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_FLOAT):
                problems.append(f"expected {name} in (0, {MAX_FLOAT:g}], got {value}")
        if self.rewriter not in REWRITERS:
            problems.append(f"expected rewriter in {REWRITERS}, got {self.rewriter!r}")
        if self.lm_url is not None:
            parts = urllib.parse.urlsplit(self.lm_url)
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or len(self.lm_url) > 2048
            ):
                problems.append(f"expected lm_url as an http(s) URL, got {self.lm_url!r}")
        if not 0 < len(self.lm_model) <= 256:
            problems.append("expected lm_model of 1 to 256 characters")
        return problems

    # -- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForgeConfig:
        """A configuration from stored JSON; fields it lacks keep their defaults and fields
        this version no longer has are dropped (stored configurations outlive releases)."""
        return cls.updated_from(cls(), _known(cls, data), strict=False)

    def updated(self, patch: object) -> ForgeConfig:
        """This configuration with ``patch`` (a partial JSON object; ``dynamics`` may itself
        be partial) applied; raises ConfigError on unknown fields or bad values."""
        return self.updated_from(self, patch, strict=True)

    @staticmethod
    def updated_from(base: ForgeConfig, patch: object, *, strict: bool) -> ForgeConfig:
        if not isinstance(patch, dict):
            raise ConfigError([f"expected a JSON object, got {type(patch).__name__}"])
        problems = [f"unknown field {name!r}" for name in patch if name not in _fields(base)]
        if problems:
            raise ConfigError(problems)
        flat = {k: v for k, v in patch.items() if k != "dynamics"}
        dynamics = patch.get("dynamics", {})
        try:
            if not strict and isinstance(dynamics, dict):
                dynamics = _known(DynamicsConfig, dynamics)
            new_dynamics = DynamicsConfig.from_dict(dynamics, base.dynamics)
        except (TypeError, ValueError) as exc:  # the dynamics config's own checks
            raise ConfigError([f"dynamics: {exc}"]) from exc
        return dataclasses.replace(base, **flat, dynamics=new_dynamics)


def _fields(obj: object) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


_HINTS: dict[type, dict[str, Any]] = {}


def _check_types(obj: object, prefix: str) -> list[str]:
    """Every field whose value is not of its annotated JSON type (bool is not an int; an int
    is a float)."""
    cls = type(obj)
    hints = _HINTS.get(cls)
    if hints is None:  # resolving annotations costs more than checking them: once per class
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    problems = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if not _is(value, hints[f.name]):
            problems.append(f"expected {prefix}{f.name} as {hints[f.name]}, got {value!r}")
    return problems


def _is(value: object, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, hint)  # type: ignore[arg-type]
    return True  # other shapes (tuples, mappings) are checked by the dataclass itself
