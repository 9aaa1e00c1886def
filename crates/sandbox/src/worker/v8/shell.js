// sandgate's V8 isolate shell: the first script of each isolate (a Deno Node-style worker),
// which runs no guest code itself. It holds the isolate's channel to `main.js` (a
// `MessagePort` handed over in `workerData`) and gives each execution a fresh V8 context
// (`node:vm`), in which the guest bootstrap (`guest.js`, with the preamble and web basics) runs
// first: new builtins, prototypes and global for every execution, so nothing one execution
// sets is seen by the next (issue 33: a fresh isolate per execution cost 20 ms of CPU; a
// context costs about 0.3 ms). An isolate runs one execution at a time.
//
// Between the two realms only text and numbers pass. The guest context gets the functions of
// `host` below (`post`, `done`, `random`, `heap`, `url`, `timer`, `clearTimer`), each taking
// and giving back primitives (`random` fills the guest's own bytes), which `guest.js` captures
// and hides before any guest code runs; every message from `main.js` reaches it as text, parsed
// there with its own `JSON`. No object of this realm ever reaches guest code, so none of its
// constructors can lead back here. The run's timers are this event loop's, dropped when it ends.
//
// Messages from `main.js`, each text with a tag: `r` + a run (a new context), `m` + a message
// for the current run, `p` (a ping: answered `pong` once no run is current and this event loop
// turns, so `main.js` gives the isolate another run only when the last one has let go), `c`
// (end this isolate, between runs).
"use strict";
{
  const G = globalThis;
  const vm = G.require("node:vm");
  const port = G.require("node:worker_threads").workerData.port;
  const post = port.postMessage.bind(port);
  const setImmediateHere = G.setImmediate;
  const setTimeoutHere = G.setTimeout;
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
  G.addEventListener("unhandledrejection", (event) => { event.preventDefault(); });

  // The current execution's entry point into its context, or null between executions, and its
  // timers (guest id → this loop's timer; bounded in number by the guest bootstrap).
  let deliver = null;
  const timers = new Map();
  const dropTimers = () => {
    for (const timer of timers.values()) clearTimeoutHere(timer);
    timers.clear();
  };
  const host = {
    __proto__: null,
    post: (text) => { post(StringHere(text)); },
    done: () => {
      deliver = null;
      dropTimers();
    },
    // A timer for the run: `fire` is delivered to its context when it is due, if it is still
    // the current one.
    timer: (run, id, ms) => {
      const entry = deliver;
      const key = Number(id);
      const text = `m{"t":"fire","run":${Number(run)},"id":${key}}`;
      const timer = setTimeoutHere(() => {
        timers.delete(key);
        if (deliver === entry && entry !== null) call(entry, text);
      }, Math.min(Math.max(0, Number(ms) || 0), 86400000));
      timers.set(key, timer);
    },
    clearTimer: (id) => {
      const key = Number(id);
      const timer = timers.get(key);
      if (timer !== undefined) {
        clearTimeoutHere(timer);
        timers.delete(key);
      }
    },
    // Fills the guest's own Uint8Array (at most 65,536 bytes, as the web's limit).
    random: (bytes) => { getRandomValues(bytes); },
    heap: (committed) => {
      const usage = memoryUsage();
      return committed ? usage.heapTotal : usage.heapUsed;
    },
    // The parts of a URL as JSON text, or `!` and why it is not one.
    url: (href, base) => {
      try {
        const url = base === undefined ? new NativeURL(StringHere(href)) : new NativeURL(StringHere(href), StringHere(base));
        return stringify([url.href, url.origin, url.protocol, url.username, url.password, url.host, url.hostname, url.port, url.pathname, url.search, url.hash]);
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
      setImmediateHere(() => { if (deliver === null) post("{\"t\":\"pong\"}"); });
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
  post("{\"t\":\"ready\"}");
}
