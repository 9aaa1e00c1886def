// The V8 guest's two guards on a fresh context's global, installed by `guest.js` before any
// guest code runs (the QuickJS engine has both by construction): memory made outside V8's heap
// is charged to the execution, and no script loads a module. Each takes the primordials
// `guest.js` captured before it cut the global (`p`) and the run's state as functions. This
// file goes in front of `guest.js` in the bootstrap (`main.js`).

// ---- memory outside the heap ---------------------------------------------------------
export function guardBuffers(G, p, memoryBytes, isFinished) {
  const { apply, defineProperty, ProxyCtor, RangeErrorCtor, isFiniteNumber } = p;
  // V8 keeps the bytes of an ArrayBuffer outside the heap its limit bounds, so every way the
  // guest can make one is charged here against the execution's memory limit, and credited
  // back when the buffer is collected. (QuickJS counts them in its heap.)
  let external = 0;
  const collected = new FinalizationRegistry((bytes) => {
    external -= bytes;
  });
  const register = FinalizationRegistry.prototype.register;
  const refuse = (bytes) => {
    throw new RangeErrorCtor(
      `out of memory: an ArrayBuffer of ${bytes} bytes would take the execution past its ${
        memoryBytes() / 1048576 | 0
      } MiB limit`,
    );
  };
  const chargeBytes = (made, bytes) => {
    if (external + bytes > memoryBytes()) refuse(bytes);
    external += bytes;
    if (bytes > 0) apply(register, collected, [made, bytes]);
    return made;
  };
  const sharedByteLengthOf = Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, "byteLength").get;
  const charge = (buffer) => chargeBytes(buffer, apply(byteLengthGetter, buffer, []));
  const byteLengthGetter = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, "byteLength").get;
  const TypedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
  const bufferOf = Object.getOwnPropertyDescriptor(TypedArrayProto, "buffer").get;
  const ReflectConstruct = Reflect.construct;
  // What a buffer would hold before it is made: refused early, so no huge buffer is made only
  // to be refused.
  const wouldHold = (elements, perElement) => {
    const n = Number(elements);
    return isFiniteNumber(n) && n > 0 ? n * perElement : 0;
  };
  const guardConstructor = (name, perElement) => {
    const Native = G[name];
    if (typeof Native !== "function") return;
    G[name] = new Proxy(Native, {
      __proto__: null,
      construct(target, args, newTarget) {
        const first = args[0];
        if (typeof first === "number" || typeof first === "bigint" || typeof first === "string") {
          const bytes = wouldHold(first, perElement);
          if (external + bytes > memoryBytes()) refuse(bytes);
        }
        const made = apply(ReflectConstruct, null, [target, args, newTarget]);
        if (name === "ArrayBuffer") return charge(made);
        // Nothing can share it (no worker, no `postMessage`): it is charged as a buffer is.
        if (name === "SharedArrayBuffer") return chargeBytes(made, apply(sharedByteLengthOf, made, []));
        const buffer = apply(bufferOf, made, []);
        // A view over a buffer the guest already holds makes no new bytes.
        if (first !== null && typeof first === "object" && (apply(isArrayBuffer, null, [first]) || first === buffer)) {
          return made;
        }
        charge(buffer);
        return made;
      },
    });
  };
  const isArrayBuffer = (value) => {
    try {
      apply(byteLengthGetter, value, []);
      return true;
    } catch (_) {
      return false;
    }
  };
  guardConstructor("ArrayBuffer", 1);
  guardConstructor("SharedArrayBuffer", 1);
  for (
    const [name, size] of [
      ["Int8Array", 1],
      ["Uint8Array", 1],
      ["Uint8ClampedArray", 1],
      ["Int16Array", 2],
      ["Uint16Array", 2],
      ["Int32Array", 4],
      ["Uint32Array", 4],
      ["Float32Array", 4],
      ["Float64Array", 8],
      ["BigInt64Array", 8],
      ["BigUint64Array", 8],
    ]
  ) {
    guardConstructor(name, size);
  }
  // The methods that make a new buffer from an existing one.
  const guardMethod = (proto, name, bufferOfResult) => {
    const native = proto[name];
    if (typeof native !== "function") return;
    defineProperty(proto, name, {
      __proto__: null,
      value: {
        [name](...args) {
          const made = apply(native, this, args);
          charge(bufferOfResult(made));
          return made;
        },
      }[name],
      writable: true,
      enumerable: false,
      configurable: true,
    });
  };
  for (const name of ["slice", "transfer", "transferToFixedLength"]) {
    guardMethod(ArrayBuffer.prototype, name, (made) => made);
  }
  for (const name of ["slice", "map", "filter", "toReversed", "toSorted", "with"]) {
    guardMethod(TypedArrayProto, name, (made) => apply(bufferOf, made, []));
  }
  // A cleanup callback runs when the collector gets to it, which may be after this execution
  // ended, while the isolate serves the next: the guest's run only while its execution does.
  const guardedRegistry = new ProxyCtor(FinalizationRegistry, {
    __proto__: null,
    construct(target, args, newTarget) {
      const callback = args[0];
      const gated = typeof callback === "function"
        ? [(held) => {
          if (!isFinished()) apply(callback, undefined, [held]);
        }]
        : args;
      return apply(ReflectConstruct, null, [target, gated, newTarget === guardedRegistry ? target : newTarget]);
    },
  });
  G.FinalizationRegistry = guardedRegistry;
  defineProperty(FinalizationRegistry.prototype, "constructor", {
    __proto__: null,
    value: guardedRegistry,
    writable: true,
    enumerable: false,
    configurable: true,
  });
}

// ---- no modules -----------------------------------------------------------------------
// Returns the check, which `guest.js` also runs on the run's own code.
export function guardModules(G, p, noModules) {
  const { apply, defineProperty, getPrototypeOf, ProxyCtor, TypeErrorCtor, StringCtor, regexpExec, indirectEval } = p;
  // QuickJS's engine refuses every `import()` in its module loader. Deno's would load `node:`
  // built-ins and `data:` modules, and offers no hook, so the source of every script is checked
  // before V8 compiles it: the run's code here, and what `eval` and the `Function` constructors
  // are given (replaced by proxies that check first, so an `eval` here is always indirect). A
  // script whose text has the word `import` before `(`, with only spaces and comments between
  // (every form a script may have: `/* */`, `//`, and Annex B's `<!--` and `-->`), is refused as
  // a whole, where QuickJS would refuse the call when it runs; so is such text in a string, and
  // a method named `import` (`x.import(`: no `.` exempts it, or `...import(` would pass).
  const IMPORT_CALL = /(?:^|[^\w$])import(?:\s|\/\*[\s\S]*?\*\/|(?:\/\/|<!--|-->)[^\n\r\u2028\u2029]*)*\(/;
  const refuseImport = (source) => {
    if (typeof source === "string" && apply(regexpExec, IMPORT_CALL, [source]) !== null) {
      // The text came with the run, before any of its code.
      throw new TypeErrorCtor(noModules());
    }
  };
  const construct = Reflect.construct;
  // A constructor turns each argument into text itself, which an object's `toString` may answer
  // differently each time: each is made text once here, checked, and that text passed on.
  // `eval` evaluates only a string, and gives anything else back as it is.
  const checkedSources = (args, isEval) => {
    if (isEval) {
      refuseImport(args[0]);
      return args;
    }
    const sources = [];
    for (let i = 0; i < args.length; i++) {
      sources[i] = StringCtor(args[i]);
      refuseImport(sources[i]);
    }
    return sources;
  };
  const checked = (native, isEval = false) =>
    new ProxyCtor(native, {
      __proto__: null,
      apply(target, self, args) {
        return apply(target, self, checkedSources(args, isEval));
      },
      construct(target, args, newTarget) {
        return construct(target, checkedSources(args, isEval), newTarget === checkedFunction ? target : newTarget);
      },
    });
  const checkedFunction = checked(Function);
  G.Function = checkedFunction;
  defineProperty(Function.prototype, "constructor", {
    __proto__: null,
    value: checkedFunction,
    writable: true,
    enumerable: false,
    configurable: true,
  });
  for (const sample of [async function () {}, function* () {}, async function* () {}]) {
    const proto = getPrototypeOf(sample);
    defineProperty(proto, "constructor", {
      __proto__: null,
      value: checked(proto.constructor),
      writable: true,
      enumerable: false,
      configurable: true,
    });
  }
  G.eval = checked(indirectEval, true);
  return refuseImport;
}
