"""The world's error hierarchy: raised for bad input and broken contracts, never for agent mistakes."""


class WorldError(Exception):
    """Base class of every error the world package raises."""


class RulesError(WorldError):
    """Raised when a rules data file is missing a field or refers to something undefined."""


class ActionError(WorldError):
    """Raised when action text is malformed (empty, control characters, too long).

    Well-formed actions that are impossible in the world are not errors: they yield
    ``Nothing happens.`` and a ``rejected`` event.
    """


class UnknownEntityError(WorldError):
    """Raised when an id names no region, place, thing or avatar of this world."""


class TaskError(WorldError):
    """Raised when a task spec names an unknown family or carries invalid parameters."""


class WorldEventError(WorldError):
    """Raised when a world event (drift, discovery, storm, flood) cannot apply as asked."""
