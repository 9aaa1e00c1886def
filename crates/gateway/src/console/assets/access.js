// The console's pages about who may do what: a user's credentials for backends, the approvals
// waiting for a person, and the pinned tool definitions an admin accepts or rejects.
import { api, badge, el, failure, main, plural, show, when } from "./ui.js";

// --- credentials ---------------------------------------------------------------------------

// A secret goes in once; the gateway never sends it back, so the page only says whether one is
// kept.
export async function credentialsPage() {
  show(el("h2", {}, "Credentials"), el("p", { class: "muted" }, "Loading…"));
  let data;
  try {
    data = await api("/ui/api/credentials");
  } catch (error) {
    main.append(failure(error));
    return;
  }
  const intro = el(
    "p",
    { class: "muted" },
    data.kept
      ? "Your own secret for each backend that takes one, or your sign-in to it (Connect). It is sealed before it is stored, sent only to that backend, and never shown again."
      : "This gateway keeps no credentials ([credentials] names no key).",
  );
  const rows = data.backends.map((b) => {
    const message = el("span", { class: "muted", "data-message": b.backend });
    const forget = b.set
      ? el("button", {
        class: "plain",
        "data-remove": b.backend,
        on: {
          click: async () => {
            try {
              await api("/ui/api/credentials?backend=" + encodeURIComponent(b.backend), { method: "DELETE" });
              credentialsPage();
            } catch (error) {
              message.textContent = String(error.message || error);
            }
          },
        },
      }, "Remove")
      : null;
    const state = el("td", { "data-state": b.backend }, b.set ? "kept since " + when(b.updated_at_ms) : "none");
    // A backend you sign in to: its authorization server asks you, and no token is pasted.
    if (b.goes_in === "sign-in") {
      const connect = el("a", {
        class: "button",
        "data-connect": b.backend,
        href: "/ui/connect/start?backend=" + encodeURIComponent(b.backend),
      }, b.set ? "Connect again" : "Connect");
      return el(
        "tr",
        { "data-backend": b.backend },
        el("td", { class: "name" }, b.backend),
        el("td", {}, "your sign-in"),
        state,
        el("td", {}, connect, forget, message),
      );
    }
    const secret = el("input", {
      type: "password",
      autocomplete: "off",
      placeholder: "new secret",
      "data-secret": b.backend,
    });
    const save = el("button", {
      "data-save": b.backend,
      on: {
        click: async () => {
          try {
            await api("/ui/api/credentials?backend=" + encodeURIComponent(b.backend), {
              method: "PUT",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ secret: secret.value }),
            });
            secret.value = "";
            credentialsPage();
          } catch (error) {
            message.textContent = String(error.message || error);
          }
        },
      },
    }, "Save");
    return el(
      "tr",
      { "data-backend": b.backend },
      el("td", { class: "name" }, b.backend),
      el("td", {}, b.goes_in),
      state,
      el("td", {}, secret, save, forget, message),
    );
  });
  show(
    el("h2", {}, "Credentials"),
    intro,
    el(
      "table",
      { id: "credentials" },
      el("thead", {}, el("tr", {}, ["Backend", "Sent in", "Yours", "Set"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows),
    ),
  );
}

// --- approvals -----------------------------------------------------------------------------

// The calls that wait for a person's yes, oldest first; the answer reaches the waiting call at
// once.
export async function approvalsPage() {
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
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ approve }),
      });
      approvalsPage();
    } catch (error) {
      message.textContent = String(error.message || error);
    }
  };
  const rows = data.approvals.map((q) => {
    const message = el("span", { class: "muted" });
    return el(
      "tr",
      { "data-approval": q.id },
      el("td", { class: "name" }, q.tool),
      el(
        "td",
        {},
        el("pre", { class: q.kind === "script" ? "code" : "arguments" }, q.arguments),
        q.tools.length ? el("ul", { class: "named-tools" }, ...q.tools.map((t) => el("li", {}, t))) : false,
      ),
      el("td", {}, q.rule),
      el("td", {}, q.profile + " (" + q.asker.slice(0, 24) + ")"),
      el("td", {}, q.execution_id + (q.line ? ", line " + q.line : "")),
      el("td", {}, when(q.asked_at_ms) + ", " + q.expires_in_s + " s left"),
      el(
        "td",
        {},
        el("button", { "data-approve": q.id, on: { click: answer(q, true, message) } }, "Approve"),
        el("button", { class: "plain", "data-deny": q.id, on: { click: answer(q, false, message) } }, "Deny"),
        message,
      ),
    );
  });
  const intro = el(
    "p",
    { class: "muted" },
    rows.length
      ? "Calls from scripts, and whole scripts before they run, that wait for a person's approval. Approve runs the call (or exactly the script shown); Deny makes the call throw ApprovalDenied in the script (or runs none of the script)."
      : "No call waits for approval.",
  );
  // Who may say yes is never who asked: the page says which questions this login answers.
  const who = el("p", { id: "you-answer" }, "You answer: " + data.you_answer);
  show(
    el("h2", {}, "Approvals"),
    intro,
    who,
    el("button", { class: "plain", id: "refresh-approvals", on: { click: approvalsPage } }, "Refresh"),
    el(
      "table",
      { id: "approvals" },
      el(
        "thead",
        {},
        el("tr", {}, ["Tool", "Arguments", "Rule", "Asked by", "Execution", "Asked", ""].map((h) => el("th", {}, h))),
      ),
      el("tbody", {}, ...rows),
    ),
  );
}

// --- pins ----------------------------------------------------------------------------------

// Every pinned tool definition and every change held for review (admins): a held one opens its
// diff, pinned on the left and served now on the right, and is accepted or rejected there.
export async function pinsPage() {
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
  const rows = data.pins.map((p) =>
    el(
      "tr",
      { "data-pin": p.name },
      el(
        "td",
        { class: "name" },
        p.state === "held"
          ? el("a", {
            href: "#/pins",
            on: {
              click: (event) => {
                event.preventDefault();
                pinDiff(p.name);
              },
            },
          }, p.name)
          : p.name,
      ),
      el("td", {}, p.state === "held" ? badge("held (" + p.held + ")") : "pinned (" + p.pinned_by + ")"),
      el("td", {}, p.rejected_by ? "rejected by " + p.rejected_by : ""),
      el("td", {}, findings(p)),
    )
  );
  const intro = el(
    "p",
    { class: "muted" },
    held.length
      ? plural(held.length, "tool is", "tools are") +
        " held for review: agents see the pinned definition (or nothing, for a new tool), and calls fail until you decide. Open one to see what changed."
      : "Nothing is held. A tool is pinned the first time it is seen; a later change to its definition is held here.",
  );
  show(
    el("h2", {}, "Pins"),
    intro,
    el("div", { id: "pin-diff" }),
    el(
      "table",
      { id: "pins" },
      el("thead", {}, el("tr", {}, ["Tool", "State", "Decided", "Findings"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows),
    ),
  );
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
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ accept }),
      });
      pinsPage();
    } catch (error) {
      message.textContent = String(error.message || error);
    }
  };
  // Side by side: a line only in the pinned definition on the left, one only served now on
  // the right, a line in both on both.
  const left = [], right = [];
  for (const line of diff.lines) {
    if (line.side !== "served") {
      left.push(el("div", { class: line.side === "pinned" ? "removed" : "" }, line.text || " "));
    }
    if (line.side !== "pinned") {
      right.push(el("div", { class: line.side === "served" ? "added" : "" }, line.text || " "));
    }
  }
  into.replaceChildren(
    el(
      "h3",
      {},
      diff.name + ": held (" + diff.held + ")" + (diff.rejected_by ? ", rejected by " + diff.rejected_by : ""),
    ),
    el(
      "ul",
      { id: "pin-findings" },
      ...diff.findings.map((f) => el("li", {}, f.severity + " " + f.kind + " in " + f.place + ": " + f.excerpt)),
    ),
    el(
      "table",
      { id: "pin-sides" },
      el(
        "thead",
        {},
        el("tr", {}, el("th", {}, diff.pinned ? "Pinned" : "Pinned (none: a new tool)"), el("th", {}, "Served now")),
      ),
      el("tbody", {}, el("tr", {}, el("td", {}, el("pre", {}, ...left)), el("td", {}, el("pre", {}, ...right)))),
    ),
    el(
      "div",
      { class: "row" },
      el("button", { id: "pin-accept", on: { click: decide(true) } }, "Accept"),
      el("button", { class: "plain", id: "pin-reject", on: { click: decide(false) } }, "Reject"),
      message,
    ),
  );
}
