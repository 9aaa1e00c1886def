// The sandgate console. Every string shown here comes from backends, tools and model-written
// code, so the page only ever sets text (textContent, attributes through setAttribute on
// elements it made), never markup; the Content-Security-Policy allows no other script.
"use strict";

const main = document.getElementById("main");
let me = null;
let events = null;
const live = { onExecution: null, onBackends: null };

// --- small helpers ----------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// Text with `code` spans (as tool descriptions write them): the spans become <code>
// elements, made here; everything stays text, nothing is parsed as markup.
function inline(text) {
  return String(text).split("`").map((part, i) => (i % 2 === 1 && part ? el("code", {}, part) : part));
}

function plural(count, one, many) {
  return count + " " + (count === 1 ? one : many);
}

function show(...nodes) {
  main.replaceChildren(...nodes);
}

function badge(text) {
  return el("span", { class: "badge " + String(text) }, text);
}

function ms(value) {
  if (value === null || value === undefined) return "unfinished";
  return value < 10 ? value.toFixed(2) + " ms" : value.toFixed(1) + " ms";
}

function when(unixMs) {
  return new Date(unixMs).toLocaleString();
}

function kb(bytes) {
  return bytes < 1024 ? bytes + " B" : (bytes / 1024).toFixed(1) + " KB";
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  if (response.status === 401) {
    loginPage();
    throw new Error("log in first");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

function failure(error) {
  return el("p", { class: "error-text" }, String(error.message || error));
}

// --- login and routing --------------------------------------------------------------------

function loginPage() {
  if (events) { events.close(); events = null; }
  document.getElementById("who").textContent = "";
  const token = el("input", { type: "password", id: "token", placeholder: "bearer token", autocomplete: "off" });
  const message = el("p", { class: "error-text", id: "login-error" });
  const provider = el("p", { id: "oauth-login-place" });
  const form = el("form", { class: "login", id: "login" },
    el("h2", {}, "Log in"),
    provider,
    el("p", { class: "muted" }, "Enter a token from [[http.tokens]], or the one sandgate printed at its first start. It becomes a session cookie; the token is not kept."),
    token,
    el("button", { type: "submit", id: "login-button" }, "Log in"),
    message);
  // A link, not a script: the browser goes to the identity provider and comes back.
  fetch("/ui/login-options", { credentials: "same-origin" })
    .then((r) => r.json())
    .then((options) => {
      if (options.issuer) {
        provider.replaceChildren(el("a", { href: "/ui/oauth/start", id: "oauth-login", class: "button" }, "Log in with your identity provider"),
          el("span", { class: "muted" }, " (" + options.issuer + ")"));
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
    me = await api("/ui/api/me");
  } catch {
    return;
  }
  const who = document.getElementById("who");
  who.replaceChildren(me.user ? el("span", { id: "user" }, "user " + me.user + " · ") : "", "profile ", el("strong", { id: "profile" }, me.profile), me.admin ? " (admin)" : "");
  const banner = document.getElementById("config-problem");
  if (banner) banner.remove();
  if (me.config_problem) {
    document.body.prepend(el("p", { class: "error-text banner", id: "config-problem" }, me.config_problem.message));
  }
  if (me.login) {
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
  events.addEventListener("execution", (event) => { if (live.onExecution) live.onExecution(JSON.parse(event.data)); });
  events.addEventListener("backends", (event) => { if (live.onBackends) live.onBackends(JSON.parse(event.data)); });
}

function route() {
  if (!me) return;
  live.onExecution = null;
  live.onBackends = null;
  const hash = location.hash || "#/backends";
  const [page, arg] = hash.slice(2).split("/");
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.page === page);
  }
  const pages = { backends: backendsPage, tools: toolsPage, executions: executionsPage, playground: playgroundPage, stats: statsPage, credentials: credentialsPage, approvals: approvalsPage, pins: pinsPage };
  if (page === "executions" && arg) return executionPage(decodeURIComponent(arg));
  (pages[page] || backendsPage)();
}

globalThis.addEventListener("hashchange", route);
globalThis.addEventListener("DOMContentLoaded", start);

// --- backends ------------------------------------------------------------------------------

async function backendsPage() {
  const body = el("tbody", { id: "backends" });
  const render = (data) => {
    body.replaceChildren(...data.backends.map((b) => el("tr", { "data-backend": b.name },
      el("td", { class: "name" }, b.name),
      el("td", {}, badge(b.state)),
      el("td", {}, b.transport),
      el("td", {}, b.protocol_version || "—"),
      el("td", {}, b.tools + (b.tools_from_cache ? " (cached)" : "")),
      el("td", {}, b.restarts),
      el("td", {}, b.last_error || "",
        b.stderr ? el("details", {}, el("summary", {}, "stderr (" + plural(b.stderr.length, "line", "lines") + ")"), el("pre", {}, b.stderr.join("\n"))) : null))));
  };
  show(el("h2", {}, "Backends"), el("table", {},
    el("thead", {}, el("tr", {}, ["Backend", "State", "Transport", "Protocol", "Tools", "Restarts", "Last error"].map((h) => el("th", {}, h)))),
    body));
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
  const detail = el("div", { id: "tool-detail" }, el("p", { class: "muted" }, "Pick a tool to see its TypeScript declaration."));
  const query = el("input", { type: "search", id: "tool-search", placeholder: "search as search_tools ranks it" });
  const load = async () => {
    try {
      const found = await api("/ui/api/tools?q=" + encodeURIComponent(query.value));
      list.replaceChildren(...(found.results || []).map((t) => el("div", { "data-tool": t.name, on: { click: () => showTool(t.name, detail) } },
        el("div", { class: "name" }, t.name),
        el("div", { class: "muted" }, inline((t.description || "").split("\n")[0].slice(0, 160))))));
      if (!(found.results || []).length) list.replaceChildren(el("div", { class: "muted" }, "No tool matches."));
    } catch (error) {
      list.replaceChildren(failure(error));
    }
  };
  let timer = null;
  query.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 200); });
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
      info.example ? el("pre", {}, info.example) : null);
  } catch (error) {
    into.replaceChildren(failure(error));
  }
}

// --- executions ----------------------------------------------------------------------------

function executionRow(x) {
  return el("tr", { class: "link", "data-execution": x.id, on: { click: () => { location.hash = "#/executions/" + encodeURIComponent(x.id); } } },
    el("td", { class: "when" }, when(x.started_at_ms)),
    el("td", {}, el("a", { href: "#/executions/" + encodeURIComponent(x.id) }, x.id)),
    el("td", {}, x.profile),
    el("td", {}, x.tier),
    el("td", {}, badge(x.status)),
    el("td", {}, ms(x.duration_ms)),
    el("td", {}, x.calls));
}

async function executionsPage() {
  const status = el("select", { id: "filter-status" }, ["", "ok", "error", "cancelled"].map((s) => el("option", { value: s }, s || "any status")));
  const tier = el("select", { id: "filter-tier" }, ["", "json", "single_call", "sandbox", "introspection"].map((t) => el("option", { value: t }, t || "any tier")));
  const since = el("select", { id: "filter-since" }, [["", "any time"], ["3600000", "last hour"], ["86400000", "last day"]].map(([v, t]) => el("option", { value: v }, t)));
  const profile = el("input", { id: "filter-profile", placeholder: "profile", disabled: me.admin ? null : "disabled", value: me.admin ? "" : me.profile });
  const body = el("tbody", { id: "executions" });
  const matches = (x) => (!status.value || x.status === status.value) && (!tier.value || x.tier === tier.value)
    && (!profile.value || x.profile === profile.value);
  const load = async () => {
    const params = new URLSearchParams({ status: status.value, tier: tier.value, profile: me.admin ? profile.value : "" });
    if (since.value) params.set("since_ms", String(Date.now() - Number(since.value)));
    try {
      const data = await api("/ui/api/executions?" + params.toString());
      body.replaceChildren(...data.executions.map(executionRow));
    } catch (error) {
      body.replaceChildren(el("tr", {}, el("td", {}, failure(error))));
    }
  };
  for (const input of [status, tier, since, profile]) input.addEventListener("change", load);
  show(el("h2", {}, "Executions"), el("div", { class: "row" }, status, tier, since, profile, el("span", { class: "muted" }, "updated live")),
    el("table", {}, el("thead", {}, el("tr", {}, ["Started", "Id", "Profile", "Tier", "Status", "Duration", "Calls"].map((h) => el("th", {}, h)))), body));
  await load();
  live.onExecution = (x) => { if (matches(x)) body.prepend(executionRow(x)); };
}

async function executionPage(id) {
  show(el("h2", {}, "Execution ", id), el("p", { class: "muted" }, "Loading…"));
  try {
    const data = await api("/ui/api/execution?id=" + encodeURIComponent(id));
    show(el("h2", {}, "Execution ", el("span", { id: "execution-id" }, id)), executionDetail(data));
  } catch (error) {
    show(el("h2", {}, "Execution ", id), failure(error));
  }
}

function executionDetail(data) {
  const x = data.execution;
  const stored = data.stored || {};
  const full = el("div", { id: "full-output" });
  const parts = Object.keys(stored).map((part) => el("span", {},
    el("button", { class: "plain", "data-part": part, on: { click: async () => {
      const text = await (await fetch("/ui/api/output?id=" + encodeURIComponent(x.id) + "&part=" + part, { credentials: "same-origin" })).text();
      full.replaceChildren(el("h3", {}, "Full " + part + " (" + kb(stored[part]) + ")"), el("pre", { id: "full-" + part }, text));
    } } }, "View full " + part),
    " ",
    el("a", { href: "/ui/api/output?id=" + encodeURIComponent(x.id) + "&part=" + part + "&download=1", download: x.id + "-" + part + ".txt", "data-download": part }, "download"),
    "  "));
  return el("div", { class: "execution" },
    el("p", {}, badge(x.status), " ", x.tier, " · ", x.profile, " · ", ms(x.duration_ms), " · started ", when(x.started_at_ms),
      x.error_kind ? el("span", { class: "error-text" }, " · " + x.error_kind) : null),
    el("h3", {}, "Code"),
    codeView(x.code || "(the code was not kept)", x.error_line),
    el("h3", {}, "Timeline"),
    timeline(x.call_rows || [], x.duration_ms),
    el("h3", {}, "Result, logs and error, as the model was shown them"),
    el("pre", { id: "shown" }, x.shown || "(not kept: only the most recent executions keep it)"),
    parts.length ? el("h3", {}, "Stored full output") : null,
    parts.length ? el("p", {}, parts) : null,
    full);
}

function codeView(code, errorLine) {
  return el("pre", { class: "code", id: "code" }, code.split("\n").map((line, i) =>
    el("span", { class: "ln" + (errorLine === i + 1 ? " error-line" : ""), "data-line": i + 1 }, line + "\n")));
}

// A bar per call, placed by when it started and how long it took within the execution: calls
// that ran at the same time overlap on the time axis.
function timeline(calls, total) {
  if (!calls.length) return el("p", { class: "muted", id: "timeline" }, "No tool calls.");
  const end = Math.max(total || 0, ...calls.map((c) => (c.started_ms || 0) + (c.duration_ms || 0)), 0.001);
  const rows = calls.map((c, i) => {
    const start = c.started_ms || 0;
    const length = c.duration_ms === null || c.duration_ms === undefined ? end - start : c.duration_ms;
    const bar = el("div", {
      class: "tl-bar" + (c.ok ? "" : " failed") + (c.changed_state === false ? "" : " changes-state") + (c.duration_ms === null ? " unfinished" : ""),
      title: c.backend + "." + c.tool + " — " + ms(c.duration_ms) + " from +" + ms(start) + (c.error ? " — " + c.error : ""),
      "data-start": start, "data-end": start + length, "data-call": i,
    });
    bar.style.left = (100 * start / end) + "%";
    bar.style.width = Math.max(0.3, 100 * length / end) + "%";
    return el("div", { class: "tl-row" }, el("div", { class: "tl-label", title: c.backend + "." + c.tool }, c.backend + "." + c.tool),
      el("div", { class: "tl-track" }, bar));
  });
  return el("div", { class: "timeline", id: "timeline" }, rows,
    el("div", { class: "tl-axis" }, el("span", {}, "0 ms"), el("span", {}, ms(end))),
    el("div", { class: "legend" }, el("span", {}, "blue: succeeded"), el("span", {}, "red: failed"), el("span", {}, "outlined: may have changed state"), el("span", {}, "striped: unfinished")));
}

// --- playground ----------------------------------------------------------------------------

const EXAMPLE = `// Runs with your profile's tools, like call_tool_chain.
const [graph, echo] = await Promise.all([
  memory.read_graph({}),
  everything.echo({ message: "hello from the playground" }),
]);
console.log("entities:", graph.entities.length);
return { entities: graph.entities.length, echo };`;

function playgroundPage() {
  const code = el("textarea", { id: "playground-code", spellcheck: "false" });
  code.value = EXAMPLE;
  const out = el("div", { id: "playground-result" });
  const run = el("button", { id: "run" }, "Run");
  run.addEventListener("click", async () => {
    run.disabled = true;
    out.replaceChildren(el("p", { class: "muted" }, "Running…"));
    try {
      const answer = await post("/ui/api/run", { code: code.value });
      const s = answer.structured || {};
      const nodes = [el("h3", {}, answer.is_error ? "Error" : "Result"), el("pre", { id: "playground-text", class: answer.is_error ? "error-text" : "" }, answer.text)];
      if (s.logs && s.logs.length) nodes.push(el("h3", {}, "Logs"), el("pre", { id: "playground-logs" }, s.logs.map((l) => "[" + l.level + "] " + l.message).join("\n")));
      if (s.execution_id) {
        try {
          const data = await api("/ui/api/execution?id=" + encodeURIComponent(s.execution_id));
          nodes.push(el("h3", {}, "Execution ", el("a", { href: "#/executions/" + encodeURIComponent(s.execution_id), id: "playground-execution" }, s.execution_id)));
          nodes.push(el("h3", {}, "Timeline"), timeline(data.execution.call_rows || [], data.execution.duration_ms));
        } catch (error) {
          nodes.push(failure(error));
        }
      }
      out.replaceChildren(...nodes);
    } catch (error) {
      out.replaceChildren(failure(error));
    } finally {
      run.disabled = false;
    }
  });
  show(el("h2", {}, "Playground"), el("p", { class: "muted" }, "TypeScript against your profile's tools; each backend is an object, each tool an async function."), code, el("div", { class: "row" }, run), out);
}

// --- stats ---------------------------------------------------------------------------------

function barChart(id, rows, valueKeys, unit) {
  const width = 520, rowHeight = 22, labelWidth = 150;
  const max = Math.max(1, ...rows.flatMap((r) => valueKeys.map((k) => r[k] || 0)));
  const chart = svg("svg", { width, height: rows.length * rowHeight + 10, id });
  rows.forEach((r, i) => {
    chart.append(svg("text", { x: 0, y: i * rowHeight + 15 }, r.label));
    valueKeys.forEach((k, j) => {
      const w = Math.max(1, (width - labelWidth - 120) * (r[k] || 0) / max);
      chart.append(svg("rect", { class: j ? "p95" : "bar", x: labelWidth, y: i * rowHeight + 4 + j * 7, width: w, height: 7 }));
    });
    chart.append(svg("text", { x: width - 112, y: i * rowHeight + 15 }, valueKeys.map((k) => (r[k] || 0).toFixed(1)).join(" / ") + unit));
  });
  return el("div", { class: "chart" }, chart);
}

async function statsPage() {
  show(el("h2", {}, "Stats"), el("p", { class: "muted" }, "Loading…"));
  try {
    const data = await api("/ui/api/stats");
    const s = data.stats || { tiers: [], backends: [], executions: 0, bytes_saved: 0 };
    const minutes = data.per_minute || [];
    const peak = Math.max(1, ...minutes);
    const perMinute = svg("svg", { width: 600, height: 120, id: "per-minute" });
    minutes.forEach((n, i) => {
      const h = 100 * n / peak;
      perMinute.append(svg("rect", { class: "bar", x: i * 10, y: 105 - h, width: 8, height: Math.max(h, n ? 1 : 0) }));
    });
    perMinute.append(svg("text", { x: 0, y: 118 }, "60 min ago"), svg("text", { x: 598, y: 118, "text-anchor": "end" }, "now"));
    show(el("h2", {}, "Stats"),
      el("p", {}, s.executions + " executions on record · " + kb(s.bytes_saved) + " kept out of responses by shaping (stored whole)"),
      el("div", { class: "grid2" },
        el("div", {}, el("h3", {}, "Per tier: p50 / p95"), barChart("tiers", s.tiers.map((t) => ({ label: t.tier + " (" + t.count + ")", p50: t.p50_ms, p95: t.p95_ms })), ["p50", "p95"], " ms")),
        el("div", {}, el("h3", {}, "Per backend: p50 / p95"), barChart("backends-chart", s.backends.map((b) => ({ label: b.backend + " (" + b.calls + ")", p50: b.p50_ms, p95: b.p95_ms })), ["p50", "p95"], " ms"))),
      el("h3", {}, "Executions per minute, last hour"), el("div", { class: "chart" }, perMinute));
  } catch (error) {
    main.append(failure(error));
  }
}

// --- credentials ---------------------------------------------------------------------------

// A secret goes in once; the gateway never sends it back, so the page only says whether one is
// kept.
async function credentialsPage() {
  show(el("h2", {}, "Credentials"), el("p", { class: "muted" }, "Loading…"));
  let data;
  try {
    data = await api("/ui/api/credentials");
  } catch (error) {
    main.append(failure(error));
    return;
  }
  const intro = el("p", { class: "muted" }, data.kept
    ? "Your own secret for each backend that takes one. It is sealed before it is stored, sent only to that backend, and never shown again."
    : "This gateway keeps no credentials ([credentials] names no key).");
  const rows = data.backends.map((b) => {
    const secret = el("input", { type: "password", autocomplete: "off", placeholder: "new secret", "data-secret": b.backend });
    const message = el("span", { class: "muted", "data-message": b.backend });
    const save = el("button", { "data-save": b.backend, on: { click: async () => {
      try {
        await api("/ui/api/credentials?backend=" + encodeURIComponent(b.backend), {
          method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ secret: secret.value }) });
        secret.value = "";
        credentialsPage();
      } catch (error) {
        message.textContent = String(error.message || error);
      }
    } } }, "Save");
    const forget = b.set ? el("button", { class: "plain", "data-remove": b.backend, on: { click: async () => {
      try {
        await api("/ui/api/credentials?backend=" + encodeURIComponent(b.backend), { method: "DELETE" });
        credentialsPage();
      } catch (error) {
        message.textContent = String(error.message || error);
      }
    } } }, "Remove") : null;
    return el("tr", { "data-backend": b.backend },
      el("td", { class: "name" }, b.backend),
      el("td", {}, b.goes_in),
      el("td", { "data-state": b.backend }, b.set ? "kept since " + when(b.updated_at_ms) : "none"),
      el("td", {}, secret, save, forget, message));
  });
  show(el("h2", {}, "Credentials"), intro, el("table", { id: "credentials" },
    el("thead", {}, el("tr", {}, ["Backend", "Sent in", "Yours", "Set"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows)));
}

// --- approvals -----------------------------------------------------------------------------

// The calls that wait for a person's yes, oldest first; the answer reaches the waiting call at
// once.
async function approvalsPage() {
  show(el("h2", {}, "Approvals"), el("p", { class: "muted" }, "Loading…"));
  let data;
  try {
    data = await api("/ui/api/approvals");
  } catch (error) {
    main.append(failure(error));
    return;
  }
  const answer = (q, approve, message) => async () => {
    try {
      await api("/ui/api/approvals?id=" + encodeURIComponent(q.id), {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ approve }) });
      approvalsPage();
    } catch (error) {
      message.textContent = String(error.message || error);
    }
  };
  const rows = data.approvals.map((q) => {
    const message = el("span", { class: "muted" });
    return el("tr", { "data-approval": q.id },
      el("td", { class: "name" }, q.tool),
      el("td", {}, el("pre", { class: "arguments" }, q.arguments)),
      el("td", {}, q.rule),
      el("td", {}, q.profile + " (" + q.asker.slice(0, 24) + ")"),
      el("td", {}, q.execution_id + (q.line ? ", line " + q.line : "")),
      el("td", {}, when(q.asked_at_ms) + ", " + q.expires_in_s + " s left"),
      el("td", {},
        el("button", { "data-approve": q.id, on: { click: answer(q, true, message) } }, "Approve"),
        el("button", { class: "plain", "data-deny": q.id, on: { click: answer(q, false, message) } }, "Deny"),
        message));
  });
  const intro = el("p", { class: "muted" }, rows.length
    ? "Calls from scripts that wait for a person's approval. Approve runs the call; Deny makes it throw ApprovalDenied in the script."
    : "No call waits for approval.");
  // Who may say yes is never who asked: the page says which questions this login answers.
  const who = el("p", { id: "you-answer" }, "You answer: " + data.you_answer);
  show(el("h2", {}, "Approvals"), intro, who,
    el("button", { class: "plain", id: "refresh-approvals", on: { click: approvalsPage } }, "Refresh"),
    el("table", { id: "approvals" },
      el("thead", {}, el("tr", {}, ["Tool", "Arguments", "Rule", "Asked by", "Execution", "Asked", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)));
}

// --- pins ----------------------------------------------------------------------------------

// Every pinned tool definition and every change held for review (admins): a held one opens its
// diff, pinned on the left and served now on the right, and is accepted or rejected there.
async function pinsPage() {
  show(el("h2", {}, "Pins"), el("p", { class: "muted" }, "Loading…"));
  let data;
  try {
    data = await api("/ui/api/pins");
  } catch (error) {
    show(el("h2", {}, "Pins"), failure(error));
    return;
  }
  const held = data.pins.filter((p) => p.state === "held");
  const findings = (p) => p.findings.map((f) => f.severity + " " + f.kind + " in " + f.place).join("; ");
  const rows = data.pins.map((p) => el("tr", { "data-pin": p.name },
    el("td", { class: "name" }, p.state === "held"
      ? el("a", { href: "#/pins", on: { click: (event) => { event.preventDefault(); pinDiff(p.name); } } }, p.name)
      : p.name),
    el("td", {}, p.state === "held" ? badge("held (" + p.held + ")") : "pinned (" + p.pinned_by + ")"),
    el("td", {}, p.rejected_by ? "rejected by " + p.rejected_by : ""),
    el("td", {}, findings(p))));
  const intro = el("p", { class: "muted" }, held.length
    ? plural(held.length, "tool is", "tools are") + " held for review: agents see the pinned definition (or nothing, for a new tool), and calls fail until you decide. Open one to see what changed."
    : "Nothing is held. A tool is pinned the first time it is seen; a later change to its definition is held here.");
  show(el("h2", {}, "Pins"), intro, el("div", { id: "pin-diff" }),
    el("table", { id: "pins" },
      el("thead", {}, el("tr", {}, ["Tool", "State", "Decided", "Findings"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)));
}

async function pinDiff(name) {
  const into = document.getElementById("pin-diff");
  into.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  let diff;
  try {
    diff = await api("/ui/api/pins/diff?tool=" + encodeURIComponent(name));
  } catch (error) {
    into.replaceChildren(failure(error));
    return;
  }
  const message = el("span", { class: "muted" });
  const decide = (accept) => async () => {
    try {
      await api("/ui/api/pins?tool=" + encodeURIComponent(name), {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ accept }) });
      pinsPage();
    } catch (error) {
      message.textContent = String(error.message || error);
    }
  };
  // Side by side: a line only in the pinned definition on the left, one only served now on
  // the right, a line in both on both.
  const left = [], right = [];
  for (const line of diff.lines) {
    if (line.side !== "served") left.push(el("div", { class: line.side === "pinned" ? "removed" : "" }, line.text || " "));
    if (line.side !== "pinned") right.push(el("div", { class: line.side === "served" ? "added" : "" }, line.text || " "));
  }
  into.replaceChildren(
    el("h3", {}, diff.name + ": held (" + diff.held + ")" + (diff.rejected_by ? ", rejected by " + diff.rejected_by : "")),
    el("ul", { id: "pin-findings" }, ...diff.findings.map((f) => el("li", {}, f.severity + " " + f.kind + " in " + f.place + ": " + f.excerpt))),
    el("table", { id: "pin-sides" },
      el("thead", {}, el("tr", {}, el("th", {}, diff.pinned ? "Pinned" : "Pinned (none: a new tool)"), el("th", {}, "Served now"))),
      el("tbody", {}, el("tr", {}, el("td", {}, el("pre", {}, ...left)), el("td", {}, el("pre", {}, ...right))))),
    el("div", { class: "row" },
      el("button", { id: "pin-accept", on: { click: decide(true) } }, "Accept"),
      el("button", { class: "plain", id: "pin-reject", on: { click: decide(false) } }, "Reject"),
      message));
}
