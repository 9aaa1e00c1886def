// The sandgate console. Every string shown here comes from backends, tools and model-written
// code, so the page only ever sets text (textContent, attributes through setAttribute on
// elements it made), never markup; the Content-Security-Policy allows no other script.
//
// This module signs in and routes between the pages; it has the catalog's pages (backends and
// tools) itself, and the others from `runs.js` and `access.js`.
import { api, badge, el, failure, inline, live, main, plural, session, show } from "./ui.js";
import { executionPage, executionsPage, playgroundPage, statsPage } from "./runs.js";
import { approvalsPage, credentialsPage, pinsPage } from "./access.js";

let events = null;
session.signedOut = () => loginPage();

// --- login and routing --------------------------------------------------------------------

function loginPage() {
  if (events) {
    events.close();
    events = null;
  }
  document.getElementById("who").textContent = "";
  const token = el("input", { type: "password", id: "token", placeholder: "bearer token", autocomplete: "off" });
  const message = el("p", { class: "error-text", id: "login-error" });
  const provider = el("p", { id: "oauth-login-place" });
  const form = el(
    "form",
    { class: "login", id: "login" },
    el("h2", {}, "Log in"),
    provider,
    el(
      "p",
      { class: "muted" },
      "Enter a token from [[http.tokens]], or the one sandgate printed at its first start. It becomes a session cookie; the token is not kept.",
    ),
    token,
    el("button", { type: "submit", id: "login-button" }, "Log in"),
    message,
  );
  // A link, not a script: the browser goes to the identity provider and comes back.
  fetch("/ui/login-options", { credentials: "same-origin" })
    .then((r) => r.json())
    .then((options) => {
      if (options.issuer) {
        provider.replaceChildren(
          el(
            "a",
            { href: "/ui/oauth/start", id: "oauth-login", class: "button" },
            "Log in with your identity provider",
          ),
          el("span", { class: "muted" }, " (" + options.issuer + ")"),
        );
      }
    })
    .catch(() => {});
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // Not through api(): its answer to a 401 is to draw this page again, which would leave
    // the message in a form no longer on the page.
    try {
      const response = await fetch("/ui/login", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token: token.value }),
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        message.textContent = body.error || ("the gateway answered HTTP " + response.status);
        token.select();
        return;
      }
      token.value = "";
      await start();
    } catch (error) {
      message.textContent = String(error.message || error);
    }
  });
  show(form);
}

async function start() {
  try {
    session.me = await api("/ui/api/me");
  } catch {
    return;
  }
  const who = document.getElementById("who");
  who.replaceChildren(
    session.me.user ? el("span", { id: "user" }, "user " + session.me.user + " · ") : "",
    "profile ",
    el("strong", { id: "profile" }, session.me.profile),
    session.me.admin ? " (admin)" : "",
  );
  const banner = document.getElementById("config-problem");
  if (banner) banner.remove();
  if (session.me.config_problem) {
    document.body.prepend(
      el("p", { class: "error-text banner", id: "config-problem" }, session.me.config_problem.message),
    );
  }
  if (session.me.login) {
    who.append(" ", el("button", { class: "plain", id: "logout", on: { click: logout } }, "Log out"));
  }
  listen();
  route();
}

async function logout() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  loginPage();
}

function listen() {
  if (events) events.close();
  events = new EventSource("/ui/api/events");
  events.addEventListener("execution", (event) => {
    if (live.onExecution) live.onExecution(JSON.parse(event.data));
  });
  events.addEventListener("backends", (event) => {
    if (live.onBackends) live.onBackends(JSON.parse(event.data));
  });
}

function route() {
  if (!session.me) return;
  live.onExecution = null;
  live.onBackends = null;
  const hash = location.hash || "#/backends";
  const [page, arg] = hash.slice(2).split("/");
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.page === page);
  }
  const pages = {
    backends: backendsPage,
    tools: toolsPage,
    executions: executionsPage,
    playground: playgroundPage,
    stats: statsPage,
    credentials: credentialsPage,
    approvals: approvalsPage,
    pins: pinsPage,
  };
  if (page === "executions" && arg) return executionPage(decodeURIComponent(arg));
  (pages[page] || backendsPage)();
}

globalThis.addEventListener("hashchange", route);
globalThis.addEventListener("DOMContentLoaded", start);

// --- backends ------------------------------------------------------------------------------

async function backendsPage() {
  const body = el("tbody", { id: "backends" });
  const render = (data) => {
    body.replaceChildren(
      ...data.backends.map((b) =>
        el(
          "tr",
          { "data-backend": b.name },
          el("td", { class: "name" }, b.name),
          el("td", {}, badge(b.state)),
          el("td", {}, b.transport),
          el("td", {}, b.protocol_version || "—"),
          el("td", {}, b.tools + (b.tools_from_cache ? " (cached)" : "")),
          el("td", {}, b.restarts),
          el(
            "td",
            {},
            b.last_error || "",
            b.stderr
              ? el(
                "details",
                {},
                el("summary", {}, "stderr (" + plural(b.stderr.length, "line", "lines") + ")"),
                el("pre", {}, b.stderr.join("\n")),
              )
              : null,
          ),
        )
      ),
    );
  };
  show(
    el("h2", {}, "Backends"),
    el(
      "table",
      {},
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["Backend", "State", "Transport", "Protocol", "Tools", "Restarts", "Last error"].map((h) => el("th", {}, h)),
        ),
      ),
      body,
    ),
  );
  try {
    render(await api("/ui/api/backends"));
    live.onBackends = render;
  } catch (error) {
    main.append(failure(error));
  }
}

// --- tools ---------------------------------------------------------------------------------

function toolsPage() {
  const list = el("div", { class: "tool-list", id: "tool-list" });
  const detail = el(
    "div",
    { id: "tool-detail" },
    el("p", { class: "muted" }, "Pick a tool to see its TypeScript declaration."),
  );
  const query = el("input", { type: "search", id: "tool-search", placeholder: "search as search_tools ranks it" });
  const load = async () => {
    try {
      const found = await api("/ui/api/tools?q=" + encodeURIComponent(query.value));
      list.replaceChildren(
        ...(found.results || []).map((t) =>
          el(
            "div",
            { "data-tool": t.name, on: { click: () => showTool(t.name, detail) } },
            el("div", { class: "name" }, t.name),
            el("div", { class: "muted" }, inline((t.description || "").split("\n")[0].slice(0, 160))),
          )
        ),
      );
      if (!(found.results || []).length) list.replaceChildren(el("div", { class: "muted" }, "No tool matches."));
    } catch (error) {
      list.replaceChildren(failure(error));
    }
  };
  let timer = null;
  query.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(load, 200);
  });
  show(el("h2", {}, "Tools"), el("div", { class: "row" }, query), el("div", { class: "tools" }, list, detail));
  load();
}

async function showTool(name, into) {
  try {
    const info = await api("/ui/api/tool?name=" + encodeURIComponent(name));
    into.replaceChildren(
      el("h3", {}, info.name || name),
      el("p", { class: "muted", id: "tool-description" }, inline(info.description || "")),
      el("pre", { id: "declaration" }, info.declaration || info.signature || ""),
      info.example ? el("h3", {}, "Example") : null,
      info.example ? el("pre", {}, info.example) : null,
    );
  } catch (error) {
    into.replaceChildren(failure(error));
  }
}
