// sandgate's V8 worker process: the main thread of a locked-down Deno, which speaks the worker
// frame protocol (`wire/protocol.rs`) on stdin and stdout, exactly as the QuickJS worker does,
// and runs executions in isolates (Deno's Node-style workers, each with a heap limit of its
// own), one execution at a time in each, every one in a fresh V8 context (`shell.js`). No guest
// code runs on this thread, so it always answers: it stops a run at its deadline or on the
// host's `Cancel` by terminating the run's isolate, even one stuck in a loop. An isolate whose
// run ended on its own serves the next (up to `RUNS_PER_ISOLATE`) once it has let go of it.
//
// A few isolates are kept ready (`PREWARM`), started by spawner threads. Deno's permissions
// are all denied (no `--allow-*` flag), so nothing here or in an isolate can open a file or a
// socket, and the process itself is locked down by the launcher before Deno starts
// (`v8/mod.rs`).
//
// Arguments: the protections JSON, the limit texts JSON, the heap in MiB, then the preamble,
// the web basics, the guest bootstrap (`guest.js`) and the isolate shell (`shell.js`) as source
// text.
"use strict";
import { MessageChannel, Worker } from "node:worker_threads";

const [protectionsJson, textsJson, heapMbText, preambleSource, webSource, guestSource, shellSource] = Deno.args;
// Each isolate's heap, in MiB: past it V8 stops that isolate alone (Node's `resourceLimits`),
// where a process-wide limit would end the whole process.
const HEAP_MB = Math.max(16, Number(heapMbText) || 64);
const protections = JSON.parse(protectionsJson);
const texts = JSON.parse(textsJson);
// A source made of parts (`engine/sources.rs`, `v8/mod.rs`) declares each part's functions with
// `export`, so each file lints on its own; in a function body they are plain declarations.
const unexported = (source) => source.replace(/^export (?=function |const |class )/gm, "");
const asFactory = (source) =>
  `(function () {\n${unexported(source).replace("export default function", "return function")}\n})()`;
// The guest bootstrap, run first in each execution's context: a function of the shell's
// functions that returns the run's entry point (`guest.js`).
const guestBootstrap = `(function (host) {\n"use strict";\nconst __SG_PREAMBLE = ${
  asFactory(preambleSource)
};\nconst __SG_WEB = ${asFactory(webSource)};\n${unexported(guestSource)}\n})`;
// Each isolate's first script: the shell (`shell.js`), with the bootstrap as its text.
const workerSource = `const __SG_GUEST = ${JSON.stringify(guestBootstrap)};\n${shellSource}`;

// ---- frames (the codec is `frames.js`, which runs before this) ---------------------------
const writeAll = (bytes) => {
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
};
const sendJson = (frame) => writeAll(jsonFrame(frame));
const sendCall = (run, id, tool, index, args, site) => writeAll(callFrame(run, id, tool, index, args, site));

// ---- runs ----------------------------------------------------------------------------------
// Runs on this process: run number → { isolate, deadline timer, calls: host id → guest id }.
const runs = new Map();
let nextCallId = 1;
let knownTools = [];
let knownBackends = [];

// Isolates are started by spawner threads (web workers of this process that run no guest
// code), since starting one takes its starter 20-40 ms: on this thread that would hold up every
// run's messages. An isolate a spawner starts begins running about 500 ms later (Deno's nested
// workers), so `PREWARM` are kept ready (they have answered `ready` and a `ping`), and topped up
// once no run is in flight here, when their start takes CPU from no run. A run takes the ready
// isolate that served last (its code and caches are warm). A run that finds none ready gets
// one started here when it is alone (a first run) or needs a heap other than the default, and
// otherwise (a burst) waits for the next that is ready, started by a spawner or freed by a run
// that ended: this thread stays free to serve the runs in flight. Either way the isolate talks to this thread over a `MessagePort` of its own, handed over in
// its `workerData`, so no message of a run passes through a spawner.
const PREWARM = 4;
// Ready isolates kept at most (each holds about 12 MiB).
const MAX_IDLE = 8;
// How long an isolate whose run ended on its own may take to let go of it before it is ended.
const LINGER_MS = 2000;
// What the ready isolates may hold, all told, of heap their runs left behind, besides the one
// that serves the next run, once the worker is quiet (`QUIET_MS` without a run starting or
// ending). An isolate collects a run's garbage only when it runs again, so after a burst of
// heavy runs every one kept would hold its run's leftovers (eight held 150 MiB more than when
// they started, for as long as the worker stayed quiet): past this, the ready one holding the
// most is ended, and its memory with it (`trimWhenQuiet`).
const IDLE_LEFTOVER_BYTES = 16 * 1048576;
const QUIET_MS = 2000;
// When a run last started or ended here (`performance.now()`).
let lastActivity = 0;
// The least heap (committed) an isolate has reported between runs: what one holds with nothing
// left over.
let leastHeap = Infinity;
// Runs one isolate serves, one after another, each in a fresh context, before it is ended.
const RUNS_PER_ISOLATE = 100;
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
// Isolates ready for a run (`idle`), and how many are on their way there: starting (`warming`)
// or letting go of a run that ended on its own (`draining`).
const idle = [];
let warming = 0;
let draining = 0;

// An isolate with `heapMb` of heap, its events routed to whichever run holds it. `how`: "ahead"
// (a spawner starts it, and it is ready once warm) or "here" (this thread starts it, for a run,
// which holds it at once).
//
// Its state: "warming" (started ahead, not yet answered), "idle", "busy" (a run holds it),
// "draining" (its run ended on its own; it joins `idle` when it answers a ping, which the shell
// does only once the run's context is let go and its event loop turns) or "gone". Every change
// of state goes through `become`, which keeps the counts (`warming`, `draining`) and the `idle`
// list in step with it.
class Isolate {
  constructor(heapMb, how) {
    const { port1, port2 } = new MessageChannel();
    this.key = nextIsolateKey++;
    this.port = port1;
    this.heapMb = heapMb;
    this.runs = 0;
    this.leftover = 0;
    this.worker = null;
    this.spawner = null;
    this.state = how === "ahead" ? "warming" : "busy";
    // What the run holding it hears: its guest's messages, and the isolate's failure.
    this.onMessage = null;
    this.onError = null;
    // The port here is never closed while its isolate lives (an isolate's code learns of it
    // in a `close` event): it closes by itself once the isolate is gone.
    this.closed = false;
    if (this.state === "warming") warming++;
    port1.on("close", () => {
      this.closed = true;
    });
    port1.on("message", (text) => this.heard(text));
    if (how === "here") {
      this.worker = new Worker(workerSource, isolateOptions(port2, heapMb));
      this.worker.on("error", (error) => this.failed(error));
    } else {
      this.spawner = spawners[nextSpawner];
      nextSpawner = (nextSpawner + 1) % spawners.length;
      spawned.set(this.key, this);
      this.spawner.postMessage({ t: "make", key: this.key, heapMb, port: port2 }, [port2]);
    }
  }

  // Leaves a state that is counted, for another.
  become(state) {
    if (this.state === "warming") warming--;
    else if (this.state === "draining") draining--;
    else if (this.state === "idle") {
      const at = idle.indexOf(this);
      if (at >= 0) idle.splice(at, 1);
    }
    this.state = state;
    if (state === "warming") warming++;
    else if (state === "draining") draining++;
    else if (state === "idle") idle.push(this);
  }

  kill() {
    if (this.worker !== null) this.worker.terminate();
    else this.spawner.postMessage({ t: "kill", key: this.key });
  }

  // Forgets it: no run hears it any more. False when it was gone already.
  leave() {
    if (this.state === "gone") return false;
    spawned.delete(this.key);
    this.onMessage = null;
    this.onError = null;
    this.become("gone");
    // It may have been counted on for a waiting run.
    if (waiting.length > 0) startForWaiting();
    return true;
  }

  // Ends the isolate from outside, which stops even a loop. A run stopped here (its deadline,
  // the host's `Cancel`, a failure) has its isolate ended so.
  stop() {
    if (this.leave()) this.kill();
  }

  // Asks an isolate between runs to end itself (the shell's `close`): a spawner busy starting
  // others, as in a burst, would end it only once it is done with them. One that has not ended
  // within `LINGER_MS` is ended from outside.
  retire() {
    if (!this.leave()) return;
    this.port.postMessage("c");
    setTimeout(() => {
      if (!this.closed) this.kill();
    }, LINGER_MS);
  }

  // An isolate that failed: the run holding it ends, and it is ended (`stop`, whose `leave`
  // forgets it among the spawned).
  failed(error) {
    if (this.state === "gone") return;
    if (this.state === "busy" && this.onError) this.onError(error);
    // An isolate that fails outside a run is sandgate's fault: say so on stderr (the
    // operator's log).
    else console.error(`sandgate V8 worker: an isolate failed: ${error && error.message}`);
    this.stop();
  }

  // A run that ended on its own gives its isolate back for another run, if it has the usual
  // heap and has not served `RUNS_PER_ISOLATE`: once the shell answers a ping (it has let go of
  // the run's context, and no code of the run is still running), within `LINGER_MS`, or the
  // isolate is ended.
  release() {
    this.onMessage = null;
    this.onError = null;
    if (this.heapMb !== HEAP_MB || this.runs >= RUNS_PER_ISOLATE) return this.retire();
    this.become("draining");
    this.port.postMessage("p");
    setTimeout(() => {
      if (this.state === "draining") this.stop();
    }, LINGER_MS);
  }

  idle() {
    this.become("idle");
  }

  // A run takes it.
  take() {
    this.become("busy");
    this.runs++;
  }

  // A message from the isolate: while it warms or drains, its `ready` and `pong`; while a run
  // holds it, the run's.
  heard(text) {
    if (this.state === "gone" || typeof text !== "string") return;
    let data;
    try {
      data = JSON.parse(text);
    } catch (_) {
      return;
    }
    if (data === null || typeof data !== "object") return;
    if (this.state === "warming" || this.state === "draining") {
      // Warming: `ready`, then a `ping` (which runs its receiving code once, so a run's first
      // message finds it compiled: about a millisecond), then idle.
      if (data.t === "ready") this.port.postMessage("p");
      else if (data.t === "pong") {
        const heap = Number(data.heap) || 0;
        if (heap < leastHeap) leastHeap = heap;
        this.leftover = heap - leastHeap;
        ready(this);
      }
      return;
    }
    if (this.state === "busy" && this.onMessage) this.onMessage(data);
  }
}
const startIsolate = (heapMb, how) => new Isolate(heapMb, how);
// Runs waiting for a ready isolate, oldest first (a burst: each gets the next isolate that is
// ready, a new one or one whose run has ended). A run that ends while it waits leaves it.
const waiting = [];
// Isolates started for waiting runs at most at once: enough to keep the spawners busy, few
// enough that a burst does not queue a start for every run (isolates freed by runs that end
// serve the rest).
const STARTING_FOR_WAITING = 8;

// Hands a run its isolate and sends it the run.
const give = (state, entry) => {
  state.isolate = entry;
  entry.onMessage = (data) => fromGuest(state.run, state, data);
  entry.onError = (error) => {
    const memory = error && error.code === "ERR_WORKER_OUT_OF_MEMORY";
    end(state.run, {
      Err: memory
        ? {
          kind: "memory",
          name: "InternalError",
          message: `out of memory: the execution used up its ${entry.heapMb} MiB heap`,
          stack: "",
        }
        : {
          kind: "internal",
          name: "InternalError",
          message: `the V8 isolate failed: ${error && error.message}`,
          stack: "",
        },
    });
  };
  entry.port.postMessage(state.message);
  state.message = null;
};
// An isolate that became ready: the oldest waiting run's, else kept. After a burst only
// `MAX_IDLE` are kept: the rest end, and their memory with them.
const ready = (entry) => {
  while (waiting.length > 0) {
    const state = runs.get(waiting.shift());
    if (state !== undefined && state.isolate === null) {
      entry.take();
      give(state, entry);
      startForWaiting();
      return;
    }
  }
  if (entry.state === "draining" && idle.length >= MAX_IDLE) return entry.retire();
  entry.idle();
  if (entry.leftover > 0) trimWhenQuiet();
};
// Once no run has started or ended here for `QUIET_MS`, ends the ready isolates holding the
// most of what their runs left, until the rest hold at most `IDLE_LEFTOVER_BYTES` besides the
// one that serves next (which collects as it goes), and starts fresh ones in their place.
// While runs keep coming the isolates stay: starting new ones would cost each burst more than
// the memory is worth.
let trimTimer = null;
const trimWhenQuiet = () => {
  if (trimTimer !== null) return;
  const wait = runs.size > 0 ? QUIET_MS : lastActivity + QUIET_MS - performance.now();
  trimTimer = setTimeout(() => {
    trimTimer = null;
    if (runs.size > 0 || performance.now() - lastActivity < QUIET_MS) return trimWhenQuiet();
    const others = idle.slice(0, -1).sort((a, b) => b.leftover - a.leftover);
    let held = others.reduce((sum, one) => sum + one.leftover, 0);
    for (const one of others) {
      if (held <= IDLE_LEFTOVER_BYTES) break;
      held -= one.leftover;
      one.retire();
    }
    refill();
  }, Math.max(0, wait));
};
// Isolates about to be ready (starting, or letting go of a run) count towards the waiting runs.
const startForWaiting = () => {
  while (warming + draining < Math.min(waiting.length, STARTING_FOR_WAITING)) startIsolate(HEAP_MB, "ahead");
};
// Finds a run its isolate (`alone`: no other run is in flight here): a ready one, else one
// started for it here when it is alone (and none is about to be ready: one whose run just
// ended answers within a millisecond) or needs a heap of its own, else it waits. Starting one
// here holds this thread for about 20 ms, but one a spawner starts begins running about
// 500 ms later.
const place = (state, alone) => {
  if (state.heapMb === HEAP_MB && idle.length > 0) {
    // The one that last served a run: its code and caches are warm.
    const entry = idle[idle.length - 1];
    entry.take();
    if (idle.length === 0 && warming === 0 && draining === 0) refill();
    return give(state, entry);
  }
  if ((alone && draining === 0) || state.heapMb !== HEAP_MB) {
    const entry = startIsolate(state.heapMb, "here");
    entry.take();
    return give(state, entry);
  }
  waiting.push(state.run);
  startForWaiting();
};
const refill = () => {
  while (idle.length + warming + draining < PREWARM) startIsolate(HEAP_MB, "ahead");
};

// Ends a run: with its own outcome (`finished`: its isolate is given back), or stopped here
// (its deadline, the host's `Cancel`, a failure), which terminates its isolate, stopping even
// a loop.
const end = (run, outcome, stats, finished) => {
  const state = runs.get(run);
  if (state === undefined) return;
  runs.delete(run);
  lastActivity = performance.now();
  clearTimeout(state.deadline);
  // The answer first: stopping an isolate may take a moment.
  if (outcome !== null) sendJson({ Done: { run, outcome, stats: stats || { memory_bytes: 0, calls: state.calls } } });
  // A run still waiting for an isolate has none to give back, and leaves the queue.
  if (state.isolate === null) {
    state.message = null;
    const at = waiting.indexOf(run);
    if (at >= 0) waiting.splice(at, 1);
  } else if (finished) state.isolate.release();
  else state.isolate.stop();
  if (runs.size === 0) refill();
};

// A run that reached its deadline: `timeout` if it had an isolate, else `busy` (none of its
// code ran), each in the host's words (`texts`), with the time limit and what was in flight.
const deadlineError = (state, limits) => {
  const [kind, name, text, inFlight] = state.isolate === null
    ? ["busy", "BusyError", texts.no_isolate, runs.size]
    : ["timeout", "TimeoutError", texts.timeout, state.toGuest.size];
  const message = text.replace("{wall_ms}", String(limits.wall_ms)).replace("{in_flight}", String(inFlight));
  return { kind, name, message, stack: "" };
};

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
  const alone = runs.size === 0;
  const state = {
    run,
    heapMb,
    isolate: null,
    message: null,
    deadline: 0,
    calls: 0,
    toGuest: new Map(),
    toHost: new Map(),
  };
  runs.set(run, state);
  lastActivity = performance.now();
  // A run still waiting for an isolate at its deadline never ran: it is told so, not that
  // its code ran out of time.
  state.deadline = setTimeout(() => end(run, { Err: deadlineError(state, limits) }), limits.wall_ms);
  state.message = "r" + JSON.stringify({
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
  place(state, alone);
};

const fromGuest = (run, state, message) => {
  if (!runs.has(run) || message === null || typeof message !== "object") return;
  switch (message.t) {
    case "call": {
      const id = nextCallId++;
      state.toGuest.set(id, message.id);
      state.toHost.set(message.id, id);
      state.calls++;
      sendCall(
        run,
        id,
        message.tool === true,
        message.index >>> 0,
        String(message.args),
        Array.isArray(message.site) ? message.site : null,
      );
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
    case "log":
      sendJson({ Log: { run, level: String(message.level), message: String(message.message) } });
      break;
    case "done": {
      const o = message.outcome;
      const outcome = o && typeof o.ok === "string" ? { Ok: o.ok } : {
        Err: o && o.err
          ? o.err
          : { kind: "internal", name: "InternalError", message: "the run ended without an outcome", stack: "" },
      };
      end(run, outcome, {
        memory_bytes: Math.max(0, Math.floor(Number(message.memory) || 0)),
        calls: message.calls >>> 0,
      }, true);
      break;
    }
  }
};

// A reply goes to the isolate that waits for it, under the guest's own id for the call.
const reply = ({ run, id, ok, err }) => {
  const state = runs.get(run);
  if (state === undefined) return;
  const guestId = state.toGuest.get(id);
  if (guestId === undefined) return;
  state.toGuest.delete(id);
  state.toHost.delete(guestId);
  const answer = err === undefined ? { ok } : { err };
  state.isolate.port.postMessage(`m${JSON.stringify({ t: "reply", run, id: guestId, ...answer })}`);
};

const hostFrame = (body) => {
  const frame = readHostFrame(body);
  if (frame.Reply) reply(frame.Reply);
  else if (frame.Run) startRun(frame.Run);
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
  // A frame longer than the buffer grows it (up to MAX_FRAME_BYTES, which `takeFrames` holds).
  const at = takeFrames(buffer, filled, hostFrame);
  if (filled - at >= 4) {
    const length = new DataView(buffer.buffer, at, 4).getUint32(0, true);
    if (4 + length > buffer.length) {
      const bigger = new Uint8Array(4 + length);
      bigger.set(buffer.subarray(at, filled));
      buffer = bigger;
      filled -= at;
      continue;
    }
  }
  if (at > 0) {
    buffer.copyWithin(0, at, filled);
    filled -= at;
  }
}
Deno.exit(0);
