// sandgate web basics: URL, URLSearchParams, TextEncoder/TextDecoder, atob/btoa,
// structuredClone and crypto, for code that reaches for them. Loaded on first use (most
// executions never touch them), from bytecode the worker compiled once.
export default function ({ randomBytes, parseUrl }) {
  const freeze = Object.freeze;
  // Captured at load, so code that replaced them cannot change how a response is read.
  const parseJson = JSON.parse;
  const stringifyJson = JSON.stringify;
  const exports = {};
  // ---- web basics ---------------------------------------------------------------------
  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  exports.btoa = (input) => {
    const s = String(input);
    let out = "";
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) {
        throw new DOMExceptionLike(
          "btoa: the string has characters outside Latin-1; encode it first with TextEncoder",
          "InvalidCharacterError",
        );
      }
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : "=") +
        (i + 2 < s.length ? B64[n & 63] : "=");
    }
    return out;
  };
  exports.atob = (input) => {
    const s = String(input).replace(/[\t\n\f\r ]/g, "");
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/=]/.test(s)) {
      throw new DOMExceptionLike("atob: not valid base64", "InvalidCharacterError");
    }
    let out = "";
    let bits = 0, buffer = 0;
    for (const ch of s.replace(/=+$/, "")) {
      buffer = (buffer << 6) | B64.indexOf(ch);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += String.fromCharCode((buffer >> bits) & 255);
      }
    }
    return out;
  };
  function DOMExceptionLike(message, name) {
    const e = new Error(message);
    e.name = name;
    return e;
  }

  class TextEncoder {
    get encoding() {
      return "utf-8";
    }
    encode(input = "") {
      const s = String(input);
      const bytes = [];
      for (const ch of s) {
        let c = ch.codePointAt(0);
        if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
        if (c < 0x80) bytes.push(c);
        else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
        else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
        else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      }
      return new Uint8Array(bytes);
    }
  }
  class TextDecoder {
    constructor(label = "utf-8") {
      if (!/^utf-?8$/i.test(String(label))) throw new RangeError(`TextDecoder supports only utf-8, not ${label}`);
    }
    get encoding() {
      return "utf-8";
    }
    decode(input) {
      if (input === undefined) return "";
      const bytes = input instanceof Uint8Array ? input : new Uint8Array(input.buffer || input);
      let out = "";
      for (let i = 0; i < bytes.length;) {
        const b = bytes[i];
        let c = 0xfffd, n = 1;
        if (b < 0x80) c = b;
        else if (b >= 0xc2 && b < 0xe0 && i + 1 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80) {
          c = ((b & 31) << 6) | (bytes[i + 1] & 63);
          n = 2;
        } else if (
          b >= 0xe0 && b < 0xf0 && i + 2 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 &&
          (bytes[i + 2] & 0xc0) === 0x80
        ) {
          c = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63);
          n = 3;
          if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
        } else if (
          b >= 0xf0 && b < 0xf5 && i + 3 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 &&
          (bytes[i + 2] & 0xc0) === 0x80 && (bytes[i + 3] & 0xc0) === 0x80
        ) {
          c = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63);
          n = 4;
          if (c < 0x10000 || c > 0x10ffff) c = 0xfffd;
        }
        out += String.fromCodePoint(c);
        i += n;
      }
      return out;
    }
  }
  exports.TextEncoder = TextEncoder;
  exports.TextDecoder = TextDecoder;

  function clone(value, seen) {
    if (value === null || typeof value !== "object") {
      if (typeof value === "function" || typeof value === "symbol") {
        throw DOMExceptionLike(`structuredClone: ${typeof value}s cannot be cloned`, "DataCloneError");
      }
      return value;
    }
    if (seen.has(value)) return seen.get(value);
    let out;
    if (Array.isArray(value)) {
      out = [];
      seen.set(value, out);
      for (let i = 0; i < value.length; i++) out[i] = clone(value[i], seen);
      return out;
    }
    if (value instanceof Date) out = new Date(value.getTime());
    else if (value instanceof RegExp) out = new RegExp(value.source, value.flags);
    else if (value instanceof Map) {
      out = new Map();
      seen.set(value, out);
      for (const [k, v] of value) out.set(clone(k, seen), clone(v, seen));
      return out;
    } else if (value instanceof Set) {
      out = new Set();
      seen.set(value, out);
      for (const v of value) out.add(clone(v, seen));
      return out;
    } else if (value instanceof ArrayBuffer) out = value.slice(0);
    else if (ArrayBuffer.isView(value)) out = new value.constructor(value);
    else if (value instanceof Error) {
      out = new Error(value.message);
      out.name = value.name;
    } else {
      out = {};
      seen.set(value, out);
      for (const k of Object.keys(value)) out[k] = clone(value[k], seen);
      return out;
    }
    seen.set(value, out);
    return out;
  }
  exports.structuredClone = (value) => clone(value, new Map());

  const getRandomValues = (array) => {
    if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array) {
      throw new TypeError("crypto.getRandomValues needs an integer typed array");
    }
    if (array.byteLength > 65536) {
      throw DOMExceptionLike("crypto.getRandomValues: at most 65536 bytes at a time", "QuotaExceededError");
    }
    new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(randomBytes(array.byteLength));
    return array;
  };
  const randomUUID = () => {
    const b = randomBytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = "";
    for (let i = 0; i < b.length; i++) h += (b[i] < 16 ? "0" : "") + b[i].toString(16);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  // ---- crypto.subtle.digest: SHA-256 and SHA-1 are `digest.js` --------------------------
  const DIGESTS = { __proto__: null, "SHA-256": sha256, "SHA-1": sha1 };
  const digest = async (algorithm, data) => {
    const name = String(algorithm !== null && typeof algorithm === "object" ? algorithm.name : algorithm).toUpperCase();
    const hash = DIGESTS[name];
    if (hash === undefined) {
      throw DOMExceptionLike(
        `crypto.subtle.digest: ${name} is not supported here; SHA-256 and SHA-1 are`,
        "NotSupportedError",
      );
    }
    let bytes;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else {throw new TypeError(
        "crypto.subtle.digest(algorithm, data) takes the data as bytes: new TextEncoder().encode(text)",
      );}
    return hash(bytes);
  };
  const subtle = freeze({ digest });
  exports.crypto = freeze({ getRandomValues, randomUUID, subtle });

  // ---- URL and URLSearchParams are `url.js` ----------------------------------------------
  const { URL, URLSearchParams } = urlClasses(parseUrl);
  exports.URL = URL;
  exports.URLSearchParams = URLSearchParams;

  // ---- console.table: rows of an array or object, one column per key, as an aligned text table
  exports.renderTable = (data, columns, shown, joined) => {
    const isArray = Array.isArray;
    const objectKeys = Object.keys;
    const cell = (value) => {
      if (value === undefined) return "";
      const text = shown(value);
      return text.length > 60 ? text.slice(0, 59) + "…" : text;
    };
    function table(data, columns) {
      if (data === null || typeof data !== "object") return joined([data]);
      const rowKeys = objectKeys(data);
      const header = ["(index)"];
      const wanted = isArray(columns) ? columns : null;
      let values = false;
      if (wanted) {
        for (let i = 0; i < wanted.length; i++) header.push(String(wanted[i]));
      } else {
        for (let r = 0; r < rowKeys.length; r++) {
          const row = data[rowKeys[r]];
          if (row !== null && typeof row === "object") {
            const keys = objectKeys(row);
            for (let k = 0; k < keys.length; k++) {
              let known = false;
              for (let h = 1; h < header.length; h++) if (header[h] === keys[k]) known = true;
              if (!known) header.push(keys[k]);
            }
          } else {
            values = true;
          }
        }
        if (values) header.push("Value");
      }
      const rows = [header];
      for (let r = 0; r < rowKeys.length; r++) {
        const row = data[rowKeys[r]];
        const line = [rowKeys[r]];
        for (let h = 1; h < header.length; h++) {
          if (values && !wanted && h === header.length - 1) {
            line.push(row !== null && typeof row === "object" ? "" : cell(row));
          } else line.push(row !== null && typeof row === "object" ? cell(row[header[h]]) : "");
        }
        rows.push(line);
      }
      const widths = [];
      for (let c = 0; c < header.length; c++) {
        let w = 0;
        for (let r = 0; r < rows.length; r++) if (rows[r][c].length > w) w = rows[r][c].length;
        widths.push(w);
      }
      let text = "";
      for (let r = 0; r < rows.length; r++) {
        let line = "│";
        for (let c = 0; c < header.length; c++) line += " " + rows[r][c].padEnd(widths[c]) + " │";
        text += (r ? "\n" : "") + line;
        if (r === 0) {
          let rule = "├";
          for (let c = 0; c < header.length; c++) {
            rule += "─".repeat(widths[c] + 2) + (c + 1 < header.length ? "┼" : "┤");
          }
          text += "\n" + rule;
        }
      }
      return text;
    }
    return table(data, columns);
  };

  // ---- fetch: the request the host sends, the Response the guest reads ---------------------
  // `fetch` exists only when the execution's profile grants network hosts. The request runs in
  // the host, which checks every hop against the grant; here it is only shaped.
  const bytesOf = (body) => {
    if (body instanceof ArrayBuffer) return new Uint8Array(body);
    if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    return null;
  };
  const base64Of = (bytes) => {
    let text = "";
    for (let i = 0; i < bytes.length; i++) text += String.fromCharCode(bytes[i]);
    return exports.btoa(text);
  };
  const headerPairs = (headers) => {
    const pairs = [];
    if (headers === undefined || headers === null) return pairs;
    if (headers instanceof Headers) return headers.entries();
    const list = Array.isArray(headers) ? headers : Object.entries(headers);
    for (const pair of list) {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw new TypeError("fetch: headers must be an object of name: value, or a list of [name, value] pairs");
      }
      pairs.push([String(pair[0]), String(pair[1])]);
    }
    return pairs;
  };
  exports.fetchRequest = (input, init) => {
    const options = init === undefined || init === null ? {} : init;
    if (typeof options !== "object") {
      throw new TypeError("fetch: the second argument must be an object ({ method, headers, body })");
    }
    const url = input !== null && typeof input === "object" && typeof input.url === "string"
      ? input.url
      : String(input);
    const request = {
      url,
      method: String(options.method || "GET").toUpperCase(),
      headers: headerPairs(options.headers),
    };
    // A Promise used as text (`Bearer ${env.get("KEY")}`) would go out as "[object Promise]".
    const promised = (where) =>
      new TypeError(
        `fetch: ${where} holds "[object Promise]": a Promise was used as text, from a call made without await (such as env.get(...)). Write await before the call, or use process.env.NAME`,
      );
    if (url.includes("[object Promise]")) throw promised("the URL");
    for (const [name, value] of request.headers) {
      if (value.includes("[object Promise]")) throw promised(`the header ${name}`);
    }
    if (options.redirect !== undefined) request.redirect = String(options.redirect);
    const body = options.body;
    if (body !== undefined && body !== null) {
      const bytes = bytesOf(body);
      if (bytes !== null) request.body_base64 = base64Of(bytes);
      else if (body instanceof URLSearchParams) {
        request.body = body.toString();
        if (!request.headers.some(([k]) => k.toLowerCase() === "content-type")) {
          request.headers.push(["content-type", "application/x-www-form-urlencoded;charset=UTF-8"]);
        }
      } else request.body = String(body);
    }
    return request;
  };
  class Headers {
    #pairs;
    constructor(init) {
      this.#pairs = headerPairs(init).map(([k, v]) => [k.toLowerCase(), v]);
    }
    get(name) {
      const key = String(name).toLowerCase();
      const found = this.#pairs.filter(([k]) => k === key).map(([, v]) => v);
      return found.length ? found.join(", ") : null;
    }
    has(name) {
      return this.get(name) !== null;
    }
    set(name, value) {
      const key = String(name).toLowerCase();
      this.#pairs = this.#pairs.filter(([k]) => k !== key);
      this.#pairs.push([key, String(value)]);
    }
    append(name, value) {
      this.#pairs.push([String(name).toLowerCase(), String(value)]);
    }
    delete(name) {
      const key = String(name).toLowerCase();
      this.#pairs = this.#pairs.filter(([k]) => k !== key);
    }
    entries() {
      return this.#pairs.map(([k, v]) => [k, v]);
    }
    keys() {
      return this.#pairs.map(([k]) => k);
    }
    values() {
      return this.#pairs.map(([, v]) => v);
    }
    forEach(fn) {
      for (const [k, v] of this.#pairs) fn(v, k, this);
    }
    [Symbol.iterator]() {
      return this.entries()[Symbol.iterator]();
    }
    toJSON() {
      return Object.fromEntries(this.#pairs);
    }
  }
  exports.Headers = Headers;
  exports.makeResponse = (raw) => {
    let used = false;
    const take = () => {
      if (used) throw new TypeError("fetch: the response body was already read");
      used = true;
    };
    const bytes = () => {
      if (typeof raw.body === "string") return new TextEncoder().encode(raw.body);
      const text = exports.atob(raw.body_base64 || "");
      const out = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
      return out;
    };
    const text = () => (typeof raw.body === "string" ? raw.body : new TextDecoder().decode(bytes()));
    return Object.freeze({
      url: raw.url,
      status: raw.status,
      statusText: raw.statusText,
      ok: raw.status >= 200 && raw.status < 300,
      redirected: raw.redirected,
      headers: new Headers(raw.headers),
      text: async () => {
        take();
        return text();
      },
      json: async () => {
        take();
        const body = text();
        try {
          return parseJson(body);
        } catch (_) {
          const type = new Headers(raw.headers).get("content-type");
          throw new SyntaxError(
            `response.json(): the body of ${raw.url} (status ${raw.status}, content-type ${
              type === null ? "none" : type
            }) is not JSON; it starts ${stringifyJson(body.slice(0, 80))}. Read it with response.text()`,
          );
        }
      },
      arrayBuffer: async () => {
        take();
        return bytes().buffer;
      },
      bytes: async () => {
        take();
        return bytes();
      },
    });
  };

  // ---- AbortController and AbortSignal -----------------------------------------------------
  // A signal passed to a tool call (`backend.tool(args, { signal })`) aborts it: the call's
  // promise rejects with the signal's reason, and the host cancels it upstream.
  const abortError = (message, name) => {
    const error = new Error(message);
    error.name = name;
    return error;
  };
  class AbortSignal {
    #aborted = false;
    #reason = undefined;
    #listeners = [];
    onabort = null;
    get aborted() {
      return this.#aborted;
    }
    get reason() {
      return this.#reason;
    }
    throwIfAborted() {
      if (this.#aborted) throw this.#reason;
    }
    addEventListener(type, listener, options) {
      if (type !== "abort" || typeof listener !== "function") return;
      const once = options !== null && typeof options === "object" && Boolean(options.once);
      this.#listeners.push({ listener, once });
    }
    removeEventListener(type, listener) {
      if (type !== "abort") return;
      const kept = [];
      for (let i = 0; i < this.#listeners.length; i++) {
        if (this.#listeners[i].listener !== listener) kept.push(this.#listeners[i]);
      }
      this.#listeners = kept;
    }
    static abort(reason) {
      const controller = new AbortController();
      controller.abort(reason);
      return controller.signal;
    }
    static timeout(ms) {
      const controller = new AbortController();
      globalThis.setTimeout(
        () => controller.abort(abortError("The operation was aborted due to timeout", "TimeoutError")),
        Number(ms) || 0,
      );
      return controller.signal;
    }
    static any(signals) {
      const controller = new AbortController();
      for (const signal of signals) {
        if (signal.aborted) {
          controller.abort(signal.reason);
          break;
        }
        signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
      }
      return controller.signal;
    }
    // Called by the controller only (a private method no guest code can reach).
    static fire(signal, reason) {
      signal.#fire(reason);
    }
    #fire(reason) {
      if (this.#aborted) return;
      this.#aborted = true;
      this.#reason = reason === undefined ? abortError("This operation was aborted", "AbortError") : reason;
      const listeners = this.#listeners;
      this.#listeners = [];
      const event = { type: "abort", target: this };
      if (typeof this.onabort === "function") this.onabort(event);
      for (let i = 0; i < listeners.length; i++) listeners[i].listener.call(this, event);
    }
  }
  const fire = AbortSignal.fire;
  delete AbortSignal.fire;
  class AbortController {
    #signal = new AbortSignal();
    get signal() {
      return this.#signal;
    }
    abort(reason) {
      fire(this.#signal, reason);
    }
  }
  exports.AbortSignal = AbortSignal;
  exports.AbortController = AbortController;

  return exports;
}
