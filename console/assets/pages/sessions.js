// Open MCP sessions (admins only): who holds them, over which transport,
// how busy they are, and a button that closes one. GET
// /console/api/sessions every 5 s while the tab is shown.

import { api } from "../api.js";
import { age, bytes, confirmable, dateTime, el, errorText, latest, num, poll, relative, setCells, syncRows, timeOfDay } from "../ui.js";

const table = document.getElementById("sessions-table");
const updated = document.getElementById("sessions-updated");

const requests = latest();
let ctx = null;
let stopPolling = null;
let failed = false; // the last refresh failed, and said so in the notice

export function start(c) {
  ctx = c;
  stopPolling = poll(load, 5000);
}

export function stop() {
  stopPolling?.();
  stopPolling = null;
  requests.stop();
}

export function reset() {
  failed = false;
  table.tBodies[0].replaceChildren();
  updated.textContent = "";
}

async function load() {
  const current = requests.begin();
  try {
    const { sessions } = await api("GET", "/console/api/sessions");
    if (!current()) return;
    render(sessions ?? []);
    updated.textContent = `Updated ${timeOfDay(Date.now())}`;
    if (failed) ctx.notice("");
    failed = false;
  } catch (err) {
    if (!current()) return;
    failed = true;
    ctx.notice(`Sessions not refreshed: ${errorText(err)}`, true);
  }
}

function render(sessions) {
  const now = Date.now();
  sessions.sort((a, b) => a.subject.localeCompare(b.subject) || a.opened.localeCompare(b.opened));
  syncRows(table.tBodies[0], sessions, {
    key: (s) => s.id,
    make: makeRow,
    fill: (tr, s) => {
      setCells(tr, [s.subject, s.transport, s.protocol || "–", s.client || "–", age(s.opened, now), num(s.calls), bytes(s.bytes),
        relative(s.last_active, now)]);
      tr.cells[4].title = `opened ${dateTime(s.opened)}`;
      tr.cells[7].title = dateTime(s.last_active);
    },
    empty: "No open sessions.",
    columns: 9,
  });
}

function makeRow(s) {
  const close = el("button", { type: "button", className: "close-session danger", title: "End this session: its client is disconnected" });
  confirmable(close, { label: "Close", confirm: "Confirm close", action: () => closeSession(s) });
  return el("tr", { dataset: { sessionId: s.id } },
    el("td"), el("td"), el("td"), el("td", { className: "clip" }), el("td"),
    el("td", { className: "num" }), el("td", { className: "num" }), el("td"), el("td", { className: "actions" }, close));
}

async function closeSession(s) {
  try {
    await api("DELETE", `/console/api/sessions/${encodeURIComponent(s.id)}`);
    ctx.notice(`Closed the ${s.transport} session of ${s.subject}.`);
  } catch (err) {
    ctx.notice(`Session not closed: ${errorText(err)}`, true);
  }
  await load();
}
