// The overview: MCP on or off (and the switch, for admins), open sessions
// (active and idle), the last hour of tool calls as charts, workers,
// database pools and the block store. GET /console/api/overview every 5 s
// while the tab is shown.
//
// Behind a round-robin balancer each refresh reaches another replica. The
// overview of a cluster is the cluster's whichever replica answers: its
// figures added up, and each replica's own in the Replicas table. Showing
// one replica asks for that replica by its prefix (?replica=), and any
// replica forwards the request there.

import { api } from "../api.js";
import { lineChart } from "../charts.js";
import { bytes, confirmable, dateTime, el, errorText, latest, num, poll, relative, setCells, span, syncRows, timeOfDay } from "../ui.js";

const $ = (id) => document.getElementById(id);
const busiest = 5; // tools drawn beside "all"

const requests = latest();
let ctx = null;
let polling = null;
let failed = false; // the last refresh failed, and said so in the notice
let enabled = null; // MCP's state as last shown
let last = null; // the last overview, drawn again when the window resizes
let resizing = 0; // the timer of that redraw
let replica = ""; // the replica shown; "": the cluster (or the single server)
let replicas = []; // the cluster's replicas, from its last overview

$("overview-replica").addEventListener("change", (event) => showReplica(event.target.value));

const toggle = confirmable($("mcp-toggle"), {
  label: "Turn MCP off",
  confirm: "Confirm: turn MCP off",
  action: switchMCP,
});

export function start(c) {
  ctx = c;
  $("mcp-toggle").hidden = !c.me.admin;
  polling = poll(load, 5000);
  window.addEventListener("resize", redraw);
}

/** refresh loads the overview now, not at its next poll. */
export function refresh() {
  polling?.now();
}

export function stop() {
  polling?.stop();
  polling = null;
  requests.stop();
  window.removeEventListener("resize", redraw);
  clearTimeout(resizing);
}

export function reset() {
  enabled = null;
  last = null;
  failed = false;
  replica = "";
  replicas = [];
  $("overview-pick").hidden = true;
  $("overview-replica").replaceChildren();
  $("overview-scope").hidden = true;
  $("replicas-card").hidden = true;
  $("replicas").tBodies[0].replaceChildren();
  $("sessions-idle-rule").textContent = "";
  $("mcp-state").textContent = "–";
  $("mcp-state").className = "badge";
  $("mcp-since").textContent = "";
  $("mcp-toggle").hidden = true;
  for (const id of ["sessions-active", "sessions-idle", "sessions-sse", "sessions-streamable", "sessions-stdio"]) $(id).textContent = "–";
  for (const id of ["workers", "blocks", "chart-calls", "chart-latency", "chart-errors", "overview-updated"]) $(id).replaceChildren();
  $("sessions-by-subject").tBodies[0].replaceChildren();
  $("databases").tBodies[0].replaceChildren();
}

async function load() {
  const current = requests.begin();
  const asked = replica;
  try {
    const ov = await api("GET", asked ? `/console/api/overview?replica=${encodeURIComponent(asked)}` : "/console/api/overview");
    if (!current()) return;
    last = ov;
    render(ov);
    if (failed) ctx.notice("");
    failed = false;
  } catch (err) {
    if (!current()) return;
    if (asked && (err.kind === "not_found" || err.kind === "unavailable")) {
      // The replica stopped (a restarted one has a new prefix): back to
      // the cluster.
      replica = "";
      replicas = replicas.filter((p) => p !== asked);
      ctx.notice(`Replica ${asked} does not answer any more: showing the cluster.`, true);
      await load();
      return;
    }
    failed = true;
    ctx.notice(`Overview not refreshed: ${errorText(err)}`, true);
  }
}

/** showReplica shows the replica with prefix ("": the cluster) from now on. */
function showReplica(prefix) {
  replica = prefix;
  $("overview-replica").value = prefix;
  load();
}

async function switchMCP() {
  requests.begin(); // a refresh in flight would show the state before the switch
  try {
    const st = await api("POST", enabled ? "/admin/mcp/disable" : "/admin/mcp/enable");
    requests.begin(); // nor one that started while the switch was on its way
    renderMCP(st.enabled, st.since);
    ctx.notice(`MCP is ${st.enabled ? "on" : "off"}.`); // for screen readers
  } catch (err) {
    ctx.notice(`MCP not switched: ${errorText(err)}`, true);
  }
}

function render(ov) {
  // The cluster's view lists its replicas; a replica's view names itself;
  // a single server does neither.
  const cluster = Array.isArray(ov.replicas);
  if (cluster) replicas = ov.replicas.map((r) => r.replica);
  renderPick(ov.replica ?? "");
  renderScope(ov.replica, cluster ? replicas.length : 0);
  renderReplicas(cluster ? ov.replicas : null);
  renderMCP(ov.mcp?.enabled, ov.mcp?.since);
  renderSessions(ov.sessions ?? {});
  renderWorkers(ov.workers ?? {}, cluster ? replicas.length : 0);
  renderBlocks(ov.blocks);
  renderDatabases(ov.databases ?? []);
  renderCharts(ov.history);
  const of = ov.replica ? ` · replica ${ov.replica}` : cluster ? ` · cluster of ${plural(replicas.length, "replica")}` : "";
  $("overview-updated").textContent = `Updated ${timeOfDay(ov.now ?? Date.now())}${of}`;
}

function plural(n, word) {
  return `${num(n)} ${word}${n === 1 ? "" : "s"}`;
}

/** renderPick offers the cluster and each of its replicas, shown one chosen. */
function renderPick(shown) {
  const pick = $("overview-replica");
  $("overview-pick").hidden = replicas.length === 0 && !shown;
  const values = ["", ...replicas];
  if (shown && !values.includes(shown)) values.push(shown);
  const label = (p) => (p ? `replica ${p}` : `cluster (${plural(replicas.length, "replica")})`);
  const same = pick.options.length === values.length && values.every((v, i) => pick.options[i].value === v && pick.options[i].text === label(v));
  if (!same) pick.replaceChildren(...values.map((v) => el("option", { value: v }, label(v))));
  pick.value = shown;
}

function renderScope(shown, replicaCount) {
  const scope = $("overview-scope");
  if (shown) {
    scope.textContent = `Replica ${shown} only: its sessions, workers, pools, block store and tool calls. MCP on/off is the cluster's switch.`;
  } else if (replicaCount) {
    scope.textContent = `The cluster: sessions, workers, pools, block store and tool calls added up over ${plural(replicaCount, "replica")}; ` +
      "latency percentiles from their histograms added up. Each replica's own figures are under Replicas.";
  }
  scope.hidden = !shown && !replicaCount;
}

/** trouble names a replica's databases that are not served, or whose circuit is not closed. */
function trouble(r) {
  const names = [...(r.unavailable ?? []).map((n) => `${n} (unavailable)`),
    ...(r.open_circuits ?? []).filter((n) => !r.unavailable?.includes(n)).map((n) => `${n} (circuit not closed)`)];
  return names.length ? names.join(", ") : "–";
}

/** renderReplicas fills the Replicas table of the cluster's view; null hides it. */
function renderReplicas(list) {
  $("replicas-card").hidden = !list;
  if (!list) return;
  syncRows($("replicas").tBodies[0], list, {
    key: (r) => r.replica,
    make: (r) => {
      const show = el("button", { type: "button", className: "link show-replica", title: `Show replica ${r.replica} only` }, r.replica);
      show.addEventListener("click", () => showReplica(r.replica));
      return el("tr", { dataset: { replica: r.replica } },
        el("td", { className: "mono" }, show), el("td", {}, el("span", { className: "badge" })),
        el("td", { className: "num" }), el("td", { className: "num" }), el("td"), el("td", { className: "num" }),
        el("td", { className: "num" }), el("td", { className: "num" }), el("td"));
    },
    fill: (tr, r) => {
      const w = r.workers ?? {};
      setCells(tr, [null, null, num(r.sessions), num(r.idle_sessions), null, num(w.waiting ?? 0), num(r.calls), num(r.errors),
        trouble(r)]);
      const badge = tr.cells[1].firstChild;
      badge.textContent = r.mcp_enabled ? "on" : "off";
      badge.className = `badge ${r.mcp_enabled ? "ok" : "bad"}`;
      tr.cells[4].replaceChildren(usage(`MCP tool calls of replica ${r.replica}`, w.in_use ?? 0, w.max ?? 0));
    },
    empty: "No replica answered",
    columns: 9,
  });
}

function redraw() {
  clearTimeout(resizing);
  resizing = setTimeout(() => last && renderCharts(last.history), 150);
}

function renderMCP(on, since) {
  enabled = Boolean(on);
  const state = $("mcp-state");
  state.textContent = enabled ? "on" : "off";
  state.className = `badge ${enabled ? "ok" : "bad"}`;
  $("mcp-since").textContent = since ? `since ${dateTime(since)} (${relative(since)})` : "";
  const verb = enabled ? "off" : "on";
  toggle.setLabels(`Turn MCP ${verb}`, `Confirm: turn MCP ${verb}`);
}

function renderSessions(s) {
  $("sessions-active").textContent = num(s.active ?? 0);
  $("sessions-idle").textContent = num(s.idle ?? 0);
  $("sessions-sse").textContent = num(s.sse ?? 0);
  $("sessions-streamable").textContent = num(s.streamable ?? 0);
  $("sessions-stdio").textContent = num(s.stdio ?? 0);
  $("sessions-idle-rule").textContent = s.idle_after_s ? `Idle: no tool call running and no activity for ${span(s.idle_after_s)}.` : "";
  syncRows($("sessions-by-subject").tBodies[0], s.by_subject ?? [], {
    key: (r) => r.subject,
    make: () => el("tr", {}, el("td"), el("td", { className: "num" }), el("td", { className: "num" }), el("td", { className: "num" })),
    fill: (tr, r) => setCells(tr, [r.subject, num(r.sse), num(r.streamable), num(r.idle ?? 0)]),
    empty: "No open sessions",
    columns: 4,
  });
}

/** usage is a labelled meter: "MCP calls 2 / 8". */
function usage(label, value, max, extra = "") {
  const meter = el("meter", { min: 0, max: Math.max(max, 1), value, low: max * 0.5, high: max * 0.85, optimum: 0, "aria-label": label });
  return el("div", { className: "usage" },
    el("span", { className: "usage-label" }, label),
    meter,
    el("span", { className: "usage-value" }, `${num(value)} / ${num(max)}${extra}`));
}

/** renderWorkers shows the worker slots; summed over replicaCount replicas in the cluster's view. */
function renderWorkers(w, replicaCount) {
  const rows = [usage("MCP tool calls", w.in_use ?? 0, w.max ?? 0, w.waiting ? ` · ${num(w.waiting)} waiting` : "")];
  if (w.pool_max) rows.push(usage("Shared pool", w.pool_in_use ?? 0, w.pool_max));
  if (replicaCount) rows.push(el("p", { className: "muted small" }, `Added up over ${plural(replicaCount, "replica")}, each with its own slots: see Replicas.`));
  $("workers").replaceChildren(...rows);
}

function renderBlocks(b) {
  if (!b) {
    $("blocks").replaceChildren(el("p", { className: "muted" }, "No block store is configured."));
    return;
  }
  const item = (term, value) => el("div", {}, el("dt", {}, term), el("dd", {}, value));
  $("blocks").replaceChildren(
    el("dl", { className: "stats" },
      item("Stored now", `${num(b.stored_now)} transfers`),
      item("Stored bytes", bytes(b.stored_bytes_now)),
      item("Since start", `${num(b.transfers)} transfers · ${num(b.blocks)} blocks · ${bytes(b.bytes)}`)),
  );
}

function renderDatabases(dbs) {
  syncRows($("databases").tBodies[0], dbs, {
    key: (d) => d.name,
    make: () => el("tr", {},
      el("td"), el("td"), el("td", {}, el("span", { className: "badge" })),
      el("td", { className: "num" }), el("td", { className: "num" }), el("td", { className: "num" }), el("td", { className: "num" }),
      el("td")),
    fill: (tr, d) => {
      const p = d.pool;
      setCells(tr, [d.name, d.dialect ?? ""]);
      [p?.acquired, p?.idle, p?.total, p?.max].forEach((v, i) => {
        tr.cells[3 + i].textContent = num(v);
      });
      // A database not served says why under its badge.
      const badge = tr.cells[2].firstChild;
      const circuit = d.circuit || "unknown";
      // In the cluster's view: the worst replica's, and on how many.
      const counts = Object.values(d.circuits ?? {});
      const all = counts.reduce((a, b) => a + b, 0);
      const on = d.circuits?.[d.circuit] ?? all;
      badge.textContent = d.unavailable ? "unavailable" : on < all ? `${circuit} on ${num(on)} of ${num(all)}` : circuit;
      badge.className = `badge ${d.unavailable || circuit === "open" ? "bad" : circuit === "closed" ? "ok" : "warn"}`;
      tr.cells[2].replaceChildren(badge, ...(d.unavailable ? [el("div", { className: "muted cause" }, d.unavailable)] : []));
      tr.cells[7].replaceChildren(p ? usage(`${d.name} connections in use`, p.acquired, p.max) : el("span", { className: "muted" }, "no pool"));
    },
    empty: "No databases",
    columns: 8,
  });
}

function renderCharts(h) {
  if (!h?.minutes?.length) {
    for (const id of ["chart-calls", "chart-latency", "chart-errors"]) {
      $(id).replaceChildren(el("p", { className: "muted" }, "No history yet."));
    }
    return;
  }
  const total = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0);
  const tools = Object.entries(h.tools ?? {})
    .sort(([an, a], [bn, b]) => total(b.calls) - total(a.calls) || an.localeCompare(bn))
    .slice(0, busiest);
  const ms = (v) => num(v >= 100 ? Math.round(v) : v >= 10 ? Math.round(v * 10) / 10 : Math.round(v * 100) / 100);
  draw("chart-calls", {
    title: "Tool calls per minute",
    series: [{ name: "all", values: h.all.calls }, ...tools.map(([name, s]) => ({ name, values: s.calls }))],
    format: num,
  }, h);
  draw("chart-latency", {
    title: "Latency of all tools in ms",
    series: [{ name: "p50", values: h.all.p50_ms }, { name: "p95", values: h.all.p95_ms }],
    format: ms,
  }, h);
  draw("chart-errors", {
    title: "Errors per minute",
    series: [{ name: "all", values: h.all.errors }, ...tools.map(([name, s]) => ({ name, values: s.errors }))],
    format: num,
  }, h);
}

function draw(id, spec, h) {
  const box = $(id);
  box.replaceChildren(lineChart({ ...spec, times: h.minutes, width: box.clientWidth || 480 }));
}
