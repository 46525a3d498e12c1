"""Tasks as data: specs round-trip and are validated, goal predicates judge the real world
(moved and consumed objects included) without changing it, and sampling is deterministic and
never hands out a task that already holds."""

from __future__ import annotations

import pytest

from world import engine, episodes, oracle, tasks
from world.episodes import Episode
from world.errors import TaskError
from world.families import DRAWN_FAMILIES, FAMILIES
from world.sampling import sample_task
from world.state import World
from world.tasks import Task, goal_met, step_budget

KITCHEN, BEDROOM, LIVING_ROOM = "0,0:2", "0,0:4", "0,0:1"


def rid(sim, label: str, place: str = KITCHEN) -> int:
    """The id of a receptacle (or resource) by label in a place."""
    with sim.tx() as world:
        return sim.find(world, label, place).id


def place_task(family: str, receptacle: int, label: str = "cabinet 1", obj: str = "mug") -> Task:
    return Task.make(
        family,
        {
            "object": obj,
            "receptacle": receptacle,
            "receptacle_label": label,
            "place": KITCHEN,
            "place_name": "kitchen 1",
        },
    )


def met(sim, task: Task, avatar: str = "a") -> bool:
    with sim.tx() as world:
        return goal_met(world, task, avatar)


SPECS = [
    {
        "family": "pick_and_place",
        "params": {
            "object": "mug",
            "receptacle": 12,
            "receptacle_label": "cabinet 2",
            "place": "0,0:2",
            "place_name": "kitchen 1",
        },
    },
    {
        "family": "clean_and_place",
        "params": {
            "object": "mug",
            "receptacle": 12,
            "receptacle_label": "cabinet 2",
            "place": "0,0:2",
            "place_name": "kitchen 1",
            "direction": "north",
        },
    },
    {
        "family": "examine_in_light",
        "params": {
            "object": "book",
            "lamp": 40,
            "lamp_label": "desk lamp 1",
            "place": "0,0:4",
            "place_name": "bedroom 1",
        },
    },
    {"family": "craft", "params": {"item": "wagon", "baseline": 0}},
    {
        "family": "gather_and_deliver",
        "params": {
            "yields": "wood",
            "units": 3,
            "baseline": 1,
            "resource": 7,
            "resource_label": "tree 1",
            "resource_place": "1,0:2",
            "resource_place_name": "grove 1",
            "resource_direction": "east",
            "receptacle": 30,
            "receptacle_label": "chest 1",
            "place": "0,0:5",
            "place_name": "workshop 1",
        },
    },
    {
        "family": "cooperate",
        "params": {"object": "apple", "avatar": "b", "avatar_name": "Bob", "baseline": 0},
    },
]


# -- specs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["family"])
def test_spec_round_trip_and_stable_id(spec) -> None:
    task = Task.from_spec(spec)
    assert task.spec() == spec
    again = Task.from_spec(
        {"family": spec["family"], "params": dict(reversed(list(spec["params"].items())))}
    )
    assert again == task and hash(again) == hash(task) and again.id == task.id
    assert len(task.id) == 16 and int(task.id, 16) >= 0
    assert {task: 1}[again] == 1


def test_ids_differ_between_tasks() -> None:
    assert len({Task.from_spec(s).id for s in SPECS}) == len(SPECS)


def test_texts_read_like_alfworld() -> None:
    texts = [Task.from_spec(s).text for s in SPECS]
    assert texts == [
        "put a mug in cabinet 2 in the kitchen 1",
        "put a clean mug in cabinet 2 in the kitchen 1 to the north",
        "look at book under the desk lamp 1 in the bedroom 1",
        "craft a wagon",
        "gather 3 wood from tree 1 in the grove 1 to the east and put them in chest 1 in the workshop 1",
        "bring an apple to Bob and give it to them",
    ]
    heat = place_task("heat_and_place", 3, "countertop 1", "apple")
    assert heat.text == "heat some apple and put it on countertop 1 in the kitchen 1"
    assert place_task("pick_two_and_place", 3).text == "put two mug in cabinet 1 in the kitchen 1"


@pytest.mark.parametrize(
    "spec",
    [
        None,
        {"family": "pick_and_place"},
        {"family": "fly_to_moon", "params": {}},
        {"family": "craft", "params": []},
        {"family": "craft", "params": {"item": "cart"}},  # baseline missing
        {"family": "craft", "params": {"item": "cart", "baseline": 0, "colour": "red"}},
        {"family": "craft", "params": {"item": "", "baseline": 0}},
        {"family": "craft", "params": {"item": "cart", "baseline": -1}},
        {"family": "craft", "params": {"item": "cart", "baseline": True}},
        {"family": "craft", "params": {"item": 3, "baseline": 0}},
        {"family": "gather_and_deliver", "params": {**SPECS[4]["params"], "units": 0}},
        {"family": "pick_and_place", "params": {**SPECS[0]["params"], "receptacle": "12"}},
    ],
)
def test_from_spec_rejects_bad_input(spec) -> None:
    with pytest.raises(TaskError):
        Task.from_spec(spec)


# -- goal predicates ---------------------------------------------------------------------------
def test_pick_and_place_judges_where_the_object_is_now(sim) -> None:
    cabinet = rid(sim, "cabinet 1")
    task = place_task("pick_and_place", cabinet)
    mug = sim.spawn("mug", holder="a")
    assert not met(sim, task)
    sim.step("a", "open cabinet 1")
    assert sim.step("a", f"put {mug.label} in cabinet 1").accepted
    assert met(sim, task)
    sim.step("a", f"take {mug.label} from cabinet 1")  # moved away again
    assert not met(sim, task)
    assert not met(sim, place_task("pick_and_place", cabinet, obj="vase"))


def test_clean_and_place_needs_a_clean_object(sim) -> None:
    cabinet = rid(sim, "cabinet 1")
    task = place_task("clean_and_place", cabinet)
    sim.spawn("mug", into="cabinet 1", clean=False)
    assert not met(sim, task)
    sim.spawn("mug", into="cabinet 1", clean=True)
    assert met(sim, task)


def test_heat_and_place_reads_temperature_as_it_settles_now(sim, rules) -> None:
    counter = rid(sim, "countertop 1")
    task = place_task("heat_and_place", counter, "countertop 1", "apple")
    apple = sim.spawn("apple", holder="a")
    assert not met(sim, task)
    sim.step("a", f"heat {apple.label} with stove 1")
    sim.step("a", f"put {apple.label} on countertop 1")
    assert met(sim, task)
    assert not met(sim, place_task("cool_and_place", counter, "countertop 1", "apple"))
    sim.skip(rules.dynamics.temperature_ticks)  # the apple is back at room temperature
    assert not met(sim, task)


def test_cool_and_place_and_a_consumed_object(sim) -> None:
    counter = rid(sim, "countertop 1")
    task = place_task("cool_and_place", counter, "countertop 1", "apple")
    apple = sim.spawn("apple", holder="a")
    sim.step("a", "open fridge 1")
    sim.step("a", f"cool {apple.label} with fridge 1")
    sim.step("a", f"put {apple.label} on countertop 1")
    assert met(sim, task)
    sim.step("a", f"take {apple.label} from countertop 1")
    sim.step("a", f"eat {apple.label}")  # gone for good
    assert not met(sim, task)


def test_pick_two_needs_two(sim) -> None:
    counter = rid(sim, "countertop 1")
    task = place_task("pick_two_and_place", counter, "countertop 1", "spoon")
    sim.spawn("spoon", into="countertop 1")
    assert not met(sim, task)
    sim.spawn("spoon", into="countertop 1")
    assert met(sim, task)


def test_examine_in_light_needs_the_lamp_on_and_the_object_in_hand(sim) -> None:
    lamp = rid(sim, "desk lamp 1", BEDROOM)
    task = Task.make(
        "examine_in_light",
        {
            "object": "book",
            "lamp": lamp,
            "lamp_label": "desk lamp 1",
            "place": BEDROOM,
            "place_name": "bedroom 1",
        },
    )
    sim.spawn("book", holder="a")
    assert not met(sim, task)  # in the kitchen
    sim.teleport("a", BEDROOM)
    assert not met(sim, task)  # lamp off
    assert sim.step("a", "use desk lamp 1").accepted
    assert met(sim, task)
    sim.teleport("a", LIVING_ROOM)
    assert not met(sim, task)


def test_craft_compares_with_the_baseline(sim) -> None:
    sim.spawn("stick", holder="a")
    task = Task.make("craft", {"item": "stick", "baseline": 1})
    assert not met(sim, task)
    sim.spawn("fiber", holder="a", quantity=3)
    assert sim.step("a", "craft rope").accepted
    assert met(sim, Task.make("craft", {"item": "rope", "baseline": 0}))
    assert not met(sim, Task.make("craft", {"item": "rope", "baseline": 1}))


def test_gather_and_deliver_counts_units_above_the_baseline(sim) -> None:
    counter = rid(sim, "countertop 1")
    params = {
        "yields": "water",
        "units": 2,
        "baseline": 1,
        "resource": 2,
        "resource_label": "well 1",
        "resource_place": "0,0:0",
        "resource_place_name": "square 1",
        "receptacle": counter,
        "receptacle_label": "countertop 1",
        "place": KITCHEN,
        "place_name": "kitchen 1",
    }
    task = Task.make("gather_and_deliver", params)
    sim.spawn("water", into="countertop 1", quantity=2)
    assert not met(sim, task)
    sim.spawn("water", into="countertop 1", quantity=1)
    assert met(sim, task)


def test_cooperate_judges_the_other_avatars_hands(sim) -> None:
    sim.join("b", "Bob")
    sim.teleport("b", KITCHEN)
    task = Task.make(
        "cooperate", {"object": "apple", "avatar": "b", "avatar_name": "Bob", "baseline": 0}
    )
    apple = sim.spawn("apple", holder="a")
    assert not met(sim, task)
    assert sim.step("a", f"give {apple.label} to bob").accepted
    assert met(sim, task)
    assert met(sim, task, "b")  # judged on Bob's hands, whoever asks
    sim.step("b", f"eat {apple.label}")
    assert not met(sim, task)


def test_goal_checks_change_nothing(sim) -> None:
    sim.spawn("apple", into="countertop 1")
    counter = rid(sim, "countertop 1")
    sim.skip(500)  # everything in the kitchen now has dynamics to settle
    before = sim.hash()
    world = World(sim.backend)
    tasks = [
        place_task(f, counter, "countertop 1", "apple")
        for f in ("pick_and_place", "heat_and_place", "pick_two_and_place")
    ]
    for task in tasks:
        goal_met(world, task, "a")
    changes = world.commit()
    assert not changes.things and not changes.avatars and not changes.events
    assert sim.hash() == before


def test_a_receptacles_contents_are_the_places_things_in_it_as_the_transaction_left_them(
    sim,
) -> None:
    """``World.peek_contents``, what the place and gather goals read, answers as the place's
    things in that receptacle do, before the transaction holds the place and after: with
    things put in, taken out, consumed and made there earlier in the transaction."""
    counter, cabinet = rid(sim, "countertop 1"), rid(sim, "cabinet 1")
    kept = [sim.spawn("apple", into="countertop 1").id for _ in range(2)]
    put_in = sim.spawn("apple", into="cabinet 1").id
    carried = sim.spawn("apple", holder="a").id
    world = World(sim.backend)

    def agree() -> list[int]:
        for receptacle in (counter, cabinet):
            lying = [t for t in world.peek_things_at(KITCHEN) if t.container == receptacle]
            assert world.peek_contents(KITCHEN, receptacle) == lying
        return [t.id for t in world.peek_contents(KITCHEN, counter)]

    assert set(kept) <= set(agree())
    world.move(world.thing(put_in), place=KITCHEN, container=counter)
    world.move(world.thing(kept[0]), holder="a")
    world.remove(world.thing(kept[1]))
    world.move(world.thing(carried), place=KITCHEN, container=cabinet)
    made = world.create_thing("apple", place=KITCHEN, container=counter).id
    inside = agree()
    assert {put_in, made} <= set(inside) and not set(kept) & set(inside)
    world.things_at(KITCHEN)  # the transaction holds the place now
    assert agree() == inside


# -- sampling ----------------------------------------------------------------------------------
def _try_sample(world: World, key: str, family: str) -> Task | None:
    try:
        return sample_task(world, "a", key=key, family=family)
    except TaskError:
        return None


def test_sampling_is_deterministic_and_never_pre_satisfied(make_sim) -> None:
    def draw(seed: int, key: str) -> list[Task | None]:
        s = make_sim(seed)
        s.join("a", "Alice")
        s.join("b", "Bob")
        with s.tx() as world:
            return [_try_sample(world, key, f) for f in FAMILIES]

    first, again = draw(3, "k1"), draw(3, "k1")
    assert first == again
    assert [t.family for t in first if t] == [f for f, t in zip(FAMILIES, first, strict=True) if t]
    assert sum(t is not None for t in first) >= 7  # the origin village alone offers most families
    assert draw(3, "k2") != first
    s = make_sim(3)
    s.join("a", "Alice")
    s.join("b", "Bob")
    for n in range(12):
        with s.tx() as world:
            task = sample_task(world, "a", key=f"n{n}")
            assert not goal_met(world, task, "a")


def test_sampling_does_not_change_the_world(make_sim) -> None:
    s = make_sim(5)
    s.join("a", "Alice")
    s.join("b", "Bob")
    s.skip(300)
    before = s.hash()
    world = World(s.backend)
    for family in FAMILIES:
        _try_sample(world, "x", family)
    changes = world.commit()
    assert not changes.things and not changes.events and not changes.regions
    assert s.hash() == before


def test_sampling_errors(make_sim) -> None:
    s = make_sim(3)
    s.join("a", "Alice")
    with s.tx() as world:
        with pytest.raises(TaskError, match="family"):
            sample_task(world, "a", key="k", family="nope")
        with pytest.raises(TaskError, match="cooperate"):
            sample_task(world, "a", key="k", family="cooperate")  # nobody else to help


def test_step_then_goal_agrees_with_engine_view(sim) -> None:
    """A task sampled here names things exactly as observations do."""
    sim.join("b", "Bob")
    with sim.tx() as world:
        task = sample_task(world, "a", key="names", family="pick_and_place")
    label = task.params["receptacle_label"]
    sim.teleport("a", task.params["place"])
    with sim.tx() as world:
        assert label in engine.observe(world, "a").text


# -- go_to: the bottom rung of the curriculum ----------------------------------------------------
def test_go_to_is_sampled_at_the_asked_hops_and_named_as_go_to_actions_name_it(sim) -> None:
    for hops in (1, 2):
        with sim.tx() as world:
            task = sample_task(world, "a", key="g", family="go_to", hops=hops)
            found = oracle.plan(world, task, "a")
            admissible = engine.observe(world, "a").admissible
        p = task.params
        assert (p["hops"], p["budget"]) == (hops, 2 * hops)
        assert found is not None and len(found) == hops
        assert all(a.startswith("go to ") for a in found.actions)
        assert found.actions[-1] == f"go to {p['place_name']}"
        assert task.text == f"go to the {p['place_name']}"
        assert found.actions[0] in admissible
        if hops == 1:  # the easiest rung: the one right move is word for word admissible
            assert f"go to {p['place_name']}" in admissible
        assert not met(sim, task)
        for action in found.actions:
            result = sim.step("a", action)
        assert result.observation.startswith(f"You arrive at the {p['place_name']}.")
        assert met(sim, task)
        sim.teleport("a", KITCHEN)
        assert not met(sim, task)


def test_go_to_sampling_is_deterministic_and_asks_for_exact_hops(sim) -> None:
    with sim.tx() as world:
        first = sample_task(world, "a", key="det", family="go_to", hops=2)
        assert sample_task(world, "a", key="det", family="go_to", hops=2) == first
        assert sample_task(world, "a", key="det", family="go_to") != first  # hops=1 by default
        with pytest.raises(TaskError, match="hops"):
            sample_task(world, "a", key="det", family="go_to", hops=0)
        with pytest.raises(TaskError, match="go_to"):
            sample_task(world, "a", key="det", family="go_to", hops=40)  # nothing that far


def test_a_draw_of_any_family_never_hands_out_go_to(make_sim) -> None:
    s = make_sim(3)
    s.join("a", "Alice")
    s.join("b", "Bob")
    with s.tx() as world:
        drawn = {sample_task(world, "a", key=f"any{n}").family for n in range(24)}
    assert "go_to" not in drawn and len(drawn) >= 3
    assert "go_to" in FAMILIES and "go_to" not in DRAWN_FAMILIES


def test_go_to_params_are_checked() -> None:
    good = {"place": KITCHEN, "place_name": "kitchen 1", "hops": 1}
    assert Task.make("go_to", good).text == "go to the kitchen 1"
    assert (
        Task.make("go_to", {**good, "direction": "north"}).text
        == "go to the kitchen 1 to the north"
    )
    for bad in (
        {**good, "hops": 0},
        {**good, "budget": 0},
        {**good, "from_family": "go_to"},
        {"place": KITCHEN, "hops": 1},
    ):
        with pytest.raises(TaskError):
            Task.make("go_to", bad)


# -- follow: a go_to whose text names every move -------------------------------------------------
def test_follow_names_each_move_of_the_oracles_walk_in_order(make_sim) -> None:
    """Every move the oracle makes is written in the task, in order, and each is admissible
    where it is made: the observation shows each step's right action."""
    s = make_sim(7)
    s.join("a", "Alice")
    with s.tx() as world:
        for x, y in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            world.region(x, y)
    for hops in (1, 2, 3, 4):
        with s.tx() as world:
            start = world.avatar("a").place
            task = sample_task(world, "a", key=f"f{hops}", family="follow", hops=hops)
            found = oracle.plan(world, task, "a")
        p = task.params
        assert (p["hops"], p["budget"], p["start"]) == (hops, 2 * hops, start)
        assert found is not None and len(found) == hops
        labels = [a.removeprefix("go to ") for a in found.actions]
        assert p.get("route", "").split(", ") == (labels[:-1] or [""])
        assert task.text.startswith("go to " + ", then ".join(f"the {x}" for x in labels))
        for action in found.actions:
            assert action in s.observe("a").admissible
            s.step("a", action)
        assert met(s, task)


def test_after_its_second_move_a_follow_often_names_the_way_back_too(make_sim) -> None:
    """The right move is always among the exits the task names, but from the third move on
    the place just left is often named too (its exit leads back): telling the two apart takes
    knowing how far along the way the avatar is, not just matching words (closed-loop page,
    rung follow_4)."""
    named: dict[int, list[int]] = {0: [], 1: [], 2: []}  # move 1, 2, 3+: exits named there
    for seed in (3, 7):
        s = make_sim(seed)
        s.join("a", "Alice")
        with s.tx() as world:
            for x, y in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                world.region(x, y)
        for n in range(24):
            try:
                with s.tx() as world:
                    task = sample_task(world, "a", key=f"w{n}", family="follow", hops=2 + n % 3)
                    found = oracle.plan(world, task, "a")
            except TaskError:  # nothing that far from here: walk on
                s.step("a", next(a for a in s.observe("a").admissible if a.startswith("go to ")))
                continue
            assert found is not None
            labels = {a.removeprefix("go to ") for a in found.actions}
            for i, action in enumerate(found.actions):
                exits = [a for a in s.observe("a").admissible if a.startswith("go to ")]
                assert action in exits
                named[min(i, 2)].append(sum(a.removeprefix("go to ") in labels for a in exits))
                s.step("a", action)
    share = {i: sum(k > 1 for k in counts) / len(counts) for i, counts in named.items()}
    assert share[0] < 0.1 and share[2] > 0.4, share


def test_follow_params_are_checked_and_read_as_directions() -> None:
    good = {"place": KITCHEN, "place_name": "kitchen 1", "hops": 1, "start": "0,0:0"}
    assert Task.make("follow", good).text == "go to the kitchen 1"
    routed = {**good, "hops": 3, "route": "north road, square 1", "direction": "south"}
    assert (
        Task.make("follow", routed).text
        == "go to the north road, then the square 1, then the kitchen 1 to the south"
    )
    for bad in ({**good, "route": ""}, {**good, "start": ""}, {**good, "route": ["a"]}):
        with pytest.raises(TaskError):
            Task.make("follow", bad)
    with pytest.raises(TaskError, match="missing"):
        Task.make("follow", {k: v for k, v in good.items() if k != "start"})


# -- trail: a go_to signposted one move at a time -------------------------------------------------
SIGNPOST = "A signpost here reads: for the "


def _signposted_move(observation: str, place_name: str) -> str | None:
    """The move the observation's closing signpost names, or None when it has none."""
    _, found, sign = observation.rpartition(SIGNPOST)
    if not found:
        return None
    target, _, move = sign.partition(", ")
    assert target == place_name and move.startswith("go to ") and move.endswith(".")
    return move.removesuffix(".")


def test_trail_signposts_a_shortest_way_at_every_decision_even_after_a_wrong_move(
    make_sim,
) -> None:
    """Every decision's observation ends with a signpost whose move is admissible and one
    nearer the target by the oracle's plan, from wherever the avatar stands (after a wrong
    move too), so following the signposts alone arrives; an ended episode shows none."""
    s = make_sim(7)
    s.join("a", "Alice")
    with s.tx() as world:
        for x, y in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            world.region(x, y)

    def distance(task: Task) -> int:
        with s.tx() as world:
            found = oracle.plan(world, task, "a")
        assert found is not None
        return len(found)

    for hops in (1, 2, 3, 4):
        with s.tx() as world:
            task = sample_task(world, "a", key=f"t{hops}", family="trail", hops=hops)
            first = episodes.begin(world, "a", task, key=None, family="trail", draw="fresh")
        name = task.params["place_name"]
        assert task.text.startswith(f"follow the signposts to the {name}")
        seen, _, text = first.text.partition(episodes.TASK_PROMPT)
        assert text == task.text
        move = _signposted_move(seen, name)
        assert move in first.admissible
        wrong = next(a for a in first.admissible if a.startswith("go to ") and a != move)
        episode = Episode(5, "a", task.id, "trail", budget=2 * hops + 2, last_step=0)
        with s.tx() as world:
            taken = episodes.advance(world, episode, task, wrong, 1)
        assert not taken.done
        left, followed = distance(task), 0
        while not taken.done:
            move = _signposted_move(taken.result.observation, name)
            assert move is not None and move in taken.result.admissible
            with s.tx() as world:
                taken = episodes.advance(world, taken.episode, task, move, followed + 2)
            followed += 1
            if not taken.done:
                assert distance(task) == left - followed
        assert taken.success and followed == left
        assert _signposted_move(taken.result.observation, name) is None
        with s.tx() as world:
            assert tasks.guide(world, task, "a").sign is None


def test_a_waymark_lists_the_signposted_move_first_and_keeps_the_rest_in_order(make_sim) -> None:
    """A waymark shows a trail's signpost, and its move heads the admissible list at every
    decision (after a wrong move too); the other actions keep the engine's order."""
    s = make_sim(7)
    s.join("a", "Alice")
    with s.tx() as world:
        for x, y in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            world.region(x, y)
    for hops in (2, 3):
        with s.tx() as world:
            task = sample_task(world, "a", key=f"w{hops}", family="waymark", hops=hops)
            first = episodes.begin(world, "a", task, key=None, family="waymark", draw="fresh")
        name = task.params["place_name"]
        seen = first.text.partition(episodes.TASK_PROMPT)[0]
        move = _signposted_move(seen, name)
        engines = s.observe("a").admissible
        assert first.admissible[0] == move and sorted(first.admissible) == sorted(engines)
        assert [a for a in first.admissible if a != move] == [a for a in engines if a != move]
        moves = [a for a in first.admissible[1:] if a.startswith("go to ")]
        wrong = (moves or list(first.admissible[1:]))[0]
        episode = Episode(5, "a", task.id, "waymark", budget=2 * hops + 2, last_step=0)
        with s.tx() as world:
            taken = episodes.advance(world, episode, task, wrong, 1)
        index = 1
        while not taken.done:  # taking the first action listed alone arrives
            listed = taken.result.admissible
            assert listed[0] == _signposted_move(taken.result.observation, name)
            index += 1
            with s.tx() as world:
                taken = episodes.advance(world, taken.episode, task, listed[0], index)
        assert taken.success


def test_families_other_than_trail_add_nothing_to_the_observation(sim) -> None:
    go = Task.make("go_to", {"place": BEDROOM, "place_name": "bedroom 1", "hops": 2})
    with sim.tx() as world:
        first = episodes.begin(world, "a", go, key=None, family="go_to", draw="fresh")
        guide = tasks.guide(world, go, "a")
        assert guide.sign is None and guide.lead is None
    seen = sim.observe("a")
    assert first.text == seen.text + episodes.TASK_PROMPT + go.text
    assert first.admissible == seen.admissible


def test_step_budget_is_the_smaller_of_the_servers_and_the_tasks() -> None:
    go = Task.make("go_to", {"place": KITCHEN, "place_name": "kitchen 1", "hops": 2, "budget": 4})
    assert step_budget(go, 50) == 4
    assert step_budget(go, 3) == 3
    unbudgeted = Task.make("go_to", {"place": KITCHEN, "place_name": "kitchen 1", "hops": 2})
    assert step_budget(unbudgeted, 50) == 50
    assert step_budget(place_task("pick_and_place", 12), 50) == 50
