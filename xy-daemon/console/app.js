// xy console (SPEC §28). Every string that came from xyd or a server is put
// into the page as text (textContent / text nodes), never parsed as markup;
// the CSP enforces Trusted Types, so any HTML-parsing sink would throw.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { token: null, page: null, list: [], stop: [], held: 0 };

// --- DOM helpers: elements from data, text only --------------------------
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const kid of kids) el.append(kid);
  return el;
}
function pill(text, cls) { return h("span", { class: "pill " + (cls || "") }, text); }
function toast(msg) {
  const t = $("#toast");
  t.textContent = msg;
  t.classList.remove("hidden");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add("hidden"), 5000);
}
function setMain(...kids) { const m = $("#main"); m.replaceChildren(...kids); return m; }
function fmtBytes(n) { if (n == null) return "–"; const u = ["B", "KiB", "MiB", "GiB"]; let i = 0; while (n >= 1024 && i < 3) { n /= 1024; i++; } return n.toFixed(i ? 1 : 0) + " " + u[i]; }
function fmtUs(us) { return us >= 1000000 ? (us / 1e6).toFixed(2) + " s" : us >= 1000 ? (us / 1000).toFixed(1) + " ms" : us + " µs"; }
function fmtAge(s) { if (s == null) return "–"; if (s < 60) return s + "s"; if (s < 3600) return Math.floor(s / 60) + "m"; if (s < 86400) return Math.floor(s / 3600) + "h"; return Math.floor(s / 86400) + "d"; }

// --- the API: every call is a POST with the session token ---------------
async function api(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-XY-Token": state.token || "" },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  });
  let v = null;
  try { v = await r.json(); } catch (_) { v = { error: { message: r.status + " " + r.statusText } }; }
  if (r.status === 401) signedOut(v.error && v.error.message);
  return v;
}
async function call(method, params) {
  const v = await api("/api/rpc", { method, params: params || {} });
  if (v.error) throw new Error(v.error.message || JSON.stringify(v.error));
  return v.result;
}
// A followed stream (events, calls, logs): one JSON value per line, read as
// it arrives; `stop()` ends it (the daemon's stream ends with the fetch).
function follow(kind, params, onItem) {
  const ctl = new AbortController();
  (async () => {
    try {
      const r = await fetch("/api/stream", {
        method: "POST", signal: ctl.signal, credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-XY-Token": state.token || "" },
        body: JSON.stringify({ kind, params: params || {} }),
      });
      if (!r.ok || !r.body) return;
      $("#live").classList.add("on");
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i); buf = buf.slice(i + 1);
          if (!line) continue;
          try { const m = JSON.parse(line); onItem(m.method, m.params || {}); } catch (_) { }
        }
      }
    } catch (_) { }
  })();
  return () => ctl.abort();
}

// --- signing in ---------------------------------------------------------
function signedOut(why) {
  sessionStorage.removeItem("xy-token");
  state.token = null;
  setMain(h("div", { class: "card" },
    h("h2", {}, "Not signed in"),
    h("p", {}, why || "This page needs a one-time link."),
    h("p", {}, "Run ", h("code", {}, "xyctl ui"), " (or ", h("code", {}, "xyctl ui --print-url"), ") for a new link; each link works once, within 60 seconds.")));
}
async function signIn() {
  const m = /^#code=([A-Za-z0-9_-]+)/.exec(location.hash);
  if (m) {
    // The code leaves the address bar and the history before anything else.
    history.replaceState(null, "", "/#/review");
    const r = await fetch("/api/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code: m[1] }),
    });
    const v = await r.json().catch(() => ({}));
    if (!r.ok || !v.token) { signedOut(v.error && v.error.message); return false; }
    sessionStorage.setItem("xy-token", v.token);
  }
  state.token = sessionStorage.getItem("xy-token");
  if (!state.token) { signedOut(); return false; }
  return true;
}

// --- the banner: held-back items, on every page ------------------------
async function refreshList() {
  try { state.list = await call("list"); } catch (e) { toast(e.message); return; }
  state.held = state.list.reduce((n, s) => n + (s.tools_held || 0), 0);
  const b = $("#banner");
  b.textContent = state.held + " pending approval";
  b.classList.toggle("hidden", state.held === 0);
}

// --- word-level diff ----------------------------------------------------
function words(s) { return (s || "").split(/(\s+)/).filter((w) => w !== ""); }
function diff(a, b) {
  const x = words(a), y = words(b);
  if (x.length * y.length > 400000) return [["del", a || ""], ["ins", b || ""]];
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = []; let i = 0, j = 0;
  const push = (k, w) => { if (out.length && out[out.length - 1][0] === k) out[out.length - 1][1] += w; else out.push([k, w]); };
  while (i < n && j < m) {
    if (x[i] === y[j]) { push("same", x[i]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) push("del", x[i++]);
    else push("ins", y[j++]);
  }
  while (i < n) push("del", x[i++]);
  while (j < m) push("ins", y[j++]);
  return out;
}
// The text with the scanner's findings marked: the quoted phrases of its
// reasons, wherever they occur (case-insensitive).
function marked(text, phrases) {
  const frag = document.createDocumentFragment();
  const lower = text.toLowerCase();
  const hits = [];
  for (const p of phrases) {
    const q = p.toLowerCase(); if (!q) continue;
    let at = lower.indexOf(q);
    while (at >= 0) { hits.push([at, at + q.length]); at = lower.indexOf(q, at + q.length); }
  }
  hits.sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [s, e] of hits) {
    if (s < pos) continue;
    frag.append(document.createTextNode(text.slice(pos, s)), h("mark", {}, text.slice(s, e)));
    pos = e;
  }
  frag.append(document.createTextNode(text.slice(pos)));
  return frag;
}
function phrasesOf(reasons) {
  const out = [];
  // A quoted pattern may hold "…" (any words between) and "*" (any ending).
  for (const r of reasons || []) for (const m of r.matchAll(/"([^"]{2,})"/g))
    for (const piece of m[1].split("…")) { const p = piece.replace(/\*/g, "").trim(); if (p.length >= 2) out.push(p); }
  return out;
}
function diffBlock(before, after, phrases) {
  const box = h("div", { class: "text" });
  if (before == null) { box.append(marked(after || "", phrases)); return box; }
  for (const [k, w] of diff(before, after)) {
    if (k === "same") box.append(marked(w, phrases));
    else box.append(h("span", { class: k }, w));
  }
  return box;
}
function pretty(v) { return v == null ? "" : JSON.stringify(v, null, 2); }

// --- pages --------------------------------------------------------------
async function pageReview() {
  await refreshList();
  const servers = state.list.filter((s) => (s.tools_held || 0) > 0);
  if (!servers.length) { setMain(h("h2", {}, "Review queue"), h("p", { class: "muted" }, "Nothing is held back.")); return; }
  const main = setMain(h("h2", {}, "Review queue"));
  for (const s of servers) {
    let t;
    try { t = await call("tools", { name: s.name }); } catch (e) { main.append(h("p", {}, s.name + ": " + e.message)); continue; }
    // Skill files and MCP Apps too: their text (an app's HTML) is shown as source.
    const items = [...((t.current && t.current.tools) || []), ...(t.prompts || []), ...(t.resources || [])]
      .filter((x) => x.state && x.state !== "approved");
    const card = h("div", { class: "card", "data-server": s.name });
    const approveAll = h("button", { class: "primary", onclick: () => approve(s.name, items) }, "Approve all " + items.length);
    const denyAll = h("button", { class: "danger", onclick: () => deny(s.name, items) }, "Deny all");
    card.append(h("div", { class: "row" }, h("h3", { class: "grow" }, s.name), pill("mode " + (t.mode || "?")), approveAll, denyAll));
    for (const it of items) {
      const phrases = phrasesOf(it.reasons);
      const a = it.approved;
      const itemCard = h("div", { class: "card item", "data-item": it.name },
        h("div", { class: "row" },
          h("strong", { class: "grow" }, it.name), pill(it.state, "t-" + it.state),
          h("code", { class: "muted", title: "digest shown; an approval names it" }, (it.digest || "").slice(0, 12)),
          h("button", { class: "primary", onclick: () => approve(s.name, [it]) }, "Approve"),
          h("button", { class: "danger", onclick: () => deny(s.name, [it]) }, "Deny")),
        it.reasons && it.reasons.length ? h("ul", { class: "findings" }, it.reasons.map((r) => h("li", {}, r))) : null,
        (it.warnings || []).length ? h("ul", {}, it.warnings.map((r) => h("li", {}, r))) : null,
        h("div", { class: "muted" }, a ? "Description (changes against the approved version of " + a.approved_at + ")" : "Description"),
        diffBlock(a ? a.description || "" : null, it.description || "", phrases),
        h("div", { class: "muted" }, "Input schema"),
        diffBlock(a ? pretty(a.input_schema) : null, pretty(it.input_schema), phrases));
      card.append(itemCard);
    }
    main.append(card);
  }
}
async function approve(server, items) {
  const v = await api("/api/approve", { name: server, items: items.map((i) => ({ name: i.name, digest: i.digest })) });
  if (v.error) toast("Not approved: " + (v.error.message || JSON.stringify(v.error)));
  else toast("Approved: " + v.result.approved.join(", "));
  render();
}
async function deny(server, items) {
  try { const r = await call("tools_deny", { name: server, tools: items.map((i) => i.name) }); toast("Denied: " + r.denied.join(", ")); }
  catch (e) { toast(e.message); }
  render();
}

const history_ = {}; // name → [{cpu, rss}]
function spark(points, key) {
  const vals = points.map((p) => p[key] || 0);
  const max = Math.max(1e-9, ...vals);
  const pts = vals.map((v, i) => (i * 160 / Math.max(1, vals.length - 1)).toFixed(1) + "," + (32 - v / max * 30).toFixed(1)).join(" ");
  return svg("svg", { class: "chart", viewBox: "0 0 160 34", preserveAspectRatio: "none" }, svg("polyline", { points: pts }));
}
function sample() {
  for (const s of state.list) {
    const hs = (history_[s.name] = history_[s.name] || []);
    hs.push({ cpu: s.cpu_percent, rss: s.rss_bytes });
    if (hs.length > 60) hs.shift();
  }
}
async function pageServers() {
  await refreshList(); sample();
  const rows = state.list.map((s) => {
    const hs = history_[s.name] || [];
    const act = (m) => h("button", { onclick: async () => { try { await call(m, { name: s.name }); toast(m + " " + s.name); } catch (e) { toast(e.message); } } }, m);
    return h("tr", { "data-server": s.name },
      h("td", {}, h("a", { href: "#/servers/" + encodeURIComponent(s.name) }, s.name)),
      h("td", {}, pill(s.state, "s-" + s.state)),
      h("td", {}, pill((s.health && s.health.state) || "–", "h-" + (s.health && s.health.state))),
      h("td", {}, s.transport || ""),
      h("td", {}, String(s.restart_count ?? 0)),
      h("td", {}, fmtAge(s.uptime_secs)),
      h("td", {}, spark(hs, "cpu"), " ", (s.cpu_percent ?? 0).toFixed(1) + "%"),
      h("td", {}, spark(hs, "rss"), " ", fmtBytes(s.rss_bytes)),
      h("td", {}, act("start"), " ", act("stop"), " ", act("restart")));
  });
  setMain(h("h2", {}, "Servers"),
    h("table", {}, h("thead", {}, h("tr", {}, ["name", "state", "health", "transport", "restarts", "uptime", "cpu", "rss", ""].map((c) => h("th", {}, c)))), h("tbody", {}, rows)));
  // CPU and RSS have no stream: the open Servers page samples `list`, as
  // `xyctl top` does; no page open, no sampling.
  const t = setTimeout(() => { if (state.page === "servers") render(); }, 2000);
  state.stop.push(() => clearTimeout(t));
}
async function pageServer(name) {
  let st;
  try { st = await call("status", { name }); } catch (e) { setMain(h("p", {}, e.message)); return; }
  const kv = (k, v) => h("tr", {}, h("th", {}, k), h("td", {}, v == null ? "–" : typeof v === "object" ? h("div", { class: "text" }, pretty(v)) : String(v)));
  const sb = st.sandbox || null;
  const denials = (sb && sb.denials) || [];
  const mcp = st.mcp || {};
  setMain(h("h2", {}, name),
    h("table", {},
      kv("state", st.state), kv("pid", st.pid), kv("why", st.explain),
      kv("era", mcp.era ? mcp.era + " (" + mcp.protocol_version + ")" : null),
      kv("server", mcp.server_name ? mcp.server_name + " " + (mcp.server_version || "") : null),
      kv("restarts", st.restart_count), kv("health", st.health && (st.health.state + (st.health.error ? ": " + st.health.error : ""))), kv("package", st.package),
      kv("remote and OAuth", st.remote), kv("sandbox rules", sb && sb.rules),
      kv("sandbox enforcement", sb && sb.enforcement)),
    h("h3", {}, "Last sandbox denials (each with the line that allows it)"),
    denials.length ? h("ul", {}, denials.map((d) => h("li", {}, typeof d === "string" ? d : pretty(d)))) : h("p", { class: "muted" }, "None recorded."));
}

const calls = { rows: [] };
function callRow(c) {
  return h("tr", { class: "new" }, h("td", {}, c.ts), h("td", {}, c.client || "–"), h("td", {}, c.server), h("td", {}, c.tool),
    h("td", {}, fmtUs(c.duration_us)), h("td", {}, pill(c.outcome, c.outcome === "ok" ? "o-ok" : "o-bad")));
}
function pct(sorted, p) { return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : 0; }
function figures(rows) {
  const by = {};
  for (const c of rows) { const k = c.server + " / " + c.tool; (by[k] = by[k] || []).push(c); }
  return Object.entries(by).map(([k, cs]) => {
    const d = cs.map((c) => c.duration_us).sort((a, b) => a - b);
    const errs = cs.filter((c) => c.outcome !== "ok").length;
    return h("tr", {}, h("td", {}, k), h("td", {}, String(cs.length)), h("td", {}, fmtUs(pct(d, 0.5))), h("td", {}, fmtUs(pct(d, 0.99))), h("td", {}, (100 * errs / cs.length).toFixed(1) + "%"));
  });
}
function timeline(rows) {
  const last = rows.slice(-120);
  const max = Math.max(1, ...last.map((c) => c.duration_us));
  const w = 1000 / Math.max(60, last.length);
  return svg("svg", { class: "big", viewBox: "0 0 1000 120", preserveAspectRatio: "none" },
    ...last.map((c, i) => svg("rect", { x: (i * w).toFixed(1), y: (118 - c.duration_us / max * 116).toFixed(1), width: Math.max(1, w - 1).toFixed(1), height: (c.duration_us / max * 116 + 2).toFixed(1), class: c.outcome === "ok" ? "ok" : "bad" })));
}
async function pageCalls() {
  const r = await call("calls", { limit: 1000 }).catch((e) => { toast(e.message); return { calls: [] }; });
  calls.rows = r.calls || [];
  const body = h("tbody", { id: "calls" }, calls.rows.slice(-200).reverse().map(callRow));
  const figs = h("tbody", {}, figures(calls.rows));
  const chart = h("div", {}, timeline(calls.rows));
  setMain(h("h2", {}, "Calls"), h("p", { class: "muted" }, "Latency of the latest calls (red: errors), live."), chart,
    h("h3", {}, "Per server and tool"), h("table", {}, h("thead", {}, h("tr", {}, ["server / tool", "calls", "p50", "p99", "errors"].map((c) => h("th", {}, c)))), figs),
    h("h3", {}, "Timeline"), h("table", {}, h("thead", {}, h("tr", {}, ["time", "client", "server", "tool", "duration", "outcome"].map((c) => h("th", {}, c)))), body));
  state.stop.push(follow("calls", {}, (m, p) => {
    if (m !== "call") return;
    const c = p.call || p;
    calls.rows.push(c);
    body.prepend(callRow(c));
    while (body.children.length > 200) body.lastChild.remove();
    figs.replaceChildren(...figures(calls.rows));
    chart.replaceChildren(timeline(calls.rows));
  }));
}
async function pageLogs() {
  await refreshList();
  const names = state.list.map((s) => s.name);
  const pick = h("select", {}, h("option", { value: "" }, "every server"), names.map((n) => h("option", { value: n }, n)));
  const search = h("input", { type: "search", placeholder: "search", "aria-label": "search" });
  const box = h("div", { class: "text logs", id: "logs" });
  const followBox = h("input", { type: "checkbox", checked: "checked", id: "follow" });
  let all = [];
  const show = (l) => !search.value || l.line.toLowerCase().includes(search.value.toLowerCase());
  const lineEl = (l) => h("div", { class: l.stream === "stderr" ? "log-err" : "" }, (pick.value ? "" : l.name + "  ") + l.ts.slice(11, 23) + "  " + l.line);
  const redraw = () => { box.replaceChildren(...all.filter(show).map(lineEl)); box.scrollTop = box.scrollHeight; };
  let stop = null;
  const load = async () => {
    if (stop) stop();
    const params = pick.value ? { name: pick.value, tail: 500 } : { tail: 200 };
    const r = await call("logs", params).catch((e) => { toast(e.message); return { lines: [] }; });
    all = r.lines || []; redraw();
    if (followBox.checked) {
      stop = follow("logs", pick.value ? { name: pick.value } : {}, (m, p) => {
        if (m !== "log") return;
        all.push(p); if (all.length > 5000) all.shift();
        if (show(p)) { box.append(lineEl(p)); box.scrollTop = box.scrollHeight; }
      });
      state.stop.push(() => stop && stop());
    }
  };
  pick.addEventListener("change", load); followBox.addEventListener("change", load); search.addEventListener("input", redraw);
  setMain(h("h2", {}, "Logs"), h("div", { class: "row" }, pick, search, h("label", {}, followBox, " follow")), box);
  await load();
}
async function pageClients() {
  // The clients' own config files (what `xyctl clients` reads), then who called what.
  const f = await call("clients", {}).catch((e) => { toast(e.message); return { clients: [] }; });
  const usesText = (e) => e.uses === "xy" ? (e.xy_server ? "xy: " + e.xy_server : "xy itself (xyctl mcp)")
    : e.uses === "aggregate" ? "xy's one endpoint " + (e.endpoint || "/mcp")
    : e.uses === "process" ? "its own process" + (e.xy_server ? " (xy runs " + e.xy_server + ": xyctl clients apply)" : "")
    : e.uses === "url" ? "another URL" : "unrecognised entry";
  const fileRows = [];
  for (const c of f.clients || []) {
    if (c.error) fileRows.push(h("tr", { "data-client": c.client }, h("td", {}, c.client), h("td", {}, "–"), h("td", {}, "unreadable: " + c.error), h("td", { class: "muted" }, c.file)));
    else if (!c.entries.length) fileRows.push(h("tr", { "data-client": c.client }, h("td", {}, c.client), h("td", {}, "–"), h("td", {}, "no servers"), h("td", { class: "muted" }, c.file)));
    for (const e of c.entries || []) fileRows.push(h("tr", { "data-client": c.client, "data-entry": e.name, "data-uses": e.uses },
      h("td", {}, c.client), h("td", {}, e.name), h("td", {}, usesText(e)), h("td", { class: "muted" }, c.file)));
  }
  const r = await call("calls", { limit: 10000 }).catch((e) => { toast(e.message); return { calls: [] }; });
  const by = {};
  for (const c of r.calls || []) { const k = c.client || "(unknown client)"; (by[k] = by[k] || {})[c.server] = ((by[k] || {})[c.server] || 0) + 1; }
  const rows = Object.entries(by).map(([client, servers]) => h("tr", {}, h("td", {}, client), h("td", {}, Object.entries(servers).map(([s, n]) => s + " (" + n + ")").join(", "))));
  setMain(h("h2", {}, "Clients"),
    h("p", { class: "muted" }, "Which apps point at which servers, from their config files (as xyctl clients reads them)."),
    fileRows.length ? h("table", { id: "client-files" }, h("thead", {}, h("tr", {}, h("th", {}, "client"), h("th", {}, "entry"), h("th", {}, "uses"), h("th", {}, "file"))), h("tbody", {}, fileRows))
      : h("p", { class: "muted" }, "No AI client config found on this machine."),
    h("h3", {}, "Activity"),
    h("p", { class: "muted" }, "Which clients called which servers through xy (from the call records)."),
    rows.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "client"), h("th", {}, "servers (calls)"))), h("tbody", {}, rows)) : h("p", { class: "muted" }, "No calls recorded yet."));
}

// --- routing ------------------------------------------------------------
async function render() {
  for (const s of state.stop.splice(0)) s();
  $("#live").classList.remove("on");
  const [, page, arg] = (location.hash.match(/^#\/([a-z]+)(?:\/(.+))?/) || [null, "review"]);
  state.page = page;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === page);
  try {
    if (page === "servers" && arg) await pageServer(decodeURIComponent(arg));
    else if (page === "servers") await pageServers();
    else if (page === "calls") await pageCalls();
    else if (page === "logs") await pageLogs();
    else if (page === "clients") await pageClients();
    else await pageReview();
  } catch (e) { toast(e.message); }
  // Lifecycle and tool changes keep the banner (and the review queue) true.
  state.stop.push(follow("events", {}, (m, p) => {
    if (m !== "event") return;
    if (p.kind === "tools" || p.kind === "state" || p.kind === "config") {
      clearTimeout(render.soon);
      render.soon = setTimeout(() => (state.page === "review" ? render() : refreshList()), 300);
    }
  }));
}

window.addEventListener("hashchange", render);
(async () => { if (await signIn()) render(); })();
