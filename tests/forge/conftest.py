"""Fixtures for the forge's pure tests (helpers in ``forgekit``); nothing here touches a
database."""

from __future__ import annotations

import pytest
from forgekit import fresh_world

from world.state import World


@pytest.fixture
def world() -> World:
    return fresh_world()
