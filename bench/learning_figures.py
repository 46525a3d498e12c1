"""The learning bench's figures: what an arm's episodes and steps show, the bar, the plot.

Used by ``bench/learning.py``; rates come with their 95% Wilson interval (``server.report``).
"""

from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from agents.client import BigWorldClient
from agents.train.config import GROUP_KEYS, TrainConfig
from agents.train.data import NotReady, episode_from_detail
from agents.train.rewards import configured_advantages, policy_advantages
from world.stats import Difference, unpaired_difference
from world.stats import wilson as wilson_interval

VOTES = 3  # m: the first m judgments of a step count, as the trainer takes them
COLOURS = {
    "frozen": (120, 120, 120),
    "outcome_only": (31, 119, 180),
    "integrated": (255, 127, 14),
    "integrated_oracle": (140, 86, 75),
    "integrated_rm": (44, 160, 44),
    "integrated_rm_forge": (214, 39, 40),
    "trl": (148, 103, 189),  # bench/trl_grpo.py's TRL GRPOTrainer arm
}


def inspect_steps(
    admin: BigWorldClient,
    policy: Path,
    config: TrainConfig | None,
    *,
    judged: bool,
    episodes: int = 200,
) -> dict[str, Any]:
    """Prompt tokens and candidates per step (p50, p95) over the latest ``episodes`` ended
    episodes, where the arm's trainer (``config``; None: the arm learns nothing) puts its
    credit over them (:func:`credit_by_move`), and where a judge voted (``judged``) its step
    accuracy per version over every ended episode (every version that judged, from the
    first; :func:`judge_accuracy`)."""
    tokenizer = AutoTokenizer.from_pretrained(policy, local_files_only=True)
    tokens, candidates = [], []
    ended = [r for r in admin.episodes(page_size=500) if r["status"] != "open"]  # oldest first
    details = [admin.episode(row["id"]) for row in (ended if judged else ended[-episodes:])]
    latest = details[-episodes:]
    for detail in latest:
        offered = [detail["admissible_actions"]] + [
            s["admissible_actions"] for s in detail["steps"]
        ]
        for step, admissible in zip(detail["steps"], offered, strict=False):
            if step.get("prompt"):
                tokens.append(len(tokenizer(step["prompt"]).input_ids))
                candidates.append(len(admissible))
    return {
        "prompt_tokens": _percentiles(tokens),
        "candidates": _percentiles(candidates),
        **judge_accuracy(details),
        "grouping_signal": grouping_signal(latest),
        "credit_by_move": credit_by_move(latest, config) if config is not None else {},
    }


def judge_accuracy(details: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The reward model's votes against the oracle's verdicts (:func:`progress`), per version:
    the share that agree (``reward_accuracy``), how many were counted (``reward_votes``), and
    the share that agree on the steps the oracle calls good, on those it calls bad, on the
    good steps of episodes that failed, where consistency with the outcome pulls the other
    way, and on the bad steps apart by :func:`step_kind` (``bad_move``: a move the wrong way;
    ``bad_other``: any other action) (``reward_by_step``), with the votes counted in each
    (``reward_votes_by_step``)."""
    cells: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for detail in details:
        votes = defaultdict(list)
        for j in detail["judgments"]:
            votes[j["step"]].append(j)
        truths = progress(detail)
        failed = not any(step["success"] for step in detail["steps"])
        for step in detail["steps"]:
            truth = truths.get(step["step"])
            if truth is None:
                continue
            kinds = ["all", "good" if truth > 0 else "bad"]
            kinds += ["good_in_failures"] if truth > 0 and failed else []
            kinds += [f"bad_{step_kind(step['observation'])}"] if truth < 0 else []
            for j in votes[step["step"]][:VOTES]:
                for kind in kinds:
                    cell = cells[j["model_version"]][kind]
                    cell[0] += j["score"] == truth
                    cell[1] += 1
    versions = sorted(cells.items(), key=_version_order)
    share = {v: {k: round(a / n, 3) for k, (a, n) in c.items() if n} for v, c in versions}
    return {
        "reward_accuracy": {v: s.pop("all") for v, s in share.items()},
        "reward_votes": {v: c["all"][1] for v, c in versions},
        "reward_by_step": share,
        "reward_votes_by_step": {v: {k: n for k, (_, n) in c.items()} for v, c in versions},
    }


def _version_order(item: tuple[str, Any]) -> tuple[int, str]:
    """Versions in the order they were published: numbered ones by number, others first."""
    version = item[0]
    return (int(version), "") if version.isdigit() else (-1, version)


def _verdicts(detail: dict[str, Any]) -> Iterator[tuple[int, int | None, int]]:
    """(step, the plan's length before it, the oracle's verdict) for each judged step of an
    episode: +1 where the plan to the goal shrank or the goal was met, -1 where it did not;
    steps without recorded distances are left out."""
    before = detail.get("distance")
    for step in sorted(detail.get("steps") or (), key=lambda s: s["step"]):
        after = step.get("distance")
        if step["success"] or (before is not None and after is not None):
            yield step["step"], before, 1 if step["success"] or after < before else -1
        before = after


def progress(detail: dict[str, Any]) -> dict[int, int]:
    """The oracle's verdict on each step of an episode (:func:`_verdicts`), by step."""
    return {step: verdict for step, _, verdict in _verdicts(detail)}


def toward_goal(detail: dict[str, Any]) -> dict[str, int]:
    """How many of an episode's steps the oracle calls good (:func:`progress`) out of those it
    judged: all of them, and those taken one move from the goal (``near``: the goal's name is
    among the exits, so the observation shows the way) and farther (``far``: which exit leads
    closer is not in the observation; a policy must have learned the map)."""
    judged = list(_verdicts(detail))
    near = [v for _, before, v in judged if before == 1]
    far = [v for _, before, v in judged if before != 1]
    return {
        f"{name}{part}": count
        for part, verdicts in (("", [v for _, _, v in judged]), ("_near", near), ("_far", far))
        for name, count in (("closer", sum(v > 0 for v in verdicts)), ("judged", len(verdicts)))
    }


def turned_back(detail: dict[str, Any]) -> dict[str, int]:
    """Of an episode's moves that came right after a move (``after_move``), how many went
    straight back to the place the avatar had just left (``back``): the mistake a follow task's
    words invite from its third move on, where that place is named in the task too. Places are
    read from the observations ("You are in the …", "You arrive at the …")."""
    place = _place(detail.get("observation") or "", "You are in the ")
    left = None  # the place the last step moved from, when the last step was a move
    back = after_move = 0
    for step in sorted(detail.get("steps") or (), key=lambda s: s["step"]):
        arrived = _place(step["observation"], "You arrive at the ")
        if arrived is None:  # not a move: the next move comes after something else
            left = None
            continue
        if left is not None:
            after_move += 1
            back += arrived == left
        left, place = place, arrived
    return {"back": back, "after_move": after_move}


MOVE_KINDS = {
    "winning": "the winning move, one move from the goal",
    "missed": "one move from the goal, anything else",
    "back_after_wrong": "straight back after a move the oracle calls bad",
    "back_after_right": "straight back after a move the oracle calls good",
    "toward": "any other step toward the goal",
    "away": "any other step not toward it",
}


def move_kinds(detail: dict[str, Any]) -> dict[int, str]:
    """Each judged step of an episode (:func:`_verdicts`) by one of :data:`MOVE_KINDS`: a move
    straight back where the last move came from (as :func:`turned_back` reads it) by the
    oracle's verdict on that last move, any other step by where it was taken and its verdict."""
    verdicts = {step: (before, v) for step, before, v in _verdicts(detail)}
    place = _place(detail.get("observation") or "", "You are in the ")
    left, last = None, None  # the place the last move left, the verdict on that move
    kinds = {}
    for step in sorted(detail.get("steps") or (), key=lambda s: s["step"]):
        arrived = _place(step["observation"], "You arrive at the ")
        before, verdict = verdicts.get(step["step"], (None, None))
        if verdict is not None:
            if arrived is not None and arrived == left and last is not None:
                kinds[step["step"]] = "back_after_right" if last > 0 else "back_after_wrong"
            elif before == 1:
                kinds[step["step"]] = "winning" if verdict > 0 else "missed"
            else:
                kinds[step["step"]] = "toward" if verdict > 0 else "away"
        if arrived is None:  # not a move: the next move comes after something else
            left = last = None
        else:
            left, place, last = place, arrived, verdict
    return kinds


def credit_by_move(
    details: list[dict[str, Any]], config: TrainConfig, batch: int = 32
) -> dict[str, Any]:
    """Where the arm's trainer puts its credit, by kind of move (:func:`move_kinds`): over
    consecutive batches of ``batch`` ended episodes (what an update sees), the advantages its
    settings give (``config``: votes or not, grouping, ranked uniform groups and their cap),
    recomputed here; per kind the samples, their mean advantage, the share above zero and
    the sum, in all groups and in the ranked uniform ones; episodes not yet judged are left out. A policy gradient raises each
    sampled move's probability by its advantage, so a kind's sum says which way it is pushed."""
    episodes = []
    for d in details:
        try:
            e = episode_from_detail(d, votes=VOTES, use_votes=config.uses_votes)
        except NotReady:  # not yet judged when the arm ended: its trainer never saw it either
            continue
        if e is not None:
            episodes.append((e, move_kinds(d)))
    kinds = {e.rollout.episode_id: k for e, k in episodes}
    cells: dict[str, list[float]] = defaultdict(list)
    rng = random.Random(config.seed)
    for i in range(0, len(episodes), batch):
        rollouts = [e.rollout for e, _ in episodes[i : i + batch]]
        advantages, _ = configured_advantages(rollouts, config, rng)
        for a in advantages:
            kind = kinds[a.episode_id].get(a.step)
            if kind is not None:
                cells[kind].append(a.advantage)
                if a.uniform:
                    cells[f"{kind}_uniform"].append(a.advantage)
    return {
        kind: {
            "n": len(values),
            "mean": round(sum(values) / len(values), 3),
            "positive": round(sum(v > 0 for v in values) / len(values), 3),
            "sum": round(sum(values), 1),
        }
        for kind in (*MOVE_KINDS, *(f"{k}_uniform" for k in MOVE_KINDS))
        if (values := cells.get(kind))
    }


STEP_KINDS = ("move", "other")  # what step_kind tells apart


def step_kind(observation: str) -> str:
    """``move`` where the step took the avatar to another place (what followed it reads "You
    arrive at the …"), else ``other``: a wrong turn is a bad step of the first kind."""
    return "move" if _place(observation, "You arrive at the ") is not None else "other"


def _place(observation: str, opening: str) -> str | None:
    if not observation.startswith(opening):
        return None
    return observation[len(opening) :].split(".", 1)[0]


def grouping_signal(details: list[dict[str, Any]], batch: int = 32) -> dict[str, Any]:
    """How clean each way of grouping rollouts (``GROUP_KEYS``) makes the outcome-only
    advantage: over consecutive batches of ``batch`` ended episodes (what an update sees),
    the share of decisions given a non-zero advantage, and how often its sign agrees with the
    oracle's verdict on the step (:func:`progress`), with its 95% Wilson interval. An
    advantage that mostly says how far the start was, not how good the move, agrees less."""
    episodes = [
        (e, progress(d))
        for d in details
        if (e := episode_from_detail(d, votes=VOTES, use_votes=False)) is not None
    ]
    by_id = {e.rollout.episode_id: truth for e, truth in episodes}
    judged = sum(len(truth) for _, truth in episodes)
    out: dict[str, Any] = {}
    for key in GROUP_KEYS:
        kept = agree = 0
        for i in range(0, len(episodes), batch):
            rollouts = [e.rollout for e, _ in episodes[i : i + batch]]
            advantages, _ = policy_advantages(rollouts, integrated=False, by=key)
            for a in advantages:
                truth = by_id[a.episode_id].get(a.step)
                if truth is not None:
                    kept += 1
                    agree += (a.advantage > 0) == (truth > 0)
        out[key] = {
            "kept": round(kept / judged, 3) if judged else None,
            "agree": wilson(agree, kept),
        }
    return out


def _percentiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    at = [float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) for q in (0.5, 0.95)]
    return {"p50": at[0], "p95": at[1], "n": float(len(values))}


def wilson(wins: int, n: int) -> dict[str, float] | None:
    """The success rate of ``n`` episodes and its 95% Wilson score interval."""
    low, high = wilson_interval(wins, n)
    if low is None or high is None:
        return None
    return {"rate": round(wins / n, 4), "low": round(low, 4), "high": round(high, 4), "n": n}


def rate_difference(a: dict[str, float], b: dict[str, float]) -> Difference:
    """Rate ``a`` - rate ``b`` with its 95% interval (Newcombe's, unpaired), from two of
    :func:`wilson`'s cells (their rate and episode count)."""
    wins_a, wins_b = round(a["rate"] * a["n"]), round(b["rate"] * b["n"])
    return unpaired_difference(wins_a, int(a["n"]), wins_b, int(b["n"]))


def _rate(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    return wilson(sum(r["success"] for r in rows), len(rows))


def _share(rows: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    """One of :data:`STEP_SHARES` over the episodes' steps: the steps ``key`` counts out of
    those its denominator counts."""
    return wilson(
        sum(r.get(key, 0) for r in rows), sum(r.get(STEP_SHARES[key][0], 0) for r in rows)
    )


def summarise(
    result: dict[str, Any], args: argparse.Namespace, buckets: int = 10
) -> dict[str, Any]:
    """The arm's figures over the rung's episodes (a runner plays one episode of any family
    where none of its own can be made near the avatar; those are counted apart)."""
    minutes, window = args.minutes, args.window
    rows = sorted(
        (r for r in result["episodes"] if r["family"] in args.families), key=lambda r: r["t"]
    )
    width = minutes * 60 / buckets
    curve = []
    for b in range(buckets):
        inside = [r for r in rows if b * width <= r["t"] < (b + 1) * width]
        curve.append({"t_end_s": round((b + 1) * width, 1), **(_rate(inside) or {"n": 0})})
    half = len(rows) // 2
    families: dict[str, dict[str, list[int]]] = defaultdict(
        lambda: {"first": [0, 0], "second": [0, 0]}
    )
    for i, r in enumerate(rows):
        cell = families[r["family"]]["first" if i < half else "second"]
        cell[0] += r["success"]
        cell[1] += 1
    per_family = {
        f: {k: (f"{w}/{n}" if n else "-") for k, (w, n) in halves.items()}
        for f, halves in sorted(families.items())
    }
    # how far each episode began from its goal (the oracle's plan length): which starts the
    # arm learned to finish, over its first and last window
    per_distance: dict[str, dict[str, str]] = defaultdict(dict)
    for name, part in (("first_window", rows[:window]), ("last_window", rows[-window:])):
        for d in sorted({r.get("distance") for r in part if r.get("distance") is not None}):
            at = [r for r in part if r.get("distance") == d]
            per_distance[str(d)][name] = f"{sum(r['success'] for r in at)}/{len(at)}"
    last = result["updates"][-1] if result["updates"] else {}
    forge = None  # the forge on: its decisions, and where the windows' tasks came from
    if (forged := result.get("forged")) is not None:
        origin = forged["origins"]
        forge = {"decisions": forged["decisions"]} | {
            f"{name}_origins": dict(
                sorted(Counter(origin.get(r["task"], "unlisted") for r in part).items())
            )
            for name, part in (("first_window", rows[:window]), ("last_window", rows[-window:]))
        }
    return {
        "arm": result["arm"],
        "episodes": len(rows),
        "other_episodes": len(result["episodes"]) - len(rows),
        "success": _rate(rows),
        "first_half": _rate(rows[:half]),
        "second_half": _rate(rows[half:]),
        "first_window": _rate(rows[:window]),
        "last_window": _rate(rows[-window:]),
        **{
            f"{name}_{key}": _share(part_rows, key)
            for name, part_rows in (("first", rows[:window]), ("last", rows[-window:]))
            for key in STEP_SHARES
        },
        "curve": curve,
        "per_family": per_family,
        "per_distance": dict(sorted(per_distance.items())),
        "updates": len(result["updates"]),
        "versions_played": result["versions"],
        "flow": result["flow"],
        "forge": forge,
        "prompt_tokens": result["prompt_tokens"],
        "candidates": result["candidates"],
        "reward_accuracy": result["reward_accuracy"],
        "reward_votes": result["reward_votes"],
        "reward_by_step": result["reward_by_step"],
        "reward_votes_by_step": result["reward_votes_by_step"],
        "grouping_signal": result["grouping_signal"],
        "credit_by_move": result["credit_by_move"],
        "last_update": {k: round(v, 4) for k, v in last.items()},
    }


# Shares of an arm's steps over its first and last window: each key of an episode's row over
# its denominator, and how the report words it. The steps the oracle calls good (toward_goal),
# all of them, one move from the goal and farther, and the moves that went straight back
# (turned_back).
GOOD = "steps toward the goal (the oracle's verdict)"
STEP_SHARES = {
    "closer": ("judged", f"{GOOD}, all"),
    "closer_near": ("judged_near", f"{GOOD}, one move away"),
    "closer_far": ("judged_far", f"{GOOD}, farther"),
    "back": ("after_move", "moves straight back where the last move came from"),
}
RATES = (
    "success",
    "first_half",
    "second_half",
    "first_window",
    "last_window",
    *(f"{name}_{key}" for name in ("first", "last") for key in STEP_SHARES),
)


def pool(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One arm over several seeds (its :func:`summarise` of each, the same arm): episodes and
    updates added up, each rate and each bucket of the curve over the seeds' episodes together
    (a window is each seed's window), and the per-seed figures beside them. The figures kept
    whole from one seed (per family, per start distance, the last update, the flow, the
    grouping signal, the forge's figures) are the first seed's. One seed's own."""
    if len(summaries) == 1:
        return summaries[0]

    def pooled(rates: list[dict[str, float] | None]) -> dict[str, float] | None:
        counted = [r for r in rates if r and r.get("n")]
        wins = sum(round(r["rate"] * r["n"]) for r in counted)
        return wilson(wins, sum(int(r["n"]) for r in counted))

    first = summaries[0]
    curve = [
        {"t_end_s": bucket["t_end_s"], **(pooled([s["curve"][b] for s in summaries]) or {"n": 0})}
        for b, bucket in enumerate(first["curve"])
    ]
    return {
        **first,
        "seeds": len(summaries),
        "episodes": sum(s["episodes"] for s in summaries),
        "other_episodes": sum(s["other_episodes"] for s in summaries),
        **{key: pooled([s[key] for s in summaries]) for key in RATES},
        "curve": curve,
        "updates": sum(s["updates"] for s in summaries),
        "per_seed": [
            {
                key: s[key]
                for key in (
                    "episodes",
                    "updates",
                    "last_window",
                    *(f"last_{key}" for key in STEP_SHARES),
                    "per_distance",
                    "reward_accuracy",
                    "reward_votes",
                    "reward_by_step",
                    "reward_votes_by_step",
                    "credit_by_move",
                    "forge",
                )
            }
            for s in summaries
        ],
    }


def verdict(summaries: list[dict[str, Any]], window: int, margin: float, gain: float) -> list[str]:
    """Each trained arm against the bar: its last ``window`` episodes at least the frozen
    arm's rate + ``margin``, and ``gain`` times its own first ``window``."""
    frozen = next((s for s in summaries if s["arm"] == "frozen"), None)
    lines = []
    for s in summaries:
        if s["arm"] == "frozen" or frozen is None or not s["last_window"]:
            continue
        last, first, base = s["last_window"]["rate"], s["first_window"]["rate"], frozen["success"]
        ok = last >= base["rate"] + margin and last >= gain * first
        lines.append(
            f"{s['arm']}: last {window} {last:.2f} vs frozen {base['rate']:.2f} + {margin} and "
            f"{gain} x first {window} {first:.2f}: {'PASS' if ok else 'FAIL'}"
        )
    return lines


def headline(summaries: list[dict[str, Any]], window: int, verdicts: list[str]) -> str:
    """The README's figure for a run: each trained arm's last ``window`` episodes, its updates
    and its verdict against the bar (:func:`verdict`'s lines), then the frozen arm's rate."""
    bar = {line.partition(":")[0]: line.rpartition(": ")[2] for line in verdicts}
    parts = [
        f"{s['arm']} last {window} {cell(s['last_window'])} in {s['updates']} updates"
        + (f", bar {bar[s['arm']]}" if s["arm"] in bar else "")
        for s in summaries
        if s["arm"] != "frozen"
    ]
    parts += [f"frozen {cell(s['success'])}" for s in summaries if s["arm"] == "frozen"]
    return "; ".join(parts)


def plot(summaries: list[dict[str, Any]], path: Path, title: str) -> None:
    """Success rate over wall time per arm, with 95% Wilson intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in summaries:
        points = [c for c in s["curve"] if c.get("rate") is not None]
        x = [c["t_end_s"] / 60 for c in points]
        y = [c["rate"] for c in points]
        errors = [[c["rate"] - c["low"] for c in points], [c["high"] - c["rate"] for c in points]]
        colour = [v / 255 for v in COLOURS[s["arm"].partition("@")[0]]]
        if "@" in s["arm"]:
            colour = [0.5 * c + 0.5 * g for c, g in zip(colour, (0.5, 0.0, 0.5), strict=True)]
        ax.errorbar(x, y, yerr=errors, marker="o", capsize=3, label=s["arm"], color=colour)
    ax.set(xlabel="minutes", ylabel="success rate (95% Wilson interval)", ylim=(0, 1), title=title)
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")


def cell(rate: dict[str, float] | None) -> str:
    """A rate and its 95% interval, e.g. ``0.42 [0.36,0.48]``."""
    if rate is None:
        return "-"
    return f"{rate['rate']:.2f} [{rate['low']:.2f},{rate['high']:.2f}]"
