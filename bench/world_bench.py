"""World benchmark (not a test): step throughput, region generation, oracle planning, and
whether the cost of a step grows with the size of the world.

Run: ``.venv/bin/python bench/world_bench.py [--quick]``. Everything is in memory
(:class:`MemoryBackend`), one :class:`World` per transaction as the server opens them, and all
figures come from the same run. Times are wall-clock on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from world import engine  # noqa: E402
from world.state import MemoryBackend, World  # noqa: E402

AVATARS = ("a", "b", "c", "d")


@dataclass(frozen=True)
class Config:
    steps: int = 4000  # steps for the throughput figure
    regions: int = 600  # regions generated one by one for the generation figure
    tasks_per_family: int = 20
    big_world: int = 10_000  # generated regions in the large world
    size_steps: int = 3000  # steps timed in each of the small and large worlds
    seed: int = 2026


QUICK = Config(steps=800, regions=150, tasks_per_family=5, big_world=2_000, size_steps=600)


@dataclass
class Row:
    what: str
    value: str
    note: str = ""


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def populate(seed: int) -> MemoryBackend:
    backend = MemoryBackend(seed)
    world = World(backend)
    for avatar in AVATARS:
        world.add_avatar(avatar, avatar.upper())
    world.commit()
    return backend


def play(
    backend: MemoryBackend,
    steps: int,
    chooser: random.Random,
    allow: Callable[[str], bool] = lambda text: True,
) -> list[float]:
    """Random admissible actions, avatars in turn; returns the seconds each step took
    (open a World, step, commit), not counting the choice of the action."""
    options: dict[str, tuple[str, ...]] = {}
    for avatar in AVATARS:
        world = World(backend)
        options[avatar] = engine.observe(world, avatar).admissible
        world.commit()
    timings = []
    for i in range(steps):
        avatar = AVATARS[i % len(AVATARS)]
        text = chooser.choice([o for o in options[avatar] if allow(o)])
        start = time.perf_counter()
        world = World(backend)
        result = engine.step(world, avatar, text)
        world.commit()
        timings.append(time.perf_counter() - start)
        options[avatar] = result.admissible
    return timings


def bench_steps(cfg: Config) -> list[Row]:
    backend = populate(cfg.seed)
    start = time.perf_counter()
    timings = play(backend, cfg.steps, random.Random(1))
    wall = time.perf_counter() - start
    return [
        Row(
            "steps per second (random admissible, 4 avatars)",
            f"{cfg.steps / wall:,.0f}",
            f"{cfg.steps} steps, {len(backend.regions)} regions generated on the way",
        ),
        Row(
            "  step time median / p95",
            f"{ms(statistics.median(timings))} / {ms(quantile(timings, 0.95))}",
        ),
    ]


def bench_regions(cfg: Config) -> list[Row]:
    backend = populate(cfg.seed)
    gen_times, commit_times, places, things = [], [], [], []
    side = int(cfg.regions**0.5) + 1
    coords = [(100 + x, 100 + y) for x in range(side) for y in range(side)][: cfg.regions]
    for rx, ry in coords:
        world = World(backend)
        start = time.perf_counter()
        region = world.region(rx, ry)
        made = time.perf_counter()
        changes = world.commit()
        commit_times.append(time.perf_counter() - made)
        gen_times.append(made - start)
        places.append(region.n_places)
        things.append(len(changes.things))
    return [
        Row(
            "region generation median / p95",
            f"{ms(statistics.median(gen_times))} / {ms(quantile(gen_times, 0.95))}",
            f"{cfg.regions} regions, {statistics.mean(places):.1f} places and {statistics.mean(things):.0f} things each",
        ),
        Row(
            "  commit of a new region median / p95",
            f"{ms(statistics.median(commit_times))} / {ms(quantile(commit_times, 0.95))}",
            "in memory",
        ),
    ]


def bench_oracle(cfg: Config) -> list[Row]:
    try:
        from world import families, oracle, sampling
    except ImportError as exc:
        return [
            Row("oracle planning", "skipped", f"world.oracle/world.sampling not importable: {exc}")
        ]
    from world.errors import TaskError

    backend = populate(cfg.seed)
    play(backend, 300, random.Random(2))  # a world the avatars have already disturbed
    rows = []
    chooser = random.Random(3)
    for family in families.FAMILIES:
        times, lengths, expanded, misses = [], [], [], 0
        for i in range(cfg.tasks_per_family):
            avatar = AVATARS[i % len(AVATARS)]
            play(backend, 4, chooser)  # move the world on between tasks
            world = World(backend)
            try:
                task = sampling.sample_task(world, avatar, key=f"bench:{family}:{i}", family=family)
            except TaskError:
                misses += 1
                world.commit()
                continue
            start = time.perf_counter()
            found = oracle.plan(world, task, avatar)
            times.append(time.perf_counter() - start)
            world.commit()
            if found is not None:
                lengths.append(len(found.actions))
                expanded.append(found.expanded)
        if not times:
            rows.append(Row(f"oracle plan: {family}", "no task", f"{misses} samples found none"))
            continue
        note = f"n={len(times)}, plan length {statistics.mean(lengths):.1f}, expanded {statistics.mean(expanded):.0f}"
        if misses:
            note += f", {misses} samples found no task"
        rows.append(
            Row(
                f"oracle plan: {family} median / p95",
                f"{ms(statistics.median(times))} / {ms(quantile(times, 0.95))}",
                note,
            )
        )
    return rows


def bench_world_size(cfg: Config) -> list[Row]:
    """The same in-region walk in a world of 10 regions and one of ``big_world`` regions.

    Roads are barred so no step generates a region: the timed work is exactly a step's own.
    """
    results = {}
    for size in (10, cfg.big_world):
        backend = populate(cfg.seed)
        side = int(size**0.5)
        coords = [(x - side // 2, y - side // 2) for x in range(side) for y in range(side)]
        coords = (
            coords[:size]
            if size > 10
            else [(0, 0), *[(x, y) for x in (-1, 0, 1) for y in (-2, -1, 1, 2)]][:size]
        )
        for start in range(0, len(coords), 200):
            world = World(backend)
            for rx, ry in coords[start : start + 200]:
                world.region(rx, ry)
            world.commit()
        timings = play(
            backend, cfg.size_steps, random.Random(4), allow=lambda t: not t.endswith(" road")
        )
        results[size] = (len(backend.regions), len(backend.things), timings)
    (small_n, small_things, small), (big_n, big_things, big) = results.values()
    ratio = statistics.median(big) / statistics.median(small)
    tail = quantile(big, 0.99) / quantile(small, 0.99)
    return [
        Row(
            f"step at {small_n:,} regions median / p99",
            f"{ms(statistics.median(small))} / {ms(quantile(small, 0.99))}",
            f"{small_things:,} things",
        ),
        Row(
            f"step at {big_n:,} regions median / p99",
            f"{ms(statistics.median(big))} / {ms(quantile(big, 0.99))}",
            f"{big_things:,} things",
        ),
        Row(
            "  ratio large / small (median, p99)",
            f"{ratio:.2f}x, {tail:.2f}x",
            "about 1 means the step does not grow with the world",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    cfg = QUICK if parser.parse_args().quick else Config()
    rows: list[Row] = []
    for section in (bench_steps, bench_regions, bench_oracle, bench_world_size):
        began = time.perf_counter()
        rows.extend(section(cfg))
        print(f"# {section.__name__} done in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    width = max(len(r.what) for r in rows)
    value_width = max(len(r.value) for r in rows)
    print(f"{'measure':<{width}}  {'value':>{value_width}}  note")
    print(f"{'-' * width}  {'-' * value_width}  {'-' * 4}")
    for row in rows:
        print(f"{row.what:<{width}}  {row.value:>{value_width}}  {row.note}")


if __name__ == "__main__":
    main()
