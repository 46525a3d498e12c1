"""``bigworld report``: PNG plots and a Markdown summary of the world's history.

It reads the database directly through the store, as the server does (the server need not
run), computes the learning metrics with :func:`server.learning.measure`, and writes into the
output folder:

- ``report.md``: the run's figures (ticks, episodes, steps, judgments, agents, versions, tasks,
  forge decisions, season changes) and the learning metrics, with the plots;
- ``success_by_family.png``: success over time per family;
- ``success_by_version.png``: success over time per policy version, and each version's success
  with its 95% Wilson interval, overall and in the families played most;
- ``success_by_version.json``: those figures per version, overall and per family;
- ``reward_model.png``: how often the reward model's votes agree with outcomes, over time;
- ``forge_decisions.png``: the forge's decisions on a timeline, by kind and verdict;
- ``world_events.png``: world changes (``world.*`` decisions) and season changes over success;
- ``metrics.json``: the whole answer of ``GET /v1/metrics/learning``.

With ``world`` a fork's name, the report is of that fork's own history (its store, found in
the main world's registry of forks: what was played in it since its tick), as
``GET /v1/worlds/{name}/metrics/learning`` answers; the history before the fork's tick is its
parent's.

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

from sqlalchemy import Engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from server.analysis import Decision, RunFigures, Scope, decisions, outcomes, run_figures
from server.learning import DEFAULT_WINDOW, LearningMetrics, measure, season_changes
from world.contract import MAIN_WORLD
from world.stats import wilson
from world.store import make_engine, read_world, session_factory
from world.store.worlds import Fork, get_fork, list_forks, open_store
from world.values import WorldMeta

PLOTS = (
    "success_by_family.png",
    "success_by_version.png",
    "reward_model.png",
    "forge_decisions.png",
    "world_events.png",
)
TABLE_ROWS = 20  # rows per table in report.md; metrics.json has them all
SEASON_LABELS = 24  # season changes named on the world-events plot; beyond, lines only
FAMILIES_BY_VERSION = 3  # families drawn on the per-version panel (the most played)
FIRST_MIN_EPISODES = 10  # the first version compared against is the first with this many
WORLDS_NAMED = 10  # worlds an unknown world's error names


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
    by_version: dict[str, Any] = dataclasses.field(default_factory=dict)  # see version_table
    fork: Fork | None = None  # the fork reported on; None: the main world


@dataclass(frozen=True)
class VersionRate:
    """One policy version's ended episodes, successes, rate and 95% Wilson interval."""

    episodes: int
    successes: int
    success_rate: float | None
    low: float | None
    high: float | None


def version_rate(successes: int, episodes: int) -> VersionRate:
    low, high = wilson(successes, episodes)
    return VersionRate(episodes, successes, successes / episodes if episodes else None, low, high)


def version_table(session: Session, tick: int) -> dict[str, Any]:
    """Success per policy version with 95% Wilson intervals, overall (``all``) and per family
    (``families``: family → version → rate), from every ended episode with a version; and
    ``above_first``: the later versions whose interval lies wholly above the first's."""
    counts: dict[tuple[str, str], list[int]] = {}
    for o in outcomes(session=session, scope=Scope(), bucket_ticks=max(1, tick + 1)):
        if o.policy_version is None:
            continue
        for family in ("", o.family):
            tally = counts.setdefault((family, o.policy_version), [0, 0])
            tally[0] += o.episodes
            tally[1] += o.episodes if o.success else 0
    table: dict[str, dict[str, VersionRate]] = {}
    for (family, version), (ended, won) in counts.items():
        table.setdefault(family, {})[version] = version_rate(won, ended)

    def ordered(rates: dict[str, VersionRate]) -> dict[str, VersionRate]:
        return {v: rates[v] for v in sorted(rates, key=version_key)}

    overall = ordered(table.pop("", {}))
    return {
        "all": overall,
        "families": {f: ordered(r) for f, r in sorted(table.items())},
        "above_first": above_first(overall),
        "interval": "Wilson score, 95%",
    }


def above_first(rates: dict[str, VersionRate]) -> list[str]:
    """The versions after the first one with at least ``FIRST_MIN_EPISODES`` episodes (in the
    order given) whose 95% interval lies wholly above that first one's."""
    names = [v for v, r in rates.items() if r.episodes >= FIRST_MIN_EPISODES]
    if not names:
        return []
    first = rates[names[0]]
    top = first.high if first.high is not None else 1.0
    later = list(rates)[list(rates).index(names[0]) + 1 :]
    return [v for v in later if (low := rates[v].low) is not None and low > top]


def version_key(version: str) -> tuple[Any, ...]:
    """Natural order: "2" before "10", numbers before names."""
    return tuple(
        (0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", version) if p
    )


def read_run(
    session: Session, *, bucket_ticks: int | None, window: int, fork: Fork | None = None
) -> Run:
    """The report of the history in ``session``'s store: the main world's, or ``fork``'s own."""
    meta = read_world(session).meta
    return Run(
        meta=meta,
        figures=run_figures(session=session),
        metrics=measure(session, Scope(), bucket_ticks=bucket_ticks, window=window),
        decisions=decisions(session=session, scope=Scope()),
        seasons=season_changes(meta, meta.tick),
        by_version=version_table(session, meta.tick),
        fork=fork,
    )


def write_report(
    database_url: str,
    out: Path,
    *,
    world: str = MAIN_WORLD,
    bucket_ticks: int | None = None,
    window: int = DEFAULT_WINDOW,
) -> Path:
    """Write the report of world ``world`` (main, or a fork of the main world at
    ``database_url``) into ``out``; returns report.md. The main world with no world yet in its
    database (or no file) gets a report that says so; a world that is not there raises
    :class:`ReportError`, and then nothing is written."""
    summary = out / "report.md"
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
        if world != MAIN_WORLD:
            raise ReportError(f"no world {world!r} (no database at {url.database})")
        out.mkdir(parents=True, exist_ok=True)
        summary.write_text(_empty(f"no database at {url.database}"))
        return summary
    engine = make_engine(database_url, pool_size=1)
    try:
        tables = set(inspect(engine).get_table_names())
        if "world_meta" not in tables:
            if world != MAIN_WORLD:
                raise ReportError(f"no world {world!r} (the database holds no world yet)")
            out.mkdir(parents=True, exist_ok=True)
            summary.write_text(_empty("the database holds no world yet"))
            return summary
        _up_to_date(tables)
        if world == MAIN_WORLD:
            with session_factory(engine)() as session:
                run = read_run(session, bucket_ticks=bucket_ticks, window=window)
        else:
            run = _read_fork(engine, tables, world, bucket_ticks=bucket_ticks, window=window)
    finally:
        engine.dispose()
    out.mkdir(parents=True, exist_ok=True)
    _plot(run, out)
    (out / "metrics.json").write_text(json.dumps(dataclasses.asdict(run.metrics), indent=1))
    (out / "success_by_version.json").write_text(json.dumps(_jsonable(run.by_version), indent=1))
    summary.write_text(_markdown(run))
    return summary


def _up_to_date(tables: set[str]) -> None:
    if "forge_decisions" not in tables:
        raise ReportError("the database schema is out of date: run `bigworld db upgrade`")


def _read_fork(
    main: Engine, tables: set[str], name: str, *, bucket_ticks: int | None, window: int
) -> Run:
    """Fork ``name``'s own history, from its store as the main world's registry places it."""
    if "worlds" not in tables:  # a schema from before forks
        raise ReportError(f"no world {name!r} (the database holds no forks)")
    with session_factory(main)() as session:
        fork = get_fork(session, name)
        if fork is None:
            forks = [f.name for f in list_forks(session, limit=WORLDS_NAMED + 1)]
            more = " and more" if len(forks) > WORLDS_NAMED else ""
            named = ", ".join([MAIN_WORLD, *forks[:WORLDS_NAMED]])
            raise ReportError(
                f"no world {name!r} (worlds in this database: {named}{more}; "
                "`bigworld world list` lists them all)"
            )
    # Opening a SQLite store that is not there would create it, empty.
    there = (
        Path(fork.location).is_file()
        if main.dialect.name == "sqlite"
        else fork.location in inspect(main).get_schema_names()
    )
    if not there:
        raise ReportError(f"world {name!r} has no store at {fork.location}")
    store = open_store(main, fork.location)
    try:
        own = set(inspect(store).get_table_names())
        if "world_meta" not in own:
            raise ReportError(f"world {name!r}'s store at {fork.location} holds no world")
        _up_to_date(own)
        with session_factory(store)() as session:
            return read_run(session, bucket_ticks=bucket_ticks, window=window, fork=fork)
    finally:
        store.dispose()


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


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
    fork = run.fork
    lines = [
        "# bigworld report" + ("" if fork is None else f" of world {fork.name}"),
        "",
        f"World seed {run.meta.seed} at tick {run.meta.tick}: {version.season(run.meta.tick)}, "
        f"dynamics version {version.version}.",
        "",
    ]
    if fork is not None:
        lines += [
            f"World `{fork.name}` is a fork of `{fork.parent}` at tick {fork.at_tick}: this is "
            "its own history since, which never touches its parent's (the history before is "
            f"`{fork.parent}`'s: `bigworld report --world {fork.parent}`).",
            "",
        ]
    lines += [
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
            ["policy version", "episodes", "success", "95% interval", *_family_columns(run)],
            [
                [
                    k,
                    str(r.episodes),
                    _pct(r.success_rate),
                    _interval(r),
                    *[_rate_cell(run, family, k) for family in _family_columns(run)],
                ]
                for k, r in (run.by_version.get("all") or {}).items()
            ],
        ),
        "",
        f"Versions whose 95% Wilson interval lies wholly above that of the first version with "
        f"at least {FIRST_MIN_EPISODES} episodes: "
        f"{', '.join(run.by_version.get('above_first') or []) or 'none'} "
        "(success_by_version.json has every family).",
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


def _interval(r: VersionRate) -> str:
    if r.low is None or r.high is None:
        return "n/a"
    return f"{100 * r.low:.1f}–{100 * r.high:.1f}%"


def _family_columns(run: Run) -> list[str]:
    """The families played most, by ended episodes with a version."""
    families: dict[str, dict[str, VersionRate]] = run.by_version.get("families") or {}
    played = sorted(families, key=lambda f: -sum(r.episodes for r in families[f].values()))
    return played[:FAMILIES_BY_VERSION]


def _rate_cell(run: Run, family: str, version: str) -> str:
    r = (run.by_version.get("families") or {}).get(family, {}).get(version)
    if r is None:
        return ""
    return f"{r.successes}/{r.episodes} ({_interval(r)})"


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
        by_version = key == "policy_version"
        fig, axes = plt.subplots(1, 2 if by_version else 1, figsize=(15 if by_version else 9, 4.5))
        ax = axes[0] if by_version else axes
        groups = sorted({getattr(r, key) for r in m.success_over_time} - {None}, key=version_key)
        for group in groups[-12:] if by_version else groups:  # the latest versions, not 100
            curve(
                ax, [r for r in m.success_over_time if getattr(r, key) == group], group, marker="."
            )
        if overall:
            curve(ax, overall, "all", color="black", linestyle="--", alpha=0.6)
        ax.set_ylim(-0.05, 1.05)
        if by_version:
            _version_panel(axes[1], run)
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


def _version_panel(ax: Any, run: Run) -> None:
    """Each version's success with its 95% Wilson interval: all episodes, and the families
    played most (points side by side)."""
    rows: list[tuple[str, dict[str, VersionRate]]] = [("all", run.by_version.get("all") or {})]
    families = run.by_version.get("families") or {}
    rows += [(f, families[f]) for f in _family_columns(run)]
    versions = list(rows[0][1])
    for i, (label, rates) in enumerate(rows):
        shift = (i - (len(rows) - 1) / 2) * 0.15
        xs, ys, lows, highs = [], [], [], []
        for x, version in enumerate(versions):
            r = rates.get(version)
            if r is None or r.success_rate is None or r.low is None or r.high is None:
                continue
            xs.append(x + shift)
            ys.append(r.success_rate)
            lows.append(r.success_rate - r.low)
            highs.append(r.high - r.success_rate)
        style = {"color": "black"} if label == "all" else {}
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", capsize=3, label=label, **style)
    step = max(1, len(versions) // 20)
    ax.set_xticks(range(0, len(versions), step), versions[::step], fontsize="small")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("policy version")
    ax.set_ylabel("success rate")
    ax.set_title("success per policy version, 95% Wilson intervals")
    if versions:
        ax.legend(fontsize="small", loc="best")
