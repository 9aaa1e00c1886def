// sandgate preamble: builds the guest's world from data passed in by the worker, never from
// generated code, so no tool or backend name can inject anything. The worker compiles it to
// bytecode once. In each fresh QuickJS context it runs in two steps: this function, ahead of
// time (console, timers, ToolError, web basics), and the `bind` function it returns, when an
// execution arrives with its tools, host functions and context. No user code runs before
// both. The native functions stay in these closures; none is put on the global object.
export default function (natives) {
  "use strict";
  const G = globalThis;
  const {
    call,
    callHost,
    log,
    setTimer,
    clearTimer,
    randomBytes,
    parseUrl,
    loadWeb,
    loadLocale,
    nativeIntl,
    monotonic,
    toolsOf,
    declarationOf,
    lastCallId,
    cancelCall,
  } = natives;
  // Captured now: backends are bound lazily, after guest code may have replaced these.
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const createObject = Object.create;
  // Captured now, so code that replaces JSON.parse or JSON.stringify cannot change what the
  // bridge sends or how results are read.
  const parseJson = JSON.parse;
  const stringifyJson = JSON.stringify;
  // Captured for the same reason: guest code cannot change how calls start or settle.
  const ErrorCtor = Error;
  const NativePromise = Promise;
  const promiseThen = Promise.prototype.then;
  const apply = Reflect.apply;
  const rejected = (error) => NativePromise.reject(error);
  // Descriptors have no prototype, so a getter or setter planted on Object.prototype cannot
  // turn them into something else.
  const shown = { __proto__: null, value: undefined, enumerable: true, writable: false, configurable: false };
  const hidden = { __proto__: null, value: undefined, enumerable: false, writable: false, configurable: false };
  const fixed = (obj, key, value, enumerable = true) => {
    const descriptor = enumerable ? shown : hidden;
    descriptor.value = value;
    defineProperty(obj, key, descriptor);
    descriptor.value = undefined;
    return obj;
  };

  // ---- stack-trace hooks ----------------------------------------------------------------
  // `Error.prepareStackTrace` hands code CallSite objects, whose getFunction() returns each
  // frame's function, the preamble's own closures included. As V8 does for strict code (and
  // all guest code is strict), getFunction() and getThis() give undefined, for good.
  {
    const hadHook = "prepareStackTrace" in ErrorCtor;
    const hook = ErrorCtor.prepareStackTrace;
    let site = null;
    ErrorCtor.prepareStackTrace = (_, sites) => {
      site = sites[0];
      return "";
    };
    void new ErrorCtor().stack;
    if (hadHook) ErrorCtor.prepareStackTrace = hook;
    else delete ErrorCtor.prepareStackTrace;
    const proto = site !== null ? Object.getPrototypeOf(site) : null;
    const nothing = function () {
      return undefined;
    };
    for (const name of ["getFunction", "getThis"]) {
      if (proto !== null && name in proto) {
        try {
          defineProperty(proto, name, {
            __proto__: null,
            value: nothing,
            writable: false,
            enumerable: false,
            configurable: false,
          });
        } catch (_) {
          // V8 (the V8 engine's isolates) keeps them fixed, and answers undefined for strict
          // frames already: every frame here is strict.
        }
      }
    }
  }

  // ---- tool results -------------------------------------------------------------------
  class ToolError extends Error {
    constructor(tool, message, content) {
      super(message);
      this.name = "ToolError";
      this.tool = tool;
      this.content = content;
    }
  }
  fixed(G, "ToolError", ToolError, false);
  // A call that needs a person's approval and did not get it (no, a timeout, or nobody could
  // be asked) rejects with one of these: the host makes it, and the code may catch it.
  class ApprovalDenied extends Error {
    constructor(message) {
      super(message);
      this.name = "ApprovalDenied";
    }
  }
  fixed(G, "ApprovalDenied", ApprovalDenied, false);

  // Results and call arguments travel as JSON, where a Map or a Set would silently become
  // `{}`: they become an object of their entries and an array instead. Like any builtin
  // method, code may replace these.
  const fromEntries = Object.fromEntries;
  const arrayFrom = Array.from;
  const method = (proto, name, fn) =>
    defineProperty(proto, name, { __proto__: null, value: fn, writable: true, enumerable: false, configurable: true });
  method(Map.prototype, "toJSON", function toJSON() {
    return fromEntries(this);
  });
  method(Set.prototype, "toJSON", function toJSON() {
    return arrayFrom(this);
  });

  // Plain loops, here and in console: a closure of ours handed to a builtin that code may have
  // replaced (Array.prototype.map, JSON.stringify, ...) would reach the guest.
  const isArray = Array.isArray;
  const textOf = (content) => {
    let text = "";
    let first = true;
    if (isArray(content)) {
      for (let i = 0; i < content.length; i++) {
        const c = content[i];
        if (!c || c.type !== "text") continue;
        text += (first ? "" : "\n") + c.text;
        first = false;
      }
    }
    return text;
  };

  function mapResult(raw) {
    if (raw.structuredContent !== undefined && raw.structuredContent !== null) return raw.structuredContent;
    const content = Array.isArray(raw.content) ? raw.content : [];
    if (content.length === 1 && content[0] && content[0].type === "text" && typeof content[0].text === "string") {
      const text = content[0].text;
      const first = text.trimStart()[0];
      if (first === "{" || first === "[") {
        try {
          return parseJson(text);
        } catch (_) {
          /* not JSON: the string itself */
        }
      }
      return text;
    }
    return content;
  }

  function argsJson(qualified, args) {
    if (args === undefined) return "{}";
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      throw new TypeError(
        `${qualified} takes one object of named arguments, e.g. ${qualified}({ ... }); got ${
          Array.isArray(args) ? "an array" : typeof args
        }`,
      );
    }
    return stringifyJson(args);
  }

  // Web basics and rarely used helpers, compiled ahead but loaded on first use (see below).
  let web = null;
  const webNow = () => {
    if (web === null) web = loadWeb({ randomBytes, parseUrl });
    return web;
  };
  // ---- console ------------------------------------------------------------------------
  function show(value, seen) {
    if (typeof value === "string") return value;
    if (typeof value === "bigint") return `${value}n`;
    if (typeof value === "function") return `[Function ${value.name || "anonymous"}]`;
    if (typeof value === "symbol" || value === undefined || value === null || typeof value !== "object") {
      return String(value);
    }
    // Not `{}`: a Promise logged where its value was meant lacks an `await`, and
    // "[object Promise]" is the symptom every JavaScript programmer knows.
    if (value instanceof NativePromise) return "[object Promise]";
    if (value instanceof Error) {
      // A failed call's error also carries where the call was made (see `withSite`).
      const stack = `${value.stack || ""}${value.callerStack || ""}`;
      return stack ? `${value.name}: ${value.message}\n${stack}` : `${value.name}: ${value.message}`;
    }
    if (seen.has(value)) return "[Circular]";
    seen.add(value);
    try {
      return stringifyJson(value, (k, v) => {
        if (typeof v === "bigint") return `${v}n`;
        if (v !== null && typeof v === "object" && k !== "") {
          if (seen.has(v)) return "[Circular]";
          seen.add(v);
        }
        return v;
      });
    } catch (_) {
      return String(value);
    } finally {
      seen.delete(value);
    }
  }
  const NativeSet = Set;
  // `console.group` indents what follows, two spaces a level, every line of it.
  let groupDepth = 0;
  const indented = (text) => {
    if (groupDepth === 0) return text;
    let pad = "";
    for (let i = 0; i < groupDepth; i++) pad += "  ";
    let out = pad;
    for (let i = 0; i < text.length; i++) out += text[i] === "\n" ? "\n" + pad : text[i];
    return out;
  };
  const joined = (args) => {
    let text = "";
    for (let i = 0; i < args.length; i++) text += (i ? " " : "") + show(args[i], new NativeSet());
    return text;
  };
  const logger = (level) => (...args) => {
    log(level, indented(joined(args)));
  };
  // Plain objects without a prototype: no method a guest could replace is called on them.
  const counts = { __proto__: null };
  const started = { __proto__: null };
  const labelOf = (label) => (label === undefined ? "default" : String(label));
  // `console.table` renders in web.js, loaded on first use (it is rarely called, and would
  // otherwise make every execution's template larger).
  const table = (data, columns) => {
    log("log", indented(webNow().renderTable(data, columns, (value) => show(value, new NativeSet()), joined)));
  };
  fixed(
    G,
    "console",
    freeze({
      log: logger("log"),
      info: logger("info"),
      warn: logger("warn"),
      error: logger("error"),
      debug: logger("debug"),
      trace: (...args) => {
        const where = (new Error().stack || "").split("\n").slice(1).join("\n");
        log("debug", indented(`Trace: ${joined(args)}${where ? "\n" + where : ""}`));
      },
      dir: (value) => {
        log("log", indented(joined([value])));
      },
      dirxml: logger("log"),
      table,
      group: (...args) => {
        if (args.length) log("log", indented(joined(args)));
        groupDepth++;
      },
      groupCollapsed: (...args) => {
        if (args.length) log("log", indented(joined(args)));
        groupDepth++;
      },
      groupEnd: () => {
        if (groupDepth > 0) groupDepth--;
      },
      count: (label) => {
        const name = labelOf(label);
        counts[name] = (counts[name] || 0) + 1;
        log("log", indented(`${name}: ${counts[name]}`));
      },
      countReset: (label) => {
        counts[labelOf(label)] = 0;
      },
      time: (label) => {
        started[labelOf(label)] = Date.now();
      },
      timeLog: (label, ...args) => {
        const name = labelOf(label);
        if (started[name] === undefined) return log("warn", indented(`Timer '${name}' does not exist`));
        log("log", indented(`${name}: ${Date.now() - started[name]} ms${args.length ? " " + joined(args) : ""}`));
      },
      timeEnd: (label) => {
        const name = labelOf(label);
        if (started[name] === undefined) return log("warn", indented(`Timer '${name}' does not exist`));
        log("log", indented(`${name}: ${Date.now() - started[name]} ms`));
        delete started[name];
      },
      assert: (condition, ...args) => {
        if (!condition) log("error", indented(`Assertion failed${args.length ? ": " + joined(args) : ""}`));
      },
    }),
    false,
  );

  // ---- timers -------------------------------------------------------------------------
  fixed(G, "setTimeout", (callback, ms, ...args) => {
    if (typeof callback !== "function") throw new TypeError("setTimeout needs a function; strings are not evaluated");
    return setTimer(Math.max(0, Number(ms) || 0), () => callback(...args));
  }, false);
  // An interval is a chain of timers, one pending at a time (so it counts as one against the
  // timer limit); its id is its first timer's, and `clearTimeout` clears it too, as in browsers.
  const intervals = { __proto__: null };
  fixed(G, "setInterval", (callback, ms, ...args) => {
    if (typeof callback !== "function") throw new TypeError("setInterval needs a function; strings are not evaluated");
    const delay = Math.max(1, Number(ms) || 0);
    const state = { __proto__: null, timer: 0, stopped: false };
    const tick = () => {
      if (state.stopped) return;
      state.timer = setTimer(delay, tick);
      callback(...args);
    };
    state.timer = setTimer(delay, tick);
    const id = state.timer;
    intervals[id] = state;
    return id;
  }, false);
  const clear = (id) => {
    const key = Number(id) || 0;
    const interval = intervals[key];
    if (interval) {
      interval.stopped = true;
      clearTimer(interval.timer);
      delete intervals[key];
    } else {
      clearTimer(key);
    }
  };
  fixed(G, "clearTimeout", clear, false);
  fixed(G, "clearInterval", clear, false);

  // ---- web basics: compiled ahead but loaded on first use ------------------------------
  const lazyWeb = (name) =>
    Object.defineProperty(G, name, {
      configurable: true,
      enumerable: false,
      get() {
        const value = webNow()[name];
        fixed(G, name, value, false);
        return value;
      },
    });
  [
    "URL",
    "URLSearchParams",
    "TextEncoder",
    "TextDecoder",
    "structuredClone",
    "atob",
    "btoa",
    "crypto",
    "AbortController",
    "AbortSignal",
  ].forEach(lazyWeb);

  // ---- locale ---------------------------------------------------------------------------
  // An engine with ICU (V8) passes its own `Intl`, and its builtins' locale methods stay its
  // own. Without one (QuickJS), `Intl` and those methods are `locale.js`, loaded on first use:
  // the common locales and options give what ICU gives; anything else is a RangeError that
  // says so, never a silently different result.
  if (nativeIntl !== undefined) {
    fixed(G, "Intl", nativeIntl, false);
  } else {
    let locale = null;
    const localeNow = () => {
      if (locale === null) locale = loadLocale();
      return locale;
    };
    defineProperty(G, "Intl", {
      configurable: true,
      enumerable: false,
      get() {
        const value = localeNow().Intl;
        fixed(G, "Intl", value, false);
        return value;
      },
    });
    method(String.prototype, "localeCompare", function localeCompare(that, locales, options) {
      return localeNow().localeCompare(String(this), String(that), locales, options);
    });
    method(Number.prototype, "toLocaleString", function toLocaleString(locales, options) {
      return localeNow().numberToLocale(Number(this), locales, options);
    });
    method(Date.prototype, "toLocaleString", function toLocaleString(locales, options) {
      return localeNow().dateToLocale(this, "both", locales, options);
    });
    method(Date.prototype, "toLocaleDateString", function toLocaleDateString(locales, options) {
      return localeNow().dateToLocale(this, "date", locales, options);
    });
    method(Date.prototype, "toLocaleTimeString", function toLocaleTimeString(locales, options) {
      return localeNow().dateToLocale(this, "time", locales, options);
    });
  }

  // ---- performance: this execution's clock -----------------------------------------------
  // `performance.now()` counts milliseconds since the execution began, in steps of 0.1 ms on
  // both engines (a finer clock times caches, not code: SECURITY.md); `timeOrigin` is when it
  // began, in milliseconds since 1970. Set anew by `bind`.
  let clockOrigin = 0;
  let clockOriginEpoch = 0;
  const floor = Math.floor;
  fixed(
    G,
    "performance",
    freeze({
      now: () => floor((monotonic() - clockOrigin) * 10) / 10,
      get timeOrigin() {
        return clockOriginEpoch;
      },
      toJSON: () => ({ timeOrigin: clockOriginEpoch }),
    }),
    false,
  );

  // ---- per execution: the tools, host functions and context it was given -------------
  // QuickJS serves small allocations from 4 KiB arenas, one list per size class, and frees an
  // arena the moment its last block is freed. Code that makes and drops one small object at a
  // time (a call's argument JSON, a promise) would create and free an arena each time. One
  // string of each size, kept for the runtime's life, keeps one arena of every class alive.
  const arenaPins = Array.from({ length: 64 }, (_, i) => "x".repeat(i * 8));

  // ---- Node's habits with `fs` ----------------------------------------------------------
  const FS_MODULES = { __proto__: null, "fs": true, "node:fs": true, "fs/promises": true, "node:fs/promises": true };
  const FS_HAS = "fs has readFile, writeFile, readdir and stat, each returning a Promise";
  // What models reach for, and what to write instead.
  const FS_SYNC = {
    __proto__: null,
    readFileSync: 'await fs.readFile(path, "utf8")',
    writeFileSync: "await fs.writeFile(path, data)",
    readdirSync: "await fs.readdir(path)",
    statSync: "await fs.stat(path)",
    existsSync: "await fs.stat(path) in a try/catch (it throws when there is nothing there)",
    lstatSync: "await fs.stat(path)",
  };
  const FS_ABSENT = [
    "appendFile",
    "mkdir",
    "rm",
    "rmdir",
    "unlink",
    "rename",
    "copyFile",
    "access",
    "createReadStream",
    "createWriteStream",
    "watch",
  ];
  // `fs.promises` is `fs` itself; a callback given last is called with (error, value); the
  // sync and absent functions throw, naming what to write instead.
  const nodeFs = (fs) => {
    // Bytes (a Uint8Array, an ArrayBuffer, any typed array) are written as base64.
    const write = fs.writeFile;
    if (typeof write === "function") {
      fs.writeFile = (path, data, ...rest) => {
        if (!(data instanceof ArrayBuffer) && !ArrayBuffer.isView(data)) return write(path, data, ...rest);
        const bytes = data instanceof ArrayBuffer
          ? new Uint8Array(data)
          : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        let text = "";
        for (let i = 0; i < bytes.length; i += 8192) {
          text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
        }
        return write(path, webNow().btoa(text), { encoding: "base64" });
      };
    }
    // Stats as Node gives them: `isFile()` and `isDirectory()` are methods, `mtimeMs` the time.
    const stat = fs.stat;
    if (typeof stat === "function") {
      fs.stat = (...args) =>
        apply(promiseThen, stat(...args), [(s) => (s === null || typeof s !== "object" ? s : {
          size: s.size,
          mtimeMs: s.modifiedMs,
          mtime: new Date(s.modifiedMs),
          modifiedMs: s.modifiedMs,
          isFile: () => s.isFile === true,
          isDirectory: () => s.isDirectory === true,
          isSymbolicLink: () => s.isSymbolicLink === true,
        })]);
    }
    for (const name of ["readFile", "writeFile", "readdir", "stat"]) {
      const call = fs[name];
      if (typeof call !== "function") continue;
      fs[name] = (...args) => {
        const last = args.length > 0 ? args[args.length - 1] : undefined;
        if (typeof last !== "function") return call(...args);
        apply(promiseThen, call(...args.slice(0, -1)), [(value) => {
          last(null, value);
        }, (error) => {
          last(error);
        }]);
        return undefined;
      };
    }
    fixed(fs, "promises", fs, false);
    for (const name in FS_SYNC) {
      fixed(fs, name, () => {
        throw new TypeError(`fs.${name} is not available: the sandbox's fs is asynchronous. Write ${FS_SYNC[name]}.`);
      }, false);
    }
    for (const name of FS_ABSENT) {
      fixed(fs, name, () => rejected(new TypeError(`fs.${name} is not available: ${FS_HAS}.`)), false);
    }
  };
  const moduleHint = (name, hostFunctions) => {
    const bare = name.replace(/^node:/, "").split("/")[0];
    const hasFetch = hostFunctions.indexOf("fetch") >= 0;
    if (["axios", "node-fetch", "got", "request", "undici", "superagent", "http", "https"].indexOf(bare) >= 0) {
      return hasFetch
        ? "Use fetch(url, init), which this execution has."
        : "There is no network in this execution (no fetch: the profile grants no hosts); use a backend tool that fetches, or ask the operator for a `net` grant.";
    }
    if (bare === "crypto") return "Use the crypto global: crypto.randomUUID() and crypto.getRandomValues().";
    if (bare === "path") return "Join paths as strings (`${dir}/${name}`); fs takes paths beneath its granted roots.";
    if (bare === "buffer") return "Use TextEncoder and TextDecoder for bytes, btoa and atob for base64.";
    return "Backends are already globals: call them directly, e.g. `await backend.tool({...})`.";
  };

  // `process.env.NAME` and `env.NAME`: the granted variables' values, loaded when the
  // execution started; a name the profile does not grant is `undefined`, with a warning in the
  // logs that names the grant (once per name).
  const bindEnv = (target, spaces, envValues) => {
    // Granted names with a value; granted names that are not set come as null.
    const granted = Object.keys(envValues);
    const values = createObject(null);
    for (const name of granted) if (typeof envValues[name] === "string") values[name] = envValues[name];
    freeze(values);
    const warned = createObject(null);
    const lookup = new Proxy(values, {
      get(held, name) {
        if (typeof name !== "string" || name in held) return held[name];
        if (warned[name] === undefined && name !== "toJSON" && name !== "then") {
          warned[name] = true;
          log(
            "warn",
            granted.indexOf(name) >= 0
              ? `process.env.${name} is undefined: the profile grants it, and it is not set in sandgate's environment`
              : `process.env.${name} is undefined: this execution has only the environment variables its profile grants (${
                granted.join(", ")
              }); ask the operator to add ${name} to the profile's env`,
          );
        }
        return undefined;
      },
    });
    fixed(target, "process", freeze({ env: lookup }), false);
    if (spaces.env !== undefined) {
      for (const name in values) if (name !== "get") fixed(spaces.env, name, values[name], true);
    }
  };

  return function bind(backendList, hostFunctions, context, toolMode, envValues) {
    void arenaPins;
    clockOrigin = monotonic();
    clockOriginEpoch = Date.now();
    // ---- backends and tools -------------------------------------------------------------
    // Errors raised after an await have lost the caller's stack; remember where the call was
    // made so the host can point at the user's line.
    const withSite = (error, site) => {
      if (error !== null && typeof error === "object" && site.stack) {
        defineProperty(error, "callerStack", { __proto__: null, value: site.stack, enumerable: false });
      }
      return error;
    };
    // No promise reaction of our own per call: the native parses the reply (in Rust) and
    // calls `map` on it before it settles the promise. Plain functions, not async ones,
    // because an async wrapper costs several more reactions per call; argument errors still
    // reject rather than throw. One `start` for every tool, so binding a tool makes only the
    // two closures the guest sees.
    const start = (index, qualified, args, site, map, options) => {
      let json;
      try {
        json = argsJson(qualified, args);
      } catch (error) {
        return rejected(error);
      }
      const signal = options !== null && typeof options === "object" ? options.signal : undefined;
      if (signal === undefined || signal === null) return call(index, json, site, map);
      if (signal.aborted) return rejected(signal.reason);
      return abortable(call(index, json, site, map), lastCallId(), signal);
    };
    // A call with `{ signal }`: an abort rejects it with the signal's reason and tells the host
    // to drop it (which cancels it upstream).
    const abortable = (promise, id, signal) =>
      new NativePromise((resolve, reject) => {
        const onAbort = () => {
          cancelCall(id);
          reject(signal.reason);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        apply(promiseThen, promise, [
          (value) => {
            signal.removeEventListener("abort", onAbort);
            resolve(value);
          },
          (error) => {
            signal.removeEventListener("abort", onAbort);
            reject(error);
          },
        ]);
      });
    const toolFunction = (index, qualified) => {
      const raw = (args, options) => start(index, qualified, args, new ErrorCtor(), undefined, options);
      const fn = (args, options) => {
        const site = new ErrorCtor();
        return start(index, qualified, args, site, (result) => {
          if (result && result.isError) {
            throw withSite(
              new ToolError(qualified, textOf(result.content) || `${qualified} failed`, result.content),
              site,
            );
          }
          return mapResult(result);
        }, options);
      };
      fixed(fn, "raw", raw);
      fixed(fn, "toolName", qualified, false);
      return fn;
    };
    // A gateway hands over every tool of every backend and a script uses a few, so a backend's
    // object (and its declarations) is built the first time code touches it, from the native's
    // list, with loops that no guest change to builtins can reach: once per backend, a frozen
    // object with an entry per tool under its identifier and, hidden, under its own name.
    const perBackend = (entry) => {
      const built = createObject(null);
      return (b) => {
        if (built[b] !== undefined) return built[b];
        const name = backendList[b][0];
        const obj = createObject(null);
        const tools = toolsOf(b);
        for (let i = 0; i < tools.length; i++) {
          const index = tools[i][0], tool = tools[i][1], jsTool = tools[i][2];
          const value = entry(index, `${name}.${tool}`);
          fixed(obj, jsTool, value);
          if (tool !== jsTool && !(tool in obj)) fixed(obj, tool, value, false);
        }
        built[b] = freeze(obj);
        return built[b];
      };
    };
    const backendObject = perBackend(toolFunction);
    const backendTypes = perBackend((index) => declarationOf(index));
    // On the global object: an accessor that puts what it built in its place on first use
    // (and keeps answering with it if code froze the global object first).
    const lazyGlobal = (key, build, enumerable) =>
      defineProperty(G, key, {
        __proto__: null,
        configurable: true,
        enumerable,
        get() {
          const value = build();
          try {
            fixed(G, key, value, enumerable);
          } catch (_) {
            /* not configurable any more: the accessor stays */
          }
          return value;
        },
      });
    // `mcp.<backend>`, `tools.<backend>` and `__interfaces.<backend>`: frozen objects, made on
    // first use, whose entries are accessors that build the backend on first use.
    const byBackend = (build) => {
      let made = null;
      return () => {
        if (made !== null) return made;
        made = createObject(null);
        for (let b = 0; b < backendList.length; b++) {
          const name = backendList[b][0], js = backendList[b][1];
          const get = () => build(b);
          defineProperty(made, js, { __proto__: null, enumerable: true, configurable: false, get });
          if (name !== js) defineProperty(made, name, { __proto__: null, enumerable: false, configurable: false, get });
        }
        return freeze(made);
      };
    };
    const aliases = byBackend(backendObject);
    const interfaces = byBackend(backendTypes);
    // A stored tool reaches its tools and capabilities only through `ctx` (its declared ones):
    // no backend, alias or capability becomes a global.
    const target = toolMode ? createObject(null) : G;
    if (!toolMode) {
      for (let b = 0; b < backendList.length; b++) {
        const name = backendList[b][0], js = backendList[b][1];
        lazyGlobal(js, () => backendObject(b), true);
        if (name !== js && !(name in G)) lazyGlobal(name, () => backendObject(b), false);
      }
    }
    // Habits of other code-mode systems: mcp.<backend>.<tool> (PML) and tools.<backend>.<tool>.
    // A backend actually named `mcp` or `tools` keeps its name (the host reports the collision).
    if (!toolMode) { for (const alias of ["mcp", "tools"]) if (!(alias in G)) lazyGlobal(alias, aliases, false); }
    lazyGlobal("__interfaces", interfaces, false);
    fixed(G, "__getToolInterface", (name) => {
      const text = String(name);
      const dot = text.indexOf(".");
      const all = interfaces();
      if (dot > 0) {
        const types = all[text.slice(0, dot)];
        const found = types && types[text.slice(dot + 1)];
        if (found !== undefined) return found;
      } else {
        for (const backend of Object.keys(all)) {
          if (all[backend][text] !== undefined) return all[backend][text];
        }
      }
      throw new ReferenceError(
        `no tool named ${JSON.stringify(text)}; use backend.tool, e.g. ${Object.keys(all)[0] || "backend"}.some_tool`,
      );
    }, false);

    // ---- host functions and context -----------------------------------------------------
    // A name with a dot (`fs.readFile`, `env.get`) is a method of a frozen object named by
    // its first part; `fetch` shapes its request and answers with a Response (see web.js).
    // What the execution was not given does not exist: there is no global to probe.
    const hostCall = (index) => (...args) => {
      let json;
      try {
        json = stringifyJson(args);
      } catch (error) {
        return rejected(error);
      }
      return callHost(index, json, new ErrorCtor());
    };
    const spaces = createObject(null);
    hostFunctions.forEach((name, index) => {
      const dot = name.indexOf(".");
      if (dot > 0) {
        const space = name.slice(0, dot);
        if (spaces[space] === undefined) spaces[space] = createObject(null);
        const send = hostCall(index);
        // `state.*` answers `{ value }`, or null for none: `undefined`, as a Map gives.
        spaces[space][name.slice(dot + 1)] = space === "state"
          ? (...args) => apply(promiseThen, send(...args), [(answer) => (answer === null ? undefined : answer.value)])
          : send;
      } else if (name === "fetch") {
        const send = hostCall(index);
        fixed(target, "fetch", (input, init) => {
          let request;
          try {
            request = webNow().fetchRequest(input, init);
          } catch (error) {
            return rejected(error);
          }
          // `{ signal }` (an AbortController's, `AbortSignal.timeout(ms)`): an abort rejects
          // with its reason, and the host drops the request.
          const signal = init !== null && typeof init === "object" ? init.signal : undefined;
          let sent;
          if (signal === undefined || signal === null) sent = send(request);
          else if (signal.aborted) return rejected(signal.reason);
          else {
            const pending = send(request);
            sent = abortable(pending, lastCallId(), signal);
          }
          return apply(promiseThen, sent, [(raw) => webNow().makeResponse(raw)]);
        }, toolMode);
        lazyWeb("Headers");
      } else {
        fixed(target, name, hostCall(index), toolMode);
      }
    });
    if (spaces.fs !== undefined) nodeFs(spaces.fs);
    if (envValues !== undefined && !toolMode) bindEnv(G, spaces, envValues);
    for (const space in spaces) fixed(target, space, freeze(spaces[space]), toolMode);
    if (!toolMode) {
      // `require("fs")` and `import fs from "node:fs/promises"` (rewritten to `__m(...)` by the
      // transpiler) give the granted `fs`; any other module is refused with what to use instead.
      const load = (name) => {
        const text = String(name);
        if (FS_MODULES[text] === true) {
          if (spaces.fs === undefined) throw new ReferenceError("fs is not defined");
          return spaces.fs;
        }
        throw new Error(
          `${JSON.stringify(text)} cannot be loaded: there are no modules in the sandbox. ${
            moduleHint(text, hostFunctions)
          }`,
        );
      };
      // `require` exists only beside a granted `fs`, so code without one finds no loader to
      // probe; the rewritten imports always reach `__m`, which names the grant they lack.
      if (spaces.fs !== undefined) fixed(G, "require", load, false);
      fixed(G, "__m", load, false);
    }
    if (context !== undefined) fixed(G, "context", context, false);
    if (toolMode) {
      fixed(target, "tools", aliases());
      fixed(target, "log", (...args) => {
        log("log", joined(args));
      });
      fixed(target, "caller", context !== undefined && context !== null ? freeze(context.caller || null) : null);
      fixed(G, "__ctx", freeze(target), false);
    }
  };
}
