// The console's pages about runs: executions (a list that follows the server's events, and one
// execution's code, calls and result), the playground, and the stats.
import { api, badge, el, failure, kb, live, main, ms, post, session, show, svg, when } from "./ui.js";

// --- executions ----------------------------------------------------------------------------

function executionRow(x) {
  return el(
    "tr",
    {
      class: "link",
      "data-execution": x.id,
      on: {
        click: () => {
          location.hash = "#/executions/" + encodeURIComponent(x.id);
        },
      },
    },
    el("td", { class: "when" }, when(x.started_at_ms)),
    el("td", {}, el("a", { href: "#/executions/" + encodeURIComponent(x.id) }, x.id)),
    el("td", {}, x.profile),
    el("td", {}, x.tier),
    el("td", {}, badge(x.status)),
    el("td", {}, ms(x.duration_ms)),
    el("td", {}, x.calls),
  );
}

export async function executionsPage() {
  const status = el(
    "select",
    { id: "filter-status" },
    ["", "ok", "error", "cancelled"].map((s) => el("option", { value: s }, s || "any status")),
  );
  const tier = el(
    "select",
    { id: "filter-tier" },
    ["", "json", "single_call", "sandbox", "introspection"].map((t) => el("option", { value: t }, t || "any tier")),
  );
  const since = el(
    "select",
    { id: "filter-since" },
    [["", "any time"], ["3600000", "last hour"], ["86400000", "last day"]].map(([v, t]) =>
      el("option", { value: v }, t)
    ),
  );
  const profile = el("input", {
    id: "filter-profile",
    placeholder: "profile",
    disabled: session.me.admin ? null : "disabled",
    value: session.me.admin ? "" : session.me.profile,
  });
  const body = el("tbody", { id: "executions" });
  const matches = (x) =>
    (!status.value || x.status === status.value) && (!tier.value || x.tier === tier.value) &&
    (!profile.value || x.profile === profile.value);
  const load = async () => {
    const params = new URLSearchParams({
      status: status.value,
      tier: tier.value,
      profile: session.me.admin ? profile.value : "",
    });
    if (since.value) params.set("since_ms", String(Date.now() - Number(since.value)));
    try {
      const data = await api("/ui/api/executions?" + params.toString());
      body.replaceChildren(...data.executions.map(executionRow));
    } catch (error) {
      body.replaceChildren(el("tr", {}, el("td", {}, failure(error))));
    }
  };
  for (const input of [status, tier, since, profile]) input.addEventListener("change", load);
  show(
    el("h2", {}, "Executions"),
    el("div", { class: "row" }, status, tier, since, profile, el("span", { class: "muted" }, "updated live")),
    el(
      "table",
      {},
      el(
        "thead",
        {},
        el("tr", {}, ["Started", "Id", "Profile", "Tier", "Status", "Duration", "Calls"].map((h) => el("th", {}, h))),
      ),
      body,
    ),
  );
  await load();
  live.onExecution = (x) => {
    if (matches(x)) body.prepend(executionRow(x));
  };
}

export async function executionPage(id) {
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
  const parts = Object.keys(stored).map((part) =>
    el(
      "span",
      {},
      el("button", {
        class: "plain",
        "data-part": part,
        on: {
          click: async () => {
            const text = await (await fetch("/ui/api/output?id=" + encodeURIComponent(x.id) + "&part=" + part, {
              credentials: "same-origin",
            })).text();
            full.replaceChildren(
              el("h3", {}, "Full " + part + " (" + kb(stored[part]) + ")"),
              el("pre", { id: "full-" + part }, text),
            );
          },
        },
      }, "View full " + part),
      " ",
      el("a", {
        href: "/ui/api/output?id=" + encodeURIComponent(x.id) + "&part=" + part + "&download=1",
        download: x.id + "-" + part + ".txt",
        "data-download": part,
      }, "download"),
      "  ",
    )
  );
  return el(
    "div",
    { class: "execution" },
    el(
      "p",
      {},
      badge(x.status),
      " ",
      x.tier,
      " · ",
      x.profile,
      " · ",
      ms(x.duration_ms),
      " · started ",
      when(x.started_at_ms),
      x.error_kind ? el("span", { class: "error-text" }, " · " + x.error_kind) : null,
    ),
    el("h3", {}, "Code"),
    codeView(x.code || "(the code was not kept)", x.error_line),
    el("h3", {}, "Timeline"),
    timeline(x.call_rows || [], x.duration_ms),
    el("h3", {}, "Result, logs and error, as the model was shown them"),
    el("pre", { id: "shown" }, x.shown || "(not kept: only the most recent executions keep it)"),
    parts.length ? el("h3", {}, "Stored full output") : null,
    parts.length ? el("p", {}, parts) : null,
    full,
  );
}

function codeView(code, errorLine) {
  return el(
    "pre",
    { class: "code", id: "code" },
    code.split("\n").map((line, i) =>
      el("span", { class: "ln" + (errorLine === i + 1 ? " error-line" : ""), "data-line": i + 1 }, line + "\n")
    ),
  );
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
      class: "tl-bar" + (c.ok ? "" : " failed") + (c.changed_state === false ? "" : " changes-state") +
        (c.duration_ms === null ? " unfinished" : ""),
      title: c.backend + "." + c.tool + " — " + ms(c.duration_ms) + " from +" + ms(start) +
        (c.error ? " — " + c.error : ""),
      "data-start": start,
      "data-end": start + length,
      "data-call": i,
    });
    bar.style.left = (100 * start / end) + "%";
    bar.style.width = Math.max(0.3, 100 * length / end) + "%";
    return el(
      "div",
      { class: "tl-row" },
      el("div", { class: "tl-label", title: c.backend + "." + c.tool }, c.backend + "." + c.tool),
      el("div", { class: "tl-track" }, bar),
    );
  });
  return el(
    "div",
    { class: "timeline", id: "timeline" },
    rows,
    el("div", { class: "tl-axis" }, el("span", {}, "0 ms"), el("span", {}, ms(end))),
    el(
      "div",
      { class: "legend" },
      el("span", {}, "blue: succeeded"),
      el("span", {}, "red: failed"),
      el("span", {}, "outlined: may have changed state"),
      el("span", {}, "striped: unfinished"),
    ),
  );
}

// --- playground ----------------------------------------------------------------------------

const EXAMPLE = `// Runs with your profile's tools, like call_tool_chain.
const [graph, echo] = await Promise.all([
  memory.read_graph({}),
  everything.echo({ message: "hello from the playground" }),
]);
console.log("entities:", graph.entities.length);
return { entities: graph.entities.length, echo };`;

const EXAMPLE_PYTHON = `# Runs with your profile's tools, like call_tool_chain with language: "python".
import asyncio
graph, echo = await asyncio.gather(
    memory.read_graph(),
    everything.echo(message="hello from the playground"),
)
print("entities:", len(graph["entities"]))
{"entities": len(graph["entities"]), "echo": echo}`;

export function playgroundPage() {
  const code = el("textarea", { id: "playground-code", spellcheck: "false" });
  code.value = EXAMPLE;
  const language = el(
    "select",
    { id: "playground-language" },
    el("option", { value: "typescript" }, "TypeScript"),
    el("option", { value: "python" }, "Python"),
  );
  // Switching language swaps the example, never code someone wrote.
  language.addEventListener("change", () => {
    if (code.value === EXAMPLE || code.value === EXAMPLE_PYTHON) {
      code.value = language.value === "python" ? EXAMPLE_PYTHON : EXAMPLE;
    }
  });
  const out = el("div", { id: "playground-result" });
  const run = el("button", { id: "run" }, "Run");
  run.addEventListener("click", async () => {
    run.disabled = true;
    out.replaceChildren(el("p", { class: "muted" }, "Running…"));
    try {
      const answer = await post("/ui/api/run", { code: code.value, language: language.value });
      const s = answer.structured || {};
      const nodes = [
        el("h3", {}, answer.is_error ? "Error" : "Result"),
        el("pre", { id: "playground-text", class: answer.is_error ? "error-text" : "" }, answer.text),
      ];
      if (s.logs && s.logs.length) {
        nodes.push(
          el("h3", {}, "Logs"),
          el(
            "pre",
            { id: "playground-logs" },
            s.logs.map((l) => "[" + l.level + "] " + l.message).join("\n"),
          ),
        );
      }
      if (s.execution_id) {
        try {
          const data = await api("/ui/api/execution?id=" + encodeURIComponent(s.execution_id));
          nodes.push(
            el(
              "h3",
              {},
              "Execution ",
              el(
                "a",
                { href: "#/executions/" + encodeURIComponent(s.execution_id), id: "playground-execution" },
                s.execution_id,
              ),
            ),
          );
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
  show(
    el("h2", {}, "Playground"),
    el(
      "p",
      { class: "muted" },
      "TypeScript or Python against your profile's tools; each backend is an object, each tool an async function.",
    ),
    code,
    el("div", { class: "row" }, language, run),
    out,
  );
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
      chart.append(
        svg("rect", { class: j ? "p95" : "bar", x: labelWidth, y: i * rowHeight + 4 + j * 7, width: w, height: 7 }),
      );
    });
    chart.append(
      svg(
        "text",
        { x: width - 112, y: i * rowHeight + 15 },
        valueKeys.map((k) => (r[k] || 0).toFixed(1)).join(" / ") + unit,
      ),
    );
  });
  return el("div", { class: "chart" }, chart);
}

export async function statsPage() {
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
    perMinute.append(
      svg("text", { x: 0, y: 118 }, "60 min ago"),
      svg("text", { x: 598, y: 118, "text-anchor": "end" }, "now"),
    );
    show(
      el("h2", {}, "Stats"),
      el(
        "p",
        {},
        s.executions + " executions on record · " + kb(s.bytes_saved) +
          " kept out of responses by shaping (stored whole)",
      ),
      el(
        "div",
        { class: "grid2" },
        el(
          "div",
          {},
          el("h3", {}, "Per tier: p50 / p95"),
          barChart(
            "tiers",
            s.tiers.map((t) => ({ label: t.tier + " (" + t.count + ")", p50: t.p50_ms, p95: t.p95_ms })),
            ["p50", "p95"],
            " ms",
          ),
        ),
        el(
          "div",
          {},
          el("h3", {}, "Per backend: p50 / p95"),
          barChart(
            "backends-chart",
            s.backends.map((b) => ({ label: b.backend + " (" + b.calls + ")", p50: b.p50_ms, p95: b.p95_ms })),
            ["p50", "p95"],
            " ms",
          ),
        ),
      ),
      el("h3", {}, "Executions per minute, last hour"),
      el("div", { class: "chart" }, perMinute),
    );
  } catch (error) {
    main.append(failure(error));
  }
}
