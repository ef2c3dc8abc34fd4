// agents-room dashboard: renders the snapshots /events streams. Every piece of data goes in
// as a text node or an attribute value (el() below), never as markup: a label such as
// <img onerror=...> shows as those characters and runs nothing.
"use strict";

const TIMELINE_SLIDE_S = 2; // the timeline (hundreds of bars) is redrawn once in this many seconds
const state = { snap: null, offset: 0, source: null, renders: [], keys: new Map() };
window.agentsRoom = state; // tests and bench/dashboard.py read renders: [{seq, at}]

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Rebuild only the rows whose data changed, and move the DOM only where the order did: a
// busy store changes a few rows a second, and the browser then lays out only those.
const built = new WeakMap(); // row node -> the JSON it was built from

function keyed(container, items, build, keyOf = (item) => JSON.stringify(item)) {
  const old = new Map();
  for (const node of container.children) if (built.has(node)) old.set(built.get(node), node);
  let cursor = container.firstChild;
  for (const item of items) {
    const key = keyOf(item);
    let node = old.get(key);
    old.delete(key);
    if (!node) {
      node = build(item);
      built.set(node, key);
    }
    if (node === cursor) cursor = cursor.nextSibling;
    else container.insertBefore(node, cursor);
  }
  while (cursor) {
    const next = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
}

function emptyOr(container, items, text, colspan) {
  if (items.length) {
    if (container.querySelector(".empty")) container.replaceChildren();
    return false;
  }
  const cell = colspan ? el("tr", {}, el("td", { colspan, class: "empty" }, text)) : el("div", { class: "empty" }, text);
  container.replaceChildren(cell);
  return true;
}

const $ = (id) => document.getElementById(id);
const now = () => Date.now() / 1000 + state.offset; // the store's clock
const who = (label, sid) => label || (sid ? sid.slice(0, 8) : "?");

function ago(t) {
  const s = Math.max(0, now() - t);
  if (s < 60) return `${s.toFixed(0)}s ago`;
  if (s < 3600) return `${(s / 60).toFixed(0)}m ago`;
  if (s < 86400) return `${(s / 3600).toFixed(0)}h ago`;
  return `${(s / 86400).toFixed(0)}d ago`;
}

function clock(t) {
  return new Date((t - state.offset) * 1000).toLocaleTimeString([], { hour12: false });
}

function hue(sid) {
  let h = 0;
  for (const c of sid || "") h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 360;
}

// The file name first, then as much of its folder as tells it apart (the full path in the title).
function tail(path, n = 3) {
  const parts = path.split("/");
  return parts.length > n ? `…/${parts.slice(-n).join("/")}` : path;
}

function splitPath(path) {
  const own = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;  // a directory lease: name it
  const cut = own.lastIndexOf("/");
  return el("span", { class: "path mono", title: path }, own.slice(cut + 1) + path.slice(own.length),
    el("span", { class: "dir" }, `  ${tail(own.slice(0, cut), 2)}/`));
}

function renderRooms(snap) {
  const select = $("room");
  const chosen = snap.room || "";
  const names = snap.rooms.map((r) => r.name);
  if (chosen && !names.includes(chosen)) names.unshift(chosen);
  const key = JSON.stringify([chosen, names]);
  if (select.dataset.key !== key) { // rebuilt only when the rooms change: an open list stays open
    const options = [el("option", { value: "" }, "every room")];
    for (const name of names) options.push(el("option", { value: name, selected: name === chosen }, name));
    select.replaceChildren(...options);
    select.value = chosen;
    select.dataset.key = key;
  }
  $("rooms").replaceChildren(...snap.rooms.map((r) =>
    el("span", { class: "room", "data-room": r.name, title: r.cap ? `capped at ${r.cap}` : null },
      `${r.name} · ${r.members}` + (r.cap ? ` · cap ${r.cap}` : ""))));
}

function renderMembers(snap) {
  document.body.classList.toggle("no-host", !snap.has_host);
  $("who-count").textContent = snap.members.length || "";
  if (emptyOr($("members"), snap.members, "nobody here", 8)) return;
  // last_seen moves with every call: it is kept out of the key and patched in place ("ago" cells tick).
  keyed($("members"), snap.members, (m) => el("tr", { "data-session": m.session_id },
    el("td", {}, el("span", { class: "dot", "data-liveness": m.liveness, title: m.liveness })),
    el("td", { title: m.cwd }, el("span", { class: "label" }, m.label || "(no label)"), el("span", { class: "sid" }, m.session_id.slice(0, 8))),
    el("td", { title: m.key ? `harness key ${m.key}` : null }, m.harness, m.key ? el("span", { class: "sid" }, m.key) : null),
    el("td", {}, el("span", { class: "badge", "data-autonomy": m.autonomy }, m.autonomy)),
    el("td", {}, el("span", { class: "unread", "data-n": m.unread }, m.unread)),
    el("td", { class: "host mono" }, m.host || "-"),
    el("td", { class: "seen", "data-t": m.last_seen }, ago(m.last_seen)),
    el("td", { class: "mono", title: m.rooms.join(", ") }, m.rooms.join(", "))),
  (m) => JSON.stringify({ ...m, last_seen: 0 }));
  snap.members.forEach((m, i) => {
    const cell = $("members").children[i].querySelector(".seen");
    if (cell.dataset.t !== String(m.last_seen)) cell.dataset.t = m.last_seen;
  });
}

function renderLeases(snap) {
  $("lease-count").textContent = snap.leases.length || "";
  if (emptyOr($("leases"), snap.leases, "no live leases", 5)) return;
  keyed($("leases"), snap.leases, (l) => el("tr",
    { "data-path": l.path, "data-holder": l.session_id, "data-directory": l.directory ? "1" : "0" },
    el("td", {}, ...(l.directory ? [el("span", { class: "badge", "data-kind": "directory", title: "a directory lease: it covers every path beneath" }, "dir")] : []),
      splitPath(l.path)),
    el("td", { class: "holder" }, el("span", { class: "label" }, who(l.label, l.session_id))),
    el("td", {}, el("span", { class: "badge", "data-mode": l.mode }, l.mode),
      ...(l.at_edit ? [el("span", { class: "badge", "data-kind": "at-edit", title: "taken by the edit guard at an edit, not by lease_claim" }, "at an edit")] : [])),
    el("td", { class: "mono" }, `#${l.token}`),
    el("td", {}, el("div", { class: "bar", "data-expires": l.expires_at, "data-ttl": l.ttl_s },
      el("div", { class: "fill" }), el("span", { class: "left" })))));
}

function renderTimeline(snap) {
  // The window shrinks to the history there is (a run that began a minute ago fills the width).
  const end = snap.now;
  const first = Math.min(end, ...snap.spans.map((s) => s.start));
  const width = Math.min(snap.window_s, Math.max(30, Math.ceil((end - first) / 15) * 15));
  const start = end - width;
  const span = (t) => (width >= 180 ? `${Math.round(t / 60)}m` : `${Math.round(t)}s`);
  $("timeline-window").textContent = `last ${span(width)}`;
  const lanes = new Map();
  for (const s of snap.spans) {
    if (!lanes.has(s.path)) lanes.set(s.path, []);
    lanes.get(s.path).push(s);
  }
  const paths = [...lanes.keys()].slice(-24).sort();
  if (!paths.length) {
    $("timeline").replaceChildren(el("div", { class: "empty" }, "no lease in the window"));
    return;
  }
  const pct = (t) => `${(100 * (Math.min(Math.max(t, start), end) - start) / (end - start)).toFixed(2)}%`;
  const rows = paths.map((path) => {
    const track = el("div", { class: "track" });
    for (const s of lanes.get(path)) {
      const stop = s.end === null ? end : s.end;
      const bar = el("div", { class: `span ${s.mode}${s.end === null ? " live" : ""}`, "data-holder": s.session_id,
        title: `${who(s.label, s.session_id)} · ${s.mode} · ${clock(s.start)}–${s.end === null ? "now" : clock(s.end)} (${s.how})` });
      bar.style.left = pct(s.start);
      bar.style.width = `calc(${pct(stop)} - ${pct(s.start)})`;
      bar.style.background = `hsl(${hue(s.session_id)} 65% 50%)`;
      track.append(bar);
    }
    return el("div", { class: "lane", "data-path": path }, el("span", { class: "name", title: path }, tail(path)), track);
  });
  const ticks = el("span", { class: "ticks" });
  for (let i = 5; i >= 0; i--) ticks.append(el("span", {}, i ? `-${span(width * i / 5)}` : "now"));
  $("timeline").replaceChildren(...rows, el("div", { class: "axis" }, el("span"), ticks));
}

function renderMessages(snap) {
  const unread = snap.members.reduce((n, m) => n + m.unread, 0);
  $("unread-total").textContent = unread ? `${unread} unread` : "";
  if (emptyOr($("messages"), snap.messages, "no messages")) return;
  const labels = new Map(snap.members.map((m) => [m.session_id, m.label]));
  keyed($("messages"), snap.messages, (m) => el("article", { class: "msg", "data-message": m.id },
    el("div", { class: "head" }, el("span", { class: "mono" }, `#${m.id}`),
      el("span", { class: "from" }, who(m.sender_label, m.sender)),
      el("span", { title: m.to }, `→ ${labels.get(m.to) || m.to}`),
      el("span", { class: "seen", "data-t": m.created_at }, ago(m.created_at))),
    m.subject ? el("div", { class: "subject" }, m.subject) : null,
    m.body ? el("div", { class: "body" }, m.body) : null,
    el("div", { class: "chips" }, ...m.deliveries.map((d) =>
      el("span", { class: "chip", "data-recipient": d.recipient, "data-state": d.state },
        `${who(d.label, d.recipient)}: ${d.state}`)))));
}

function describe(e) {
  const d = e.detail || {};
  const parts = [];
  if (e.path) parts.push(tail(e.path));
  for (const [k, v] of Object.entries(d)) {
    if (k === "expires_at") continue;
    parts.push(`${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  }
  return parts.join(" ");
}

function renderEvents(snap) {
  $("seq").textContent = `seq ${snap.seq}`;
  keyed($("events"), snap.events, (e) => el("li", { "data-seq": e.seq },
    el("span", { class: "dim" }, `#${e.seq}`), el("span", { class: "dim" }, clock(e.at)),
    el("span", { class: "kind", "data-kind": e.kind }, e.kind),
    el("span", {}, e.session_id ? who(e.label, e.session_id) : "-"),
    el("span", { title: describe(e) }, describe(e))), (e) => String(e.seq));
}

function render(snap) {
  state.offset = snap.now - Date.now() / 1000;
  state.snap = snap;
  // A section is rebuilt only when its data changed: an idle page costs the browser little.
  const parts = [
    [renderRooms, [snap.room, snap.rooms]],
    [renderMembers, [snap.has_host, snap.members]],
    [renderLeases, snap.leases],
    [renderTimeline, [snap.room, Math.floor(snap.now / TIMELINE_SLIDE_S)]], // slides, and takes new spans
    [renderMessages, [snap.messages, snap.members.map((m) => m.unread)]],
    [renderEvents, snap.events],
  ];
  for (const [draw, data] of parts) {
    const key = JSON.stringify(data);
    if (state.keys.get(draw) !== key) {
      draw(snap);
      state.keys.set(draw, key);
    }
  }
  tick(); // in the same frame as the render: one layout a snapshot
  state.renders.push({ seq: snap.seq, at: Date.now() });
  if (state.renders.length > 500) state.renders.splice(0, 250);
}

// Countdowns and "ago" move between snapshots, on the page's own clock.
function tick() {
  for (const bar of document.querySelectorAll(".bar[data-expires]")) {
    const left = Math.max(0, Number(bar.dataset.expires) - now());
    const share = Math.min(1, left / Number(bar.dataset.ttl));
    const fill = bar.querySelector(".fill");
    setStyle(fill, "width", `${(share * 100).toFixed(0)}%`);
    if (fill.classList.contains("low") !== share < 0.2) fill.classList.toggle("low", share < 0.2);
    setText(bar.querySelector(".left"), left >= 60 ? `${(left / 60).toFixed(1)}m` : `${left.toFixed(0)}s`);
  }
  for (const cell of document.querySelectorAll(".seen[data-t]")) setText(cell, ago(Number(cell.dataset.t)));
}

// Writes that change nothing still cost the browser a layout: skip them.
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function setStyle(node, name, value) {
  if (node.style[name] !== value) node.style[name] = value;
}

function connect() {
  if (state.source) state.source.close();
  state.keys.clear();
  const room = $("room").value;
  $("store").textContent = location.host;
  const source = new EventSource(`/events${room ? `?room=${encodeURIComponent(room)}` : ""}`);
  source.addEventListener("snapshot", (event) => {
    $("status").dataset.state = "live";
    $("status").textContent = "live";
    state.pending = JSON.parse(event.data);
    if (!document.hidden) render(state.pending); // a tab in the background draws nothing
  });
  source.addEventListener("problem", (event) => {
    $("status").dataset.state = "lost";
    $("status").textContent = JSON.parse(event.data).error;
  });
  source.onerror = () => {
    $("status").dataset.state = "lost";
    $("status").textContent = "reconnecting";
  };
  state.source = source;
}

document.addEventListener("DOMContentLoaded", () => {
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted) $("room").replaceChildren(el("option", { value: wanted, selected: true }, wanted));
  $("room").addEventListener("change", () => {
    history.replaceState(null, "", $("room").value ? `#${encodeURIComponent($("room").value)}` : location.pathname);
    connect();
  });
  connect();
  // Snapshots come at least once a second, each followed by a tick; between them (a lost
  // connection), the countdowns still move.
  setInterval(() => {
    const last = state.renders[state.renders.length - 1];
    if (!last || Date.now() - last.at > 1500) tick();
  }, 1000);
});
