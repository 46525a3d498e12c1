"""Rules load from data into frozen dataclasses, meet the size floors, and bad data fails loudly."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from world.errors import RulesError
from world.rules import (
    DATA_DIR,
    STATIONS,
    ObjectType,
    ReceptacleType,
    Recipe,
    ResourceType,
    Rules,
    RulesVersion,
    load_rules,
)


def test_every_rule_is_a_frozen_dataclass(rules: Rules) -> None:
    samples = [
        next(iter(rules.objects.values())),
        next(iter(rules.receptacles.values())),
        next(iter(rules.resources.values())),
        next(iter(rules.recipes.values())),
        next(iter(rules.places.values())),
        next(iter(rules.regions.values())),
        rules.dynamics,
        rules,
    ]
    for value in samples:
        assert dataclasses.is_dataclass(value)
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
    # A recipe's inputs cannot be edited behind the dataclass's back either.
    with pytest.raises(TypeError):
        rules.recipes["plank"].inputs["wood"] = 5  # type: ignore[index]


def test_types_are_typed(rules: Rules) -> None:
    assert all(isinstance(o, ObjectType) for o in rules.objects.values())
    assert all(isinstance(r, ReceptacleType) for r in rules.receptacles.values())
    assert all(isinstance(r, ResourceType) for r in rules.resources.values())
    assert all(isinstance(r, Recipe) for r in rules.recipes.values())
    assert isinstance(rules.dynamics, RulesVersion)
    assert rules.objects["apple"].spoil_ticks == 2400
    assert "edible" in rules.objects["apple"].tags
    assert rules.receptacles["fridge"].openable and rules.receptacles["fridge"].station == "cool"
    assert rules.resources["berry bush"].dormant_seasons == frozenset({"winter"})
    assert rules.recipes["plank"].inputs == {"wood": 1} and rules.recipes["plank"].count == 2


def test_size_floors(rules: Rules) -> None:
    assert len(rules.objects) >= 40
    assert len(rules.receptacles) >= 15
    assert len(rules.resources) >= 6
    assert len(rules.recipes) >= 30


def test_some_recipe_tree_is_at_least_four_deep(rules: Rules) -> None:
    deepest = max(rules.recipes, key=rules.recipe_depth)
    assert rules.recipe_depth(deepest) >= 4
    # wagon <- cart <- wheel <- iron band <- iron ingot <- ore: check one chain by hand.
    assert rules.recipe_depth("wagon") == 5
    assert rules.recipe_depth("iron ingot") == 1
    assert rules.recipe_depth("wood") == 0


def test_every_station_and_raw_material_is_reachable(rules: Rules) -> None:
    stations = {r.station for r in rules.receptacles.values() if r.station}
    assert stations <= set(STATIONS)
    assert {"clean", "heat", "cool", "light"} <= stations
    # Every recipe input is itself crafted, gathered from a resource, or spawned somewhere.
    gathered = {r.yields for r in rules.resources.values()}
    spawned = {s.type for p in rules.places.values() for s in p.objects}
    for recipe in rules.recipes.values():
        for name in recipe.inputs:
            assert name in rules.recipes or name in gathered or name in spawned, name


def test_some_recipes_are_locked_until_discovered(rules: Rules) -> None:
    locked = {r.output for r in rules.recipes.values() if r.locked}
    assert {"pot", "vase", "knife", "kettle"} <= locked and not rules.dynamics.discovered
    genesis = rules.dynamics
    assert not genesis.knows(rules.recipes["vase"]) and genesis.knows(rules.recipes["plank"])
    known = rules.dynamics.replace(discovered=("vase",))
    assert known.knows(rules.recipes["vase"]) and not known.knows(rules.recipes["pot"])
    assert RulesVersion.from_row(dataclasses.asdict(known) | {"discovered": ["vase"]}) == known


def test_kind_of(rules: Rules) -> None:
    assert rules.kind_of("apple") == "object"
    assert rules.kind_of("fridge") == "receptacle"
    assert rules.kind_of("tree") == "resource"
    with pytest.raises(RulesError, match="unicorn"):
        rules.kind_of("unicorn")


def test_rules_version_calendar(rules: Rules) -> None:
    v = RulesVersion(day_length=48, season_length=1200)
    assert v.is_day(0) and v.is_day(23) and not v.is_day(24) and not v.is_day(47) and v.is_day(48)
    assert [v.season(t) for t in (0, 1199, 1200, 2400, 3600, 4799, 4800)] == [
        "spring", "spring", "summer", "autumn", "winter", "winter", "spring",
    ]  # fmt: skip
    assert v.replace(spoil_rate=2.0).spoil_rate == 2.0 and v.spoil_rate == 1.0


# -- bad data ---------------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def _edit(data_dir: Path, name: str, change) -> None:
    path = data_dir / name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def test_copy_of_data_loads(data_dir: Path, rules: Rules) -> None:
    copy = load_rules(data_dir)
    assert copy.objects == rules.objects and copy.recipes.keys() == rules.recipes.keys()


def test_avatar_capacity_is_data(data_dir: Path, rules: Rules) -> None:
    assert rules.avatar_capacity == 3
    _edit(data_dir, "things.yaml", lambda d: d.update({"avatar": {"capacity": 5}}))
    assert load_rules(data_dir).avatar_capacity == 5


def test_missing_file(data_dir: Path) -> None:
    (data_dir / "recipes.yaml").unlink()
    with pytest.raises(RulesError, match="recipes.yaml"):
        load_rules(data_dir)


def _set(section: str, name: str, spec: dict):
    def change(data: dict) -> None:
        data[section][name] = spec

    return change


@pytest.mark.parametrize(
    ("file", "change", "message"),
    [
        ("things.yaml", _set("resources", "tree", {"yields": "unobtainium", "tool": "axe", "stock": 1, "regrow_ticks": 1}),
         "unobtainium"),
        ("things.yaml", _set("receptacles", "fridge", {"preposition": "under"}), "fridge"),
        ("things.yaml", _set("receptacles", "fridge", {"station": "teleport"}), "fridge"),
        ("things.yaml", _set("objects", "apple from mars", {"tags": []}), "apple from mars"),
        ("things.yaml", _set("objects", "r2d2", {"tags": []}), "r2d2"),
        ("things.yaml", _set("objects", "fridge", {"tags": []}), "unique"),
        ("recipes.yaml", lambda d: d["recipes"].append({"output": "plank", "inputs": {"moonrock": 1}}),
         "moonrock"),
        ("recipes.yaml", lambda d: d["recipes"].append({"output": "gizmo", "inputs": {"wood": 1}}),
         "gizmo"),
        ("recipes.yaml", lambda d: d["recipes"].append({"output": "stick", "inputs": {"wood": 1}, "station": "altar"}),
         "altar"),
        ("regions.yaml", lambda d: d["places"]["kitchen"]["objects"].append({"type": "apple", "in": ["oven"]}),
         "kitchen"),
        ("regions.yaml", lambda d: d["places"]["kitchen"]["objects"].append({"type": "unicorn", "in": ["fridge"]}),
         "unicorn"),
        ("regions.yaml", lambda d: d["places"]["kitchen"]["receptacles"].update({"oven": 1}), "oven"),
        ("regions.yaml", lambda d: d["regions"]["village"]["groups"].append({"places": ["castle"]}), "castle"),
        ("dynamics.yaml", lambda d: d.update({"discovered": ["plank"]}), "locked recipes"),
        ("things.yaml", lambda d: d.update({"avatar": {"capacity": 0}}), "capacity"),
        ("things.yaml", lambda d: d.update({"avatar": {"capacity": "3"}}), "capacity"),
    ],
)  # fmt: skip
def test_bad_data_raises_rules_error(data_dir: Path, file: str, change, message: str) -> None:
    _edit(data_dir, file, change)
    with pytest.raises(RulesError, match=message):
        load_rules(data_dir)


def test_unknown_dynamics_field_is_a_rules_error(data_dir: Path) -> None:
    _edit(data_dir, "dynamics.yaml", lambda d: d.update({"gravity": 9.8}))
    with pytest.raises(RulesError, match="gravity"):
        load_rules(data_dir)


def test_missing_required_field_is_a_rules_error(data_dir: Path) -> None:
    _edit(data_dir, "things.yaml", _set("resources", "tree", {"yields": "wood", "tool": "axe"}))
    with pytest.raises(RulesError, match="tree"):
        load_rules(data_dir)


def test_malformed_yaml_is_a_rules_error(data_dir: Path) -> None:
    (data_dir / "things.yaml").write_text("objects: [unclosed\n")
    with pytest.raises(RulesError, match="things.yaml"):
        load_rules(data_dir)
