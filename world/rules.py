"""Typed, frozen views of the world's rules, loaded from the YAML files in ``world/data``.

Everything that a designer may want to tune (object types, receptacles, resources, recipes,
region layouts and the dynamics parameters) lives in data. The dynamics parameters are
versioned (:class:`RulesVersion`) so that the forge can publish new ones at a tick; lazily
applied dynamics integrate over every version in force since an entity was last touched.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar, overload

import yaml

from world.errors import RulesError

DATA_DIR = Path(__file__).parent / "data"
T = TypeVar("T")
SEASONS = ("spring", "summer", "autumn", "winter")
STATIONS = ("clean", "heat", "cool", "light", "craft", "smelt")
# Words that separate the parts of an action; no type name may contain them.
RESERVED_WORDS = frozenset({"from", "in", "on", "with", "to", "for", "at"})


@dataclass(frozen=True)
class ObjectType:
    """A portable thing: food, tools, tableware, materials, crafted goods."""

    name: str
    tags: frozenset[str] = frozenset()
    durability: int | None = None  # uses before a tool breaks; None: never wears
    stack: int = 1  # most units of this type one inventory slot holds
    spoil_ticks: int | None = None  # ticks at room temperature from fresh to rotten
    value: int = 1  # genesis price at a market, in coins (RulesVersion.prices multiplies it)


@dataclass(frozen=True)
class ReceptacleType:
    """A fixed receptacle: shelves, containers, stations, lamps."""

    name: str
    preposition: str = "in"  # "in" or "on": how things are put into it
    openable: bool = False
    toggleable: bool = False
    station: str | None = None  # one of STATIONS
    capacity: int = 12
    sells: tuple[str, ...] = ()  # object types a trade at it gives out (a market's stall)


@dataclass(frozen=True)
class ResourceType:
    """A fixed source of things whose stock is consumed by gathering and regrows."""

    name: str
    yields: str  # object type produced by one gather
    tool: str  # tag the tool used to gather must carry
    stock: int  # stock when full
    regrow_ticks: int  # ticks to regrow one unit (at regrow_rate 1.0)
    dormant_seasons: frozenset[str] = frozenset()  # seasons without regrowth
    daylight_only: bool = False  # gathering only works by day


@dataclass(frozen=True)
class Recipe:
    """``count`` units of ``output`` from ``inputs`` (type -> units), at a station or by hand."""

    output: str
    inputs: Mapping[str, int]
    count: int = 1
    station: str | None = None  # receptacle type that must stand in the place, or None
    locked: bool = False  # unknown at genesis: craftable once a rules version discovers it


@dataclass(frozen=True)
class Spawn:
    """Objects that a place template may spawn inside one of its receptacles."""

    type: str
    receptacles: tuple[str, ...]
    count: tuple[int, int] = (0, 1)  # inclusive range


@dataclass(frozen=True)
class PlaceTemplate:
    """What a place of one kind contains when it is generated."""

    kind: str
    receptacles: Mapping[str, tuple[int, int]]  # type -> inclusive count range
    objects: tuple[Spawn, ...] = ()
    resources: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    outdoor: bool = True
    seasons: frozenset[str] = frozenset(SEASONS)  # seasons in which it can be entered


@dataclass(frozen=True)
class PlaceGroup:
    """A cluster of places attached to a region's hub.

    ``chain`` links hub - p0 - p1 - ...; ``star`` links hub - p0 and p0 - each other place.
    ``close`` additionally links the last place of a chain to the first place of that kind.
    """

    places: tuple[str, ...]
    count: tuple[int, int] = (1, 1)
    shape: str = "chain"
    close: str | None = None


@dataclass(frozen=True)
class RegionTemplate:
    """A kind of region: its hub (where the roads to the four neighbours leave from) and its
    clusters of places."""

    kind: str
    weight: float
    hub: str
    groups: tuple[PlaceGroup, ...]


@dataclass(frozen=True)
class RulesVersion:
    """Dynamics parameters in force from ``since_tick`` on. The forge publishes new versions."""

    version: int = 1
    since_tick: int = 0
    day_length: int = 48  # ticks per day; the first half is daylight
    season_length: int = 1200  # ticks per season; a year is four seasons from spring
    spoil_rate: float = 1.0  # multiplies every object's spoil speed
    cold_spoil_factor: float = 0.2  # cooled food spoils at this fraction of the speed
    temperature_ticks: int = 60  # ticks before a heated or cooled object is at room temperature
    regrow_rate: float = 1.0  # multiplies every resource's regrowth speed
    wear_per_use: int = 1  # durability a tool loses per gather
    discovered: tuple[str, ...] = ()  # outputs of locked recipes known from this version on
    # object type -> multiplier of its genesis price (ObjectType.value) at every market; absent: 1
    prices: dict[str, float] = field(default_factory=dict)
    cause: str = "genesis"  # why it was published: "genesis", "drift", "discovery" or "market"

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RulesVersion:
        """The inverse of ``dataclasses.asdict`` (JSON turns the tuple into a list; versions
        stored before markets traded have no prices)."""
        return cls(
            **{
                **row,
                "discovered": tuple(row.get("discovered", ())),
                "prices": dict(row.get("prices", {})),
            }
        )

    def row(self) -> dict[str, Any]:
        """As ``dataclasses.asdict`` makes it, in a twentieth of the time (a world that has run
        for days holds thousands of versions, written whole when one is published)."""
        row = {name: getattr(self, name) for name in _VERSION_FIELDS}
        row["prices"] = dict(self.prices)
        return row

    def knows(self, recipe: Recipe) -> bool:
        """Whether ``recipe`` can be crafted while this version is in force."""
        return not recipe.locked or recipe.output in self.discovered

    def price(self, spec: ObjectType) -> float:
        """What one unit of ``spec`` is worth at a market while this version is in force, in
        coins to the cent (never below one cent)."""
        return max(0.01, round(spec.value * self.prices.get(spec.name, 1.0), 2))

    def season(self, tick: int) -> str:
        return SEASONS[(tick // self.season_length) % 4]

    def is_day(self, tick: int) -> bool:
        return tick % self.day_length < self.day_length // 2

    def replace(self, **changes: Any) -> RulesVersion:
        return dataclasses.replace(self, **changes)


_VERSION_FIELDS = tuple(f.name for f in dataclasses.fields(RulesVersion))


class Versions(Sequence[RulesVersion]):
    """A world's dynamics versions in the order they come in force: by ``since_tick``, and of
    two for one tick the later published last (it is the one in force from then on).

    Immutable: publishing makes a new one (:meth:`published`), so a copy of the world's meta
    shares it. The version in force at a tick and the ticks where versions change between two
    ticks are binary searches, not scans: the forge publishes a drift every 2,000 ticks by
    default, so a world that has run for days holds thousands of versions, and every thing a
    step loads asks for them (scans of them, and parsing them, made a step at 10,000 versions
    ten times as slow as in a new world, docs/benchmarks/fleet.md)."""

    __slots__ = ("_items", "_ticks", "next_number", "spoils_only", "regrows_only")

    def __init__(self, versions: Iterable[RulesVersion] = ()) -> None:
        self._items = tuple(sorted(versions, key=lambda v: v.since_tick))  # a stable sort
        self._ticks = [v.since_tick for v in self._items]
        self.next_number = max((v.version for v in self._items), default=0) + 1
        # no version gives freshness back, or takes stock away (world.dynamics' sums)
        self.spoils_only = all(v.spoil_rate >= 0 and v.cold_spoil_factor >= 0 for v in self)
        self.regrows_only = all(v.regrow_rate >= 0 for v in self)

    @overload
    def __getitem__(self, index: int) -> RulesVersion: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[RulesVersion, ...]: ...
    def __getitem__(self, index: int | slice) -> RulesVersion | tuple[RulesVersion, ...]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Versions):
            return NotImplemented
        return self is other or self._items == other._items

    def __repr__(self) -> str:
        return f"Versions({list(self._items)!r})"

    def at(self, tick: int) -> RulesVersion:
        """The version in force at ``tick`` (the first one before any is)."""
        return self._items[max(0, bisect.bisect_right(self._ticks, tick) - 1)]

    def changes_between(self, start: int, end: int) -> list[int]:
        """The ticks strictly between ``start`` and ``end`` where a version comes in force,
        ascending, each once."""
        found = self._ticks[
            bisect.bisect_right(self._ticks, start) : bisect.bisect_left(self._ticks, end)
        ]
        return list(dict.fromkeys(found))

    def until(self, tick: int) -> Versions:
        """The versions in force from a tick up to ``tick``."""
        return Versions(self._items[: bisect.bisect_right(self._ticks, tick)])

    def published(self, version: RulesVersion) -> Versions:
        """These versions and ``version``, in force from its ``since_tick``."""
        return Versions((*self._items, version))

    def rows(self) -> list[dict[str, Any]]:
        """As JSON values, in order."""
        return [v.row() for v in self._items]


@dataclass(frozen=True)
class Rules:
    """Everything static about a world. Dynamics versions live in the world state."""

    objects: Mapping[str, ObjectType]
    receptacles: Mapping[str, ReceptacleType]
    resources: Mapping[str, ResourceType]
    recipes: Mapping[str, Recipe]  # keyed by output
    places: Mapping[str, PlaceTemplate]
    regions: Mapping[str, RegionTemplate]
    dynamics: RulesVersion  # the genesis version
    # Inventory slots of every avatar (a stack fills one). Each held thing adds a dozen
    # ``put X in Y`` actions to every admissible list, so few slots keep prompts short.
    avatar_capacity: int = 3
    # Other avatars an observation names (by id) and ``give`` may reach; the rest of a crowd
    # is counted, so that a fleet's avatars at the origin do not fill every prompt.
    crowd_shown: int = 8

    def kind_of(self, type_name: str) -> str:
        """``object``, ``receptacle`` or ``resource``."""
        if type_name in self.objects:
            return "object"
        if type_name in self.receptacles:
            return "receptacle"
        if type_name in self.resources:
            return "resource"
        raise RulesError(f"expected a known type name, got {type_name!r}")

    def recipe_depth(self, output: str) -> int:
        """Length of the longest chain of recipes below ``output`` (a raw material is 0)."""
        recipe = self.recipes.get(output)
        if recipe is None:
            return 0
        return 1 + max(self.recipe_depth(name) for name in recipe.inputs)


def _range(value: Any) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    lo, hi = value
    return (int(lo), int(hi))


def _read(name: str, data_dir: Path) -> dict[str, Any]:
    path = data_dir / name
    try:
        return yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise RulesError(f"expected rules file {path}, found none") from exc
    except yaml.YAMLError as exc:
        raise RulesError(f"expected valid YAML in {path}: {exc}") from exc


def _entries(section: Any, what: str, build: Callable[[str, dict[str, Any]], T]) -> dict[str, T]:
    """Build every entry of a mapping section; a broken entry is a RulesError naming it."""
    if not isinstance(section, dict):
        raise RulesError(f"expected a mapping of {what} entries, got {type(section).__name__}")
    built = {}
    for name, spec in section.items():
        try:
            built[name] = build(name, spec or {})
        except KeyError as exc:
            raise RulesError(f"{what} {name!r}: expected field {exc.args[0]!r}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise RulesError(f"{what} {name!r}: {exc}") from exc
    return built


def _object(name: str, spec: dict[str, Any]) -> ObjectType:
    return ObjectType(
        name=name,
        tags=frozenset(spec.get("tags", ())),
        durability=spec.get("durability"),
        stack=spec.get("stack", 1),
        spoil_ticks=spec.get("spoil_ticks"),
        value=spec.get("value", 1),
    )


def _resource(name: str, spec: dict[str, Any]) -> ResourceType:
    return ResourceType(
        name=name,
        yields=spec["yields"],
        tool=spec["tool"],
        stock=spec["stock"],
        regrow_ticks=spec["regrow_ticks"],
        dormant_seasons=frozenset(spec.get("dormant_seasons", ())),
        daylight_only=spec.get("daylight_only", False),
    )


def _recipe(output: str, spec: dict[str, Any]) -> Recipe:
    return Recipe(
        output=output,
        inputs=MappingProxyType(dict(spec["inputs"])),
        count=spec.get("count", 1),
        station=spec.get("station"),
        locked=spec.get("locked", False),
    )


def _place(kind: str, spec: dict[str, Any]) -> PlaceTemplate:
    return PlaceTemplate(
        kind=kind,
        receptacles={k: _range(v) for k, v in spec.get("receptacles", {}).items()},
        objects=tuple(
            Spawn(type=o["type"], receptacles=tuple(o["in"]), count=_range(o.get("count", [0, 1])))
            for o in spec.get("objects", ())
        ),
        resources={k: _range(v) for k, v in spec.get("resources", {}).items()},
        outdoor=spec.get("outdoor", True),
        seasons=frozenset(spec.get("seasons", SEASONS)),
    )


def _region(kind: str, spec: dict[str, Any]) -> RegionTemplate:
    return RegionTemplate(
        kind=kind,
        weight=float(spec["weight"]),
        hub=spec["hub"],
        groups=tuple(
            PlaceGroup(
                places=tuple(g["places"]),
                count=_range(g.get("count", 1)),
                shape=g.get("shape", "chain"),
                close=g.get("close"),
            )
            for g in spec.get("groups", ())
        ),
    )


def load_rules(data_dir: Path = DATA_DIR) -> Rules:
    """Load and cross-check the rules in ``data_dir``; any defect is a RulesError."""
    things = _read("things.yaml", data_dir)
    layout = _read("regions.yaml", data_dir)
    recipe_list = _read("recipes.yaml", data_dir).get("recipes")
    if not isinstance(recipe_list, list) or not all(isinstance(r, dict) for r in recipe_list):
        raise RulesError(f"expected a list of recipes in {data_dir / 'recipes.yaml'}")
    by_output = {str(r.get("output")): r for r in recipe_list}
    objects = _entries(things.get("objects"), "object", _object)
    receptacles = _entries(
        things.get("receptacles"),
        "receptacle",
        lambda n, s: ReceptacleType(name=n, **{**s, "sells": tuple(s.get("sells", ()))}),
    )
    resources = _entries(things.get("resources"), "resource", _resource)
    recipes = _entries(by_output, "recipe for", _recipe)
    places = _entries(layout.get("places"), "place", _place)
    regions = _entries(layout.get("regions"), "region", _region)
    dynamics = _entries(
        {"dynamics.yaml": _read("dynamics.yaml", data_dir)},
        "dynamics in",
        lambda _, s: RulesVersion.from_row(s),
    )
    avatar = things.get("avatar") or {}
    if not isinstance(avatar, dict):
        raise RulesError(f"expected a mapping for avatar in {data_dir / 'things.yaml'}")
    rules = Rules(
        objects,
        receptacles,
        resources,
        recipes,
        places,
        regions,
        dynamics["dynamics.yaml"],
        avatar_capacity=avatar.get("capacity", Rules.avatar_capacity),
        crowd_shown=avatar.get("crowd_shown", Rules.crowd_shown),
    )
    _check(rules)
    return rules


def _check(rules: Rules) -> None:
    capacity = rules.avatar_capacity
    if type(capacity) is not int or capacity < 1:
        raise RulesError(f"expected avatar capacity as an int >= 1, got {capacity!r}")
    shown = rules.crowd_shown
    if type(shown) is not int or shown < 0:
        raise RulesError(f"expected avatar crowd_shown as an int >= 0, got {shown!r}")
    names = [*rules.objects, *rules.receptacles, *rules.resources]
    if len(names) != len(set(names)):
        raise RulesError("expected type names unique across objects, receptacles and resources")
    for name in names:
        if RESERVED_WORDS & set(name.split()) or not name.replace(" ", "").isalpha():
            raise RulesError(
                f"expected a type name of letters without {sorted(RESERVED_WORDS)}, got {name!r}"
            )
    for r in rules.receptacles.values():
        if r.preposition not in ("in", "on") or (r.station and r.station not in STATIONS):
            raise RulesError(f"receptacle {r.name!r}: bad preposition or station")
        if not set(r.sells) <= set(rules.objects):
            raise RulesError(f"receptacle {r.name!r} sells unknown objects {list(r.sells)}")
    for res in rules.resources.values():
        if res.yields not in rules.objects:
            raise RulesError(f"resource {res.name!r} yields unknown object {res.yields!r}")
    for recipe in rules.recipes.values():
        unknown = [n for n in (recipe.output, *recipe.inputs) if n not in rules.objects]
        if unknown or (recipe.station and recipe.station not in rules.receptacles):
            raise RulesError(
                f"recipe for {recipe.output!r} names unknown types {unknown or recipe.station}"
            )
    locked = {r.output for r in rules.recipes.values() if r.locked}
    if not set(rules.dynamics.discovered) <= locked:
        raise RulesError(
            f"expected genesis discoveries among the locked recipes {sorted(locked)}, "
            f"got {list(rules.dynamics.discovered)}"
        )
    if not set(rules.dynamics.prices) <= set(rules.objects) or not all(
        m > 0 for m in rules.dynamics.prices.values()
    ):
        raise RulesError(
            f"expected genesis price multipliers > 0 of object types, got {rules.dynamics.prices}"
        )
    for place in rules.places.values():
        for spawn in place.objects:
            if spawn.type not in rules.objects or not set(spawn.receptacles) <= set(
                place.receptacles
            ):
                raise RulesError(
                    f"place {place.kind!r} spawns {spawn.type!r} in unknown receptacles"
                )
        for kind in (*place.receptacles, *place.resources):
            rules.kind_of(kind)
    for region in rules.regions.values():
        kinds = {region.hub, *(p for g in region.groups for p in g.places)}
        unknown = [k for k in kinds if k not in rules.places]
        if unknown:
            raise RulesError(f"region {region.kind!r} names unknown place kinds {unknown}")


@cache
def default_rules() -> Rules:
    """The rules shipped with bigworld, loaded once per process."""
    return load_rules()
