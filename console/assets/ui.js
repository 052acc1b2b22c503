// Small helpers the pages share: building DOM from data (always as text,
// never as markup), human units, two-click confirmation, polling and the
// polled list pages.

import { api } from "./api.js";

/**
 * el makes an element: el("td", {className: "num"}, "42"). props are set
 * as properties (className, title, type, hidden...) except dataset
 * entries and aria-* names, set as attributes. children are nodes or
 * strings (added as text).
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("aria-") || key === "role" || key === "scope") node.setAttribute(key, String(value));
    else node[key] = value;
  }
  node.append(...children.flat().filter((c) => c !== undefined && c !== null && c !== false));
  return node;
}

/** show sets an element's text and hides it when the text is empty. */
export function show(node, text) {
  node.textContent = text ?? "";
  node.hidden = !text;
}

/** errorText is one line for an ApiError or any other error. */
export function errorText(err) {
  const hint = err?.hint ? ` (${err.hint})` : "";
  const retry = err?.retryAfter ? ` Retry in ${Math.ceil(err.retryAfter)} s.` : "";
  return `${err?.message ?? err}${hint}${retry}`;
}

/**
 * syncRows makes tbody hold one row per item, in order, keyed by
 * key(item): existing rows are kept and updated with fill(tr, item), so
 * that a refresh keeps their buttons (and a pending confirmation, and
 * focus); rows of items gone are removed. make(item) builds a new row.
 * With no items, tbody holds one row saying empty.
 */
export function syncRows(tbody, items, { key, make, fill, empty, columns }) {
  const old = new Map();
  for (const tr of tbody.rows) if (tr.dataset.key !== undefined) old.set(tr.dataset.key, tr);
  const rows = items.map((item) => {
    const k = String(key(item));
    let tr = old.get(k);
    old.delete(k);
    if (!tr) {
      tr = make(item);
      tr.dataset.key = k;
    }
    fill(tr, item);
    return tr;
  });
  if (rows.length === 0) rows.push(emptyRow(columns, empty));
  // Move only what moved: a row taken out of the document loses focus.
  const keep = new Set(rows);
  for (const tr of [...tbody.rows]) if (!keep.has(tr)) tr.remove();
  rows.forEach((tr, i) => {
    if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] ?? null);
  });
}

/**
 * shortID shortens a session or transfer id for a table: its first 8
 * characters (in a cluster, the replica's prefix) and its last 4.
 */
export function shortID(id) {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

/**
 * copyText puts text on the clipboard, or throws. Pages served over plain
 * HTTP from another host than localhost have no clipboard API: there a
 * selected, hidden text area is copied instead.
 */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el("textarea", { value: text, readOnly: true, className: "visually-hidden" });
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  if (!copied) throw new Error("the browser did not copy");
}

/** emptyRow is a table row spanning columns that says text. */
export function emptyRow(columns, text) {
  return el("tr", { className: "empty" }, el("td", { colSpan: columns }, text));
}

/**
 * setCells sets the text of a row's first cells, in order; a null leaves
 * its cell as it is (one that holds more than text).
 */
export function setCells(tr, texts) {
  texts.forEach((text, i) => {
    if (text !== null && tr.cells[i].textContent !== text) tr.cells[i].textContent = text;
  });
}

/**
 * confirmable makes a button act on a second click within 5 s; the first
 * one changes its text to confirm, Escape takes that back. setLabels changes both texts (and
 * cancels a pending confirmation, so that what the button says is always
 * what it does).
 */
export function confirmable(button, { label, confirm, action }) {
  let timer = 0;
  const cancel = () => {
    clearTimeout(timer);
    timer = 0;
    button.textContent = label;
    button.classList.remove("confirming");
  };
  button.addEventListener("click", async () => {
    if (!timer) {
      button.textContent = confirm;
      button.classList.add("confirming");
      timer = setTimeout(cancel, 5000);
      return;
    }
    cancel();
    button.disabled = true;
    try {
      await action();
    } finally {
      button.disabled = false;
    }
  });
  button.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && timer) cancel();
  });
  cancel();
  return {
    setLabels(newLabel, newConfirm) {
      if (newLabel === label && newConfirm === confirm) return;
      label = newLabel;
      confirm = newConfirm;
      cancel();
    },
  };
}

/**
 * poll calls fn now and then every ms after the last call ended, while
 * the page is visible (and at once when it becomes visible again). It
 * returns stop, and now, which calls fn at once unless a call is under
 * way (one request in flight, however often it is asked) and starts the
 * wait for the next from its end.
 */
export function poll(fn, ms) {
  let timer = 0;
  let running = false;
  let stopped = false;
  const tick = async () => {
    clearTimeout(timer);
    if (stopped || running) return;
    if (document.visibilityState === "visible") {
      running = true;
      try {
        await fn();
      } catch {
        // fn reports its own errors; the next tick tries again.
      }
      running = false;
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  const visible = () => {
    if (document.visibilityState === "visible") tick();
  };
  document.addEventListener("visibilitychange", visible);
  tick();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", visible);
    },
    now: tick,
  };
}

/**
 * latest numbers a page's requests: begin() returns a check that is true
 * only while no later request began and the page did not stop, so that a
 * slow answer never overwrites a newer one.
 */
export function latest() {
  let n = 0;
  return {
    begin() {
      const mine = ++n;
      return () => mine === n;
    },
    stop() {
      n++;
    },
  };
}

const numberFormat = new Intl.NumberFormat();

/** num formats a count with digit grouping; "–" for a missing value. */
export function num(n) {
  return typeof n === "number" ? numberFormat.format(n) : "–";
}

/** bytes formats a byte count in binary units: "12.1 KiB". */
export function bytes(n) {
  if (typeof n !== "number") return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${units[i]}`;
}

/** span formats a duration in seconds: "42 s", "5 min", "2 h 5 min", "3 d 4 h". */
export function span(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** relative says how far a time is from now: "12 s ago", "in 5 min". */
export function relative(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "–";
  const diff = (t - now) / 1000;
  if (Math.abs(diff) < 1) return "now";
  return diff < 0 ? `${span(-diff)} ago` : `in ${span(diff)}`;
}

/** age is the time since iso: "5 min". */
export function age(iso, now = Date.now()) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "–" : span((now - t) / 1000);
}

/** timeOfDay formats a time (a Date or RFC 3339 text) as the local 24-hour time: "21:05:09". */
export function timeOfDay(t) {
  return new Date(t).toLocaleTimeString([], { hour12: false });
}

/** dateTime formats a time (a Date or RFC 3339 text) as the local date and 24-hour time. */
export function dateTime(t) {
  return new Date(t).toLocaleString([], { dateStyle: "medium", timeStyle: "medium", hour12: false });
}

/**
 * listPage is a page that shows the list GET path answers (under key),
 * refreshed every ms while shown: it returns the page's start(ctx), stop()
 * and reset(), load() to refresh at once, refresh() to do so through the
 * poll (none while one is in flight), and notice(text, isError).
 * render(items, answer) fills table; what names the list in failure
 * notices.
 */
export function listPage({ path, key, every, table, updated, what, render }) {
  const requests = latest();
  let ctx = null;
  let polling = null;
  let failed = false; // the last refresh failed, and said so in the notice
  async function load() {
    const current = requests.begin();
    try {
      const data = await api("GET", path);
      if (!current()) return;
      render(data?.[key] ?? [], data ?? {});
      updated.textContent = `Updated ${timeOfDay(Date.now())}`;
      if (failed) ctx.notice("");
      failed = false;
    } catch (err) {
      if (!current()) return;
      failed = true;
      ctx.notice(`${what} not refreshed: ${errorText(err)}`, true);
    }
  }
  return {
    start(c) {
      ctx = c;
      polling = poll(load, every);
    },
    stop() {
      polling?.stop();
      polling = null;
      requests.stop();
    },
    reset() {
      failed = false;
      table.tBodies[0].replaceChildren();
      updated.textContent = "";
    },
    load,
    refresh: () => polling?.now(),
    notice: (text, isError) => ctx?.notice(text, isError),
  };
}
