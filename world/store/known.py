"""What a writer's transactions know of their world without reading it again: a step reads the
world row, its avatar's region and that region's places, and the steps of a batch mostly
stand in the same few regions (on PostgreSQL each read is a round trip).

- **Regions** never change once generated (``World.peek_region``). One that a batch read or
  wrote is kept for the writer's lifetime once the batch has committed: a writer serves one
  world's store (main's, or a fork's own, whose runtime has a writer of its own and drops it
  with the fork), so nothing of another world is ever found here.
- **Places** do change (a flood sets ``flooded_until``, ``world.world_events``), and another
  process may write them. A region's places are kept for one batch only, and only while the
  batch holds a lock that every writer of them must hold: on SQLite the batch's write lock
  (``BEGIN IMMEDIATE``), on PostgreSQL the whole world's lock or the region's (a transaction
  writes only places of the regions it locked, ``regions.check_written``). Meanwhile only the
  batch's own transactions can change them, and their saves are applied to what is kept.
- **The world row** is kept for one batch while it holds the whole world (on PostgreSQL, from
  the first of its transactions that takes the world's lock): then no other transaction writes
  the row or draws from the clock's sequence. The batch follows its own draws, kept or rolled
  back (a sequence is not rolled back), so each transaction starts at the tick a read of the
  row would give it.
- **The clock's sequence** (PostgreSQL) is the batch's alone for the same span, so the batch
  draws its ticks itself, the ones ``nextval`` would have given, and sets the sequence to the
  last of them once, before it commits (:attr:`Batch.unsent`): a round trip per step less.

What one transaction reads or writes is kept only once it keeps its work (its
``session.commit()``: :meth:`Known.keep`), and dropped when it rolls back; what was read in a
transaction that kept nothing is dropped with it. So nothing is known that the database will
not hold once the batch commits, and a batch that fails leaves only what earlier batches
committed.

- **Reads made ahead.** A batch of steps (``records.StepReads``) reads what each of its steps
  will read, in a few statements for all of them, while the batch holds the whole world: then
  only the batch's own transactions write. Each read (:class:`Ahead`) is kept until a
  transaction of the batch that wrote a row it read, or one that would now match it (an avatar
  or a thing that moves where it looked, its episode's row), keeps its work: then what was
  written is put into it as the table now holds it, a part the writes may have changed in a
  way it cannot follow is left out (its step reads that part again), or the whole read is
  dropped. A transaction that rolls back leaves the reads as they were, as it leaves the
  tables. They are the batch's only: a step carried into the next batch reads again.

Only the writer's sessions carry a :class:`Known` (``session.info[SESSION_KNOWN]``); every
other reader of the world reads the tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from world.entities import Place, Region, region_of

SESSION_KNOWN = "bigworld_known"  # session.info: the Known of a writer's transaction

Key = tuple[int, int]  # a region's (rx, ry)
Rows = dict[str, dict[str, Any]]  # a region's place rows by place id, as the table holds them


class Moved(NamedTuple):
    """An avatar written: where it stood before (None: nowhere, or new) and its row as
    written (its ``id``, ``place``, ...)."""

    stood: str | None
    row: dict[str, Any]


class Ahead(Protocol):
    """A step's read made ahead (``records.StepReads``), kept by its batch until a write
    changes what it read."""

    @property
    def episode(self) -> int:
        """Its episode's id: a write of the episode's row or steps drops the read."""
        ...

    def after(self, avatars: Sequence[Moved], things: Sequence[Any]) -> Ahead | None:
        """The read as it stands once ``avatars`` and ``things`` (their rows, or a removed
        one's id) are written: itself, itself with what was written put in or taken out and
        the parts it cannot follow left out (to be read again), or None (read it all
        again)."""
        ...

    def lying(self, place: str) -> list[dict[str, Any]] | None:
        """The rows of every thing lying at ``place``, where the read holds them all (its
        avatar stands there), else None."""
        ...

    def standing(self, place: str) -> tuple[int, list[dict[str, Any]]] | None:
        """How many avatars stand at ``place`` and the rows of the first of them by id, at
        least as many as the read's step shows, where the read knows them (its avatar
        stands there), else None."""
        ...


class Regions:
    """The regions of one writer's world known to be committed, kept across its batches."""

    def __init__(self) -> None:
        self.committed: dict[Key, Region] = {}

    def batch(self, *, whole: bool) -> Batch:
        """What one batch knows; ``whole`` when the batch holds every region's lock from the
        start (SQLite's write lock)."""
        return Batch(self, whole=whole)


class Batch:
    """One batch's knowledge: the regions and places its kept transactions read or wrote, the
    regions whose places it may keep (those it holds the lock of), and, while it holds the
    whole world, the world row."""

    def __init__(self, regions: Regions, *, whole: bool) -> None:
        self._regions = regions
        self.whole = whole  # holds the whole world: every region's places may be kept
        self.locked: set[Key] = set()  # PostgreSQL: the regions its transactions locked
        self.regions: dict[Key, Region] = {}
        self.places: dict[Key, Rows] = {}
        # The world row (a backend.WorldRow) as its kept transactions left it, and the last
        # tick drawn from the clock's sequence since (PostgreSQL: "now" is the sequence's).
        self.row: Any = None
        self.clock: int | None = None
        # PostgreSQL, while the batch holds the whole world: the sequence's last value as the
        # batch's own draws have moved it, and whether the sequence must still be set to it.
        self.sequence: int | None = None
        self.unsent = False
        # Reads made ahead for the batch's steps, by (episode, step)
        self.ahead: dict[tuple[int, int], Ahead] = {}

    def world_row(self) -> Any:
        """The world row the next transaction starts from, as a read of it would find it, or
        None (read it): known only while the batch holds the whole world, where no other
        transaction can move the row or the clock."""
        if not self.whole or self.row is None:
            return None
        meta = self.row.meta.copy()
        if self.clock is not None:
            meta.tick = self.clock
        return dataclasses.replace(self.row, meta=meta)

    def read_row(self, row: Any) -> None:
        """The world row as a transaction read it (kept where the batch holds the world)."""
        if self.whole:
            self.row, self.clock = row, None
            self.sequence = row.meta.tick  # "now" on PostgreSQL is the sequence's last value

    def draw(self) -> int | None:
        """The clock's next tick, drawn by the batch itself while it holds the whole world
        (no other transaction draws meanwhile), or None: draw it from the sequence."""
        if not self.whole or self.sequence is None:
            return None
        self.sequence += 1
        self.clock, self.unsent = self.sequence, True
        return self.sequence

    def hold(self, regions: Iterable[Key] | None) -> None:
        """The batch now holds these regions' locks (``None``: the whole world's), until it
        commits."""
        if regions is None:
            self.whole = True
        else:
            self.locked.update(regions)

    def holds(self, key: Key) -> bool:
        return self.whole or key in self.locked

    def region(self, key: Key) -> Region | None:
        """The region as the batch's kept transactions or an earlier batch knew it."""
        return self.regions.get(key) or self._regions.committed.get(key)

    def transaction(self) -> Known:
        """What the batch's next transaction knows."""
        return Known(self)

    def read_ahead(self, key: tuple[int, int], read: Ahead) -> None:
        """A step's read, made ahead while the batch holds the whole world."""
        if self.whole:
            self.ahead[key] = read

    def take_ahead(self, key: tuple[int, int]) -> Ahead | None:
        """The read made ahead for the step ``key`` (episode, step), as the writes since have
        left it, or None; a read is taken once."""
        return self.ahead.pop(key, None)

    def wrote_episode(self, episode: int) -> None:
        """A kept transaction wrote the episode's row (or its steps): its reads are dropped."""
        for key in [k for k, read in self.ahead.items() if read.episode == episode]:
            del self.ahead[key]

    def wrote_rows(self, avatars: Sequence[Moved], things: Sequence[Any]) -> None:
        """A kept transaction wrote these avatars and things (their rows as written, or the
        id of one it removed): the reads made ahead are updated or lose what they may have
        changed."""
        for key, read in list(self.ahead.items()):
            after = read.after(avatars, things)
            if after is None:
                del self.ahead[key]
            else:
                self.ahead[key] = after

    def lying(self, place: str) -> list[dict[str, Any]] | None:
        """The rows of every thing lying at ``place`` as a read made ahead holds them, else
        None."""
        return next((f for r in self.ahead.values() if (f := r.lying(place)) is not None), None)

    def standing(self, place: str) -> tuple[int, list[dict[str, Any]]] | None:
        """The avatars standing at ``place`` as a read made ahead knows them (their count and
        the first by id), else None."""
        return next((f for r in self.ahead.values() if (f := r.standing(place)) is not None), None)

    def committed(self) -> None:
        """The batch has committed: every region it knows is the database's for good."""
        self._regions.committed.update(self.regions)


class Known:
    """One transaction's view of its batch's knowledge: what its batch and earlier batches
    kept, under what it read and wrote itself since it last kept its work."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self._regions: dict[Key, Region] = {}
        self._places: dict[Key, Rows] = {}
        self._row: Any = None  # the world row this transaction wrote
        # its writes of rows the reads made ahead may cover, in order: an episode's id, or the
        # avatars and things of a save (Batch.wrote_episode, Batch.wrote_rows)
        self._wrote: list[int | tuple[Sequence[Moved], Sequence[Any]]] = []

    def region(self, rx: int, ry: int) -> Region | None:
        """The region if known (a copy: a World's objects are its own), else None (it may
        still be stored: only regions are known, never their absence)."""
        key = (rx, ry)
        found = self._regions.get(key) or self.batch.region(key)
        return dataclasses.replace(found) if found is not None else None

    def place_rows(self, rx: int, ry: int) -> list[dict[str, Any]] | None:
        """The rows of the region's places if known and the batch holds the region, else
        None (read the table)."""
        key = (rx, ry)
        if not self.batch.holds(key):
            return None
        rows = self._places.get(key, self.batch.places.get(key))
        return None if rows is None else list(rows.values())

    def read_region(self, region: Region) -> None:
        self._regions[(region.rx, region.ry)] = dataclasses.replace(region)

    def read_places(self, rx: int, ry: int, rows: Iterable[dict[str, Any]]) -> None:
        """The region's place rows as the table gave them (kept only where the batch holds
        the region)."""
        if self.batch.holds((rx, ry)):
            self._places[(rx, ry)] = {row["id"]: row for row in rows}

    def draw(self) -> int | None:
        """The next tick where the batch draws its own (:meth:`Batch.draw`), else None."""
        return self.batch.draw()

    def drew(self, tick: int) -> None:
        """A tick drawn from the clock's sequence: the batch's "now" whatever becomes of this
        transaction (a sequence is not rolled back)."""
        self.batch.clock = tick

    def wrote(self, regions: Iterable[Region], places: Iterable[dict[str, Any]], row: Any) -> None:
        """This transaction's upserts of regions and place rows, and the world row it wrote
        (None if it left the row as it was): a region's places are replaced where the region
        is known (or, all of them, where it was generated here), and otherwise left to be
        read."""
        if row is not None:
            self._row = row
        generated = set()
        for region in regions:
            self.read_region(region)
            generated.add((region.rx, region.ry))
        for key in generated:  # a generation writes every place of its region
            if self.batch.holds(key):
                self._places[key] = {}
        for place in places:
            key = region_of(place["id"])
            if key not in self._places:
                known = self.batch.places.get(key)
                if known is None or not self.batch.holds(key):
                    continue
                self._places[key] = dict(known)
            self._places[key][place["id"]] = place

    def lying(self, place: str) -> list[dict[str, Any]] | None:
        """The rows of the things lying at ``place`` as the batch's reads made ahead hold them,
        while this transaction has written nothing they follow (then they are the table's);
        else None."""
        return None if self._wrote else self.batch.lying(place)

    def standing(self, place: str) -> tuple[int, list[dict[str, Any]]] | None:
        """The avatars standing at ``place`` (their count, and the rows of the first by id) as
        the batch's reads made ahead know them, while this transaction has written nothing
        they follow; else None."""
        return None if self._wrote else self.batch.standing(place)

    def wrote_episode(self, episode: int) -> None:
        """This transaction wrote the episode's row or its steps."""
        self._wrote.append(episode)

    def wrote_rows(self, avatars: Sequence[Moved], things: Sequence[Any]) -> None:
        """This transaction wrote these avatars and things (their rows as written, or the
        id of one it removed)."""
        if avatars or things:
            self._wrote.append((avatars, things))

    def keep(self) -> None:
        """The transaction kept its work (``session.commit()``): what it knows is the batch's,
        and the reads made ahead follow what it wrote."""
        self.batch.regions.update(self._regions)
        self.batch.places.update(self._places)
        if self._row is not None and self.batch.whole:  # a row written holding less is not
            self.batch.row = self._row  # kept: the next to hold the world reads it afresh
        for wrote in self._wrote:
            if isinstance(wrote, int):
                self.batch.wrote_episode(wrote)
            else:
                self.batch.wrote_rows(*wrote)
        self.drop()

    def drop(self) -> None:
        """The transaction rolled back: forget what it read and wrote since it last kept."""
        self._regions = {}
        self._places = {}
        self._row = None
        self._wrote = []


def place_row(place: Place) -> dict[str, Any]:
    """A place as its table row (with its region's ``rx`` and ``ry``)."""
    rx, ry = region_of(place.id)
    return {**dataclasses.asdict(place), "rx": rx, "ry": ry}
