// The data browser: a database's tables, one table's columns and keys, and
// a SQL workbench that shows one page of rows at a time. Earlier pages are
// not kept (only the cursor to the next one), so a large result never sits
// in the page; "Download CSV" has the server stream all of it to disk.

import { api, download } from "../api.js";
import { el, errorText, latest, num, show } from "../ui.js";

const $ = (id) => document.getElementById(id);
const dbSelect = $("db-select");
const tablesList = $("tables-list");
const filter = $("tables-filter");
const detail = $("table-detail");
const sqlText = $("sql");
const maxRows = $("max-rows");
const runButton = $("run-sql");
const nextButton = $("next-page");
const csvButton = $("download-csv");
const resultTable = $("result-table");
const status = $("result-status");
const followFilters = $("follow-filters");
const followStart = $("follow-start");
const followStop = $("follow-stop");
const followError = $("follow-error");
const followStatus = $("follow-status");
const followTable = $("follow-table");

const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
const numericType = /int|numeric|decimal|real|double|float|serial|money/i;

const databases = latest(); // the database list
const tables = latest(); // one database's tables
const details = latest(); // one table's detail
const results = latest(); // SQL pages

let ctx = null;
let paging = null; // {body, page, offset, count, cursor} of the page shown
let chosenTable = ""; // the table whose detail is shown

export function start(c) {
  ctx = c;
  loadDatabases();
}

export function stop() {
  // Nothing refreshes here; an answer in flight still fills the page. A
  // follow stops: it would hold a request open for nothing.
  stopFollowing();
}

export function reset() {
  databases.stop();
  tables.stop();
  details.stop();
  results.stop();
  dbSelect.replaceChildren();
  tablesList.replaceChildren();
  filter.value = "";
  chosenTable = "";
  showDetailHint();
  sqlText.value = "";
  maxRows.value = "100";
  clearResult();
  showError(null);
  stopFollowing();
  followFilters.value = "";
  followStatus.textContent = "";
  followTable.tHead.replaceChildren();
  followTable.tBodies[0].replaceChildren();
  showError(null, followError);
}

async function loadDatabases() {
  const current = databases.begin();
  try {
    const list = (await api("GET", "/rest/databases")).databases ?? [];
    if (!current()) return;
    const chosen = dbSelect.value;
    dbSelect.replaceChildren(...list.map((d) => el("option", { value: d.name }, `${d.name} (${d.dialect})`)));
    if (list.some((d) => d.name === chosen)) dbSelect.value = chosen;
    if (dbSelect.value) await loadTables();
    else tablesList.replaceChildren(el("li", { className: "muted" }, "No databases you may read."));
  } catch (err) {
    if (current()) tablesList.replaceChildren(el("li", { className: "error" }, errorText(err)));
  }
}

async function loadTables() {
  const db = dbSelect.value;
  if (!db) return;
  const current = tables.begin();
  try {
    const list = (await api("GET", `/rest/databases/${encodeURIComponent(db)}/tables`)).tables ?? [];
    if (!current()) return;
    const items = list.map((t) =>
      el("li", {},
        el("button", { type: "button", className: "table-item", dataset: { table: t.name }, "aria-current": t.name === chosenTable ? "true" : undefined },
          el("span", { className: "table-name" }, t.name),
          el("span", { className: "table-kind" }, t.kind === "table" ? "" : t.kind),
          el("span", { className: "table-rows", title: rowsTitle(t.row_estimate) }, estimate(t.row_estimate)))));
    tablesList.replaceChildren(...(items.length ? items : [el("li", { className: "muted" }, "No tables.")]));
    applyFilter();
  } catch (err) {
    if (current()) tablesList.replaceChildren(el("li", { className: "error" }, errorText(err)));
  }
}

function estimate(n) {
  return typeof n === "number" && n >= 0 ? `≈${compact.format(n)}` : "?";
}

function rowsTitle(n) {
  return typeof n === "number" && n >= 0 ? `about ${num(n)} rows` : "row count unknown";
}

function applyFilter() {
  const words = filter.value.trim().toLowerCase();
  for (const button of tablesList.querySelectorAll("button[data-table]")) {
    button.parentElement.hidden = words !== "" && !button.dataset.table.toLowerCase().includes(words);
  }
}

function showDetailHint() {
  detail.replaceChildren(el("p", { className: "muted" }, "Choose a table to see its columns and keys."));
}

async function loadDetail(name) {
  const db = dbSelect.value;
  const current = details.begin();
  chosenTable = name;
  for (const b of tablesList.querySelectorAll("button[data-table]")) {
    if (b.dataset.table === name) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  detail.replaceChildren(el("p", { className: "muted" }, `Loading ${name}…`));
  try {
    const t = await api("GET", `/rest/databases/${encodeURIComponent(db)}/tables/${encodeURIComponent(name)}`);
    if (current()) renderDetail(t);
  } catch (err) {
    if (current()) detail.replaceChildren(el("p", { className: "error" }, errorText(err)));
  }
}

function renderDetail(t) {
  const use = el("button", { type: "button" }, "Query this table");
  use.addEventListener("click", () => {
    sqlText.value = `SELECT * FROM ${sqlName(t.name)}`;
    sqlText.focus();
  });
  const columns = (t.columns ?? []).map((c) =>
    el("tr", {},
      el("td", { className: "mono" }, c.name),
      el("td", { className: "mono" }, c.type),
      el("td", {}, c.nullable ? "yes" : "no"),
      el("td", {}, c.primary_key ? el("span", { className: "badge pk", title: "primary key" }, "PK") : "")));
  const keys = (t.foreign_keys ?? []).map((fk) => {
    const ref = el("button", { type: "button", className: "link", dataset: { table: fk.ref_table } }, fk.ref_table);
    ref.addEventListener("click", () => loadDetail(fk.ref_table));
    return el("li", { className: "mono" }, `(${fk.columns.join(", ")}) → `, ref, `(${fk.ref_columns.join(", ")})`);
  });
  detail.replaceChildren(
    el("div", { className: "detail-head" },
      el("h2", {}, el("span", { className: "mono" }, t.name), " ", el("span", { className: "badge" }, t.kind)),
      el("span", { className: "muted" }, t.row_estimate >= 0 ? `about ${num(t.row_estimate)} rows` : "row count unknown"),
      use),
    el("div", { className: "table-wrap" },
      el("table", { className: "grid-table" },
        el("caption", { className: "visually-hidden" }, `Columns of ${t.name}`),
        el("thead", {}, el("tr", {}, ...["Column", "Type", "Nullable", "Key"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, ...columns))),
    el("p", {}, el("strong", {}, "Primary key: "),
      t.primary_key?.length ? el("span", { className: "mono" }, `(${t.primary_key.join(", ")})`) : "none"),
    el("p", {}, el("strong", {}, "Foreign keys: "), keys.length ? "" : "none"),
    el("ul", { className: "fk-list", hidden: !keys.length }, ...keys),
  );
}

/** sqlName writes a table name ("t" or "schema.t") for SQL, quoting the parts that need it. */
function sqlName(name) {
  return name.split(".").map((part) => (/^[a-z_][a-z0-9_]*$/.test(part) ? part : `"${part.replaceAll('"', '""')}"`)).join(".");
}

/** request reads the workbench: the statement to run, or an error to show. */
function request() {
  const database = dbSelect.value;
  const sql = sqlText.value.trim();
  if (!database) return { error: { kind: "validation_error", message: "no database is chosen", hint: "pick one above" } };
  if (!sql) return { error: { kind: "validation_error", message: "there is no SQL to run", hint: "write a SELECT statement first" } };
  return { database, sql };
}

// maxPage bounds the rows a page holds; the whole result is the CSV
// download's.
const maxPage = 1000;

function rowsPerPage() {
  const n = Math.floor(Number(maxRows.value));
  const rows = Number.isFinite(n) && n >= 1 ? Math.min(n, maxPage) : 100;
  maxRows.value = String(rows);
  return rows;
}

function run() {
  const r = request();
  if (r.error) {
    showError(r.error);
    return;
  }
  fetchPage({ body: { database: r.database, sql: r.sql, limit: rowsPerPage() }, page: 1, offset: 0 });
}

function nextPage() {
  if (!paging?.cursor) return;
  const { body, page, offset, count, cursor } = paging;
  fetchPage({ body, page: page + 1, offset: offset + count }, cursor);
}

async function fetchPage(next, cursor) {
  const current = results.begin();
  showError(null);
  nextButton.disabled = true;
  status.textContent = "Running…";
  try {
    const res = await api("POST", "/rest/sql", cursor ? { ...next.body, cursor } : next.body);
    if (!current()) return;
    const count = res.row_count ?? res.rows?.length ?? 0;
    paging = { ...next, count, cursor: res.truncated && res.next_cursor ? res.next_cursor : "" };
    renderResult(res);
    const rows = count ? `Rows ${num(next.offset + 1)}–${num(next.offset + count)}` : "No rows";
    const more = paging.cursor ? "more available" : res.truncated ? "truncated" : "end";
    status.textContent = `${rows} · ${more} · page ${next.page} · ${num(res.elapsed_ms)} ms`;
    // The server's hint about a truncated result tells API clients to send
    // the cursor, which "Next page" does; other hints are worth showing.
    show($("result-hint"), paging.cursor ? "" : (res.hint ?? ""));
    nextButton.disabled = !paging.cursor;
  } catch (err) {
    if (!current()) return;
    clearResult();
    showError(err);
  }
}

function clearResult() {
  paging = null;
  nextButton.disabled = true;
  status.textContent = "";
  show($("result-hint"), "");
  resultTable.tHead.replaceChildren();
  resultTable.tBodies[0].replaceChildren();
}

function renderResult(res) {
  const columns = res.columns ?? [];
  const numeric = columns.map((c) => numericType.test(c.type ?? ""));
  resultTable.tHead.replaceChildren(
    el("tr", {}, ...columns.map((c, i) => el("th", { scope: "col", title: c.type, className: numeric[i] ? "num" : "" }, c.name))));
  resultTable.tBodies[0].replaceChildren(
    ...(res.rows ?? []).map((row) => el("tr", {}, ...row.map((v, i) => cell(v, numeric[i])))));
}

function cell(value, numeric) {
  if (value === null || value === undefined) return el("td", {}, el("span", { className: "null" }, "NULL"));
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return el("td", { className: numeric ? "num" : "", title: text.length > 60 ? text : undefined }, text);
}

/** showError fills box (#sql-error) from an error body or ApiError; null hides it. */
function showError(err, box = $("sql-error")) {
  box.hidden = !err;
  if (!err) return;
  const retry = err.retryAfter || err.retry_after;
  box.querySelector(".error-kind").textContent = err.kind ?? "error";
  box.querySelector(".error-message").textContent = `${err.message}${retry ? ` Retry in ${Math.ceil(retry)} s.` : ""}`;
  show(box.querySelector(".error-hint"), err.hint ?? "");
}

// Following a table: POST /rest/tail answers its newest rows and a
// cursor, then, asked again with the cursor, waits (up to followWait) for
// rows after it. Rows show newest first; the oldest go past followKeep.
const followWait = 25;
const followKeep = 200;
let following = null; // {controller} of the follow running

async function follow() {
  const database = dbSelect.value;
  const table = chosenTable;
  if (!table) {
    showError({ kind: "validation_error", message: "no table is chosen", hint: "choose one in the list of tables" }, followError);
    return;
  }
  let filters = [];
  const text = followFilters.value.trim();
  if (text) {
    try {
      filters = JSON.parse(text);
    } catch (err) {
      showError({ kind: "validation_error", message: `the filters are not JSON: ${err.message}`, hint: 'write e.g. [{"column": "device_id", "op": "=", "value": 7}]' }, followError);
      return;
    }
    if (!Array.isArray(filters)) filters = [filters];
  }
  stopFollowing();
  showError(null, followError);
  const run = { controller: new AbortController() };
  following = run;
  followStart.disabled = true;
  followStop.disabled = false;
  followTable.tHead.replaceChildren();
  followTable.tBodies[0].replaceChildren();
  let cursor = "";
  let columns = null;
  let shown = 0;
  followStatus.textContent = `Following ${table}…`;
  while (following === run) {
    try {
      const body = { database, table, filters, wait_s: cursor ? followWait : 0 };
      if (cursor) body.cursor = cursor;
      const res = await api("POST", "/rest/tail", body, { signal: run.controller.signal });
      if (following !== run) return;
      if (!columns) {
        columns = res.columns ?? [];
        const numeric = columns.map((c) => numericType.test(c.type ?? ""));
        columns.numeric = numeric;
        followTable.tHead.replaceChildren(
          el("tr", {}, ...columns.map((c, i) => el("th", { scope: "col", title: c.type, className: numeric[i] ? "num" : "" }, c.name))));
      }
      const rows = res.rows ?? [];
      const tbody = followTable.tBodies[0];
      for (const old of tbody.querySelectorAll("tr.fresh")) old.classList.remove("fresh");
      // Rows come oldest first: each goes on top.
      for (const row of rows) {
        const tr = el("tr", { className: cursor ? "fresh" : "" }, ...row.map((v, i) => cell(v, columns.numeric[i])));
        tbody.prepend(tr);
      }
      while (tbody.rows.length > followKeep) tbody.lastElementChild.remove();
      shown += cursor ? rows.length : 0;
      cursor = res.next_cursor || cursor;
      followStatus.textContent = `Following ${table} · ${num(shown)} new rows · last look ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      if (following !== run) return;
      if (err.retryAfter) {
        followStatus.textContent = `Following ${table} · waiting ${Math.ceil(err.retryAfter)} s as the server asks`;
        await new Promise((r) => setTimeout(r, err.retryAfter * 1000));
        continue;
      }
      showError(err, followError);
      stopFollowing();
      followStatus.textContent = `Stopped following ${table}.`;
    }
  }
}

function stopFollowing() {
  if (!following) return;
  following.controller.abort();
  following = null;
  followStart.disabled = false;
  followStop.disabled = true;
  if (followStatus.textContent.startsWith("Following")) followStatus.textContent = "Stopped.";
}

async function downloadCSV() {
  const r = request();
  if (r.error) {
    showError(r.error);
    return;
  }
  showError(null);
  csvButton.disabled = true;
  try {
    await download({ sql: { database: r.database, sql: r.sql } });
    ctx?.notice("CSV download started: the server streams every row of the result to the file.");
  } catch (err) {
    showError(err);
  } finally {
    csvButton.disabled = false;
  }
}

dbSelect.addEventListener("change", () => {
  chosenTable = "";
  details.stop();
  showDetailHint();
  loadTables();
});
filter.addEventListener("input", applyFilter);
tablesList.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-table]");
  if (button) loadDetail(button.dataset.table);
});
runButton.addEventListener("click", run);
followStart.addEventListener("click", follow);
followStop.addEventListener("click", stopFollowing);
nextButton.addEventListener("click", nextPage);
csvButton.addEventListener("click", downloadCSV);
sqlText.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    run();
  }
});
maxRows.addEventListener("keydown", (event) => {
  if (event.key === "Enter") run();
});
