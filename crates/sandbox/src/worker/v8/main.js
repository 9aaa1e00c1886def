// sandgate's V8 worker process: the main thread of a locked-down Deno, which speaks the worker
// frame protocol (`wire/protocol.rs`) on stdin and stdout, exactly as the QuickJS worker does,
// and runs each execution in a Deno Worker of its own: a fresh V8 isolate that is terminated
// when the execution ends. No guest code runs on this thread, so it always answers: it stops a
// run at its deadline or on the host's `Cancel` by terminating the run's isolate, even one
// stuck in a loop.
//
// A few isolates are started ahead (`PREWARM`), by a spawner thread: an execution takes one that
// has loaded the preamble and never ran anything, and a new one starts in the background. Deno's permissions
// are all denied (no `--allow-*` flag), so nothing here or in an isolate can open a file or a
// socket, and the process itself is locked down by the launcher before Deno starts
// (`v8/mod.rs`).
//
// Arguments: the protections JSON, the limit texts JSON, then the preamble, the web basics and
// the guest bootstrap (`guest.js`) as source text.
"use strict";
import { MessageChannel, Worker } from "node:worker_threads";

const [protectionsJson, textsJson, heapMbText, preambleSource, webSource, guestSource] = Deno.args;
// Each isolate's heap, in MiB: past it V8 stops that isolate alone (Node's `resourceLimits`),
// where a process-wide limit would end the whole process.
const HEAP_MB = Math.max(16, Number(heapMbText) || 64);
const protections = JSON.parse(protectionsJson);
const texts = JSON.parse(textsJson);
const asFactory = (source) => `(function () {\n${source.replace("export default function", "return function")}\n})()`;
const workerSource = `const __SG_PREAMBLE = ${asFactory(preambleSource)};\nconst __SG_WEB = ${asFactory(webSource)};\n${guestSource}`;


// ---- frames --------------------------------------------------------------------------------
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });
const MAX_FRAME_BYTES = 64 * 1024 * 1024;

const writeAll = (bytes) => {
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
};
const frameOf = (body) => {
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length, true);
  out.set(body, 4);
  return out;
};
const sendJson = (frame) => writeAll(frameOf(encoder.encode(JSON.stringify(frame))));
const putU64 = (view, at, n) => {
  view.setUint32(at, n % 4294967296, true);
  view.setUint32(at + 4, Math.floor(n / 4294967296), true);
};
const getU64 = (view, at) => view.getUint32(at, true) + view.getUint32(at + 4, true) * 4294967296;
// A call travels as `C`, run, id, callee kind and index, line and column, then the JSON.
const sendCall = (run, id, tool, index, args, site) => {
  const json = encoder.encode(args);
  const body = new Uint8Array(1 + 8 + 8 + 1 + 4 + 4 + 4 + json.length);
  const view = new DataView(body.buffer);
  body[0] = 0x43;
  putU64(view, 1, run);
  putU64(view, 9, id);
  body[17] = tool ? 0 : 1;
  view.setUint32(18, index, true);
  view.setUint32(22, site ? site[0] : 0, true);
  view.setUint32(26, site ? site[1] : 0, true);
  body.set(json, 30);
  writeAll(frameOf(body));
};

// ---- runs ----------------------------------------------------------------------------------
// Runs on this process: run number → { isolate, deadline timer, calls: host id → guest id }.
const runs = new Map();
let nextCallId = 1;
let knownTools = [];
let knownBackends = [];

// Isolates are started by spawner threads (web workers of this process that run no guest
// code), since starting one takes its starter 20-40 ms: on this thread that would hold up every
// run's messages. An isolate a spawner starts begins running about 500 ms later (Deno's nested
// workers), so `PREWARM` are kept warm (they have answered `ready` and a `ping`), and replaced
// once no run is in flight here, when their start takes CPU from no run. A run that finds none
// warm gets one started here when it is alone (a first run, a heap other than the default),
// and from a spawner otherwise (a burst: this thread stays free to serve the runs in flight).
// Either way the isolate talks to this thread over a `MessagePort` of its own, handed over in
// its `workerData`, so no message of a run passes through a spawner.
const PREWARM = 4;
// How long an isolate whose run has ended may take to close itself before it is terminated.
const LINGER_MS = 5000;
const SPAWNERS = 2;
// How every isolate is made, here and in a spawner (whose source includes this function's).
const isolateOptions = (port, heapMb) => ({
  eval: true,
  workerData: { port },
  transferList: [port],
  resourceLimits: { maxOldGenerationSizeMb: heapMb },
  stdout: false,
  stderr: false,
});
const spawnerSource = `
import { Worker } from "node:worker_threads";
const isolateOptions = ${isolateOptions};
let source = "";
const isolates = new Map();
self.onmessage = ({ data }) => {
  if (data.t === "source") source = data.source;
  else if (data.t === "make") {
    const worker = new Worker(source, isolateOptions(data.port, data.heapMb));
    isolates.set(data.key, worker);
    worker.on("error", (error) => self.postMessage({ t: "error", key: data.key, code: error && error.code, message: String(error && error.message) }));
    worker.on("exit", () => isolates.delete(data.key));
  } else if (data.t === "kill") {
    const worker = isolates.get(data.key);
    isolates.delete(data.key);
    if (worker !== undefined) worker.terminate();
  }
};
`;
// Isolates a spawner started, by key, for its reports of their failures.
const spawned = new Map();
const spawners = [];
for (let i = 0; i < SPAWNERS; i++) {
  // `Worker` here is Node's (imported above); a spawner is a web worker.
  const spawner = new globalThis.Worker(`data:text/javascript;base64,${btoa(spawnerSource)}`, { type: "module" });
  spawner.postMessage({ t: "source", source: workerSource });
  spawner.onmessage = ({ data }) => {
    const entry = spawned.get(data.key);
    if (entry !== undefined && data.t === "error") entry.failed({ code: data.code, message: data.message });
  };
  spawners.push(spawner);
}
let nextSpawner = 0;
let nextIsolateKey = 1;
const idle = [];
let warming = 0;

// An isolate with `heapMb` of heap, its events routed to whichever run holds it. `how`: "ahead"
// (a spawner starts it, and it joins `idle` once warm), "spawned" (a spawner starts it for a
// run, which holds it at once) or "here" (this thread starts it, for a run).
const startIsolate = (heapMb, how) => {
  const { port1, port2 } = new MessageChannel();
  const ahead = how === "ahead";
  const entry = { key: nextIsolateKey++, port: port1, worker: null, spawner: null, warm: false, released: false, onMessage: null, onError: null };
  const leaveWarming = () => {
    if (ahead && !entry.warm) {
      entry.warm = true;
      warming--;
      return true;
    }
    return false;
  };
  entry.failed = (error) => {
    spawned.delete(entry.key);
    if (entry.released) return;
    if (entry.onError) entry.onError(error);
    else {
      // An isolate that fails before any run is sandgate's fault: say so on stderr (the
      // operator's log).
      console.error(`sandgate V8 worker: an isolate failed: ${error && error.message}`);
      const at = idle.indexOf(entry);
      if (at >= 0) idle.splice(at, 1);
      leaveWarming();
    }
  };
  // The port here is never closed while its isolate lives: Deno's code in the isolate would
  // then dispatch a `close` event made with the global `Event`, which the guest deleted, and
  // the isolate would die of an uncaught error written to standard error. The port closes by
  // itself once the isolate is gone.
  let closed = false;
  port1.on("close", () => { closed = true; });
  const terminate = () => {
    if (entry.worker !== null) entry.worker.terminate();
    else entry.spawner.postMessage({ t: "kill", key: entry.key });
  };
  // A run that ended on its own lets its isolate go: the isolate closes itself, and one that
  // has not within `LINGER_MS` (it should not happen) is terminated.
  entry.forget = () => {
    spawned.delete(entry.key);
    entry.onMessage = null;
    entry.onError = null;
    entry.released = true;
    setTimeout(() => { if (!closed) terminate(); }, LINGER_MS);
  };
  // A run stopped here (its deadline, the host's `Cancel`, a failure) has its isolate
  // terminated, which stops even a loop.
  entry.stop = () => {
    entry.forget();
    terminate();
  };
  port1.on("message", (data) => {
    if (ahead && !entry.warm && data !== null && typeof data === "object") {
      // Warming: `ready`, then a `ping` (which runs its receiving code once, so a run's first
      // message finds it compiled: about a millisecond), then warm.
      if (data.t === "ready") port1.postMessage({ t: "ping" });
      else if (data.t === "pong" && leaveWarming()) idle.push(entry);
      return;
    }
    if (entry.onMessage) entry.onMessage(data);
  });
  if (how === "here") {
    entry.worker = new Worker(workerSource, isolateOptions(port2, heapMb));
    entry.worker.on("error", (error) => entry.failed(error));
  } else {
    if (ahead) warming++;
    entry.spawner = spawners[nextSpawner];
    nextSpawner = (nextSpawner + 1) % spawners.length;
    spawned.set(entry.key, entry);
    entry.spawner.postMessage({ t: "make", key: entry.key, heapMb, port: port2 }, [port2]);
  }
  return entry;
};
// The isolate for a run (`alone`: no other run is in flight here).
const takeIsolate = (heapMb, alone) => {
  if (heapMb === HEAP_MB && idle.length > 0) {
    const entry = idle.shift();
    if (idle.length === 0 && warming === 0) refill();
    return entry;
  }
  return startIsolate(heapMb, alone ? "here" : "spawned");
};
const refill = () => {
  while (idle.length + warming < PREWARM) startIsolate(HEAP_MB, "ahead");
};

// Ends a run: with its own outcome (`finished`: the isolate closes itself), or stopped here
// (its deadline, the host's `Cancel`, a failure), which terminates its isolate, stopping even
// a loop.
const end = (run, outcome, stats, finished) => {
  const state = runs.get(run);
  if (state === undefined) return;
  runs.delete(run);
  clearTimeout(state.deadline);
  // The answer first: stopping an isolate may take a moment.
  if (outcome !== null) sendJson({ Done: { run, outcome, stats: stats || { memory_bytes: 0, calls: state.calls } } });
  for (const timer of state.timers) clearTimeout(timer);
  if (finished) state.isolate.forget();
  else state.isolate.stop();
  if (runs.size === 0) refill();
};

const timeoutError = (limits, inFlight) => ({
  kind: "timeout",
  name: "TimeoutError",
  message: texts.timeout.replace("{wall_ms}", String(limits.wall_ms)).replace("{in_flight}", String(inFlight)),
  stack: "",
});

// The backends of a tool set, in first-seen order, with their tools' indices (as the QuickJS
// worker's `ToolSet` groups them).
const backendsOf = (tools) => {
  const byName = new Map();
  const list = [];
  tools.forEach((tool, index) => {
    let backend = byName.get(tool.backend);
    if (backend === undefined) {
      backend = { name: tool.backend, js: tool.jsBackend, tools: [] };
      byName.set(tool.backend, backend);
      list.push(backend);
    }
    backend.tools.push(index);
  });
  return list;
};

const startRun = (frame) => {
  const { run, js, tools, host_functions, env, context, limits, mode } = frame;
  if (tools !== null && tools !== undefined) {
    knownTools = tools;
    knownBackends = backendsOf(tools);
  }
  const heapMb = Math.max(16, Math.min(HEAP_MB, Math.ceil(limits.memory_bytes / 1048576)));
  const entry = takeIsolate(heapMb, runs.size === 0);
  const state = { isolate: entry, deadline: 0, calls: 0, toGuest: new Map(), toHost: new Map(), timers: new Set() };
  runs.set(run, state);
  state.deadline = setTimeout(() => end(run, { Err: timeoutError(limits, state.toGuest.size) }), limits.wall_ms);
  entry.onMessage = (data) => fromGuest(run, state, data);
  entry.onError = (error) => {
    const memory = error && error.code === "ERR_WORKER_OUT_OF_MEMORY";
    end(run, {
      Err: memory
        ? { kind: "memory", name: "InternalError", message: `out of memory: the execution used up its ${heapMb} MiB heap`, stack: "" }
        : { kind: "internal", name: "InternalError", message: `the V8 isolate failed: ${error && error.message}`, stack: "" },
    });
  };
  entry.port.postMessage({
    t: "run",
    run,
    js,
    tools: knownTools,
    backends: knownBackends,
    hostFunctions: host_functions,
    env,
    context: context === undefined ? null : context,
    limits,
    mode,
    texts,
  });
};

const fromGuest = (run, state, message) => {
  if (!runs.has(run) || message === null || typeof message !== "object") return;
  switch (message.t) {
    case "call": {
      const id = nextCallId++;
      state.toGuest.set(id, message.id);
      state.toHost.set(message.id, id);
      state.calls++;
      sendCall(run, id, message.tool === true, message.index >>> 0, String(message.args), Array.isArray(message.site) ? message.site : null);
      break;
    }
    case "cancelCall": {
      const id = state.toHost.get(message.id);
      if (id === undefined) break;
      state.toHost.delete(message.id);
      state.toGuest.delete(id);
      sendJson({ CancelCall: { run, id } });
      break;
    }
    case "timer": {
      // The guest's timers (bounded in number there); each fires as a message.
      const id = message.id;
      const timer = setTimeout(() => {
        state.timers.delete(timer);
        if (runs.has(run)) state.isolate.port.postMessage({ t: "fire", id });
      }, Math.min(Math.max(0, Number(message.ms) || 0), 86400000));
      state.timers.add(timer);
      break;
    }
    case "log":
      sendJson({ Log: { run, level: String(message.level), message: String(message.message) } });
      break;
    case "done": {
      const o = message.outcome;
      const outcome = o && typeof o.ok === "string" ? { Ok: o.ok } : { Err: o && o.err ? o.err : { kind: "internal", name: "InternalError", message: "the run ended without an outcome", stack: "" } };
      end(run, outcome, { memory_bytes: Math.max(0, Math.floor(Number(message.memory) || 0)), calls: message.calls >>> 0 }, true);
      break;
    }
  }
};

const reply = (body) => {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const run = getU64(view, 1);
  const id = getU64(view, 9);
  const state = runs.get(run);
  if (state === undefined) return;
  const guestId = state.toGuest.get(id);
  if (guestId === undefined) return;
  state.toGuest.delete(id);
  state.toHost.delete(guestId);
  const rest = body.subarray(18);
  if (body[17] === 0) state.isolate.port.postMessage({ t: "reply", id: guestId, ok: decoder.decode(rest) });
  else {
    const failure = JSON.parse(decoder.decode(rest));
    state.isolate.port.postMessage({ t: "reply", id: guestId, err: { kind: failure.kind, message: failure.message } });
  }
};

const hostFrame = (body) => {
  if (body.length > 0 && body[0] === 0x52) return reply(body);
  const frame = JSON.parse(decoder.decode(body));
  if (frame.Run) startRun(frame.Run);
  else if (frame.Cancel) end(frame.Cancel.run, null);
};

// ---- the loop --------------------------------------------------------------------------------
refill();
sendJson({ Ready: { protections, template_bytes: null, fresh_per_run: true } });
let buffer = new Uint8Array(1 << 16);
let filled = 0;
for (;;) {
  if (filled === buffer.length) {
    const bigger = new Uint8Array(buffer.length * 2);
    bigger.set(buffer);
    buffer = bigger;
  }
  const n = await Deno.stdin.read(buffer.subarray(filled));
  if (n === null) break;
  filled += n;
  let at = 0;
  while (filled - at >= 4) {
    const length = new DataView(buffer.buffer, at, 4).getUint32(0, true);
    if (length > MAX_FRAME_BYTES) throw new Error(`a frame of ${length} bytes is over the limit`);
    if (filled - at - 4 < length) {
      if (4 + length > buffer.length) {
        const bigger = new Uint8Array(4 + length);
        bigger.set(buffer.subarray(at, filled));
        buffer = bigger;
        filled -= at;
        at = 0;
      }
      break;
    }
    hostFrame(buffer.slice(at + 4, at + 4 + length));
    at += 4 + length;
  }
  if (at > 0) {
    buffer.copyWithin(0, at, filled);
    filled -= at;
  }
}
Deno.exit(0);
