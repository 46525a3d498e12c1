// The bigworld dashboard: plain JS, no build step, nothing loaded from elsewhere.
// It reads the token from the fragment #token= (a fragment never leaves the browser, so no
// server or proxy logs it; the page then drops it from the address bar) or a form, keeps it in
// sessionStorage, and polls the API every few seconds. A ?token= query is not used: it has
// already been sent to the server by the time the page reads it. Each section shows "unavailable" with
// the status when its route is missing or failing; the others carry on.
"use strict";

const REFRESH_MS = 3000;
const TOKEN_KEY = "bigworld.token";
const SVG_NS = "http://www.w3.org/2000/svg";
const KEEP_EVENTS = 60;
const KEEP_EPISODES = 15;
const KEEP_DECISIONS = 20;
const MAP_REGIONS = 20000; // the map draws at most this many regions
const MAX_PAGES = 4; // per list per refresh; a backlog beyond this is caught up next time
// Tick windows tried, nearest first, to find the newest rows of an id-ordered list.
const WINDOWS = [20, 500, 20000, null];
const KIND_COLOURS = {
  village: "#d9a05b", farm: "#9bc53d", forest: "#2e7d32", mine: "#757575",
  lake: "#4f9bd9", market: "#c2185b",
};
const LINE_COLOURS = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#bcbd22", "#7f7f7f",
];

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

class AuthError extends ApiError {}

const state = {
  token: null,
  timer: null,
  round: 0, // refreshes so far
  tick: 0,
  events: { floor: null, items: [] },
  episodes: { floor: null, items: [] },
  decisions: { floor: null, items: [] },
};

// -- small DOM helpers --------------------------------------------------------------------
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

const pct = (x) => (x === null || x === undefined ? "–" : `${Math.round(x * 100)}%`);
const num = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en"));

function short(value, n = 120) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

function setState(section, error) {
  const box = $(section);
  const line = box.querySelector(".state");
  if (!error) {
    box.dataset.state = "ok";
    line.textContent = "";
    return;
  }
  box.dataset.state = "unavailable";
  const status = error.status ? `${error.status} ${error.code || ""}`.trim() : "no answer";
  line.textContent = `unavailable (${status}): ${error.message}`;
}

// -- the API ------------------------------------------------------------------------------
async function api(path, params = {}) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) query.set(k, v);
  const url = query.toString() ? `${path}?${query}` : path;
  let reply;
  try {
    reply = await fetch(url, { headers: { Authorization: `Bearer ${state.token}` } });
  } catch (err) {
    throw new ApiError(0, "network", `the server did not answer (${err.message})`);
  }
  let body = null;
  try {
    body = await reply.json();
  } catch (err) {
    body = null;
  }
  if (reply.ok) return body;
  const detail = (body && body.error) || {};
  const Kind = reply.status === 401 ? AuthError : ApiError;
  throw new Kind(reply.status, detail.code || "error", detail.message || reply.statusText);
}

// Follow the cursor pages of an id-ordered list after `cursor`; the last `keep` rows.
async function follow(path, params, cursor, keep, maxPages = MAX_PAGES) {
  let items = [];
  for (let i = 0; i < maxPages; i++) {
    const page = await api(path, { ...params, cursor });
    items = items.concat(page.items).slice(-keep);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return items;
}

// The newest `keep` rows of a list: the first time by widening tick windows back from now
// (lists without a tick filter just ignore it); then from just below the oldest row shown,
// so rows already shown come back with their changes (an episode that ended) with new ones.
async function newest(path, params, list, keep) {
  let items;
  if (list.floor === null) {
    for (const window of WINDOWS) {
      const fromTick = window === null ? null : Math.max(0, state.tick - window);
      items = await follow(path, { ...params, from_tick: fromTick }, null, keep);
      if (items.length >= keep || fromTick === null || fromTick === 0) break;
    }
  } else {
    items = await follow(path, params, String(list.floor), keep);
  }
  list.items = items;
  list.floor = items.length ? items[0].id - 1 : null;
  return items.slice().reverse();
}

// -- sections -----------------------------------------------------------------------------
async function loadWorld() {
  const w = await api("/v1/world");
  state.tick = w.tick;
  $("world-tick").textContent = num(w.tick);
  $("world-season").textContent = w.season;
  $("world-day").textContent = w.day ? "day" : "night";
  $("world-seed").textContent = String(w.seed);
  $("world-rules").textContent = String(w.rules_version);
  for (const name of ["regions", "places", "things", "avatars"]) {
    $(`world-${name}`).textContent = num(w[name]);
  }
  return w;
}

async function loadMap() {
  const regions = await follow("/v1/regions", { limit: 1000 }, null, MAP_REGIONS, 20);
  const box = $("map-svg");
  box.replaceChildren();
  const legend = $("map-legend");
  legend.replaceChildren();
  if (!regions.length) {
    box.setAttribute("viewBox", "0 0 10 10");
    return;
  }
  const xs = regions.map((r) => r.rx);
  const ys = regions.map((r) => r.ry);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const cols = x1 - x0 + 1;
  const rows = y1 - y0 + 1;
  const cell = Math.max(3, Math.min(40, Math.floor(400 / cols), Math.floor(215 / rows)));
  box.setAttribute("viewBox", `0 0 ${cols * cell} ${rows * cell}`);
  box.setAttribute("width", cols * cell);
  box.setAttribute("height", rows * cell);
  const kinds = {};
  for (const r of regions) {
    kinds[r.kind] = (kinds[r.kind] || 0) + 1;
    const x = (r.rx - x0) * cell;
    const y = (y1 - r.ry) * cell; // north (+ry) up
    const about =
      `region ${r.rx},${r.ry}: ${r.kind}, ${r.places} places, ${r.things} things, ` +
      `${r.avatars} avatars (generated at tick ${r.generated_tick})`;
    const group = svg("g", {
      class: "region", "data-rx": r.rx, "data-ry": r.ry, "data-kind": r.kind,
      "data-avatars": r.avatars,
    });
    group.append(
      svg("title", {}, about),
      svg("rect", {
        x: x + 0.5, y: y + 0.5, width: cell - 1, height: cell - 1,
        fill: KIND_COLOURS[r.kind] || "#bbbbbb",
      }),
    );
    if (r.rx === 0 && r.ry === 0) {
      group.append(svg("rect", {
        class: "origin", x: x + 2, y: y + 2, width: cell - 4, height: cell - 4,
      }));
    }
    if (r.avatars > 0) {
      group.append(svg("circle", {
        class: "avatar-marker", cx: x + cell / 2, cy: y + cell / 2, r: Math.max(2, cell / 4),
      }));
      if (cell >= 20) {
        group.append(svg("text", { class: "avatar-count", x: x + cell / 2, y: y + cell / 2 },
          String(r.avatars)));
      }
    }
    box.append(group);
  }
  for (const [kind, count] of Object.entries(kinds).sort()) {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = KIND_COLOURS[kind] || "#bbbbbb";
    legend.append(el("li", {}, swatch, `${kind} ${count}`));
  }
  const marker = el("span", { class: "swatch avatar-swatch" });
  legend.append(el("li", {}, marker, "avatars here"));
}

function eventText(e) {
  const p = e.payload || {};
  switch (e.kind) {
    case "action":
      return `${p.text}${p.accepted === false ? " (refused)" : ""}`;
    case "goal_check":
      return `${p.met ? "met" : "not met"} (episode ${p.episode}, step ${p.step})`;
    case "episode_ended":
      return `episode ${p.episode_id} ${p.status} after ${p.steps} steps (${p.family})`;
    case "region_generated":
      return `${p.kind} at ${(e.entities[0] || "").replace("region:", "")} ` +
        `(${p.places} places, ${p.things} things)`;
    case "state":
      return `${(p.things || []).length} things, ${(p.places || []).length} places, ` +
        `${(p.avatars || []).length} avatars changed, ${(p.removed || []).length} removed`;
    case "avatar_joined":
      return `${p.name} at ${p.place}`;
    case "episode_begun":
      return p.task ? `${p.task.family}` : short(p);
    default:
      return short(p);
  }
}

async function loadEvents() {
  const events = await newest("/v1/events", { limit: 200 }, state.events, KEEP_EVENTS);
  const kinds = {};
  const list = $("event-list");
  list.replaceChildren(...events.map((e) => {
    kinds[e.kind] = (kinds[e.kind] || 0) + 1;
    return el("li", { class: `event kind-${e.kind}`, "data-kind": e.kind, "data-id": e.id },
      el("span", { class: "tick" }, `t${e.tick}`), " ",
      el("span", { class: "kind" }, e.kind), " ",
      el("span", { class: "actor" }, e.actor || ""), " ",
      el("span", { class: "text" }, eventText(e)));
  }));
  $("event-kinds").textContent = Object.entries(kinds)
    .sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(" · ");
}

async function loadEpisodes() {
  const episodes = await newest("/v1/episodes", { limit: 500 }, state.episodes, KEEP_EPISODES);
  $("episode-rows").replaceChildren(...episodes.map((ep) => {
    const outcome = ep.outcome === null ? "" : ` (${ep.outcome > 0 ? "+" : ""}${ep.outcome})`;
    return el("tr", { class: `episode status-${ep.status}`, "data-id": ep.id },
      el("td", {}, ep.id),
      el("td", {}, ep.avatar_id),
      el("td", {}, ep.family),
      el("td", { class: "task" }, ep.task.text),
      el("td", { class: "status" }, ep.status + outcome),
      el("td", {}, `${ep.last_step}/${ep.budget}`),
      el("td", {}, `${ep.begin_tick}–${ep.end_tick === null ? "" : ep.end_tick}`));
  }));
}

async function loadDecisions() {
  const rows = await newest("/v1/forge/decisions", { limit: 500 }, state.decisions,
    KEEP_DECISIONS);
  $("forge-rows").replaceChildren(...rows.map((d) =>
    el("tr", { class: `decision verdict-${d.verdict}`, "data-id": d.id },
      el("td", {}, d.id),
      el("td", {}, d.cycle ?? ""),
      el("td", {}, d.tick ?? ""),
      el("td", {}, d.kind ?? ""),
      el("td", {}, d.task_id ?? ""),
      el("td", {}, d.candidate_id ?? ""),
      el("td", { class: "verdict" }, d.verdict ?? ""),
      el("td", { class: "evidence", title: JSON.stringify(d.evidence) }, short(d.evidence, 90)))));
}

function chartLearning(rows, families, changes) {
  const box = $("learning-svg");
  box.replaceChildren();
  const W = 640, H = 240, L = 40, R = 10, T = 10, B = 28;
  box.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const lines = new Map(); // "overall" or family -> points
  for (const r of rows) {
    if (r.policy_version !== null && r.policy_version !== undefined) continue;
    if (r.success_rate === null || r.success_rate === undefined) continue;
    const key = r.family ?? "overall";
    if (!lines.has(key)) lines.set(key, []);
    lines.get(key).push(r);
  }
  const all = [...lines.values()].flat();
  const t0 = Math.min(...all.map((r) => r.tick_start), 0);
  const t1 = Math.max(...all.map((r) => r.tick_end), t0 + 1);
  const X = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const Y = (v) => T + (1 - v) * (H - T - B);
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    box.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: Y(v), y2: Y(v) }));
    box.append(svg("text", { class: "axis", x: L - 4, y: Y(v) + 4, "text-anchor": "end" },
      `${v * 100}%`));
  }
  for (const c of changes) {
    if (typeof c.tick !== "number" || c.tick < t0 || c.tick > t1) continue;
    box.append(svg("line", { class: "change", x1: X(c.tick), x2: X(c.tick), y1: T, y2: H - B },
      svg("title", {}, `tick ${c.tick}: ${c.kind}`)));
  }
  box.append(svg("text", { class: "axis", x: L, y: H - 8 }, `tick ${t0}`));
  box.append(svg("text", { class: "axis", x: W - R, y: H - 8, "text-anchor": "end" },
    `tick ${t1}`));
  const legend = $("learning-legend");
  legend.replaceChildren();
  let i = 0;
  for (const [key, points] of [...lines.entries()].sort()) {
    const colour = key === "overall" ? "#000000" : LINE_COLOURS[i++ % LINE_COLOURS.length];
    points.sort((a, b) => a.tick_start - b.tick_start);
    const xy = points.map((r) => `${X((r.tick_start + r.tick_end) / 2)},${Y(r.success_rate)}`);
    const line = svg("polyline", {
      class: key === "overall" ? "curve overall" : "curve", "data-family": key,
      points: xy.join(" "), stroke: colour,
    });
    line.append(svg("title", {}, key));
    box.append(line);
    for (const r of points) {
      box.append(svg("circle", {
        cx: X((r.tick_start + r.tick_end) / 2), cy: Y(r.success_rate), r: 2.5, fill: colour,
      }, svg("title", {}, `${key}: ${pct(r.success_rate)} of ${r.episodes} episodes, ` +
        `ticks ${r.tick_start}–${r.tick_end}`)));
    }
    const total = families[key];
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = colour;
    legend.append(el("li", { "data-family": key }, swatch, key,
      total ? ` ${total.successes}/${total.episodes}` : ""));
  }
}

// A round bucket size (1, 2 or 5 times a power of ten) giving about 16 buckets so far: fewer,
// fuller buckets than the route's default make steadier curves.
function bucketTicks(tick) {
  const rough = Math.max(1, tick / 16);
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5, 10].map((m) => m * power).find((size) => size >= rough);
}

const fixed = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(2));

async function loadLearning() {
  const m = await api("/v1/metrics/learning", { bucket_ticks: bucketTicks(state.tick) });
  chartLearning(m.success_over_time || [], m.families || {}, m.world_changes || []);
  const forgetting = m.forgetting || {};
  const transfer = m.forward_transfer || {};
  const rm = m.reward_model || {};
  const figures = [
    ["episodes ended", num(m.episodes)],
    ["average success", pct(m.average_success)],
    ["bucket", `${num(m.bucket_ticks)} ticks`],
    [`forgetting (${num(forgetting.probe_tasks)} probes)`, fixed(forgetting.mean)],
    [`forward transfer (${num(transfer.forged_tasks)} forged)`, fixed(transfer.mean)],
    ["RM step accuracy", pct(rm.step_accuracy)],
    ["RM outcome accuracy", pct(rm.outcome_accuracy)],
    ["world changes", num((m.world_changes || []).length)],
  ];
  $("learning-figures").replaceChildren(...figures.flatMap(([k, v]) =>
    [el("dt", {}, k), el("dd", {}, v)]));
  const versions = Object.entries(m.versions || {});
  $("learning-versions").querySelector("tbody").replaceChildren(...versions.map(([v, r]) =>
    el("tr", { class: "version" }, el("td", {}, v), el("td", {}, num(r.episodes)),
      el("td", {}, num(r.successes)), el("td", {}, pct(r.success_rate)))));
}

// -- the loop -----------------------------------------------------------------------------
// [section, loader, every how many refreshes]: the map and the learning metrics read the
// whole world or its whole history, so they refresh less often than the feeds.
const SECTIONS = [
  ["map", loadMap, 2],
  ["events", loadEvents, 1],
  ["episodes", loadEpisodes, 1],
  ["learning", loadLearning, 5],
  ["forge", loadDecisions, 2],
];

function showAuthError(message) {
  clearTimeout(state.timer);
  const box = $("auth-error");
  box.textContent = message;
  box.hidden = false;
  $("sections").hidden = true;
  $("token-form").hidden = false;
  $("forget-token").hidden = true;
  $("status").textContent = "not connected";
}

async function refresh() {
  clearTimeout(state.timer);
  try {
    await loadWorld();
    setState("world", null);
  } catch (err) {
    if (err instanceof AuthError) {
      sessionStorage.removeItem(TOKEN_KEY);
      showAuthError(`The token was refused (${err.status}): ${err.message}. ` +
        "Enter an observer token.");
      return;
    }
    setState("world", err);
  }
  const due = SECTIONS.filter(([, , every]) => state.round % every === 0);
  state.round += 1;
  const results = await Promise.allSettled(due.map(([, load]) => load()));
  results.forEach((result, i) => setState(due[i][0], result.reason));
  $("status").textContent = `tick ${num(state.tick)} · updated ` +
    new Date().toLocaleTimeString("en-GB") + ` · every ${REFRESH_MS / 1000} s`;
  document.body.dataset.loaded = "true";
  state.timer = setTimeout(refresh, REFRESH_MS);
}

function start(token) {
  state.token = token;
  state.round = 0;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("auth-error").hidden = true;
  $("token-form").hidden = true;
  $("forget-token").hidden = false;
  $("sections").hidden = false;
  $("status").textContent = "loading…";
  refresh();
}

// The token in the fragment (#token=…), or null; either way the address bar keeps neither a
// fragment token nor a query one (out of history and bookmarks).
function tokenFromAddress() {
  const url = new URL(window.location.href);
  const fragment = new URLSearchParams(url.hash.replace(/^#/, ""));
  const token = fragment.get("token");
  const inQuery = url.searchParams.has("token");
  if (token === null && !inQuery) return null;
  fragment.delete("token");
  url.searchParams.delete("token");
  const rest = fragment.toString();
  history.replaceState(null, "", url.pathname + url.search + (rest ? `#${rest}` : ""));
  if (inQuery && token === null) {
    showAuthError("A token in the address's query (?token=) is sent to the server and can " +
      "reach its logs, so it was not used. Open /#token=… instead, or enter the token here.");
  }
  return token;
}

function main() {
  const fromUrl = tokenFromAddress();
  $("show-state").addEventListener("change", (ev) => {
    $("event-list").classList.toggle("hide-state", !ev.target.checked);
  });
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const token = $("token-input").value.trim();
    $("token-input").value = "";
    if (token) start(token);
  });
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    window.location.reload();
  });
  const token = (fromUrl || "").trim() || sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    start(token);
  } else if ($("auth-error").hidden) {
    $("sections").hidden = true;
    $("token-form").hidden = false;
    $("status").textContent = "not connected";
  }
}

main();
