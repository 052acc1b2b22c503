// Block transfers in the block store (the caller's own; an admin's list
// has everyone's): download one as a file, or delete it. GET
// /console/api/transfers every 10 s while the tab is shown.

import { api, download } from "../api.js";
import { bytes, confirmable, dateTime, el, errorText, listPage, num, relative, setCells, shortID, syncRows } from "../ui.js";

const table = document.getElementById("transfers-table");
const updated = document.getElementById("transfers-updated");

const page = listPage({ path: "/console/api/transfers", key: "transfers", every: 10000, table, updated, what: "Transfers", render });
export const { start, stop, reset } = page;

function render(transfers) {
  const now = Date.now();
  transfers.sort((a, b) => b.created.localeCompare(a.created));
  syncRows(table.tBodies[0], transfers, {
    key: (t) => t.id,
    make: makeRow,
    fill: (tr, t) => {
      setCells(tr, [shortID(t.id), t.owner, t.format, num(t.rows), bytes(t.bytes), num(t.blocks), relative(t.expires, now)]);
      tr.cells[6].title = dateTime(t.expires);
    },
    empty: "No transfers.",
    columns: 8,
  });
}

function makeRow(t) {
  const get = el("button", { type: "button", className: "download-transfer" }, "Download");
  get.addEventListener("click", () => fetchFile(get, t));
  const del = el("button", { type: "button", className: "delete-transfer danger" });
  confirmable(del, { label: "Delete", confirm: "Confirm delete", action: () => remove(t) });
  return el("tr", { dataset: { transferId: t.id } },
    el("td", { className: "mono", title: t.id }), el("td"), el("td"),
    el("td", { className: "num" }), el("td", { className: "num" }), el("td", { className: "num" }), el("td"),
    el("td", { className: "actions" }, get, " ", del));
}

async function fetchFile(button, t) {
  button.disabled = true;
  try {
    await download({ transfer: t.id });
  } catch (err) {
    page.notice(`Download not started: ${errorText(err)}`, true);
  } finally {
    button.disabled = false;
  }
}

async function remove(t) {
  try {
    await api("DELETE", `/console/api/transfers/${encodeURIComponent(t.id)}`);
    page.notice(`Deleted transfer ${shortID(t.id)}.`);
  } catch (err) {
    page.notice(`Transfer not deleted: ${errorText(err)}`, true);
  }
  await page.load();
}
