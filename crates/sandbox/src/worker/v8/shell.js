// sandgate's V8 isolate shell: the first script of each isolate (a Deno Node-style worker),
// which runs no guest code itself. It holds the isolate's channel to `main.js` (a
// `MessagePort` handed over in `workerData`) and gives each execution a fresh V8 context
// (`node:vm`), in which the guest bootstrap (`guest.js`, with the preamble and web basics) runs
// first: new builtins, prototypes and global for every execution, so nothing one execution
// sets is seen by the next (issue 33: a fresh isolate per execution cost 20 ms of CPU; a
// context costs about 0.3 ms). An isolate runs one execution at a time.
//
// Between the two realms only text and numbers pass. The guest context gets the functions of
// `host` below (`post`, `done`, `random`, `heap`, `url`, `timer`, `clearTimer`, `now`), each taking
// and giving back primitives (`random` fills the guest's own bytes), which `guest.js` captures
// and hides before any guest code runs; every message from `main.js` reaches it as text, parsed
// there with its own `JSON`. No object of this realm ever reaches guest code, so none of its
// constructors can lead back here. The run's timers are this event loop's, dropped when it ends.
//
// Messages from `main.js`, each text with a tag: `r` + a run (a new context), `m` + a message
// for the current run, `p` (a ping: answered `pong` with the isolate's committed heap once no
// run is current and this event loop turns, so `main.js` gives the isolate another run only
// when the last one has let go, and knows what that run left behind), `c` (end this isolate,
// between runs).
"use strict";
{
  const G = globalThis;
  const vm = G.require("node:vm");
  const port = G.require("node:worker_threads").workerData.port;
  const post = port.postMessage.bind(port);
  const setImmediateHere = G.setImmediate;
  const setTimeoutHere = G.setTimeout;
  const nowHere = G.performance.now.bind(G.performance);
  const clearTimeoutHere = G.clearTimeout;
  const closeSelf = G.close.bind(G);
  const getRandomValues = G.crypto.getRandomValues.bind(G.crypto);
  const NativeURL = G.URL;
  const memoryUsage = G.Deno.memoryUsage;
  const stringify = JSON.stringify;
  const StringHere = String;
  // Compiled once per isolate; each context runs it afresh (its functions' bytecode is shared).
  const bootstrap = new vm.Script(__SG_GUEST, { filename: "sandgate-guest.js" });
  // A rejection nobody handled is an event on this global, which would end the isolate unless
  // it is prevented: QuickJS ignores such a rejection, and so does this.
  G.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
  });

  // The current execution's entry point into its context, or null between executions.
  let deliver = null;

  // The run's timers: a queue ordered by when each is due (then by when it was made), with one
  // timer of this loop armed for the earliest. A timer of this loop costs Deno about 2 µs to
  // make, and a run may make ten thousand; these cost a push. Each due one fires in a task of
  // its own, as timers do. Cleared ones leave the queue when they come up, or when they are
  // most of it.
  const queue = [];
  const live = new Set();
  let made = 0;
  let armed = null;
  let armedDue = Infinity;
  const earlier = (a, b) => a.due < b.due || (a.due === b.due && a.order < b.order);
  const swap = (i, j) => {
    const t = queue[i];
    queue[i] = queue[j];
    queue[j] = t;
  };
  const push = (item) => {
    queue.push(item);
    for (let i = queue.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!earlier(queue[i], queue[parent])) break;
      swap(i, parent);
      i = parent;
    }
  };
  const pop = () => {
    const top = queue[0];
    const last = queue.pop();
    if (queue.length > 0) {
      queue[0] = last;
      for (let i = 0;;) {
        const left = 2 * i + 1;
        let least = i;
        if (left < queue.length && earlier(queue[left], queue[least])) least = left;
        if (left + 1 < queue.length && earlier(queue[left + 1], queue[least])) least = left + 1;
        if (least === i) break;
        swap(i, least);
        i = least;
      }
    }
    return top;
  };
  const disarm = () => {
    if (armed !== null) clearTimeoutHere(armed);
    armed = null;
    armedDue = Infinity;
  };
  const arm = () => {
    while (queue.length > 0 && !live.has(queue[0].id)) pop();
    if (queue.length === 0) return disarm();
    const due = queue[0].due;
    if (armed !== null && armedDue <= due) return;
    disarm();
    armedDue = due;
    armed = setTimeoutHere(fireDue, Math.max(0, due - nowHere()));
  };
  const fireDue = () => {
    armed = null;
    armedDue = Infinity;
    const now = nowHere();
    while (queue.length > 0 && queue[0].due <= now) {
      const { id, text } = pop();
      if (!live.delete(id)) continue;
      const entry = deliver;
      setImmediateHere(() => {
        if (deliver === entry && entry !== null) call(entry, text);
      });
    }
    arm();
  };
  const dropTimers = () => {
    queue.length = 0;
    live.clear();
    disarm();
  };
  const host = {
    __proto__: null,
    post: (text) => {
      post(StringHere(text));
    },
    done: () => {
      deliver = null;
      dropTimers();
    },
    // A timer for the run: `fire` is delivered to its context when it is due, if it is still
    // the current one.
    timer: (run, id, ms) => {
      const key = Number(id);
      const delay = Math.min(Math.max(0, Number(ms) || 0), 86400000);
      live.add(key);
      push({ due: nowHere() + delay, order: made++, id: key, text: `m{"t":"fire","run":${Number(run)},"id":${key}}` });
      arm();
    },
    clearTimer: (id) => {
      live.delete(Number(id));
      if (queue.length > 2 * live.size + 1024) {
        // Mostly cleared: keep the live ones (sorted, which is a valid queue).
        const kept = queue.filter((item) => live.has(item.id)).sort((a, b) => (earlier(a, b) ? -1 : 1));
        queue.length = 0;
        for (const item of kept) queue.push(item);
      }
    },
    // Milliseconds on this event loop's clock (`performance.now()` of the guest counts from
    // its execution's start on it).
    now: () => nowHere(),
    // Fills the guest's own Uint8Array (at most 65,536 bytes, as the web's limit).
    random: (bytes) => {
      getRandomValues(bytes);
    },
    heap: (committed) => {
      const usage = memoryUsage();
      return committed ? usage.heapTotal : usage.heapUsed;
    },
    // The parts of a URL as JSON text, or `!` and why it is not one.
    url: (href, base) => {
      try {
        const url = base === undefined
          ? new NativeURL(StringHere(href))
          : new NativeURL(StringHere(href), StringHere(base));
        return stringify([
          url.href,
          url.origin,
          url.protocol,
          url.username,
          url.password,
          url.host,
          url.hostname,
          url.port,
          url.pathname,
          url.search,
          url.hash,
        ]);
      } catch (error) {
        return `!${StringHere(error && error.message)}`;
      }
    },
  };
  // Each message is handled in a task of its own: V8 stopping an isolate at its heap limit is
  // reported (as the run's `memory` end) only for code that runs in a task, not inside a
  // port's event, where the isolate would hang.
  const call = (entry, text) => {
    try {
      entry(text);
    } catch (_) {
      // `guest.js` reports its own faults; whatever is thrown here is the guest's and stays
      // untouched.
    }
  };
  port.addEventListener("message", (event) => {
    const text = event.data;
    if (typeof text !== "string" || text.length === 0) return;
    const tag = text[0];
    if (tag === "p") {
      setImmediateHere(() => {
        if (deliver === null) post(`{"t":"pong","heap":${memoryUsage().heapTotal}}`);
      });
    } else if (tag === "r" && deliver === null) {
      // An ordinary global (`DONT_CONTEXTIFY`): a contextified one forwards through
      // interceptors, which break freezing it and non-writable globals.
      const context = vm.createContext(vm.constants.DONT_CONTEXTIFY);
      const entry = bootstrap.runInContext(context)(host);
      deliver = entry;
      setImmediateHere(() => call(entry, text));
    } else if (tag === "c" && deliver === null) {
      closeSelf();
    } else if (tag === "m" && deliver !== null) {
      const entry = deliver;
      setImmediateHere(() => call(entry, text));
    }
  });
  port.start();
  post('{"t":"ready"}');
}
