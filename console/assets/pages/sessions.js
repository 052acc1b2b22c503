// Open MCP sessions (admins only): which session (its id, shortened; the
// whole id on hover or copied with a click), who holds it, whether it is
// active or idle, over which transport, how busy it is, and a button that
// closes one. GET /console/api/sessions every 5 s while the tab is shown,
// and at once when its tab is clicked again.

import { api } from "../api.js";
import { age, bytes, confirmable, copyText, dateTime, el, errorText, listPage, num, relative, setCells, shortID, span, syncRows } from "../ui.js";

const table = document.getElementById("sessions-table");
const updated = document.getElementById("sessions-updated");
const summary = document.getElementById("sessions-summary");
const filter = document.getElementById("sessions-filter");

const page = listPage({ path: "/console/api/sessions", key: "sessions", every: 5000, table, updated, what: "Sessions", render });
export const { start, stop, refresh } = page;

let last = null; // the last answer's sessions and rule, drawn again when the filter changes

export function reset() {
  page.reset();
  last = null;
  summary.textContent = "";
  filter.value = "";
}

filter.addEventListener("change", () => last && render(...last));

function render(sessions, answer) {
  last = [sessions, answer];
  const now = Date.now();
  const idle = sessions.filter((s) => s.idle).length;
  const rule = answer.idle_after_s ? `idle: no tool call running and no activity for ${span(answer.idle_after_s)}` : "";
  summary.textContent = `${num(sessions.length)} open · ${num(sessions.length - idle)} active · ${num(idle)} idle${rule ? ` (${rule})` : ""}`;
  const shown = sessions.filter((s) => !filter.value || (filter.value === "idle") === Boolean(s.idle));
  shown.sort((a, b) => a.subject.localeCompare(b.subject) || a.opened.localeCompare(b.opened));
  syncRows(table.tBodies[0], shown, {
    key: (s) => s.id,
    make: makeRow,
    fill: (tr, s) => {
      const calls = s.running ? `${num(s.calls)} · ${num(s.running)} running` : num(s.calls);
      setCells(tr, [null, s.subject, null, s.transport, s.protocol || "–", s.client || "–", age(s.opened, now), calls, bytes(s.bytes),
        relative(s.last_active, now)]);
      const state = tr.cells[2].firstChild;
      state.textContent = s.idle ? "idle" : "active";
      state.className = `badge state ${s.idle ? "" : "ok"}`;
      state.title = s.idle ? rule : s.running ? `${s.running} tool call(s) in progress` : "a tool call or request lately";
      tr.cells[6].title = `opened ${dateTime(s.opened)}`;
      tr.cells[9].title = dateTime(s.last_active);
    },
    empty: sessions.length ? "No session in this state." : "No open sessions.",
    columns: 11,
  });
}

function makeRow(s) {
  const copy = el("button", { type: "button", className: "copy-id", title: "Copy the whole id", "aria-label": "Copy the id of this session" }, "copy");
  copy.addEventListener("click", () => copyID(copy, s));
  const close = el("button", { type: "button", className: "close-session danger", title: "End this session: its client is disconnected" });
  confirmable(close, { label: "Close", confirm: "Confirm close", action: () => closeSession(s) });
  return el("tr", { dataset: { sessionId: s.id } },
    el("td", { className: "id" }, el("code", { className: "session-id", title: s.id }, shortID(s.id)), copy),
    el("td"), el("td", {}, el("span", { className: "badge state" })), el("td"), el("td"), el("td", { className: "clip" }), el("td"),
    el("td", { className: "num" }), el("td", { className: "num" }), el("td"), el("td", { className: "actions" }, close));
}

async function copyID(button, s) {
  try {
    await copyText(s.id);
    button.textContent = "copied";
    setTimeout(() => (button.textContent = "copy"), 1500);
    page.notice(`Copied the id of ${s.subject}'s session.`); // for screen readers
  } catch (err) {
    page.notice(`Not copied (${errorText(err)}): the session id is ${s.id}`, true);
  }
}

async function closeSession(s) {
  try {
    await api("DELETE", `/console/api/sessions/${encodeURIComponent(s.id)}`);
    page.notice(`Closed the ${s.transport} session ${shortID(s.id)} of ${s.subject}.`);
  } catch (err) {
    page.notice(`Session not closed: ${errorText(err)}`, true);
  }
  await page.load();
}
