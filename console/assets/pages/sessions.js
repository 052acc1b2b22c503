// Open MCP sessions (admins only): who holds them, over which transport,
// how busy they are, and a button that closes one. GET
// /console/api/sessions every 5 s while the tab is shown.

import { api } from "../api.js";
import { age, bytes, confirmable, dateTime, el, errorText, listPage, num, relative, setCells, syncRows } from "../ui.js";

const table = document.getElementById("sessions-table");
const updated = document.getElementById("sessions-updated");

const page = listPage({ path: "/console/api/sessions", key: "sessions", every: 5000, table, updated, what: "Sessions", render });
export const { start, stop, reset } = page;

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
    page.notice(`Closed the ${s.transport} session of ${s.subject}.`);
  } catch (err) {
    page.notice(`Session not closed: ${errorText(err)}`, true);
  }
  await page.load();
}
