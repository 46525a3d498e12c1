"""Applying actions: the step function, admissible actions and ALFWorld-style observations.

Every verb has one handler that checks its preconditions and, when asked, applies its effect.
The admissible actions are exactly the candidate actions whose handler check passes, so the
list shown to an agent and the rules that judge it can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from world import actions, dynamics
from world.actions import Action
from world.entities import Avatar, Place, Thing, region_of
from world.rules import Rules
from world.state import World

NOTHING = "Nothing happens."


@dataclass(frozen=True)
class Observation:
    text: str
    admissible: tuple[str, ...]


@dataclass(frozen=True)
class StepResult:
    """What an avatar observes after one action. ``accepted`` is False for ``Nothing happens.``"""

    observation: str
    admissible: tuple[str, ...]
    tick: int
    accepted: bool


class Rejected(Exception):
    """Internal: a well-formed action that is impossible here (the reason goes to the log)."""


class View:
    """What one avatar can see and reach in its place during one step."""

    def __init__(self, world: World, avatar: Avatar) -> None:
        self.world = world
        self.rules: Rules = world.rules
        self.avatar = avatar
        self.place: Place = world.place(avatar.place)
        self.things = world.things_at(avatar.place)
        self.held = world.inventory(avatar.id)
        # the others named (and reachable by give), and how many more stand here
        self.others, crowd = world.crowd(avatar.place, avatar.id, self.rules.crowd_shown)
        self.unnamed = crowd - len(self.others)
        named: dict[str, Avatar] = {}
        for other in self.others:  # a give names the first of them by each name
            named.setdefault(other.name.lower(), other)
        self.receivers = list(named.values())
        self._indexes: dict[int, tuple[list[Thing], dict[str, Thing]]] = {}  # by id(pool)
        by_id = {t.id: t for t in self.things}
        self.receptacles = [t for t in self.things if t.kind == "receptacle"]
        self.resources = [t for t in self.things if t.kind == "resource"]
        self.visible = [
            t for t in self.things
            if t.kind == "object" and t.container is not None and _is_reachable(by_id[t.container])
        ]  # fmt: skip
        self.examinable = self.receptacles + self.resources + self.visible + self.held

    def find(self, label: str | None, pool: list[Thing]) -> Thing:
        # Admissible-action checks call this hundreds of times per step: index each pool once.
        # The cache holds the pool itself, so its id cannot be reused while this view lives.
        cached = self._indexes.get(id(pool))
        if cached is None:
            cached = self._indexes[id(pool)] = (pool, {t.label: t for t in reversed(pool)})
        thing = cached[1].get(label or "")
        if thing is None:
            raise Rejected(f"no {label!r} here")
        return thing

    def contents(self, receptacle: Thing) -> list[Thing]:
        return [t for t in self.things if t.container == receptacle.id]

    @property
    def free_slots(self) -> int:
        return self.rules.avatar_capacity - len(self.held)

    def hands_full(self) -> Rejected:
        """The refusal of an action that needs a free slot (logged with the rejection)."""
        return Rejected(f"your hands are full: you can carry {self.rules.avatar_capacity} things")


def _is_reachable(receptacle: Thing) -> bool:
    return bool(receptacle.attrs.get("open", True))


def _article(label: str) -> str:
    return f"a {label}"


def _listing(things: list[Thing]) -> str:
    labels = [_article(t.label) for t in things]
    if not labels:
        return "nothing"
    if len(labels) == 1:
        return labels[0]
    return ", ".join(labels[:-1]) + f", and {labels[-1]}"


def _time_of_day(world: World) -> str:
    version = world.dynamics
    part = (world.tick % version.day_length) * 4 // version.day_length
    return ("morning", "afternoon", "evening", "night")[part]


def describe(view: View) -> str:
    """The ``look`` text of the avatar's place."""
    world, place = view.world, view.place
    lines = [
        f"You are in the {place.name}. It is a {world.season} {_time_of_day(world)}.",
        f"Looking around you, you see {_listing(view.receptacles + view.resources)}.",
    ]
    for receptacle in view.receptacles:
        lines.append(_receptacle_text(view, receptacle))
    if view.others or view.unnamed:
        names = ", ".join(a.name for a in view.others)
        if view.unnamed:
            counted = f"{view.unnamed} other{'s' if view.unnamed > 1 else ''}"
            names = f"{names} and {counted}" if names else counted
        lines.append(f"Also here: {names}.")
    lines.append(f"From here you can go to {', '.join(place.exits)}.")
    return " ".join(line for line in lines if line)


def _receptacle_text(view: View, receptacle: Thing) -> str:
    spec = view.rules.receptacles[receptacle.type]
    if not _is_reachable(receptacle):
        return f"The {receptacle.label} is closed."
    inside = view.contents(receptacle)
    if not inside and not spec.openable:
        return ""
    prefix = "On" if spec.preposition == "on" else "In"
    return f"{prefix} the {receptacle.label}, you see {_listing(inside)}."


def _describe_thing(view: View, thing: Thing) -> str:
    if thing.kind == "receptacle":
        spec = view.rules.receptacles[thing.type]
        parts = [_receptacle_text(view, thing) or f"The {thing.label} is empty."]
        if spec.openable and _is_reachable(thing):
            parts.insert(0, f"The {thing.label} is open.")
        if spec.toggleable:
            parts.append(f"The {thing.label} is {'on' if thing.attrs.get('on') else 'off'}.")
        if spec.sells:
            parts.append(f"The {thing.label} sells {_price_list(view, spec.sells)}.")
        return " ".join(parts)
    if thing.kind == "resource":
        source = view.rules.resources[thing.type]
        stock = thing.count("stock")
        return f"The {thing.label} has {stock} {source.yields} left. Gathering it needs a {source.tool}."
    attrs = thing.attrs
    words = ["clean" if attrs.get("clean", True) else "dirty"]
    if attrs.get("temp") in (dynamics.HOT, dynamics.COLD):
        words.append(str(attrs["temp"]))
    text = f"This is a {', '.join(words)} {thing.label}."
    if "fresh" in attrs:
        fresh = thing.number("fresh")
        state = "rotten" if fresh <= 0 else "stale" if fresh < 40 else "fresh"
        text += f" It is {state}."
    if "durability" in attrs:
        text += (
            " It is broken." if attrs.get("broken") else f" It has {attrs['durability']} uses left."
        )
    if thing.quantity > 1:
        text += f" There are {attrs['quantity']} of them."
    return text


def _price_list(view: View, types: tuple[str, ...]) -> str:
    """``bread for 4 coins, ...``: today's prices (of the rules version in force)."""
    version, objects = view.world.dynamics, view.rules.objects
    return ", ".join(f"{name} for {version.price(objects[name]):g} coins" for name in types)


# -- handlers: check, and apply when ``apply`` is true; return the feedback text ----------
Handler = Callable[[View, Action, bool], str]


def _look(view: View, action: Action, apply: bool) -> str:
    # Never refused: a check (the admissible list's) writes no text (describing the place and
    # what could be examined for every step's list was 4% of the writer's time in a batch,
    # docs/benchmarks/fleet.md)
    return describe(view) if apply else ""


def _inventory(view: View, action: Action, apply: bool) -> str:
    if not view.held:
        return "You are not carrying anything."
    return f"You are carrying: {_listing(view.held)}."


def _wait(view: View, action: Action, apply: bool) -> str:
    return "You wait."


def _go(view: View, action: Action, apply: bool) -> str:
    target_id = view.place.exits.get(action.obj or "")
    if target_id is None:
        raise Rejected(f"no exit {action.obj!r} from {view.place.name}")
    world = view.world
    if not apply:
        # A place in this region is one cheap load. Enterability of a place in another region
        # is decided when moving (generating the region just to list exits would make every
        # look at a hub touch four regions); only an already loaded one is checked here.
        if region_of(target_id) == region_of(view.place.id):
            _check_enterable(world, world.place(target_id))
        elif (loaded := world.loaded_place(target_id)) is not None:
            _check_enterable(world, loaded)
        return ""
    target = world.place(target_id)
    _check_enterable(world, target)
    view.avatar.place = target.id
    world.touch(view.avatar)
    arrived = View(world, view.avatar)
    return f"You arrive at the {target.name}. {describe(arrived)}"


def _check_enterable(world: World, target: Place) -> None:
    if world.season not in world.rules.places[target.kind].seasons:
        raise Rejected(f"{target.name} cannot be entered in {world.season}")
    if int(target.attrs.get("flooded_until") or -1) > world.tick:
        raise Rejected(f"{target.name} is flooded")


def _openable(view: View, action: Action) -> Thing:
    receptacle = view.find(action.obj, view.receptacles)
    if not view.rules.receptacles[receptacle.type].openable:
        raise Rejected(f"{receptacle.label} does not open")
    return receptacle


def _open(view: View, action: Action, apply: bool) -> str:
    receptacle = _openable(view, action)
    if receptacle.attrs.get("open"):
        raise Rejected("already open")
    if apply:
        receptacle.attrs["open"] = True
        view.world.touch(receptacle)
    return f"You open the {receptacle.label}. In it, you see {_listing(view.contents(receptacle))}."


def _close(view: View, action: Action, apply: bool) -> str:
    receptacle = _openable(view, action)
    if not receptacle.attrs.get("open"):
        raise Rejected("already closed")
    if apply:
        receptacle.attrs["open"] = False
        view.world.touch(receptacle)
    return f"You close the {receptacle.label}."


def _take(view: View, action: Action, apply: bool) -> str:
    receptacle = view.find(action.target, view.receptacles)
    thing = view.find(action.obj, view.visible)
    if thing.container != receptacle.id:
        raise Rejected(f"{thing.label} is not in {receptacle.label}")
    if view.free_slots < 1:
        raise view.hands_full()
    if apply:
        thing.attrs.pop("chilled", None)
        view.world.move(thing, holder=view.avatar.id)
    return f"You pick up the {thing.label} from the {receptacle.label}."


def _put(view: View, action: Action, apply: bool) -> str:
    prep, _, label = (action.target or "").partition(" ")
    thing = view.find(action.obj, view.held)
    receptacle = view.find(label, view.receptacles)
    spec = view.rules.receptacles[receptacle.type]
    if prep != "in/on" and prep != spec.preposition:
        raise Rejected(f"things go {spec.preposition} the {receptacle.label}")
    if not _is_reachable(receptacle):
        raise Rejected(f"{receptacle.label} is closed")
    if len(view.contents(receptacle)) >= spec.capacity:
        raise Rejected(f"{receptacle.label} is full")
    if apply:
        if spec.station == "cool":
            thing.attrs["chilled"] = True
        view.world.move(thing, place=view.place.id, container=receptacle.id)
    return f"You put the {thing.label} {spec.preposition} the {receptacle.label}."


def _station(view: View, action: Action, station: str, tag: str) -> tuple[Thing, Thing]:
    thing = view.find(action.obj, view.held)
    receptacle = view.find(action.target, view.receptacles)
    if view.rules.receptacles[receptacle.type].station != station:
        raise Rejected(f"{receptacle.label} cannot {action.verb}")
    if tag not in view.rules.objects[thing.type].tags:
        raise Rejected(f"{thing.label} cannot be {action.verb}ed")
    return thing, receptacle


def _clean(view: View, action: Action, apply: bool) -> str:
    thing, receptacle = _station(view, action, "clean", "cleanable")
    if apply:
        thing.attrs["clean"] = True
        view.world.touch(thing)
    return f"You clean the {thing.label} using the {receptacle.label}."


def _temper(view: View, action: Action, apply: bool, temp: str) -> str:
    station, tag = ("heat", "heatable") if temp == dynamics.HOT else ("cool", "coolable")
    thing, receptacle = _station(view, action, station, tag)
    if apply:
        world = view.world
        thing.attrs["temp"] = temp
        thing.attrs["temp_until"] = dynamics.temperature_until(world.dynamics, world.tick)
        world.touch(thing)
    return f"You {action.verb} the {thing.label} using the {receptacle.label}."


def _use(view: View, action: Action, apply: bool) -> str:
    receptacle = view.find(action.obj, view.receptacles)
    if not view.rules.receptacles[receptacle.type].toggleable:
        raise Rejected(f"{receptacle.label} cannot be switched")
    on = not receptacle.attrs.get("on")
    if apply:
        receptacle.attrs["on"] = on
        view.world.touch(receptacle)
    return f"You turn {'on' if on else 'off'} the {receptacle.label}."


def _examine(view: View, action: Action, apply: bool) -> str:
    thing = view.find(action.obj, view.examinable)  # the only refusal
    return _describe_thing(view, thing) if apply else ""


def _gather(view: View, action: Action, apply: bool) -> str:
    world = view.world
    resource = view.find(action.obj, view.resources)
    tool = view.find(action.target, view.held)
    spec = world.rules.resources[resource.type]
    if spec.tool not in world.rules.objects[tool.type].tags or tool.attrs.get("broken"):
        raise Rejected(f"{tool.label} cannot gather from {resource.label}")
    if resource.number("stock") < 1:
        raise Rejected(f"{resource.label} is exhausted")
    if spec.daylight_only and not world.dynamics.is_day(world.tick):
        raise Rejected("too dark")
    stack = _stack_for(view, spec.yields)
    if stack is None and view.free_slots < 1:
        raise view.hands_full()
    if apply:
        resource.attrs["stock"] = round(resource.number("stock") - 1, 3)
        world.touch(resource)
        _wear(world, tool)
        _receive(view, stack, spec.yields)
    return f"You gather a {spec.yields} from the {resource.label} with the {tool.label}."


def _stack_for(view: View, type_name: str) -> Thing | None:
    """A held stack of ``type_name`` with room for one more unit, if any."""
    limit = view.rules.objects[type_name].stack
    for thing in view.held:
        if thing.type == type_name and thing.quantity < limit:
            return thing
    return None


def _receive(view: View, stack: Thing | None, type_name: str) -> None:
    """One unit of ``type_name`` into the avatar's hands: onto ``stack`` or as a new thing."""
    if stack is not None:
        stack.attrs["quantity"] = stack.quantity + 1
        view.world.touch(stack)
    else:
        view.world.create_thing(type_name, holder=view.avatar.id)


def _consume(world: World, thing: Thing, units: int) -> None:
    """Take ``units`` of a held stack away (eaten, crafted, traded); the last unit removes it."""
    left = thing.quantity - units
    if left:
        thing.attrs["quantity"] = left
        world.touch(thing)
    else:
        world.remove(thing)


def _wear(world: World, tool: Thing) -> None:
    if "durability" not in tool.attrs:
        return
    left = max(0, tool.count("durability") - world.dynamics.wear_per_use)
    tool.attrs["durability"] = left
    if left == 0:
        tool.attrs["broken"] = True
    world.touch(tool)


def _craft(view: View, action: Action, apply: bool) -> str:
    rules, world = view.rules, view.world
    recipe = rules.recipes.get(action.obj or "")
    if recipe is None:
        raise Rejected(f"no recipe for {action.obj!r}")
    if not world.dynamics.knows(recipe):
        raise Rejected(f"the recipe for {recipe.output} is not discovered yet")
    if recipe.station and not any(r.type == recipe.station for r in view.receptacles):
        raise Rejected(f"needs a {recipe.station}")
    consumed: list[tuple[Thing, int]] = []  # (thing, units taken)
    for type_name, units in sorted(recipe.inputs.items()):
        need = units
        for thing in view.held:
            if thing.type != type_name or need == 0 or dynamics.is_rotten(thing):
                continue
            take = min(need, thing.quantity)
            consumed.append((thing, take))
            need -= take
        if need:
            raise Rejected(f"missing {need} {type_name}")
    emptied = sum(1 for t, n in consumed if n == t.quantity)
    spec = rules.objects[recipe.output]
    slots = 1 if spec.stack >= recipe.count else recipe.count
    if view.free_slots + emptied < slots:
        raise view.hands_full()
    if apply:
        for thing, take in consumed:
            _consume(world, thing, take)
        if slots == 1:
            made = world.create_thing(recipe.output, holder=view.avatar.id)
            made.attrs["quantity"] = recipe.count
        else:
            for _ in range(recipe.count):
                world.create_thing(recipe.output, holder=view.avatar.id)
    return f"You craft {recipe.count} {recipe.output}."


def _give(view: View, action: Action, apply: bool) -> str:
    thing = view.find(action.obj, view.held)
    other = next((a for a in view.others if a.name.lower() == action.target), None)
    if other is None:
        raise Rejected(f"nobody called {action.target!r} here")
    capacity = view.rules.avatar_capacity
    if not apply:
        # An admissible list checks a give to each receiver in turn: the first check reads
        # what they all hold, in one statement (issue 38). An applied give reads its own.
        view.world.gather_inventories([a.id for a in view.receivers])
    if len(view.world.inventory(other.id)) >= capacity:
        raise Rejected(f"{other.name}'s hands are full: they can carry {capacity} things")
    if apply:
        view.world.move(thing, holder=other.id)
    return f"You give the {thing.label} to {other.name}."


def _eat(view: View, action: Action, apply: bool) -> str:
    thing = view.find(action.obj, view.held)
    if "edible" not in view.rules.objects[thing.type].tags or dynamics.is_rotten(thing):
        raise Rejected(f"{thing.label} is not edible")
    if apply:
        _consume(view.world, thing, 1)
    return f"You eat the {thing.label}."


def _trade(view: View, action: Action, apply: bool) -> str:
    """Give the fewest units of a held stack whose worth covers one unit of a sold type, at
    the prices of the rules version in force (a market shift changes them from its tick on).
    A stall's stock never runs out; it does not take rotten food or broken tools."""
    rules = view.rules
    thing = view.find(action.obj, view.held)
    stall = view.find(action.target, view.receptacles)
    wanted = action.item or ""
    if wanted not in rules.receptacles[stall.type].sells or wanted == thing.type:
        raise Rejected(f"{stall.label} does not trade {thing.type} for {wanted!r}")
    if dynamics.is_rotten(thing) or thing.attrs.get("broken"):
        raise Rejected(f"{stall.label} does not take a rotten or broken {thing.label}")
    version = view.world.dynamics
    ask = round(100 * version.price(rules.objects[wanted]))  # cents
    offer = round(100 * version.price(rules.objects[thing.type]))  # cents per unit
    units = -(-ask // offer)  # the fewest units worth at least the ask
    if units > thing.quantity:
        raise Rejected(f"{thing.quantity} {thing.type} are worth less than one {wanted}")
    stack = _stack_for(view, wanted)
    if stack is None and view.free_slots + int(units == thing.quantity) < 1:
        raise view.hands_full()
    if apply:
        _consume(view.world, thing, units)
        _receive(view, stack, wanted)
    return f"You trade {units} {thing.type} for 1 {wanted} at the {stall.label}."


HANDLERS: dict[str, Handler] = {
    "look": _look,
    "inventory": _inventory,
    "wait": _wait,
    "go": _go,
    "open": _open,
    "close": _close,
    "take": _take,
    "put": _put,
    "clean": _clean,
    "heat": lambda v, a, apply: _temper(v, a, apply, dynamics.HOT),
    "cool": lambda v, a, apply: _temper(v, a, apply, dynamics.COLD),
    "use": _use,
    "examine": _examine,
    "gather": _gather,
    "craft": _craft,
    "give": _give,
    "eat": _eat,
    "trade": _trade,
}


def candidates(view: View) -> Iterator[Action]:
    """Every action worth checking in this view, in a stable order."""
    yield Action("look")
    yield Action("inventory")
    for label in view.place.exits:
        yield Action("go", label)
    for r in view.receptacles:
        yield Action("open", r.label)
        yield Action("close", r.label)
    for t in view.visible:
        yield Action(
            "take", t.label, next(r.label for r in view.receptacles if r.id == t.container)
        )
    for t in view.held:
        for r in view.receptacles:
            yield Action("put", t.label, f"{view.rules.receptacles[r.type].preposition} {r.label}")
        for r in view.receptacles:
            for verb in ("clean", "heat", "cool"):
                yield Action(verb, t.label, r.label)
        for other in view.others:
            yield Action("give", t.label, other.name.lower())
        yield Action("eat", t.label)
        for r in view.receptacles:
            for item in view.rules.receptacles[r.type].sells:
                yield Action("trade", t.label, r.label, item)
    for r in view.receptacles:
        yield Action("use", r.label)
    for resource in view.resources:
        for tool in view.held:
            yield Action("gather", resource.label, tool.label)
    held_types = {t.type for t in view.held}
    for output in sorted(view.rules.recipes):
        if held_types.issuperset(view.rules.recipes[output].inputs):
            yield Action("craft", output)
    for t in view.examinable:
        yield Action("examine", t.label)
    yield Action("wait")


def admissible(view: View) -> tuple[str, ...]:
    allowed = []
    for action in candidates(view):
        try:
            HANDLERS[action.verb](view, action, False)
        except Rejected:
            continue
        allowed.append(action.text)
    return tuple(allowed)


def observe(world: World, avatar_id: str) -> Observation:
    """Look around without acting: no tick passes and nothing changes."""
    view = View(world, world.avatar(avatar_id))
    return Observation(describe(view), admissible(view))


def step(world: World, avatar_id: str, text: str) -> StepResult:
    """Apply one action of one avatar: validate, apply, advance the tick, log.

    The action is applied at the tick its admissible list was computed at; then the clock
    moves on and the new admissible list is computed at the tick the next action will be
    applied at. Raises ``ActionError`` for malformed text and ``UnknownEntityError`` for an
    unknown avatar, both before anything changes. Does not commit.
    """
    normal = actions.validate(text)
    avatar = world.avatar(avatar_id)
    view = View(world, avatar)
    action = actions.parse(normal)
    accepted, reason = True, ""
    try:
        if action is None:
            raise Rejected("not in the action grammar")
        feedback = HANDLERS[action.verb](view, action, True)
    except Rejected as rejected:
        accepted, feedback, reason = False, NOTHING, str(rejected)
    started = world.tick
    tick = world.advance()
    if not accepted:
        world.emit(
            "rejected", avatar_id, [f"avatar:{avatar_id}"], {"text": normal, "reason": reason}
        )
    world.emit(
        "action",
        avatar_id,
        [f"avatar:{avatar_id}", f"place:{view.place.id}"],
        {"text": normal, "accepted": accepted, "observation": feedback, **_jump(started, tick)},
    )
    after = View(world, avatar)
    return StepResult(feedback, admissible(after), tick, accepted)


def heartbeat(world: World) -> int:
    """Advance the clock by one tick with no action (logged, so a replay stays exact)."""
    started = world.tick
    tick = world.advance()
    world.emit("tick", None, [], _jump(started, tick))
    return tick


def _jump(started: int, tick: int) -> dict[str, int]:
    """Where the clock stood before an advance that skipped ticks other transactions drew
    (PostgreSQL, design §4): a replay starts the input there. Empty for a one-tick advance."""
    return {} if tick == started + 1 else {"from_tick": started}
