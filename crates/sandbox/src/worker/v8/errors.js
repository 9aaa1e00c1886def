// What a value the guest threw becomes in the V8 guest's reports (`guest.js`): a `GuestError`
// with its kind, its words bounded, and the fault V8's words name (see `wire/fault.rs`), read
// here where V8 raised it. V8's words for the common faults are said as QuickJS says them, so
// the message a model reads is the same on both engines. This file goes in front of `guest.js`
// in the bootstrap (`main.js`).
//
// `p` holds the primordials `guest.js` captured before any guest code ran; `frames` keeps the
// stack's frames; `texts` gives the limits' texts of the run.
export function errorReports(p, frames, texts) {
  const { apply, regexpExec, parseJson, stringifyJson, StringCtor, toWellFormed, stringSlice } = p;
  const STACK_OVERFLOW = /maximum call stack|stack overflow/i;
  const OUT_OF_MEMORY = /^out of memory|array buffer allocation failed/i;
  // V8's words for the common faults, said as QuickJS says them, so the message a model reads
  // is the same on both engines (display text only: the host matches on the fault below). The
  // code itself, catching an error, sees V8's own words.
  const QUICKJS_WORDS = [
    [
      /^Cannot read properties of (undefined|null) \(reading '(.*)'\)$/s,
      (m) => `cannot read property '${m[2]}' of ${m[1]}`,
    ],
    [
      /^Cannot set properties of (undefined|null) \(setting '(.*)'\)$/s,
      (m) => `cannot set property '${m[2]}' of ${m[1]}`,
    ],
    [/^Cannot access '(.*)' before initialization$/s, (m) => `${m[1]} is not initialized`],
    [/^.* is not a function$/s, () => "not a function"],
    [/^.* is not iterable.*$/s, () => "not an object"],
  ];
  const inQuickjsWords = (name, message) => {
    if (name !== "TypeError" && name !== "ReferenceError") return message;
    for (let i = 0; i < QUICKJS_WORDS.length; i++) {
      const found = apply(regexpExec, QUICKJS_WORDS[i][0], [message]);
      if (found !== null) return QUICKJS_WORDS[i][1](found);
    }
    return message;
  };
  // The fault V8's words name (see `wire/fault.rs`), read here where V8 raised it.
  const V8_FAULTS = [
    ["ReferenceError", /^no tool named ("(?:[^"\\]|\\.)*")/s, (m) => {
      let name;
      try {
        name = parseJson(m[1]);
      } catch (_) {
        name = m[1];
      }
      return { fault: "no_such_tool", name };
    }],
    ["ReferenceError", /^(.*) is not defined$/s, (m) => ({ fault: "not_defined", name: m[1] })],
    [
      "ReferenceError",
      /^Cannot access '(.*)' before initialization$/s,
      (m) => ({ fault: "not_initialized", name: m[1] }),
    ],
    [
      "TypeError",
      /^Cannot read properties of (undefined|null) \(reading '(.*)'\)$/s,
      (m) => ({ fault: "nullish_read", property: m[2], of: m[1] }),
    ],
    [
      "TypeError",
      /^Cannot set properties of (undefined|null) \(setting '(.*)'\)$/s,
      (m) => ({ fault: "nullish_write", property: m[2], of: m[1] }),
    ],
    ["TypeError", /^.* is not a function$/s, () => ({ fault: "not_a_function" })],
    ["TypeError", /^.* is not iterable.*$/s, () => ({ fault: "not_iterable" })],
  ];
  const faultOf = (name, message) => {
    for (let i = 0; i < V8_FAULTS.length; i++) {
      if (V8_FAULTS[i][0] !== name) continue;
      const found = apply(regexpExec, V8_FAULTS[i][1], [message]);
      if (found !== null) return V8_FAULTS[i][2](found);
    }
    return null;
  };
  const guestError = (error) => {
    if (error !== null && (typeof error === "object" || typeof error === "function")) {
      let name = "Error", message = "", stack = "", kind = null;
      try {
        name = StringCtor(error.name === undefined ? "Error" : error.name);
      } catch (_) { /* a throwing getter */ }
      try {
        message = StringCtor(error.message === undefined ? "" : error.message);
      } catch (_) { /* a throwing getter */ }
      try {
        stack = typeof error.stack === "string" ? frames(error.stack) : "";
      } catch (_) { /* a throwing getter */ }
      try {
        if (typeof error.callerStack === "string") stack += error.callerStack;
      } catch (_) { /* a throwing getter */ }
      let callKind = null;
      try {
        callKind = typeof error.kind === "string" ? error.kind : null;
      } catch (_) { /* a throwing getter */ }
      if (apply(regexpExec, STACK_OVERFLOW, [message]) !== null) kind = "stack";
      else if (apply(regexpExec, OUT_OF_MEMORY, [message]) !== null) kind = "memory";
      else if (callKind === "tool_denied" || callKind === "approval_denied") kind = "tool_denied";
      else if (callKind === "memory") kind = "memory";
      else if (callKind === "tool_held") kind = "tool_held";
      else if (callKind === "sign_in_required") kind = "sign_in_required";
      else if (
        callKind === "tool_failed" || callKind === "timeout" || callKind === "cancelled" || callKind === "internal"
      ) kind = "tool_failed";
      let fault = null;
      if (kind === null && callKind === null) {
        fault = faultOf(name, message);
        message = inQuickjsWords(name, message);
      }
      const out = {
        kind,
        name: bounded(name, 256),
        message: bounded(message, texts().maxErrorMessage),
        stack: bounded(stack, texts().maxErrorStack),
      };
      if (fault !== null) out.fault = boundedFault(fault);
      return out;
    }
    let text;
    try {
      text = stringifyJson(error);
    } catch (_) {
      text = undefined;
    }
    if (text === undefined) text = "a non-Error value";
    return { kind: null, name: "Error", message: bounded(`uncaught ${text}`, texts().maxErrorMessage), stack: "" };
  };
  const boundedFault = (fault) => {
    if (typeof fault.name === "string") fault.name = bounded(fault.name, 256);
    if (typeof fault.property === "string") fault.property = bounded(fault.property, 256);
    return fault;
  };
  const bounded = (text, max) => {
    const t = apply(toWellFormed, text, []);
    return t.length > max ? apply(stringSlice, t, [0, max]) : t;
  };
  return { guestError };
}
