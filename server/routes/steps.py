"""POST /v1/steps: a batch of steps of the caller's open episodes, answered step by step."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from server import episodes as service
from server.dependencies import PolicyDep, RuntimeDep
from server.routes.common import ERRORS
from world.schemas import MAX_BATCH_STEPS, StepsOut

router = APIRouter(prefix="/steps", tags=["episodes"], responses=ERRORS)

Batch = Annotated[
    list[Any],
    Body(
        min_length=1,
        max_length=MAX_BATCH_STEPS,
        description="steps, each a BatchStepIn: `{episode_id, step, action, ...}` as one "
        "episode's step body with its episode; a malformed one is answered in its place",
    ),
]


@router.post("", response_model=StepsOut)
async def take_steps(items: Batch, runtime: RuntimeDep, caller: PolicyDep) -> Response:
    """Apply up to MAX_BATCH_STEPS steps of the caller's episodes in one writer turn; each is
    answered, in order, with its result or its own error. A step's failure undoes no other."""
    out = await service.steps_async(runtime, caller, items)
    return Response(out.model_dump_json(), media_type="application/json")
