"""GET /v1/metrics/learning: learning curves and continual-learning metrics from history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from server.analysis import Scope
from server.dependencies import CallerDep, SessionDep
from server.errors import Unprocessable
from server.learning import DEFAULT_WINDOW, LearningMetrics, measure
from server.routes.common import ERRORS, Tick
from world.contract import ErrorCode

router = APIRouter(prefix="/metrics", tags=["metrics"], responses=ERRORS)


@router.get("/learning", response_model=LearningMetrics)
def learning(
    session: SessionDep,
    _caller: CallerDep,
    bucket_ticks: Annotated[
        int | None,
        Query(
            ge=1,
            le=2**40,
            description="ticks per bucket of success_over_time; default: "
            "a round size giving about 40 buckets over the range",
        ),
    ] = None,
    family: Annotated[str | None, Query(max_length=32, description="only this task family")] = None,
    from_tick: Tick = None,
    to_tick: Tick = None,
    window: Annotated[
        int,
        Query(
            ge=1,
            le=100,
            description="N: episodes per window of forgetting, forward "
            "transfer and world-change figures",
        ),
    ] = DEFAULT_WINDOW,
) -> LearningMetrics:
    """Success over time (overall, per family, per policy version), forgetting on the probe
    set, forward transfer to forged tasks, adaptation and recovery after world changes, and
    the reward model's step and outcome accuracy. Episodes count at their end tick; the
    definitions are in ``server/learning.py``."""
    if from_tick is not None and to_tick is not None and from_tick > to_tick:
        raise Unprocessable(f"expected from_tick <= to_tick, got {from_tick} > {to_tick}")
    scope = Scope(from_tick=from_tick, to_tick=to_tick, family=family)
    try:
        return measure(session, scope, bucket_ticks=bucket_ticks, window=window)
    except ValueError as exc:
        raise Unprocessable(str(exc), code=ErrorCode.TOO_MANY_BUCKETS) from exc
