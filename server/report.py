"""``bigworld report``: PNG plots and a Markdown summary of the world's history.

It reads the database directly through the store, as the server does (the server need not
run), computes the learning metrics with :func:`server.learning.measure`, and writes into the
output folder:

- ``report.md``: the run's figures (ticks, episodes, steps, judgments, agents, versions, tasks,
  forge decisions, season changes) and the learning metrics, with the plots;
- ``success_by_family.png``, ``success_by_version.png``: success over time;
- ``reward_model.png``: how often the reward model's votes agree with outcomes, over time;
- ``forge_decisions.png``: the forge's decisions on a timeline, by kind and verdict;
- ``world_events.png``: world changes (``world.*`` decisions) and season changes over success;
- ``metrics.json``: the whole answer of ``GET /v1/metrics/learning``.

matplotlib (Agg backend) is imported only here, when a report is written, so the server
starts without it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from server.learning import DEFAULT_WINDOW, LearningMetrics, measure, season_changes
from world.state import WorldMeta
from world.store import SqlBackend, make_engine, read_meta, session_factory
from world.store.analysis import Decision, RunFigures, Scope, decisions, run_figures

PLOTS = (
    "success_by_family.png",
    "success_by_version.png",
    "reward_model.png",
    "forge_decisions.png",
    "world_events.png",
)
TABLE_ROWS = 20  # rows per table in report.md; metrics.json has them all
SEASON_LABELS = 24  # season changes named on the world-events plot; beyond, lines only


class ReportError(Exception):
    """Raised when the database cannot be reported on (e.g. its schema is out of date)."""


@dataclass(frozen=True)
class Run:
    """Everything one report shows."""

    meta: WorldMeta
    figures: RunFigures
    metrics: LearningMetrics
    decisions: list[Decision]
    seasons: list[tuple[int, str]]


def version_key(version: str) -> tuple[Any, ...]:
    """Natural order: "2" before "10", numbers before names."""
    return tuple(
        (0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", version) if p
    )


def read_run(session: Session, *, bucket_ticks: int | None, window: int) -> Run:
    meta = SqlBackend(session, read_meta(session)).load_meta()
    return Run(
        meta=meta,
        figures=run_figures(session=session),
        metrics=measure(session, Scope(), bucket_ticks=bucket_ticks, window=window),
        decisions=decisions(session=session, scope=Scope()),
        seasons=season_changes(meta, meta.tick),
    )


def write_report(
    database_url: str, out: Path, *, bucket_ticks: int | None = None, window: int = DEFAULT_WINDOW
) -> Path:
    """Write the report of the world at ``database_url`` into ``out``; returns report.md.
    A database with no world yet (or no file) gets a report that says so."""
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "report.md"
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
        summary.write_text(_empty(f"no database at {url.database}"))
        return summary
    engine = make_engine(database_url, pool_size=1)
    try:
        tables = set(inspect(engine).get_table_names())
        if "world_meta" not in tables:
            summary.write_text(_empty("the database holds no world yet"))
            return summary
        if "forge_decisions" not in tables:
            raise ReportError("the database schema is out of date: run `bigworld db upgrade`")
        with session_factory(engine)() as session:
            run = read_run(session, bucket_ticks=bucket_ticks, window=window)
    finally:
        engine.dispose()
    _plot(run, out)
    (out / "metrics.json").write_text(json.dumps(dataclasses.asdict(run.metrics), indent=1))
    summary.write_text(_markdown(run))
    return summary


def _empty(why: str) -> str:
    return f"# bigworld report\n\nNothing to report: {why}. Run `bigworld serve` (or `bigworld demo`) first.\n"


# -- Markdown --------------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{round(100 * value, 1) + 0.0:+.1f} pts"  # no -0.0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows[:TABLE_ROWS]]
    if len(rows) > TABLE_ROWS:
        lines.append(f"\n({len(rows) - TABLE_ROWS} more rows in metrics.json)")
    return lines


def _markdown(run: Run) -> str:
    m, f = run.metrics, run.figures
    version = run.meta.version_at(run.meta.tick)
    ended = sum(n for s, n in f.episodes_by_status.items() if s != "open")
    decided = {kind: sum(v.values()) for kind, v in f.decisions_by_kind.items()}
    lines = [
        "# bigworld report",
        "",
        f"World seed {run.meta.seed} at tick {run.meta.tick}: {version.season(run.meta.tick)}, "
        f"dynamics version {version.version}.",
        "",
        "## The run",
        "",
        *_table(
            ["figure", "value"],
            [
                ["ticks", str(run.meta.tick)],
                [
                    "episodes",
                    f"{sum(f.episodes_by_status.values())} ({_counts(f.episodes_by_status)})",
                ],
                ["episodes ended", str(ended)],
                ["steps", str(f.steps)],
                ["judgments (votes)", str(f.judgments)],
                ["agents", _counts(f.agents_by_role)],
                [
                    "policy versions on steps",
                    ", ".join(sorted(f.policy_versions, key=version_key)) or "none",
                ],
                ["model versions registered", _counts(f.registered_models)],
                ["tasks by origin", _counts(f.tasks_by_origin)],
                ["tasks by status", _counts(f.tasks_by_status)],
                ["forge decisions", f"{sum(decided.values())} ({_counts(decided)})"],
                ["season changes", str(len(run.seasons))],
            ],
        ),
        "",
        "## Learning",
        "",
        "Definitions: `server/learning.py` (episodes count at their end tick; windows of "
        f"{m.window} episodes; buckets of {m.bucket_ticks} ticks).",
        "",
        f"Average success: **{_pct(m.average_success)}** over {m.episodes} ended episodes.",
        "",
    ]
    if m.episodes == 0:
        lines += ["No episode has ended yet: the metrics below are empty.", ""]
    lines += _table(
        ["family", "episodes", "success"],
        [[k, str(r.episodes), _pct(r.success_rate)] for k, r in m.families.items()],
    )
    lines += [
        "",
        *_table(
            ["policy version", "episodes", "success"],
            [
                [k, str(m.versions[k].episodes), _pct(m.versions[k].success_rate)]
                for k in sorted(m.versions, key=version_key)
            ],
        ),
    ]
    fg, ft, rm = m.forgetting, m.forward_transfer, m.reward_model
    lines += [
        "",
        f"**Forgetting** on {fg.probe_tasks} probe tasks (best earlier window minus the newest): "
        f"mean {_signed(fg.mean)}.",
        "",
        *_table(
            ["probe task", "episodes", "best earlier", "current", "forgetting"],
            [
                [
                    t.task_id,
                    str(t.episodes),
                    _pct(t.best_earlier),
                    _pct(t.current),
                    _signed(t.forgetting),
                ]
                for t in fg.tasks
            ],
        ),
        "",
        f"**Forward transfer** to {ft.forged_tasks} forged tasks (first episodes minus the "
        f"parent's level when forged): mean {_signed(ft.mean)}.",
        "",
        *_table(
            ["task", "origin", "parent", "first episodes", "parent then", "transfer"],
            [
                [
                    t.task_id,
                    t.origin,
                    t.parent_id or "",
                    _pct(t.success),
                    _pct(t.parent_success),
                    _signed(t.transfer),
                ]
                for t in ft.tasks
            ],
        ),
        "",
        f"**World changes**: {len(m.world_changes)} (success before; episodes until the "
        "rolling rate drops, and until it is back).",
        "",
        *_table(
            ["tick", "kind", "success before", "drops after", "back after"],
            [
                [
                    str(c.tick),
                    c.kind,
                    _pct(c.success_before),
                    _opt(c.adaptation_episodes),
                    _opt(c.recovery_episodes),
                ]
                for c in reversed(m.world_changes)
            ],
        ),
        "",
        f"**Reward model**: step accuracy {_pct(rm.step_accuracy)} over {rm.votes} votes on "
        f"{rm.judged_steps} steps with known plan distances; outcome accuracy "
        f"{_pct(rm.outcome_accuracy)} over {rm.judged_episodes} judged episodes.",
        "",
        "## Plots",
        "",
        *[f"![{name[:-4].replace('_', ' ')}]({name})" for name in PLOTS],
        "",
    ]
    return "\n".join(lines)


def _opt(value: int | None) -> str:
    return "never" if value is None else str(value)


# -- plots -----------------------------------------------------------------------------------
def _plot(run: Run, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = run.metrics
    overall = [r for r in m.success_over_time if r.family is None and r.policy_version is None]

    def curve(ax: Any, rows: list[Any], label: str, **style: Any) -> None:
        ax.plot(
            [(r.tick_start + r.tick_end) / 2 for r in rows],
            [r.success_rate for r in rows],
            label=label,
            **style,
        )

    def finish(fig: Any, ax: Any, name: str, title: str, ylabel: str, empty: bool) -> None:
        ax.set_title(title)
        ax.set_xlabel("tick")
        ax.set_ylabel(ylabel)
        if empty:
            ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
        elif ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)

    for name, key, title in (
        ("success_by_family.png", "family", "success over time per task family"),
        ("success_by_version.png", "policy_version", "success over time per policy version"),
    ):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        groups = sorted({getattr(r, key) for r in m.success_over_time} - {None}, key=version_key)
        for group in groups:
            curve(
                ax, [r for r in m.success_over_time if getattr(r, key) == group], group, marker="."
            )
        if overall:
            curve(ax, overall, "all", color="black", linestyle="--", alpha=0.6)
        ax.set_ylim(-0.05, 1.05)
        finish(fig, ax, name, title, "success rate", not overall)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    accuracy = m.reward_model.over_time
    ax.plot(
        [(b.tick_start + b.tick_end) / 2 for b in accuracy],
        [b.outcome_accuracy for b in accuracy],
        marker="o",
        label="votes agree with outcome",
    )
    if overall:
        curve(ax, overall, "policy success", color="grey", linestyle="--")
    ax.set_ylim(-0.05, 1.05)
    finish(
        fig,
        ax,
        "reward_model.png",
        "reward model: agreement with outcomes",
        "share of episodes",
        not accuracy,
    )

    fig, ax = plt.subplots(figsize=(9, 4.5))
    kinds = sorted({d.kind for d in run.decisions})
    verdicts = sorted({d.verdict for d in run.decisions})
    for verdict in verdicts:
        chosen = [d for d in run.decisions if d.verdict == verdict]
        ax.scatter(
            [d.tick for d in chosen],
            [kinds.index(d.kind) for d in chosen],
            label=verdict,
            s=18,
            alpha=0.7,
        )
    ax.set_yticks(range(len(kinds)), kinds)
    finish(fig, ax, "forge_decisions.png", "forge decisions", "kind", not run.decisions)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    # One line collection per kind: a long run has thousands of changes and seasons.
    edge = ax.get_xaxis_transform()  # x in ticks, y in axes fractions
    ax.vlines(
        [t for t, _ in run.seasons],
        0,
        1,
        transform=edge,
        colors="tab:green",
        alpha=0.4,
        linestyles=":",
        label="season change" if run.seasons else "_nolegend_",
    )
    if len(run.seasons) <= SEASON_LABELS:
        for tick, season in run.seasons:
            ax.text(
                tick,
                0.99,
                season,
                transform=edge,
                fontsize="x-small",
                color="tab:green",
                rotation=90,
                va="top",
            )
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    changes = [d for d in run.decisions if d.kind.startswith("world.")]
    for i, kind in enumerate(sorted({d.kind for d in changes})):
        ticks = [d.tick for d in changes if d.kind == kind]
        ax.vlines(
            ticks, 0, 1, transform=edge, colors=palette[i % len(palette)], alpha=0.5, label=kind
        )
    if overall:
        curve(ax, overall, "success", color="black")
    ax.set_ylim(-0.05, 1.15)
    ax.set_xlim(0, max(run.meta.tick, 1))
    finish(
        fig,
        ax,
        "world_events.png",
        "world changes and seasons over success",
        "success rate",
        not (overall or changes or run.seasons),
    )
