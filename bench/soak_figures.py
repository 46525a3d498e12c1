"""The soak's figures: fits of the samples, the verdict against the goals, the table, the plot.

Used by ``bench/soak.py``; a sample is a plain dict (see ``soak.sample``) so that the JSON holds
exactly what was measured.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

RSS_SLOPE_MIB = 1.0  # per 10 minutes: "within noise"
# Resident memory is judged on its floor: the lowest sample of each window of this many
# seconds (shorter in a short run, so that there are FLOORS at least). A leak raises the floor;
# a process's working set does not. The trainer's RSS swings by 200 MiB with its training
# batches, so a line fitted through every sample moved by ±10 MiB per 10 minutes from run to
# run and could not tell a leak from the batches it sampled.
FLOOR_WINDOW_S = 300.0
FLOORS = 8
# A floor rising faster than RSS_SLOPE_MIB fails only where the rise is told from no growth: the
# lower end of its slope's 95% interval is above zero. A policy agent's RSS moves between 392
# and 416 MiB in steps that last minutes, so the ten floors of an hour scatter by ±5 MiB and
# their slope's standard error is 0.84 MiB per 10 min (the server's: 0.17); a run then failed
# on +1.01 (interval −0.93 to +2.95) for a process whose samples fell by 7 MiB over the hour.
# Student's t, two-sided 95%, by degrees of freedom (floors − 2); 1.96 beyond the table.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
P50_RISE = 0.10  # of the median p50, over the samples after the warm-up
P50_RISE_MS = 1.0  # a rise below this is noise whatever the median
Sample = dict[str, Any]


def slope(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs``; None with fewer than 2 distinct xs."""
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return num / sum((x - mx) ** 2 for x in xs)


def slope_interval(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """The 95% interval of the least-squares slope of ``ys`` over ``xs`` (None with fewer than
    3 points)."""
    b = slope(xs, ys)
    if b is None or len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    error = (residual / (len(xs) - 2) / sum((x - mx) ** 2 for x in xs)) ** 0.5
    t = T95[len(xs) - 3] if len(xs) - 2 <= len(T95) else 1.96
    return b - t * error, b + t * error


def floors(points: list[tuple[float, float]], window_s: float) -> list[tuple[float, float]]:
    """The lowest (t, y) of each whole ``window_s`` from the first point on (a last, partial
    window is left out when there are whole ones)."""
    if not points:
        return []
    start = points[0][0]
    windows: dict[int, list[tuple[float, float]]] = {}
    for t, y in points:
        windows.setdefault(int((t - start) // window_s), []).append((t, y))
    whole = [k for k in windows if points[-1][0] - start >= (k + 1) * window_s]
    return [min(windows[k], key=lambda p: p[1]) for k in sorted(whole or windows)]


def growth(values: list[float]) -> float:
    """The fewest of the second half minus the fewest of the first. A leaked descriptor or
    thread is never given back, so the count never comes down to where it was; a pool's come
    and go with the requests in flight (the server's worker threads moved between 8 and 11 all
    hour, and a median of the last quarter one above the first's read as growth)."""
    half = max(1, len(values) // 2)
    return min(values[half:] or values) - min(values[:half])


def judge(samples: list[Sample], warmup_s: float) -> dict[str, Any]:
    """Fit the samples after ``warmup_s`` and judge them against the goals: per process the
    slope of the RSS floor (MiB per 10 min; the slope through every sample is reported beside
    it), fd and thread growth; the p50 latency's slope and rise."""
    after = [s for s in samples if s["t_s"] >= warmup_s]
    fits: dict[str, Any] = {"warmup_s": warmup_s, "samples": len(after), "processes": {}}
    failures: list[str] = []
    if len(after) < 3:
        return {**fits, "failures": [f"only {len(after)} samples after the warm-up (need 3)"]}
    names = list(after[0]["processes"])
    for name in names:
        seen = [(s["t_s"], s["processes"].get(name)) for s in after]
        alive = [(t, p) for t, p in seen if p is not None]
        if len(alive) < len(seen):
            failures.append(f"{name} stopped during the run")
        if len(alive) < 3:
            continue
        ts = [t for t, _ in alive]
        rss = slope(ts, [p["rss_mib"] for _, p in alive])
        window = min(FLOOR_WINDOW_S, (ts[-1] - ts[0]) / FLOORS)
        low = floors([(t, p["rss_mib"]) for t, p in alive], window)
        floor = slope([t for t, _ in low], [y for _, y in low])
        interval = slope_interval([t for t, _ in low], [y for _, y in low])
        fit: dict[str, Any] = {
            "rss_floor_mib_per_10min": None if floor is None else floor * 600,
            "rss_floor_interval": None if interval is None else [v * 600 for v in interval],
            "rss_mib_per_10min": None if rss is None else rss * 600,
            "rss_floors": len(low),
            "rss_mib_first_last": [alive[0][1]["rss_mib"], alive[-1][1]["rss_mib"]],
            "fds_growth": growth([p["fds"] for _, p in alive]),
            "threads_growth": growth([p["threads"] for _, p in alive]),
        }
        if fit["fds_growth"] > 0:  # which kind of descriptor: sockets, database files, ...
            kinds = sorted({k for _, p in alive for k in p.get("fd_kinds", {})})
            fit["fd_kinds_growth"] = {
                k: growth([p.get("fd_kinds", {}).get(k, 0) for _, p in alive]) for k in kinds
            }
        fits["processes"][name] = fit
        grows, within = fit["rss_floor_mib_per_10min"], fit["rss_floor_interval"]
        if grows is not None and grows > RSS_SLOPE_MIB and (within is None or within[0] > 0):
            failures.append(
                f"{name} RSS floor grows {grows:+.2f} MiB per 10 min"
                + ("" if within is None else f" (95% {within[0]:+.2f} to {within[1]:+.2f})")
                + f" (goal <= {RSS_SLOPE_MIB}, or not told from no growth)"
            )
        for what in ("fds", "threads"):
            if fit[f"{what}_growth"] > 0:
                failures.append(f"{name} {what} grew by {fit[f'{what}_growth']:+g} (goal: 0)")
    timed = [(s["t_s"], s["p50_ms"]) for s in after if s["p50_ms"] is not None]
    if len(timed) >= 3:
        per_s = slope([t for t, _ in timed], [p for _, p in timed]) or 0.0
        median = statistics.median(p for _, p in timed)
        rise = per_s * (timed[-1][0] - timed[0][0])
        allowed = max(P50_RISE * median, P50_RISE_MS)
        fits["p50"] = {
            "median_ms": median,
            "ms_per_10min": per_s * 600,
            "rise_ms": rise,
            "allowed_ms": allowed,
        }
        if rise > allowed:
            failures.append(f"p50 latency rose {rise:+.2f} ms (goal: at most {allowed:.2f})")
    else:
        failures.append(f"only {len(timed)} windows with timed steps after the warm-up")
    db = slope([s["t_s"] for s in after], [s["db_mib"] + s["wal_mib"] for s in after])
    fits["db_mib_per_10min"] = (db or 0.0) * 600
    return {**fits, "failures": failures}


HEAD = f"{'min':>5} {'tick':>7}"


def header(names: list[str]) -> str:
    cells = "".join(f" {n[:15]:>15}" for n in names)
    return (
        f"{HEAD}{cells} {'db+wal':>8} {'steps':>5} {'p50':>7} {'p95':>7}\n"
        f"{'':>13}" + "".join(f" {'MiB fds thr':>15}" for _ in names) + f" {'MiB':>8}"
        f" {'':>5} {'ms':>7} {'ms':>7}"
    )


def row(s: Sample) -> str:
    cells = "".join(
        f" {p['rss_mib']:7.1f} {p['fds']:3d} {p['threads']:3d}" if p else f" {'gone':>15}"
        for p in s["processes"].values()
    )
    tick = "-" if s["tick"] is None else str(s["tick"])
    p50, p95 = (f"{s[k]:7.1f}" if s[k] is not None else f"{'-':>7}" for k in ("p50_ms", "p95_ms"))
    return (
        f"{s['t_s'] / 60:5.1f} {tick:>7}{cells} {s['db_mib'] + s['wal_mib']:8.1f}"
        f" {s['steps']:5d} {p50} {p95}"
    )


def summary(fits: dict[str, Any], leftover: list[str]) -> list[str]:
    lines = [
        f"after the warm-up ({fits['warmup_s'] / 60:.1f} min, {fits['samples']} samples):",
        f"  {'process':<10} {'RSS MiB/10min: floor':>21} {'(95%)':>15} {'samples':>8}"
        f" {'RSS first→last':>17} {'fds Δ':>6} {'thr Δ':>6}",
    ]
    for name, f in fits["processes"].items():
        floor, every = (
            "-" if f[k] is None else f"{f[k]:+.2f}"
            for k in ("rss_floor_mib_per_10min", "rss_mib_per_10min")
        )
        within = f.get("rss_floor_interval")  # absent from runs judged before it was
        interval = "-" if within is None else f"{within[0]:+.2f}..{within[1]:+.2f}"
        first, last = f["rss_mib_first_last"]
        lines.append(
            f"  {name:<10} {floor:>21} {interval:>15} {every:>8} {f'{first:.1f}→{last:.1f}':>17} "
            f"{f['fds_growth']:>+6g} {f['threads_growth']:>+6g}"
        )
        grown = {k: d for k, d in f.get("fd_kinds_growth", {}).items() if d}
        if grown:
            lines.append(
                f"  {'':<10} fds by kind: " + ", ".join(f"{k} {d:+g}" for k, d in grown.items())
            )
    if "p50" in fits:
        p = fits["p50"]
        lines.append(
            f"  step p50 {p['median_ms']:.1f} ms (median), {p['ms_per_10min']:+.2f} ms per 10 min, "
            f"{p['rise_ms']:+.2f} ms over the span (allowed {p['allowed_ms']:.2f})"
        )
    if "db_mib_per_10min" in fits:
        lines.append(f"  database (file + WAL) {fits['db_mib_per_10min']:+.2f} MiB per 10 min")
    lines.append(f"  left running after the stop: {', '.join(leftover) or 'nothing'}")
    failures = fits["failures"] + [f"left running: {x}" for x in leftover]
    lines.append("verdict: " + ("PASS, every goal met" if not failures else "FAIL"))
    lines += [f"  - {f}" for f in failures]
    return lines


def quarters(kept: list[Sample]) -> list[tuple[Sample, Sample]]:
    """The first and the last quarter of ``kept``, each as its (first, last) sample."""
    q = len(kept) // 4
    return [(kept[0], kept[q]), (kept[-q - 1], kept[-1])]


def cpu(samples: list[Sample], warmup_s: float) -> list[str]:
    """Each process's CPU use, in cores, over the first and the last quarter of the samples
    after the warm-up. Not judged; it says whether a latency that rose met a busier machine
    (these machines have 2 cores for 5 processes and the probe)."""
    kept = [s for s in samples if s["t_s"] >= warmup_s]
    sampled = len(kept) >= 8 and any(p and "cpu_s" in p for p in kept[0]["processes"].values())
    if not sampled:  # a short run, or one from before cpu_s was sampled
        return []
    lines = [f"  {'CPU (cores: first quarter -> last)':<52} {'first':>8} {'last':>8}"]
    for name in kept[0]["processes"]:
        shares = []
        for a, b in quarters(kept):
            pa, pb = a["processes"].get(name), b["processes"].get(name)
            took = pb["cpu_s"] - pa["cpu_s"] if pa and pb else None
            shares.append("-" if took is None else f"{took / (b['t_s'] - a['t_s']):.2f}")
        lines.append(f"  {name:<52} {shares[0]:>8} {shares[1]:>8}")
    return lines


def routes(samples: list[Sample], warmup_s: float) -> list[str]:
    """Where the server's time went, by route: the mean answer time over the first and the
    last quarter of the samples after the warm-up (from /metrics), busiest routes first, with
    the writer's time per transaction and per commit. Not judged; it says which requests grew
    slower as the world's history grew, and whether running or committing them did."""
    kept = [s for s in samples if s["t_s"] >= warmup_s and s.get("routes")]
    if len(kept) < 8:
        return []
    spans = quarters(kept)

    def mean_ms(a: Sample, b: Sample, route: str) -> tuple[float | None, float]:
        s0, n0 = a["routes"].get(route, [0.0, 0.0])
        s1, n1 = b["routes"].get(route, [0.0, 0.0])
        return ((s1 - s0) / (n1 - n0) * 1e3 if n1 > n0 else None), s1 - s0

    lines = [f"  {'route (mean ms: first quarter -> last)':<52} {'first':>8} {'last':>8} {'s':>7}"]
    busiest = sorted(kept[-1]["routes"], key=lambda r: -mean_ms(kept[0], kept[-1], r)[1])
    for route in busiest[:12]:
        (first, _), (last, _) = (mean_ms(a, b, route) for a, b in spans)
        total = mean_ms(kept[0], kept[-1], route)[1]
        shown = [("-" if v is None else f"{v:.1f}") for v in (first, last)]
        lines.append(f"  {route[:52]:<52} {shown[0]:>8} {shown[1]:>8} {total:>7.0f}")
    return lines


def plot(samples: list[Sample], warmup_s: float, path: Path) -> None:
    """RSS, fds and threads per process, database size and step latency over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["t_s"] / 60 for s in samples]
    names = list(samples[0]["processes"]) if samples else []
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = (("rss_mib", "RSS (MiB)"), ("fds", "open fds"), ("threads", "threads"))
    for ax, (key, label) in zip(axes.flat, panels, strict=False):
        for name in names:
            ys = [(s["processes"].get(name) or {}).get(key) for s in samples]
            ax.plot(minutes, [float("nan") if y is None else y for y in ys], label=name)
        ax.set(ylabel=label)
    axes[0][0].legend(fontsize=8)
    ax = axes[1][1]
    for key, label in (("p50_ms", "step p50"), ("p95_ms", "step p95")):
        ax.plot(minutes, [float("nan") if s[key] is None else s[key] for s in samples], label=label)
    ax.set(ylabel="ms (probe)")
    db = ax.twinx()
    db.plot(minutes, [s["db_mib"] + s["wal_mib"] for s in samples], "k:", label="db + WAL (MiB)")
    db.set(ylabel="MiB")
    ax.legend(loc="upper left", fontsize=8)
    db.legend(loc="lower right", fontsize=8)
    for ax in axes.flat:
        ax.axvline(warmup_s / 60, color="grey", lw=0.8, ls="--")
    for ax in axes[1]:
        ax.set(xlabel="minutes")
    fig.suptitle("bigworld soak: the demo's processes on one server (SQLite)")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
