// The server's JSON routes, called with the bearer token of this tab.
//
// The token lives only in sessionStorage (this tab, until it closes or the
// operator signs out): never in localStorage, a cookie or a URL.

const tokenKey = "lakegate.token";

export const token = {
  get: () => sessionStorage.getItem(tokenKey),
  set: (value) => sessionStorage.setItem(tokenKey, value),
  clear: () => sessionStorage.removeItem(tokenKey),
};

/** ApiError is an error answer: {"error": {kind, message, hint, retry_after}}. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `the server answered ${status}`);
    this.status = status;
    this.kind = body?.kind || (status ? `http_${status}` : "network");
    this.hint = body?.hint || "";
    this.retryAfter = body?.retry_after || 0;
  }
}

let unauthorized = () => {};

/** onUnauthorized sets what happens when any call is answered 401. */
export function onUnauthorized(fn) {
  unauthorized = fn;
}

/**
 * api sends one request and returns its JSON answer, or throws ApiError.
 * A 401 also calls the onUnauthorized handler, unless quiet401 is set
 * (the sign-in form reports it itself).
 */
export async function api(method, path, body, { quiet401 = false, signal } = {}) {
  const headers = { Accept: "application/json", Authorization: `Bearer ${token.get() ?? ""}` };
  const init = { method, headers, cache: "no-store", credentials: "omit", signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    if (signal?.aborted) throw new ApiError(0, { kind: "aborted", message: "stopped" });
    throw new ApiError(0, { kind: "network", message: "the server did not answer", hint: "check that it runs and that this page can reach it" });
  }
  const text = await readBounded(res);
  let data = null;
  try {
    data = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's error page): the status says enough.
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data?.error);
    if (res.status === 401 && !quiet401) unauthorized(err);
    throw err;
  }
  return data;
}

/** maxAnswer bounds, in bytes, what a page reads of one answer. */
const maxAnswer = 16 << 20;

/**
 * readBounded reads res's body as text, at most maxAnswer bytes: a larger
 * answer (a page of very wide rows) is cut off and refused, never held.
 */
async function readBounded(res) {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxAnswer) {
      await reader.cancel();
      throw new ApiError(0, {
        kind: "too_large",
        message: `the answer is larger than ${maxAnswer >> 20} MiB`,
        hint: "ask for fewer rows per page, or download the whole result as CSV",
      });
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

/**
 * download asks for a single-use download URL and follows it with a link
 * click: the server answers with Content-Disposition: attachment, so the
 * browser streams the file to disk and the page stays. body is
 * {"transfer": id} or {"sql": {database, sql}}.
 */
export async function download(body) {
  const { url } = await api("POST", "/console/api/downloads", body);
  if (typeof url !== "string" || !url.startsWith("/console/download/")) {
    throw new ApiError(500, { kind: "internal", message: "the download URL is not one of this server's" });
  }
  const a = document.createElement("a");
  a.href = url;
  a.download = "";
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
}
