"""The oracle planner: a plan for a task from the current state, or None within a budget.

The planner never changes the world it is given. It copies the avatar's neighbourhood (its
region and the already generated regions next to it, plus the regions the task names) into a
:class:`Snapshot`, ranks candidate plans by an exact or estimated length computed from
shortest paths in the place graph, and then *builds* the best candidates by executing them on
a scratch in-memory world through the engine's own action handlers. A plan is returned only
if every action passed the engine's checks and the goal holds at the end, so a plan from here
is admissible step by step in the real world as long as nobody else changes it meanwhile.

Each family builds its own candidates (:meth:`world.families.family.Family.plan`) with the
rehearsal library (:mod:`world.rehearsal`, :mod:`world.crafting`), and its module says how short
its plans are: most are the shortest over every usable object in scope; craft's is a heuristic
upper bound. A plan's ``expanded`` counts candidates ranked plus actions simulated.

Everything is planned inside the snapshot's regions; exits into regions nobody has generated
yet are never taken (their label numbers are not known before they are generated).
"""

from __future__ import annotations

from world.families import get_family
from world.rehearsal import Plan
from world.snapshot import Snapshot
from world.state import World
from world.tasks import Task, goal_met

DEFAULT_BUDGET = 4000  # search breadth a plan may take (candidates ranked plus actions simulated)


def plan_in(snap: Snapshot, task: Task, *, budget: int = DEFAULT_BUDGET) -> Plan | None:
    """Plan inside a snapshot (the sampler reuses one snapshot for many candidates)."""
    if snap.avatar_id not in snap.avatars:
        return None
    return get_family(task.family).plan(snap, task.params, budget)


def plan(world: World, task: Task, avatar_id: str, *, budget: int = DEFAULT_BUDGET) -> Plan | None:
    """A plan achieving ``task`` for the avatar from the world's current state, or None.

    Returns ``Plan((), 0)`` when the goal already holds. Never changes ``world``.
    """
    if goal_met(world, task, avatar_id):
        return Plan((), 0)
    things = get_family(task.family).reads_things
    return plan_in(Snapshot.of(world, avatar_id, task.places, things=things), task, budget=budget)


def next_action(
    world: World, task: Task, avatar_id: str, *, budget: int = DEFAULT_BUDGET
) -> str | None:
    """The first action of a fresh plan, or None when the goal holds or no plan is found."""
    found = plan(world, task, avatar_id, budget=budget)
    return found.actions[0] if found and found.actions else None
