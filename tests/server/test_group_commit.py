"""Group commit (``world.store.writer``): concurrent world transactions share one database
commit, each is answered only once it is durable, and one that fails leaves the others of its
batch committed and itself unwritten. Runs a Runtime in this process, on SQLite and PostgreSQL;
test_crash_recovery.py kills a server under concurrent load."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import built_runtime
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from server import episodes
from server.accounts import register_agent
from server.credentials import Caller
from server.errors import ApiError, Conflict
from server.runtime import Runtime
from world import engine
from world.schemas import StepIn, StepOut
from world.state import World
from world.store import SqlBackend, StoreError, WorldRow, read_world
from world.store.models import EventRow, StepRow

CLIENTS = 8


@pytest.fixture
def runtime(database_url: str, tmp_path: Path) -> Iterator[Runtime]:
    with built_runtime(database_url, tmp_path / "data", step_budget=10_000) as runtime:
        yield runtime


@pytest.fixture
def commits(runtime: Runtime) -> list[int]:
    """Grows by one for every database commit of the engine from here on."""
    seen: list[int] = []
    event.listen(runtime.engine, "commit", lambda _conn: seen.append(1))
    return seen


class Player:
    """A policy agent stepping its episode with ``look``, which ends an episode only at its
    step budget; the next step then begins another first."""

    def __init__(self, runtime: Runtime, name: str) -> None:
        def work(session: Session, world_row: WorldRow) -> Caller:
            agent, _token = register_agent(session, world_row, runtime.rules, name, "policy")
            session.commit()
            return Caller(agent.id, agent.name, agent.role, agent.avatar_id)

        self.runtime = runtime
        self.caller = runtime.world_transaction(work)
        self.episode, self.index = self._begin(), 0
        self.answers: list[StepOut] = []

    def _begin(self) -> int:
        return episodes.begin(self.runtime, self.caller, None, "go_to").episode_id

    def step(self, index: int | None = None) -> StepOut:
        if self.answers and self.answers[-1].done:
            self.episode, self.index = self._begin(), 0
        body = StepIn(step=index or self.index + 1, action="look")
        out = episodes.step(self.runtime, self.caller, self.episode, body)
        self.answers.append(out)
        self.index = out.step
        return out


def _tick(runtime: Runtime) -> int:
    with runtime.sessions() as session:
        return read_world(session).meta.tick


def _together(runtime: Runtime, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads while the writer is held up, so that all of them wait in its
    queue and go into one batch; returns each call's value or exception, in order."""
    held, release = threading.Event(), threading.Event()

    def hold(_session: Session, _row: WorldRow) -> None:
        held.set()
        release.wait(30)

    holder = threading.Thread(target=runtime.world_transaction, args=(hold,))
    holder.start()
    assert held.wait(30), "the writer never ran the hold"
    results: list[Any] = [None] * len(calls)

    def call(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while runtime.writer.pending() < len(calls):
        assert time.monotonic() < deadline, "the calls never reached the writer"
        time.sleep(0.005)
    release.set()
    for thread in [holder, *threads]:
        thread.join(30)
    return results


def test_queued_steps_share_one_commit(runtime: Runtime, commits: list[int]) -> None:
    players = [Player(runtime, f"p{i}") for i in range(CLIENTS)]
    before = _tick(runtime)
    answered: list[int] = []  # steps already answered, at each commit

    def count(_conn: Any) -> None:
        answered.append(sum(len(p.answers) for p in players))

    event.listen(runtime.engine, "commit", count)
    commits.clear()
    answers = _together(runtime, [p.step for p in players])
    assert all(isinstance(a, StepOut) for a in answers), answers
    assert len(commits) == 2, f"{len(commits)} commits: expected the hold's, then one for all"
    assert answered == [0, 0], "a step was answered before its commit"
    # /metrics splits the writer's time: running the transactions (the hold's wait among
    # them) and committing them
    metrics = runtime.metrics
    assert metrics.world_work_s > 0 and metrics.world_commit_s > 0
    assert sorted(a.tick for a in answers) == list(range(before + 1, before + CLIENTS + 1))
    assert _tick(runtime) == before + CLIENTS


def test_concurrent_steps_share_commits(runtime: Runtime, commits: list[int]) -> None:
    players = [Player(runtime, f"p{i}") for i in range(CLIENTS)]
    before = _tick(runtime)
    commits.clear()
    threads = [threading.Thread(target=lambda p=p: [p.step() for _ in range(15)]) for p in players]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    acknowledged = [a for p in players for a in p.answers]
    assert len(acknowledged) == 15 * CLIENTS
    assert len(commits) < len(acknowledged), "every step took a commit of its own"
    # Ticks are handed out in commit order, one per step (begins do not move the tick).
    assert sorted(a.tick for a in acknowledged) == list(range(before + 1, _tick(runtime) + 1))
    with runtime.sessions() as session:
        stored = session.scalar(select(func.count()).select_from(StepRow))
    assert stored == len(acknowledged)


def test_a_failing_request_leaves_its_batch_alone(runtime: Runtime, commits: list[int]) -> None:
    first, second, late = (Player(runtime, name) for name in ("first", "second", "late"))
    before = _tick(runtime)

    def writes_then_fails(session: Session, world_row: WorldRow) -> None:
        world = World(SqlBackend(session, world_row), runtime.rules)
        engine.heartbeat(world)
        world.commit()  # the tick and its event are written (in this savepoint) ...
        session.flush()
        raise Conflict("changed my mind", code="test_conflict")  # ... and given up

    commits.clear()
    answers = _together(
        runtime,
        [
            first.step,
            lambda: runtime.world_transaction(writes_then_fails),
            lambda: late.step(index=5),  # out of order: a 409 before any write
            second.step,
        ],
    )
    assert isinstance(answers[0], StepOut) and isinstance(answers[3], StepOut), answers
    assert isinstance(answers[1], Conflict) and answers[1].code == "test_conflict"
    assert isinstance(answers[2], ApiError) and answers[2].code == "step_out_of_order"
    assert len(commits) == 2
    # On PostgreSQL ticks come from a sequence, and the failed heartbeat's stays drawn: a gap.
    gap = 0 if runtime.engine.dialect.name == "sqlite" else 1
    assert sorted([answers[0].tick, answers[3].tick]) == [before + 1, before + 2 + gap]
    assert _tick(runtime) == before + 2 + gap
    with runtime.sessions() as session:
        heartbeats = session.scalar(
            select(func.count()).select_from(EventRow).where(EventRow.kind == "tick")
        )
        steps = {
            player.episode: session.scalar(
                select(func.count())
                .select_from(StepRow)
                .where(StepRow.episode_id == player.episode)
            )
            for player in (first, late, second)
        }
    # only the failed transaction's work is undone (on PostgreSQL each transaction's savepoint
    # is left open and the next opens inside it: world.store.driver.send_savepoints)
    assert heartbeats == 0 and steps == {first.episode: 1, late.episode: 0, second.episode: 1}


def test_a_failed_commit_fails_its_whole_batch(runtime: Runtime) -> None:
    player = Player(runtime, "ann")
    before = _tick(runtime)

    def refuse(_conn: Any) -> None:
        raise RuntimeError("the disk is gone")

    event.listen(runtime.engine, "commit", refuse)
    try:
        with pytest.raises(RuntimeError, match="the disk is gone"):
            player.step()
    finally:
        event.remove(runtime.engine, "commit", refuse)
    assert _tick(runtime) == before
    assert player.step().step == 1  # the same index again: nothing of the failed one stayed


def test_world_transactions_do_not_nest(runtime: Runtime) -> None:
    def outer(_session: Session, _row: WorldRow) -> None:
        runtime.world_transaction(lambda _s, _r: None)

    with pytest.raises(StoreError, match="one world transaction at a time"):
        runtime.world_transaction(outer)


def test_a_transaction_cancelled_while_queued_never_runs(runtime: Runtime) -> None:
    """An event loop that stops awaiting a step (``Runtime.world_transaction_async``) cancels
    its future: still queued, the transaction is dropped and the writer goes on; once taken
    into a batch, it can no longer be cancelled and runs to its end."""
    held, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold(_session: Session, _row: WorldRow) -> None:
        held.set()
        release.wait(30)

    holding = runtime.writer.submit(hold)
    assert held.wait(30)
    assert not holding.cancel()  # running: too late
    queued = runtime.writer.submit(lambda _s, _r: ran.append("cancelled"))
    assert queued.cancel()
    release.set()
    holding.result(30)
    assert runtime.world_transaction(lambda _s, _r: ran.append("next") or 7) == 7
    assert ran == ["next"]


def test_a_batch_awaited_by_the_event_loop_is_answered_in_place_or_cancelled_whole(
    runtime: Runtime,
) -> None:
    """``Runtime.world_transactions_async`` answers each transaction in its place, with its
    value or its own exception; an event loop that stops awaiting a batch still queued
    cancels it, and none of it runs."""

    def refuse(_session: Session, _row: WorldRow) -> None:
        raise Conflict("not this one")

    async def mixed() -> list[Any]:
        works = [(lambda _s, _r: 1, None), (refuse, None), (lambda _s, _r: 3, None)]
        return await runtime.world_transactions_async(works)

    one, refused, three = asyncio.run(mixed())
    assert (one, three) == (1, 3) and isinstance(refused, Conflict)

    held, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def hold(_session: Session, _row: WorldRow) -> None:
        held.set()
        release.wait(30)

    async def given_up() -> None:
        work = (lambda _s, _r: ran.append(1), None)
        batch = asyncio.ensure_future(runtime.world_transactions_async([work, work]))
        await asyncio.sleep(0.05)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch

    holding = runtime.writer.submit(hold)
    assert held.wait(30)
    asyncio.run(given_up())
    release.set()
    holding.result(30)
    assert runtime.world_transaction(lambda _s, _r: 7) == 7
    assert ran == []
