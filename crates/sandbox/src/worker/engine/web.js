// sandgate web basics: URL, URLSearchParams, TextEncoder/TextDecoder, atob/btoa,
// structuredClone and crypto, for code that reaches for them. Loaded on first use (most
// executions never touch them), from bytecode the worker compiled once.
export default function ({ randomBytes, parseUrl }) {
  const freeze = Object.freeze;
  const exports = {};
  // ---- web basics ---------------------------------------------------------------------
  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  exports.btoa = ((input) => {
    const s = String(input);
    let out = "";
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new DOMExceptionLike("btoa: the string has characters outside Latin-1; encode it first with TextEncoder", "InvalidCharacterError");
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : "=") + (i + 2 < s.length ? B64[n & 63] : "=");
    }
    return out;
  });
  exports.atob = ((input) => {
    const s = String(input).replace(/[\t\n\f\r ]/g, "");
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/=]/.test(s)) throw new DOMExceptionLike("atob: not valid base64", "InvalidCharacterError");
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
  });
  function DOMExceptionLike(message, name) {
    const e = new Error(message);
    e.name = name;
    return e;
  }

  class TextEncoder {
    get encoding() { return "utf-8"; }
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
    get encoding() { return "utf-8"; }
    decode(input) {
      if (input === undefined) return "";
      const bytes = input instanceof Uint8Array ? input : new Uint8Array(input.buffer || input);
      let out = "";
      for (let i = 0; i < bytes.length; ) {
        const b = bytes[i];
        let c = 0xfffd, n = 1;
        if (b < 0x80) c = b;
        else if (b >= 0xc2 && b < 0xe0 && i + 1 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80) { c = ((b & 31) << 6) | (bytes[i + 1] & 63); n = 2; }
        else if (b >= 0xe0 && b < 0xf0 && i + 2 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80) { c = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63); n = 3; if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd; }
        else if (b >= 0xf0 && b < 0xf5 && i + 3 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80 && (bytes[i + 3] & 0xc0) === 0x80) { c = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63); n = 4; if (c < 0x10000 || c > 0x10ffff) c = 0xfffd; }
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
      if (typeof value === "function" || typeof value === "symbol") throw DOMExceptionLike(`structuredClone: ${typeof value}s cannot be cloned`, "DataCloneError");
      return value;
    }
    if (seen.has(value)) return seen.get(value);
    let out;
    if (Array.isArray(value)) { out = []; seen.set(value, out); for (let i = 0; i < value.length; i++) out[i] = clone(value[i], seen); return out; }
    if (value instanceof Date) out = new Date(value.getTime());
    else if (value instanceof RegExp) out = new RegExp(value.source, value.flags);
    else if (value instanceof Map) { out = new Map(); seen.set(value, out); for (const [k, v] of value) out.set(clone(k, seen), clone(v, seen)); return out; }
    else if (value instanceof Set) { out = new Set(); seen.set(value, out); for (const v of value) out.add(clone(v, seen)); return out; }
    else if (value instanceof ArrayBuffer) out = value.slice(0);
    else if (ArrayBuffer.isView(value)) out = new value.constructor(value);
    else if (value instanceof Error) { out = new Error(value.message); out.name = value.name; }
    else { out = {}; seen.set(value, out); for (const k of Object.keys(value)) out[k] = clone(value[k], seen); return out; }
    seen.set(value, out);
    return out;
  }
  exports.structuredClone = (value) => clone(value, new Map());

  const getRandomValues = (array) => {
    if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array) throw new TypeError("crypto.getRandomValues needs an integer typed array");
    if (array.byteLength > 65536) throw DOMExceptionLike("crypto.getRandomValues: at most 65536 bytes at a time", "QuotaExceededError");
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
  exports.crypto = freeze({ getRandomValues, randomUUID });

  class URLSearchParams {
    #list = [];
    #onChange = null;
    constructor(init = "", onChange = null) {
      if (typeof init === "string") this.#parse(init);
      else if (init instanceof URLSearchParams) this.#list = [...init];
      else if (init && typeof init === "object") for (const [k, v] of (Symbol.iterator in init ? init : Object.entries(init))) this.#list.push([String(k), String(v)]);
      this.#onChange = onChange;
    }
    #parse(text) {
      this.#list = [];
      const s = text.startsWith("?") ? text.slice(1) : text;
      for (const part of s.split("&")) {
        if (!part) continue;
        const eq = part.indexOf("=");
        const dec = (x) => { try { return decodeURIComponent(x.replace(/\+/g, " ")); } catch (_) { return x; } };
        this.#list.push(eq < 0 ? [dec(part), ""] : [dec(part.slice(0, eq)), dec(part.slice(eq + 1))]);
      }
    }
    #changed() { if (this.#onChange) this.#onChange(this.toString()); }
    get size() { return this.#list.length; }
    append(k, v) { this.#list.push([String(k), String(v)]); this.#changed(); }
    // Plain loops throughout: no closure of ours is handed to a builtin that code may have
    // replaced (Array.prototype.filter and friends), so none can reach the guest.
    #where(key, keep) {
      const out = [];
      for (let i = 0; i < this.#list.length; i++) if ((this.#list[i][0] === key) === keep) out[out.length] = this.#list[i];
      return out;
    }
    #column(c) {
      const out = [];
      for (let i = 0; i < this.#list.length; i++) out[i] = c < 0 ? [this.#list[i][0], this.#list[i][1]] : this.#list[i][c];
      return out;
    }
    delete(k) { this.#list = this.#where(String(k), false); this.#changed(); }
    get(k) { const found = this.#where(String(k), true); return found.length ? found[0][1] : null; }
    getAll(k) { const found = this.#where(String(k), true); const out = []; for (let i = 0; i < found.length; i++) out[i] = found[i][1]; return out; }
    has(k) { return this.#where(String(k), true).length > 0; }
    set(k, v) {
      const key = String(k);
      const out = [];
      let placed = false;
      for (let i = 0; i < this.#list.length; i++) {
        if (this.#list[i][0] !== key) out[out.length] = this.#list[i];
        else if (!placed) { out[out.length] = [key, String(v)]; placed = true; }
      }
      if (!placed) out[out.length] = [key, String(v)];
      this.#list = out;
      this.#changed();
    }
    sort() {
      // Insertion sort: stable, as the standard requires.
      const list = this.#list;
      for (let i = 1; i < list.length; i++) {
        const item = list[i];
        let j = i - 1;
        while (j >= 0 && list[j][0] > item[0]) { list[j + 1] = list[j]; j--; }
        list[j + 1] = item;
      }
      this.#changed();
    }
    forEach(fn, self) { for (const [k, v] of this.#list) fn.call(self, v, k, this); }
    keys() { return this.#column(0)[Symbol.iterator](); }
    values() { return this.#column(1)[Symbol.iterator](); }
    entries() { return this.#column(-1)[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    toString() {
      const enc = (x) => {
        const plain = encodeURIComponent(x);
        let out = "";
        for (let i = 0; i < plain.length; i++) {
          const c = plain[i];
          if (c === "%" && plain[i + 1] === "2" && plain[i + 2] === "0") { out += "+"; i += 2; }
          else if (c === "!" || c === "'" || c === "(" || c === ")" || c === "~") out += "%" + c.charCodeAt(0).toString(16).toUpperCase();
          else out += c;
        }
        return out;
      };
      let text = "";
      for (let i = 0; i < this.#list.length; i++) text += (i ? "&" : "") + `${enc(this.#list[i][0])}=${enc(this.#list[i][1])}`;
      return text;
    }
  }
  class URL {
    #parts;
    #params;
    constructor(href, base) {
      this.#parts = parseUrl(String(href), base === undefined ? null : String(base));
      this.#params = new URLSearchParams(this.#parts.search, (query) => {
        this.#parts = parseUrl(this.#with("search", query ? `?${query}` : ""), null);
      });
    }
    static canParse(href, base) { try { new URL(href, base); return true; } catch (_) { return false; } }
    #with(key, value) {
      const p = { ...this.#parts, [key]: value };
      const auth = p.username ? `${p.username}${p.password ? ":" + p.password : ""}@` : "";
      const host = p.host ? `//${auth}${p.host}` : p.protocol === "file:" ? "//" : "";
      return `${p.protocol}${host}${p.pathname}${p.search}${p.hash}`;
    }
    #set(key, value) { this.#parts = parseUrl(this.#with(key, value), null); this.#params = new URLSearchParams(this.#parts.search, this.#params ? (q) => { this.#parts = parseUrl(this.#with("search", q ? `?${q}` : ""), null); } : null); }
    get href() { return this.#parts.href; }
    set href(v) { this.#parts = parseUrl(String(v), null); this.#params = new URLSearchParams(this.#parts.search); }
    get origin() { return this.#parts.origin; }
    get protocol() { return this.#parts.protocol; }
    get username() { return this.#parts.username; }
    get password() { return this.#parts.password; }
    get host() { return this.#parts.host; }
    get hostname() { return this.#parts.hostname; }
    get port() { return this.#parts.port; }
    get pathname() { return this.#parts.pathname; }
    set pathname(v) { this.#set("pathname", String(v).startsWith("/") ? String(v) : `/${v}`); }
    get search() { return this.#parts.search; }
    set search(v) { const s = String(v); this.#set("search", s && !s.startsWith("?") ? `?${s}` : s); }
    get hash() { return this.#parts.hash; }
    set hash(v) { const s = String(v); this.#set("hash", s && !s.startsWith("#") ? `#${s}` : s); }
    get searchParams() { return this.#params; }
    toString() { return this.#parts.href; }
    toJSON() { return this.#parts.href; }
  }
  exports.URL = URL;
  exports.URLSearchParams = URLSearchParams;
  return exports;
}
