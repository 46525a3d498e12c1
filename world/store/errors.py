"""The store's errors: raised when the database is not in the shape the store expects."""

from world.errors import WorldError


class StoreError(WorldError):
    """Raised when the database is missing the world row or a transaction is misused."""
