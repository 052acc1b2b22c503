// The console's shell: signing in and out, the header, and hash routing
// between the pages (#/overview, #/sessions, #/transfers, #/data). Each
// page module fills its own section of index.html:
//
//   start(ctx)  the page is shown: load and start refreshing
//   stop()      the page is left: stop timers, ignore answers in flight
//   reset()     the operator signed out: forget everything shown

import { api, token, onUnauthorized } from "./api.js";
import { errorText, show } from "./ui.js";
import * as overview from "./pages/overview.js";
import * as sessions from "./pages/sessions.js";
import * as transfers from "./pages/transfers.js";
import * as data from "./pages/data.js";

const pages = {
  overview: { module: overview, title: "Overview" },
  sessions: { module: sessions, title: "Sessions", admin: true },
  transfers: { module: transfers, title: "Transfers" },
  data: { module: data, title: "Data" },
};

const $ = (id) => document.getElementById(id);

let me = null; // GET /console/api/me of the signed-in operator
let current = ""; // the shown page's name

const ctx = {
  get me() {
    return me;
  },
  /**
   * notice reports what happened: an error above the page, or (when not
   * isError) to screen readers only, since the page shows the outcome
   * itself (a row gone, a state changed). "" clears it.
   */
  notice(text, isError = false) {
    const n = $("notice");
    n.textContent = text;
    n.className = isError && text ? "notice" : "visually-hidden";
  },
};

function leavePage() {
  if (current) pages[current].module.stop();
  current = "";
  for (const name of Object.keys(pages)) $(`page-${name}`).hidden = true;
  ctx.notice("");
}

/** signOut forgets the token and everything shown, and asks for a token. */
function signOut(message = "") {
  leavePage();
  token.clear();
  me = null;
  for (const p of Object.values(pages)) p.module.reset();
  $("nav").hidden = true;
  $("user").hidden = true;
  $("whoami").textContent = "";
  $("version").textContent = "";
  $("signin-view").hidden = false;
  $("token").value = "";
  show($("signin-error"), message);
  document.title = "Sign in · lakegate console";
  $("token").focus();
}

/**
 * signIn checks the stored token with GET /console/api/me and shows the
 * console; fromForm says the token was just typed (else it is a reload's).
 */
async function signIn(fromForm) {
  try {
    me = await api("GET", "/console/api/me", undefined, { quiet401: true });
  } catch (err) {
    if (err.status === 401 || err.status === 403) {
      signOut(fromForm ? errorText(err) : "session expired or token refused");
    } else {
      $("signin-view").hidden = false;
      show($("signin-error"), errorText(err));
    }
    return;
  }
  $("signin-view").hidden = true;
  $("token").value = "";
  show($("signin-error"), "");
  $("whoami").textContent = me.roles?.length ? `${me.subject} · ${me.roles.join(", ")}` : me.subject;
  $("version").textContent = me.version ?? "";
  $("nav-sessions").hidden = !me.admin;
  $("nav").hidden = false;
  $("user").hidden = false;
  route();
}

/** route shows the page the location's hash names, the overview when it names none. */
function route() {
  if (!me) return;
  let name = location.hash.replace(/^#\/?/, "");
  if (!pages[name] || (pages[name].admin && !me.admin)) {
    name = "overview";
    history.replaceState(null, "", "#/overview");
  }
  if (name === current) return;
  leavePage();
  current = name;
  $(`page-${name}`).hidden = false;
  for (const other of Object.keys(pages)) {
    const link = $(`nav-${other}`);
    if (other === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${pages[name].title} · lakegate console`;
  pages[name].module.start(ctx);
}

onUnauthorized(() => {
  if (me) signOut("session expired or token refused");
});

$("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("token").value.trim().replace(/^Bearer\s+/i, "");
  if (!value) {
    show($("signin-error"), "paste a token first");
    return;
  }
  token.set(value);
  signIn(true);
});

// Enter signs in (a token is one line); Shift+Enter still breaks a line.
$("token").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("signin-form").requestSubmit();
  }
});

$("signout").addEventListener("click", () => signOut());
// A click on the tab already shown refreshes its page now rather than at
// its next poll: the hash does not change, so no hashchange comes.
for (const name of Object.keys(pages)) {
  $(`nav-${name}`).addEventListener("click", () => {
    if (name === current) pages[name].module.refresh?.();
  });
}
window.addEventListener("hashchange", route);

if (token.get()) signIn(false);
else signOut();
