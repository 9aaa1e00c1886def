// sandgate's V8 guest: the bootstrap of one execution, run first in a fresh V8 context of its
// own (`shell.js` makes one per execution). It is the V8 twin of the QuickJS engine's Rust
// natives (`engine/natives.rs`, `engine/mod.rs`): the same preamble (`engine/preamble.js`) and
// web basics (`engine/web.js`) get the same natives, here as closures over state no guest code
// can reach, and enforce the same limits with the same words.
//
// `main.js` wraps this file in a function of the shell's functions (`host`) that returns the
// run's entry point: the shell hands it each message from `main.js`, as text. Before the
// preamble runs, the context's global is cut down to what the QuickJS guest has. The shell's
// functions belong to another realm: they are kept in closures here, take and give back only
// primitives, and are called through `across`, which lets no exception of that realm through
// (an error object of it would lead back there). `__SG_PREAMBLE` and `__SG_WEB` are the two
// factories `main.js` puts in front of this file; `errorReports` (`errors.js`), `guardBuffers`
// and `guardModules` (`guards.js`) come in front of it in the same bootstrap (`v8/mod.rs`).
{
  const G = globalThis;
  // ---- captured before anything is deleted -------------------------------------------
  const hostPost = host.post;
  const hostDone = host.done;
  const hostRandom = host.random;
  const hostHeap = host.heap;
  const hostUrl = host.url;
  const hostTimer = host.timer;
  const hostClearTimer = host.clearTimer;
  const hostNow = host.now;
  // This context's own `Intl` (V8's, with all of ICU): the preamble puts it back.
  const NativeIntl = G.Intl;
  // Timers are the shell's (its event loop's), each firing as a `fire` message for this run;
  // the callbacks stay here.
  const dueCallbacks = { __proto__: null };
  let nextDue = 0;
  const nativeSetTimeout = (callback, ms) => {
    const id = ++nextDue;
    dueCallbacks[id] = callback;
    across(hostTimer, [run, id, ms]);
    return id;
  };
  const nativeClearTimeout = (id) => {
    delete dueCallbacks[id];
    across(hostClearTimer, [id]);
  };
  const indirectEval = G.eval;
  const parseJson = JSON.parse;
  const stringifyJson = JSON.stringify;
  const apply = Reflect.apply;
  const ownKeys = Reflect.ownKeys;
  const deleteProperty = Reflect.deleteProperty;
  const setPrototypeOf = Object.setPrototypeOf;
  const getPrototypeOf = Object.getPrototypeOf;
  const defineProperty = Object.defineProperty;
  const NativePromise = Promise;
  const promiseThen = Promise.prototype.then;
  const ErrorCtor = Error;
  const RangeErrorCtor = RangeError;
  const TypeErrorCtor = TypeError;
  const isArray = Array.isArray;
  const stringIndexOf = String.prototype.indexOf;
  const stringSlice = String.prototype.slice;
  const stringSplit = String.prototype.split;
  const toWellFormed = String.prototype.toWellFormed;
  const regexpExec = RegExp.prototype.exec;
  const mathMin = Math.min;
  const mathMax = Math.max;
  const isFiniteNumber = Number.isFinite;
  const hasOwn = Object.hasOwn;
  const StringCtor = String;
  const Uint8ArrayCtor = Uint8Array;
  const ProxyCtor = Proxy;
  const preambleFactory = __SG_PREAMBLE;
  const webFactory = __SG_WEB;

  // ---- the global, cut to the QuickJS guest's -----------------------------------------
  // The ECMAScript globals both engines have; everything else goes.
  const KEEP = {
    __proto__: null,
    globalThis: 1,
    Infinity: 1,
    NaN: 1,
    undefined: 1,
    eval: 1,
    isFinite: 1,
    isNaN: 1,
    parseFloat: 1,
    parseInt: 1,
    decodeURI: 1,
    decodeURIComponent: 1,
    encodeURI: 1,
    encodeURIComponent: 1,
    escape: 1,
    unescape: 1,
    Object: 1,
    Function: 1,
    Boolean: 1,
    Symbol: 1,
    Error: 1,
    AggregateError: 1,
    EvalError: 1,
    RangeError: 1,
    ReferenceError: 1,
    SyntaxError: 1,
    TypeError: 1,
    URIError: 1,
    Number: 1,
    BigInt: 1,
    Math: 1,
    Date: 1,
    String: 1,
    RegExp: 1,
    Array: 1,
    Int8Array: 1,
    Uint8Array: 1,
    Uint8ClampedArray: 1,
    Int16Array: 1,
    Uint16Array: 1,
    Int32Array: 1,
    Uint32Array: 1,
    BigInt64Array: 1,
    BigUint64Array: 1,
    Float32Array: 1,
    Float64Array: 1,
    Map: 1,
    Set: 1,
    WeakMap: 1,
    WeakSet: 1,
    WeakRef: 1,
    FinalizationRegistry: 1,
    ArrayBuffer: 1,
    SharedArrayBuffer: 1,
    DataView: 1,
    Atomics: 1,
    JSON: 1,
    Promise: 1,
    Reflect: 1,
    Proxy: 1,
    Iterator: 1,
    queueMicrotask: 1,
  };
  for (const key of ownKeys(G)) {
    if (typeof key === "string" && KEEP[key] !== 1) deleteProperty(G, key);
  }
  // `SharedArrayBuffer` stays (QuickJS has it too): with no worker and no `postMessage`, nothing
  // can share it. `Atomics.waitAsync` goes (QuickJS lacks it): its timeout would run this
  // execution's code after it ended, while the isolate serves the next.
  deleteProperty(Atomics, "waitAsync");

  // ---- the run's state: closures only ------------------------------------------------
  let run = null;
  let limits = null;
  let tools = [];
  let backends = [];
  let hostCount = 0;
  let callsMade = 0;
  let inFlight = 0;
  let lastCallId = 0;
  let nextCallId = 0;
  let pendingArgsBytes = 0;
  const pending = { __proto__: null };
  const queue = { __proto__: null };
  let queueHead = 0;
  let queueTail = 0;
  let timerCount = 0;
  let timersMade = 0;
  const timers = { __proto__: null };
  let logLines = 0;
  let logBytes = 0;
  let dropped = null;
  let finished = false;
  let result = null;

  const wellFormedJson = (json) => {
    // JSON.stringify escapes a lone surrogate (`\ud800`); every tier sends U+FFFD instead.
    if (apply(stringIndexOf, json, ["\\ud"]) < 0 && apply(stringIndexOf, json, ["\\uD"]) < 0) return json;
    const repair = (value) => {
      if (typeof value === "string") return apply(toWellFormed, value, []);
      if (value === null || typeof value !== "object") return value;
      const out = isArray(value) ? [] : {};
      for (const key of ownKeys(value)) {
        defineProperty(out, apply(toWellFormed, key, []), {
          __proto__: null,
          value: repair(value[key]),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    };
    return stringifyJson(repair(parseJson(json)));
  };

  // Calls a function of the shell's realm; any exception there (its stack or memory running
  // out) becomes one of this realm.
  const across = (f, args) => {
    try {
      return apply(f, undefined, args);
    } catch (_) {
      throw new RangeErrorCtor("Maximum call stack size exceeded");
    }
  };
  // Messages to `main.js` are text made here, not by `JSON.stringify` of an object (which asks
  // every object, through its prototype, for a `toJSON` the guest may have put there): each
  // value is a string, a number, a boolean, null, or an array or object made in this file,
  // read by its own keys.
  const encode = (value) => {
    if (typeof value === "string") return stringifyJson(value);
    if (typeof value === "number") return isFiniteNumber(value) ? StringCtor(value) : "null";
    if (typeof value === "boolean") return value ? "true" : "false";
    if (value === null || typeof value !== "object") return "null";
    let out;
    if (isArray(value)) {
      out = "[";
      for (let i = 0; i < value.length; i++) out += (i > 0 ? "," : "") + encode(value[i]);
      return out + "]";
    }
    const keys = ownKeys(value);
    out = "{";
    let first = true;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (typeof key !== "string" || value[key] === undefined) continue;
      out += (first ? "" : ",") + stringifyJson(key) + ":" + encode(value[key]);
      first = false;
    }
    return out + "}";
  };
  const send = (message) => {
    across(hostPost, [encode(message)]);
  };
  const heapUsed = () => across(hostHeap, [false]);
  // The isolate's heap as the run found it: an isolate serves runs one after another, and what
  // an earlier one left is not yet collected, so a run counts only what its heap grew by.
  let heapBase = 0;
  const runHeap = () => mathMax(0, heapUsed() - heapBase);
  const heapCommitted = () => across(hostHeap, [true]);

  // ---- natives for the preamble ---------------------------------------------------------
  const refusal = (isTool, index, bytes) => {
    if (bytes > limits.max_call_args_bytes) {
      const name = isTool && tools[index]
        ? `${tools[index].backend}.${tools[index].name}`
        : (isTool ? "this call" : "this host function");
      return ["tool_failed", texts.argumentsTooLarge(name, bytes, limits.max_call_args_bytes)];
    }
    const heap = runHeap();
    if (pendingArgsBytes + bytes + heap > limits.memory_bytes) {
      return [
        "memory",
        `out of memory: the arguments of this execution's waiting calls (${
          pendingArgsBytes + bytes
        } bytes, this one included) and its heap would pass its ${limits.memory_bytes / 1048576 | 0} MiB limit`,
      ];
    }
    return null;
  };
  const errorObject = (kind, message, site) => {
    const error = new ErrorCtor(message);
    defineProperty(error, "name", {
      __proto__: null,
      value: ERROR_NAMES[kind] || "ToolCallError",
      writable: true,
      enumerable: false,
      configurable: true,
    });
    defineProperty(error, "kind", {
      __proto__: null,
      value: kind,
      writable: true,
      enumerable: true,
      configurable: true,
    });
    if (kind === "approval_denied" && typeof G.ApprovalDenied === "function") {
      setPrototypeOf(error, G.ApprovalDenied.prototype);
    }
    if (site !== undefined && site !== null && typeof site.stack === "string") {
      defineProperty(error, "callerStack", {
        __proto__: null,
        value: frames(site.stack),
        writable: true,
        enumerable: false,
        configurable: true,
      });
    }
    return error;
  };
  const ERROR_NAMES = {
    __proto__: null,
    tool_denied: "ToolDeniedError",
    timeout: "ToolTimeoutError",
    approval_denied: "ApprovalDenied",
    tool_held: "ToolHeldError",
  };
  // Stacks are frames alone (see `prepareStackTrace` below), unless the guest replaced it.
  const frames = (stack) => stack;
  const SITE = /code\.js:(\d+):(\d+)/;
  const callSite = (site) => {
    if (!limits.report_call_sites || site === undefined || site === null) return null;
    const stack = site.stack;
    if (typeof stack !== "string") return null;
    const found = apply(regexpExec, SITE, [stack]);
    return found === null ? null : [+found[1], +found[2]];
  };
  const flushQueue = () => {
    while (inFlight < limits.max_concurrent_calls && queueHead < queueTail) {
      const call = queue[queueHead];
      delete queue[queueHead];
      queueHead++;
      inFlight++;
      send({ t: "call", id: call.id, tool: call.tool, index: call.index, args: call.args, site: call.site });
    }
  };
  const bridge = (isTool) => (index, args, site, map) => {
    const count = isTool ? tools.length : hostCount;
    if (!(index >= 0 && index < count)) throw new RangeErrorCtor("no such callable");
    const at = isTool ? callSite(site) : null;
    if (callsMade >= limits.max_tool_calls) {
      throw new RangeErrorCtor(`tool call limit reached: an execution may make at most ${limits.max_tool_calls} calls`);
    }
    callsMade++;
    const json = wellFormedJson(StringCtor(args));
    const refused = refusal(isTool, index, json.length);
    if (refused !== null) return NativePromise.reject(errorObject(refused[0], refused[1], site));
    const id = ++nextCallId;
    let resolve, reject;
    const promise = new NativePromise((yes, no) => {
      resolve = yes;
      reject = no;
    });
    pending[id] = { resolve, reject, site, map, bytes: json.length };
    pendingArgsBytes += json.length;
    queue[queueTail++] = { id, tool: isTool, index, args: json, site: at };
    lastCallId = id;
    flushQueue();
    return promise;
  };
  const cancelCall = (id) => {
    const settlers = pending[id];
    if (settlers === undefined) return;
    delete pending[id];
    pendingArgsBytes -= settlers.bytes;
    for (let i = queueHead; i < queueTail; i++) {
      if (queue[i] !== undefined && queue[i].id === id) {
        // Left in place as a hole: the queue is read in order.
        queue[i] = { id: 0, tool: false, index: -1, args: "", site: null, skip: true };
        return;
      }
    }
    inFlight--;
    send({ t: "cancelCall", id });
    flushQueue();
    scheduleStallCheck();
  };
  const LEVELS = { __proto__: null, log: 1, info: 1, warn: 1, error: 1, debug: 1 };
  const TAIL_LINES = 20, TAIL_BYTES = 8 * 1024, TAIL_LINE_BYTES = 2 * 1024;
  const utf8Length = (text) => {
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
        n += 4;
        i++;
      } else n += 3;
    }
    return n;
  };
  const log = (level, message) => {
    const lvl = LEVELS[level] === 1 ? level : "log";
    const text = apply(toWellFormed, StringCtor(message), []);
    const bytes = utf8Length(text);
    const cost = bytes + texts.logLineOverhead;
    if (dropped === null && logLines < limits.max_log_lines && logBytes + cost <= limits.max_log_bytes) {
      logLines++;
      logBytes += cost;
      send({ t: "log", level: lvl, message: text });
      return;
    }
    if (dropped === null) dropped = { lines: 0, bytes: 0, tail: [], tailBytes: 0 };
    dropped.lines++;
    dropped.bytes += bytes;
    const kept = text.length > TAIL_LINE_BYTES
      ? apply(stringSlice, text, [0, TAIL_LINE_BYTES / 2]) + " … " +
        apply(stringSlice, text, [text.length - TAIL_LINE_BYTES / 2])
      : text;
    dropped.tail[dropped.tail.length] = [lvl, kept];
    dropped.tailBytes += kept.length;
    while (dropped.tail.length > TAIL_LINES || dropped.tailBytes > TAIL_BYTES) {
      const first = dropped.tail[0];
      dropped.tailBytes -= first[1].length;
      const rest = [];
      for (let i = 1; i < dropped.tail.length; i++) rest[i - 1] = dropped.tail[i];
      dropped.tail = rest;
    }
  };
  const sendDroppedLogs = () => {
    if (dropped === null) return;
    const shown = dropped.tail.length;
    send({
      t: "log",
      level: "warn",
      message: `[${
        dropped.lines - shown
      } log lines (${dropped.bytes} bytes) past the log limits (${limits.max_log_lines} lines, ${limits.max_log_bytes} bytes) were dropped; the last ${shown} follow]`,
    });
    for (let i = 0; i < shown; i++) send({ t: "log", level: dropped.tail[i][0], message: dropped.tail[i][1] });
    dropped = null;
  };
  const setTimer = (ms, callback) => {
    if (timerCount >= limits.max_timers) {
      throw new RangeErrorCtor(`too many pending timers (limit ${limits.max_timers})`);
    }
    const id = ++timersMade;
    const delay = isFiniteNumber(ms) ? mathMin(mathMax(0, ms), 86400000) : 0;
    timerCount++;
    timers[id] = nativeSetTimeout(() => {
      if (timers[id] === undefined) return;
      delete timers[id];
      timerCount--;
      try {
        callback();
      } catch (error) {
        const message = error !== null && typeof error === "object" && "message" in error
          ? `${error.name || "Error"}: ${error.message}`
          : StringCtor(error);
        send({ t: "log", level: "error", message: `uncaught error in a setTimeout callback: ${message}` });
      }
      scheduleStallCheck();
    }, delay);
    return id;
  };
  const clearTimer = (id) => {
    const handle = timers[id];
    if (handle === undefined) return;
    delete timers[id];
    timerCount--;
    nativeClearTimeout(handle);
    scheduleStallCheck();
  };
  const randomBytes = (n) => {
    const bytes = new Uint8ArrayCtor(mathMin(n >>> 0, 65536));
    across(hostRandom, [bytes]);
    const out = [];
    for (let i = 0; i < bytes.length; i++) out[i] = bytes[i];
    return out;
  };
  const parseUrl = (href, base) => {
    const text = across(
      hostUrl,
      base === null || base === undefined ? [StringCtor(href)] : [StringCtor(href), StringCtor(base)],
    );
    if (typeof text !== "string" || text[0] === "!") {
      throw new TypeErrorCtor(
        `Invalid URL ${stringifyJson(href)}: ${
          typeof text === "string" ? apply(stringSlice, text, [1]) : "unreadable"
        }`,
      );
    }
    const p = parseJson(text);
    return {
      href: p[0],
      origin: p[1],
      protocol: p[2],
      username: p[3],
      password: p[4],
      host: p[5],
      hostname: p[6],
      port: p[7],
      pathname: p[8],
      search: p[9],
      hash: p[10],
    };
  };
  const toolsOf = (b) => {
    const list = [];
    const backend = backends[b];
    if (backend === undefined) return list;
    for (let i = 0; i < backend.tools.length; i++) {
      const index = backend.tools[i];
      list[i] = [index, tools[index].name, tools[index].jsTool];
    }
    return list;
  };
  const declarationOf = (index) => (tools[index] !== undefined ? tools[index].declaration || "" : "");
  const natives = {
    call: bridge(true),
    callHost: bridge(false),
    log,
    setTimer,
    clearTimer,
    randomBytes,
    parseUrl,
    loadWeb: (n) => webFactory(n),
    nativeIntl: NativeIntl,
    monotonic: () => across(hostNow, []),
    toolsOf,
    declarationOf,
    lastCallId: () => lastCallId,
    cancelCall,
  };
  // Stacks as the QuickJS engine writes them: the frames of the user's code alone, one
  // `    at name (code.js:line:column)` per line, with no `Name: message` line before them.
  defineProperty(ErrorCtor, "prepareStackTrace", {
    __proto__: null,
    value: (_error, sites) => {
      let out = "";
      for (let i = 0; i < sites.length; i++) {
        const site = sites[i];
        if (site.getScriptNameOrSourceURL() !== "code.js") continue;
        const name = site.getFunctionName();
        out += `    at ${
          name && name !== "eval" ? name : "<anonymous>"
        } (code.js:${site.getLineNumber()}:${site.getColumnNumber()})\n`;
      }
      return out;
    },
    writable: true,
    enumerable: false,
    configurable: true,
  });
  // ---- the guards: memory outside the heap, no modules (`guards.js`) ---------------------
  const primordials = {
    __proto__: null,
    apply,
    defineProperty,
    getPrototypeOf,
    ProxyCtor,
    RangeErrorCtor,
    TypeErrorCtor,
    isFiniteNumber,
    StringCtor,
    regexpExec,
    indirectEval,
    parseJson,
    stringifyJson,
    toWellFormed,
    stringSlice,
  };
  guardBuffers(G, primordials, () => limits.memory_bytes, () => finished);
  const refuseImport = guardModules(G, primordials, () => texts.noModules);
  const bind = preambleFactory(natives);
  // The texts the limits say, sent by the host with the first run (see `main.js`).
  let texts = null;

  // ---- the end of the run ---------------------------------------------------------------
  const promiseIn = (value) => {
    if (value instanceof NativePromise) return "at its top";
    if (isArray(value)) {
      const n = mathMin(value.length, 10000);
      for (let i = 0; i < n; i++) if (value[i] instanceof NativePromise) return `at [${i}]`;
      return null;
    }
    if (value !== null && typeof value === "object") {
      let seen = 0;
      for (const key in value) {
        if (++seen > 10000) break;
        if (hasOwn(value, key) && value[key] instanceof NativePromise) return `at .${key}`;
      }
    }
    return null;
  };
  // ---- what a thrown value becomes (`errors.js`) ------------------------------------------
  const { guestError } = errorReports(primordials, frames, () => texts);
  const finish = (outcome) => {
    if (finished) return;
    finished = true;
    sendDroppedLogs();
    send({ t: "done", outcome, memory: runHeap(), calls: callsMade });
    // The shell lets go of this context: nothing more reaches it.
    across(hostDone, []);
  };
  const settleRun = (value) => {
    const where = promiseIn(value);
    if (where !== null) {
      return finish({
        err: {
          kind: null,
          name: "TypeError",
          message:
            `${texts.promiseInResult} ${where}: a call (or other async work) that was not awaited, so its value is not there yet`,
          stack: "",
        },
      });
    }
    if (value === undefined) return finish({ ok: "null" });
    let json;
    try {
      json = stringifyJson(value);
    } catch (error) {
      const e = guestError(error);
      e.message = `the result cannot be turned into JSON: ${e.message}`;
      return finish({ err: e });
    }
    if (json === undefined) return finish({ ok: "null" });
    json = wellFormedJson(json);
    if (utf8Length(json) > limits.max_result_bytes) {
      return finish({ err: texts.outputLimit(utf8Length(json), limits.max_result_bytes) });
    }
    finish({ ok: json });
  };
  // A run that waits for nothing (no call out or queued, no timer) can never settle: checked
  // once the microtasks after each event have run. V8 stops the code of an isolate that reaches
  // its heap limit where it stands and lets the isolate go on: its code then waits for nothing,
  // with a full heap, which is how QuickJS's engine tells a broken chain from a stall too.
  let stallCheck = false;
  const outOfMemory = () => ({
    kind: "memory",
    name: "InternalError",
    message: `out of memory: the execution used up its ${limits.memory_bytes / 1048576 | 0} MiB heap`,
    stack: "",
  });
  // Deno's Node-style isolates do not always run the microtasks one message queued before the
  // next message: the check passes only when three in a row find the run waiting for nothing.
  let idleChecks = 0;
  let heapAtFirstCheck = 0;
  const scheduleStallCheck = (again = false) => {
    if (!again) idleChecks = 0;
    if ((stallCheck && !again) || finished || result === null) return;
    stallCheck = true;
    nativeSetTimeout(() => {
      stallCheck = false;
      if (finished) return;
      if (inFlight === 0 && queueHead === queueTail && timerCount === 0) {
        // The heap as the first check found it (a collection may free the dropped data before
        // the last), committed or used.
        if (idleChecks === 0) {
          heapAtFirstCheck = mathMax(heapUsed(), heapCommitted());
        }
        idleChecks++;
        if (idleChecks < 3) return scheduleStallCheck(true);
        if (heapAtFirstCheck >= 0.75 * limits.memory_bytes) return finish({ err: outOfMemory() });
        finish({
          err: {
            kind: null,
            name: "Error",
            message:
              "the script is waiting for something that can never happen: no tool call or timer is pending, but the result is not settled (an await on a promise nobody resolves, or a promise chain broken by running out of memory?)",
            stack: "",
          },
        });
      }
    }, 0);
  };

  // ---- messages from main.js -------------------------------------------------------------
  const start = (message) => {
    heapBase = heapUsed();
    run = message.run;
    limits = message.limits;
    texts = makeTexts(message.texts);
    tools = message.tools;
    backends = message.backends;
    hostCount = message.hostFunctions.length;
    const env = message.env.length === 0 ? undefined : (() => {
      const values = {};
      for (let i = 0; i < message.env.length; i++) values[message.env[i][0]] = message.env[i][1];
      return values;
    })();
    const pairs = [];
    for (let i = 0; i < backends.length; i++) pairs[i] = [backends[i].name, backends[i].js];
    try {
      bind(
        pairs,
        message.hostFunctions,
        message.context === null ? undefined : message.context,
        message.mode === "Tool",
        env,
      );
    } catch (error) {
      return finish({
        err: {
          kind: "internal",
          name: "InternalError",
          message: `preamble failed: ${guestError(error).message}`,
          stack: "",
        },
      });
    }
    let promise;
    try {
      refuseImport(message.js);
      promise = indirectEval(`"use strict";${message.js}\n//# sourceURL=code.js`);
    } catch (error) {
      const e = guestError(error);
      if (e.kind === null && e.name === "SyntaxError") e.kind = "syntax";
      return finish({ err: e });
    }
    result = promise;
    apply(promiseThen, promise, [settleRun, (error) => finish({ err: guestError(error) })]);
    scheduleStallCheck();
  };
  const reply = (message) => {
    const settlers = pending[message.id];
    if (settlers === undefined) return;
    delete pending[message.id];
    inFlight--;
    pendingArgsBytes -= settlers.bytes;
    flushQueue();
    if (message.ok !== undefined) {
      let value;
      try {
        value = parseJson(message.ok);
      } catch (error) {
        settlers.reject(
          errorObject("tool_failed", `the call's result is not valid JSON: ${error.message}`, settlers.site),
        );
        return scheduleStallCheck();
      }
      if (typeof settlers.map === "function") {
        try {
          value = settlers.map(value);
        } catch (thrown) {
          settlers.reject(thrown);
          return scheduleStallCheck();
        }
      }
      settlers.resolve(value);
    } else {
      settlers.reject(errorObject(message.err.kind, message.err.message, settlers.site));
    }
    scheduleStallCheck();
  };
  const makeTexts = (t) => ({
    logLineOverhead: t.log_line_overhead,
    maxErrorMessage: t.max_error_message,
    maxErrorStack: t.max_error_stack,
    promiseInResult: t.promise_in_result,
    noModules: t.no_modules,
    argumentsTooLarge: (name, bytes, max) =>
      fill(t.arguments_too_large, {
        name,
        bytes,
        max,
        max_mib: max % 1048576 === 0 ? `${max / 1048576} MiB` : `${(max / 1048576).toFixed(1)} MiB`,
      }),
    outputLimit: (bytes, max) => ({
      kind: "output_limit",
      name: "OutputLimitError",
      message: fill(t.output_limit, { bytes, max }),
      stack: "",
    }),
  });
  const fill = (template, values) => {
    let out = template;
    for (const key in values) {
      const parts = apply(stringSplit, out, [`{${key}}`]);
      out = parts[0];
      for (let i = 1; i < parts.length; i++) out += StringCtor(values[key]) + parts[i];
    }
    return out;
  };
  // A message from `main.js`, as text after the shell's one-letter tag. Nothing may escape: a
  // fault of ours ends the run with an internal error instead. Replies and timers name their
  // run, and only this context's run is served.
  const handle = (text) => {
    try {
      const message = parseJson(apply(stringSlice, text, [1]));
      if (message === null || typeof message !== "object") return;
      if (message.t === "run" && run === null) start(message);
      else if (run === null || message.run !== run) return;
      else if (message.t === "reply") reply(message);
      else if (message.t === "fire") {
        const callback = dueCallbacks[message.id];
        if (callback !== undefined) {
          delete dueCallbacks[message.id];
          callback();
        }
      }
    } catch (error) {
      let text = "a non-Error value";
      try {
        text = `${error.name}: ${error.message}`;
      } catch (_) { /* a throwing getter */ }
      finish({ err: { kind: "internal", name: "InternalError", message: `the V8 guest failed: ${text}`, stack: "" } });
    }
  };
  return handle;
}
