"""Episodes: begin, step, abandon (policy owner), list and read (any), judge (reward),
expert hints (trainer, admin)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, Query, Response, status
from sqlalchemy.orm import Session

from server import episodes as service
from server import records as server_records
from server.dependencies import (
    CallerDep,
    PolicyDep,
    RewardDep,
    RuntimeDep,
    SessionDep,
    TrainerDep,
)
from server.errors import Conflict, NotFound, Unprocessable
from server.models import JudgmentRow
from server.routes.common import ERRORS, IdCursor, IdPath, IdQuery, Limit, Tick
from world.contract import ErrorCode
from world.schemas import (
    EpisodeBegin,
    EpisodeDetail,
    EpisodeOut,
    EpisodeStarted,
    ExpertHint,
    JudgmentIn,
    JudgmentOut,
    JudgmentsAccepted,
    Page,
    Status,
    StepIn,
    StepOut,
    StepRecord,
)
from world.store import WorldRow, records
from world.store.models import EpisodeRow, TaskRow

router = APIRouter(prefix="/episodes", tags=["episodes"], responses=ERRORS)


@router.post("", response_model=EpisodeStarted, status_code=status.HTTP_201_CREATED)
def begin_episode(
    runtime: RuntimeDep, caller: PolicyDep, body: EpisodeBegin | None = None
) -> EpisodeStarted:
    body = body or EpisodeBegin()
    return service.begin(runtime, caller, body.task_id, body.family, body.task)


@router.post("/{episode_id}/steps", response_model=StepOut)
async def take_step(
    episode_id: IdPath, body: StepIn, runtime: RuntimeDep, caller: PolicyDep
) -> Response:
    # On the event loop, awaiting the writer's commit: no trip through the thread pool. Answered
    # as JSON straight from the StepOut the service built (FastAPI would validate it again).
    out = await service.step_async(runtime, caller, episode_id, body)
    return Response(out.model_dump_json(), media_type="application/json")


@router.post("/{episode_id}/abandon", response_model=EpisodeOut)
def abandon_episode(
    episode_id: IdPath, runtime: RuntimeDep, caller: PolicyDep, session: SessionDep
) -> EpisodeOut:
    episode = service.abandon(runtime, caller, episode_id)
    return _episode_out(session, episode)


@router.get("", response_model=Page[EpisodeOut])
def list_episodes(
    session: SessionDep,
    _caller: CallerDep,
    agent: IdQuery = None,
    task: Annotated[str | None, Query(max_length=64)] = None,
    family: Annotated[str | None, Query(max_length=32)] = None,
    status: Status | None = None,
    from_tick: Tick = None,
    to_tick: Tick = None,
    needs_votes: Annotated[
        int | None,
        Query(ge=1, le=64, description="only ended episodes with a step judged fewer times"),
    ] = None,
    policy_version: Annotated[
        str | None, Query(max_length=128, description="only episodes with a step by this version")
    ] = None,
    limit: Limit = 100,
    cursor: IdCursor = None,
) -> Page[EpisodeOut]:
    found = records.list_episodes(
        session=session,
        agent=agent,
        task=task,
        family=family,
        status=status,
        from_tick=from_tick,
        to_tick=to_tick,
        needs_votes=needs_votes,
        policy_version=policy_version,
        limit=limit,
        cursor=cursor,
    )
    # One query for the page's tasks. Held here: the session's identity map keeps only rows
    # something references, so rows loaded and dropped were looked up again one by one.
    tasks = records.tasks_by_id(session=session, task_ids=[e.task_id for e in found.items])
    return Page[EpisodeOut](
        items=[_episode_out(session, e, tasks[e.task_id]) for e in found.items],
        next_cursor=found.next_cursor,
    )


@router.get("/{episode_id}", response_model=EpisodeDetail)
def read_episode(episode_id: IdPath, session: SessionDep, _caller: CallerDep) -> EpisodeDetail:
    episode = records.get_episode(session=session, episode_id=episode_id)
    if episode is None:
        raise NotFound(f"no episode {episode_id}")
    steps = [
        StepRecord(
            **service.step_out(s).model_dump(),
            action=s.action,
            policy_version=s.policy_version,
            prompt=s.prompt,
            completion=s.completion,
            parse_failed=s.parse_failed,
            mode=s.mode,
            temperature=s.temperature,
            completion_ids=s.completion_ids,
            distance=s.distance,
        )
        for s in records.steps_of(session=session, episode_id=episode.id)
    ]
    judgments = [
        _judgment_out(j)
        for j in server_records.judgments_of(session=session, episode_id=episode.id)
    ]
    return EpisodeDetail(
        **_episode_out(session, episode).model_dump(),
        observation=episode.observation,
        admissible_actions=list(episode.admissible),
        distance=episode.distance,
        steps=steps,
        judgments=judgments,
    )


@router.post(
    "/{episode_id}/judgments", response_model=JudgmentsAccepted, status_code=status.HTTP_201_CREATED
)
def judge_steps(
    episode_id: IdPath,
    judgments: Annotated[list[JudgmentIn], Body(max_length=1024)],
    runtime: RuntimeDep,
    caller: RewardDep,
) -> JudgmentsAccepted:
    """Store judgments of an ended episode; a (step, vote) slot already filled is skipped, so a
    resent batch (or a second reward agent on the same episode) stores nothing twice. A step
    has ``votes_per_step`` (m) slots, so no reward agent fills more than m of a step's votes."""
    m = runtime.settings.votes_per_step
    beyond = sorted({j.vote for j in judgments if j.vote >= m})
    if beyond:
        raise Unprocessable(
            f"expected votes 0..{m - 1} (this server takes {m} votes per step), got {beyond}",
            code=ErrorCode.VOTE_OUT_OF_RANGE,
            details={"votes_per_step": m, "votes": beyond},
        )
    now = time.time()

    def work(session: Session, _world_row: WorldRow) -> JudgmentsAccepted:
        episode = records.get_episode(session=session, episode_id=episode_id)
        if episode is None:
            raise NotFound(f"no episode {episode_id}")
        if episode.status == "open":
            # Judges see whole trajectories: the trainer learns only from ended episodes.
            raise Conflict(
                f"expected an ended episode, got episode {episode_id} still open",
                code=ErrorCode.EPISODE_OPEN,
                details={"episode_id": episode_id},
            )
        unknown = sorted({j.step for j in judgments if j.step > episode.last_step})
        if unknown:
            raise Unprocessable(
                f"expected steps 1..{episode.last_step} of episode {episode_id}, got {unknown}",
                code=ErrorCode.UNKNOWN_STEP,
                details={"steps": unknown},
            )
        made = server_records.add_judgments(
            session=session,
            rows=[
                {
                    "episode_id": episode.id,
                    "step": j.step,
                    "vote": j.vote,
                    "agent_id": caller.id,
                    "score": j.score,
                    "rationale": j.rationale,
                    "model_version": j.model_version,
                    "mode": j.mode,
                    "temperature": j.temperature,
                    "completion_ids": j.completion_ids,
                    "created_at": now,
                }
                for j in judgments
            ],
        )
        session.commit()
        return JudgmentsAccepted(
            accepted=len(made),
            duplicates=len(judgments) - len(made),
            judgments=[_judgment_out(j) for j in made],
        )

    return runtime.world_transaction(work)


@router.get("/{episode_id}/expert", response_model=ExpertHint)
def expert_hint(episode_id: IdPath, runtime: RuntimeDep, caller: TrainerDep) -> ExpertHint:
    """The oracle's next action for an open episode (trainer and admin only; recorded)."""
    return service.expert(runtime, caller, episode_id)


def _episode_out(session: Session, episode: EpisodeRow, task: TaskRow | None = None) -> EpisodeOut:
    task = task or records.get_task(session=session, task_id=episode.task_id)
    assert task is not None
    return EpisodeOut(
        id=episode.id,
        agent_id=episode.agent_id,
        avatar_id=episode.avatar_id,
        task=service.task_out(task),
        family=episode.family,
        status=episode.status,
        outcome=episode.outcome,
        budget=episode.budget,
        last_step=episode.last_step,
        begin_tick=episode.begin_tick,
        end_tick=episode.end_tick,
    )


def _judgment_out(j: JudgmentRow) -> JudgmentOut:
    return JudgmentOut(
        id=j.id,
        step=j.step,
        vote=j.vote,
        score=j.score,
        rationale=j.rationale,
        model_version=j.model_version,
        mode=j.mode,
        temperature=j.temperature,
        completion_ids=j.completion_ids,
        agent_id=j.agent_id,
    )
