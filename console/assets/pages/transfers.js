// Jobs (exports and long calls, running or ended) and the block transfers
// in the block store (the caller's own; an admin's lists have everyone's):
// cancel a running job (on the replica that runs it), download a transfer
// as a file, or delete it. GET
// /console/api/transfers every 10 s while the tab is shown, and at once
// when its tab is clicked again.

import { api, download } from "../api.js";
import { bytes, confirmable, dateTime, el, errorText, listPage, num, relative, setCells, shortID, syncRows } from "../ui.js";

const table = document.getElementById("transfers-table");
const jobsTable = document.getElementById("jobs-table");
const updated = document.getElementById("transfers-updated");

const page = listPage({ path: "/console/api/transfers", key: "transfers", every: 10000, table, updated, what: "Transfers", render });
export const { start, stop, reset, refresh } = page;

function render(transfers, answer) {
  const now = Date.now();
  renderJobs(answer.jobs ?? [], now);
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

function renderJobs(jobs, now) {
  syncRows(jobsTable.tBodies[0], jobs, {
    key: (j) => j.id,
    make: makeJobRow,
    fill: (tr, j) => {
      setCells(tr, [shortID(j.id), j.owner, j.tool, j.state, num(j.rows), bytes(j.bytes), relative(j.created, now),
        j.transfer_id ? shortID(j.transfer_id) : "–"]);
      tr.cells[3].title = j.error ?? "";
      tr.cells[6].title = dateTime(j.created);
      tr.cells[7].title = j.transfer_id ?? "";
      tr.querySelector("button.cancel-job").hidden = j.state !== "running";
    },
    empty: "No jobs.",
    columns: 9,
  });
}

function makeJobRow(j) {
  const cancel = el("button", { type: "button", className: "cancel-job danger" });
  confirmable(cancel, { label: "Cancel", confirm: "Confirm cancel", action: () => cancelJob(j) });
  return el("tr", { dataset: { jobId: j.id } },
    el("td", { className: "mono", title: j.id }), el("td"), el("td"), el("td"),
    el("td", { className: "num" }), el("td", { className: "num" }), el("td"), el("td", { className: "mono" }),
    el("td", { className: "actions" }, cancel));
}

async function cancelJob(j) {
  try {
    await api("DELETE", `/console/api/jobs/${encodeURIComponent(j.id)}`);
    page.notice(`Cancelled job ${shortID(j.id)}.`);
  } catch (err) {
    page.notice(`Job not cancelled: ${errorText(err)}`, true);
  }
  await page.load();
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
