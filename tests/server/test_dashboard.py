"""The dashboard: GET /v1/regions against both databases, and the page at ``/`` rendered by
headless Chromium against a live server with a little history (what the DOM shows, and the
message for a bad token)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from harness import ADMIN_TOKEN, Api, AppServer, ServerProcess
from sqlalchemy import select

from world.entities import region_of
from world.store import make_engine, session_factory
from world.store.models import AvatarRow, PlaceRow, RegionRow, ThingRow

VIRTUAL_TIME_MS = 8000  # Chromium's virtual clock: the first load and a couple of refreshes


def play(api: Api, steps: int, rng: random.Random) -> None:
    """Random admissible actions for ``steps`` steps, beginning episodes as they end; half the
    time a road when there is one, so that the avatar roams into new regions."""
    episode = None
    for _ in range(steps):
        if episode is None:
            begun = api.post("/v1/episodes", json={})
            assert begun.status_code == 201, begun.text
            episode, last = begun.json()["episode_id"], 0
            admissible = begun.json()["admissible_actions"]
        roads = [a for a in admissible if a.startswith("go to") and a.endswith(" road")]
        action = rng.choice(roads if roads and rng.random() < 0.5 else admissible)
        reply = api.post(f"/v1/episodes/{episode}/steps", json={"step": last + 1, "action": action})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        last, admissible = body["step"], body["admissible_actions"]
        if body["done"]:
            episode = None


def all_pages(api: Api, path: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        reply = api.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


def stored_regions(database_url: str) -> dict[tuple[int, int], dict[str, Any]]:
    """Per region, counted in Python from the raw rows (independent of the route's SQL)."""
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            out = {
                (r.rx, r.ry): {"kind": r.kind, "places": 0, "things": 0, "avatars": 0}
                for r in session.scalars(select(RegionRow))
            }
            for place_id in session.scalars(select(PlaceRow.id)):
                out[region_of(place_id)]["places"] += 1
            for place_id in session.scalars(select(ThingRow.place)):
                if place_id is not None:
                    out[region_of(place_id)]["things"] += 1
            for place_id in session.scalars(select(AvatarRow.place)):
                out[region_of(place_id)]["avatars"] += 1
    finally:
        engine.dispose()
    return out


def test_regions_count_what_each_region_holds(server: AppServer, admin: Api) -> None:
    rng = random.Random(3)
    for name in ("ann", "bob"):
        play(admin.agent(name), 25, rng)
    watcher = admin.agent("watcher", "observer")

    regions = all_pages(watcher, "/v1/regions", limit=2)  # several pages
    assert regions == all_pages(watcher, "/v1/regions")  # same rows however paged
    keys = [(r["rx"], r["ry"]) for r in regions]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    expected = stored_regions(server.database_url)
    assert {
        (r["rx"], r["ry"]): {k: r[k] for k in ("kind", "places", "things", "avatars")}
        for r in regions
    } == expected
    world = watcher.get("/v1/world").json()
    assert len(regions) == world["regions"] > 1
    assert sum(r["places"] for r in regions) == world["places"]
    assert sum(r["avatars"] for r in regions) == world["avatars"] == 2

    first = watcher.get("/v1/regions", params={"limit": 1}).json()
    assert first["items"] == regions[:1] and first["next_cursor"] == "{rx},{ry}".format(
        **regions[0]
    )
    after = watcher.get("/v1/regions", params={"cursor": first["next_cursor"]}).json()
    assert after["items"] == regions[1:] and after["next_cursor"] is None

    for bad in ({"cursor": "0;0"}, {"cursor": "1,2,3"}, {"limit": 0}, {"limit": 1001}):
        reply = watcher.get("/v1/regions", params=bad)
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["code"]
    assert Api(server).get("/v1/regions").status_code == 401


# -- the page in a browser ------------------------------------------------------------------
@pytest.fixture
def chromium() -> str:
    """Chromium's path; skips without it, except under CI=true where that is a failure."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but chromium is not installed (apt-get install chromium)")
    pytest.skip("chromium is not installed")


def browse(chromium: str, url: str, profile: Path, *extra: str) -> str:
    """The DOM after Chromium ran the page's scripts for VIRTUAL_TIME_MS of virtual time."""
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={VIRTUAL_TIME_MS}",
        *extra,
        "--dump-dom",
        url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """Elements as (tag, attributes, text inside), in document order."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[list[str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        text: list[str] = []
        self.elements.append((tag, {k: v or "" for k, v in attrs}, text))
        if tag not in self.VOID:
            self._open.append(text)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for text in self._open:
            text.append(data)

    def find(self, **attrs: str) -> list[tuple[dict[str, str], str]]:
        """Elements whose attributes include ``attrs`` (``class_`` matches one class)."""
        wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        out = []
        for _tag, have, text in self.elements:
            ok = all(
                v in have.get(k, "").split() if k == "class" else have.get(k) == v
                for k, v in wanted.items()
            )
            if ok:
                out.append((have, "".join(text)))
        return out

    def text(self, element_id: str) -> str:
        (found,) = self.find(id=element_id)
        return found[1].strip()


@pytest.fixture
def lively(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server whose world has history: two policies walked, some episodes ended."""
    proc = ServerProcess(  # log level info: the access log is on, as by default
        f"sqlite:///{tmp_path / 'world.db'}",
        tmp_path / "data",
        log_level="info",
        BIGWORLD_STEP_BUDGET="12",
    ).start()
    try:
        admin = Api(proc, ADMIN_TOKEN)
        rng = random.Random(7)
        for name in ("ann", "bob"):
            play(admin.agent(name), 30, rng)
        yield proc
    finally:
        proc.stop()


def test_page_shows_the_world_and_refuses_a_bad_token(
    chromium: str, lively: ServerProcess, tmp_path: Path
) -> None:
    admin = Api(lively, ADMIN_TOKEN)
    watcher = admin.agent("watcher", "observer")
    token = watcher.http.headers["Authorization"].removeprefix("Bearer ")
    world = watcher.get("/v1/world").json()
    regions = all_pages(watcher, "/v1/regions")
    episodes = all_pages(watcher, "/v1/episodes")
    events = all_pages(watcher, "/v1/events")

    page = Api(lively).get("/")  # static: no token needed
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert Api(lively).get("/static/dashboard.js").status_code == 200
    assert Api(lively).get("/static/missing.js").status_code == 404
    assert Api(lively).get("/static/..%2Fapp.py").status_code in (404, 422)

    dom = Dom(browse(chromium, f"{lively.url}/#token={token}", tmp_path / "profile"))
    (body,) = [a for tag, a, _ in dom.elements if tag == "body"]
    assert body.get("data-loaded") == "true", "the page never finished a refresh"
    assert dom.text("auth-error") == ""
    assert dom.text("world-tick") == f"{world['tick']:,}"
    for name in ("regions", "places", "things", "avatars"):
        assert dom.text(f"world-{name}") == f"{world[name]:,}", name
    assert dom.text("world-seed") == str(world["seed"])
    assert dom.text("world-season") == world["season"]
    assert dom.text("world-rules") == str(world["rules_version"])

    cells = dom.find(class_="region")
    assert sorted(
        (int(a["data-rx"]), int(a["data-ry"]), a["data-kind"]) for a, _ in cells
    ) == sorted((r["rx"], r["ry"], r["kind"]) for r in regions)
    marked = {(int(a["data-rx"]), int(a["data-ry"])) for a, _ in cells if a["data-avatars"] != "0"}
    assert marked == {(r["rx"], r["ry"]) for r in regions if r["avatars"]}
    assert len(dom.find(class_="avatar-marker")) == len(marked)

    shown = dom.find(class_="event")
    newest = events[-len(shown) :]
    assert len(shown) == min(60, len(events))
    assert [a["data-id"] for a, _ in shown] == [str(e["id"]) for e in reversed(newest)]
    assert Counter(a["data-kind"] for a, _ in shown) == Counter(e["kind"] for e in newest)
    assert {"action", "goal_check"} <= {a["data-kind"] for a, _ in shown}
    first_action = next(e for e in reversed(newest) if e["kind"] == "action")
    assert (
        first_action["payload"]["text"]
        in dict((a["data-id"], t) for a, t in shown)[str(first_action["id"])]
    )

    rows = dom.find(class_="episode")
    recent = sorted(episodes, key=lambda e: e["id"], reverse=True)[:15]
    assert [a["data-id"] for a, _ in rows] == [str(e["id"]) for e in recent]
    statuses = Counter(a["class"].split()[1] for a, _ in rows)
    assert statuses == Counter(f"status-{e['status']}" for e in recent)
    assert {"status-open", "status-failed"} <= set(statuses)

    # Learning curves: one line per family plus the overall one; the newest forge decisions.
    # (A failing route's "unavailable" state is test_sections_degrade_one_by_one's business.)
    learning = watcher.get("/v1/metrics/learning")
    assert learning.status_code == 200, learning.text
    drawn = {a["data-family"] for a, _ in dom.find(class_="curve")}
    buckets = learning.json()["success_over_time"]
    assert drawn == {b["family"] or "overall" for b in buckets if b["policy_version"] is None}
    assert "overall" in drawn
    decisions = watcher.get("/v1/forge/decisions", params={"limit": 1000})
    assert decisions.status_code == 200, decisions.text
    newest_ids = sorted((d["id"] for d in decisions.json()["items"]), reverse=True)[:20]
    assert newest_ids  # the begins fixed probe tasks: task.probe decisions
    assert [a["data-id"] for a, _ in dom.find(class_="decision")] == [str(i) for i in newest_ids]
    for section in ("learning", "forge"):
        assert dom.find(id=section)[0][0]["data-state"] == "ok", section
        assert dom.text(f"{section}-state") == "", section

    refused = Dom(browse(chromium, f"{lively.url}/#token=bw_not-a-token", tmp_path / "refused"))
    message = refused.text("auth-error")
    assert "The token was refused (401)" in message and "not valid" in message
    assert refused.find(id="sections")[0][0].get("hidden") is not None
    assert refused.find(class_="event") == [] and refused.find(class_="episode") == []

    # A token in the query has reached the server already: the page does not use it, and the
    # access log writes it redacted.
    queried = Dom(browse(chromium, f"{lively.url}/?token={token}", tmp_path / "queried"))
    assert "it was not used" in queried.text("auth-error") and "/#token=" in queried.text(
        "auth-error"
    )
    assert queried.find(class_="event") == []
    log = lively.log.read_text()
    assert '"GET / HTTP/1.1" 200' in log and "/v1/world" in log, log[-2000:]
    assert token not in log and "bw_not-a-token" not in log
    assert "/?token=[redacted]" in log


def test_sections_degrade_one_by_one(chromium: str, tmp_path: Path) -> None:
    """A token allowed two requests: the world loads, then the other sections meet 429s and
    each says so with the status while what was loaded stays on the page."""
    proc = ServerProcess(
        f"sqlite:///{tmp_path / 'world.db'}",
        tmp_path / "data",
        BIGWORLD_RATE_LIMIT="0.001",
        BIGWORLD_RATE_LIMIT_BURST="2",
        BIGWORLD_FORGE_ENABLED="false",
    ).start()
    try:
        watcher = Api(proc, ADMIN_TOKEN).agent("watcher", "observer")
        token = watcher.http.headers["Authorization"].removeprefix("Bearer ")
        dom = Dom(browse(chromium, f"{proc.url}/#token={token}", tmp_path / "profile"))
    finally:
        proc.stop()
    assert dom.text("auth-error") == "" and dom.text("world-tick") == "0"
    sections = ("world", "map", "events", "episodes", "learning", "forge")
    states = {s: dom.find(id=s)[0][0].get("data-state") for s in sections}
    unavailable = [s for s in sections if states[s] == "unavailable"]
    assert len(unavailable) >= 5, states  # two requests for six sections, refreshed since
    for section in unavailable:
        assert dom.text(f"{section}-state").startswith("unavailable (429 rate_limited): over ")
