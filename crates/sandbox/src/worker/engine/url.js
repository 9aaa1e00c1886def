// URL and URLSearchParams for the web basics (`web.js`): the parsing is the host's
// (`parseUrl`, WHATWG rules), the objects are these. This file goes in front of `web.js` in
// the same module (QuickJS) or factory (V8); see `engine/sources.rs`.
export function urlClasses(parseUrl) {
  class URLSearchParams {
    #list = [];
    #onChange = null;
    constructor(init = "", onChange = null) {
      if (typeof init === "string") this.#parse(init);
      else if (init instanceof URLSearchParams) this.#list = [...init];
      else if (init && typeof init === "object") {
        for (const [k, v] of (Symbol.iterator in init ? init : Object.entries(init))) {
          this.#list.push([String(k), String(v)]);
        }
      }
      this.#onChange = onChange;
    }
    #parse(text) {
      this.#list = [];
      const s = text.startsWith("?") ? text.slice(1) : text;
      for (const part of s.split("&")) {
        if (!part) continue;
        const eq = part.indexOf("=");
        const dec = (x) => {
          try {
            return decodeURIComponent(x.replace(/\+/g, " "));
          } catch (_) {
            return x;
          }
        };
        this.#list.push(eq < 0 ? [dec(part), ""] : [dec(part.slice(0, eq)), dec(part.slice(eq + 1))]);
      }
    }
    #changed() {
      if (this.#onChange) this.#onChange(this.toString());
    }
    get size() {
      return this.#list.length;
    }
    append(k, v) {
      this.#list.push([String(k), String(v)]);
      this.#changed();
    }
    // Plain loops throughout: no closure of ours is handed to a builtin that code may have
    // replaced (Array.prototype.filter and friends), so none can reach the guest.
    #where(key, keep) {
      const out = [];
      for (let i = 0; i < this.#list.length; i++) {
        if ((this.#list[i][0] === key) === keep) out[out.length] = this.#list[i];
      }
      return out;
    }
    #column(c) {
      const out = [];
      for (let i = 0; i < this.#list.length; i++) {
        out[i] = c < 0 ? [this.#list[i][0], this.#list[i][1]] : this.#list[i][c];
      }
      return out;
    }
    delete(k) {
      this.#list = this.#where(String(k), false);
      this.#changed();
    }
    get(k) {
      const found = this.#where(String(k), true);
      return found.length ? found[0][1] : null;
    }
    getAll(k) {
      const found = this.#where(String(k), true);
      const out = [];
      for (let i = 0; i < found.length; i++) out[i] = found[i][1];
      return out;
    }
    has(k) {
      return this.#where(String(k), true).length > 0;
    }
    set(k, v) {
      const key = String(k);
      const out = [];
      let placed = false;
      for (let i = 0; i < this.#list.length; i++) {
        if (this.#list[i][0] !== key) out[out.length] = this.#list[i];
        else if (!placed) {
          out[out.length] = [key, String(v)];
          placed = true;
        }
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
        while (j >= 0 && list[j][0] > item[0]) {
          list[j + 1] = list[j];
          j--;
        }
        list[j + 1] = item;
      }
      this.#changed();
    }
    forEach(fn, self) {
      for (const [k, v] of this.#list) fn.call(self, v, k, this);
    }
    keys() {
      return this.#column(0)[Symbol.iterator]();
    }
    values() {
      return this.#column(1)[Symbol.iterator]();
    }
    entries() {
      return this.#column(-1)[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    toString() {
      const enc = (x) => {
        const plain = encodeURIComponent(x);
        let out = "";
        for (let i = 0; i < plain.length; i++) {
          const c = plain[i];
          if (c === "%" && plain[i + 1] === "2" && plain[i + 2] === "0") {
            out += "+";
            i += 2;
          } else if (c === "!" || c === "'" || c === "(" || c === ")" || c === "~") {
            out += "%" + c.charCodeAt(0).toString(16).toUpperCase();
          } else out += c;
        }
        return out;
      };
      let text = "";
      for (let i = 0; i < this.#list.length; i++) {
        text += (i ? "&" : "") + `${enc(this.#list[i][0])}=${enc(this.#list[i][1])}`;
      }
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
    static canParse(href, base) {
      try {
        new URL(href, base);
        return true;
      } catch (_) {
        return false;
      }
    }
    #with(key, value) {
      const p = { ...this.#parts, [key]: value };
      const auth = p.username ? `${p.username}${p.password ? ":" + p.password : ""}@` : "";
      const host = p.host ? `//${auth}${p.host}` : p.protocol === "file:" ? "//" : "";
      return `${p.protocol}${host}${p.pathname}${p.search}${p.hash}`;
    }
    #set(key, value) {
      this.#parts = parseUrl(this.#with(key, value), null);
      this.#params = new URLSearchParams(
        this.#parts.search,
        this.#params
          ? (q) => {
            this.#parts = parseUrl(this.#with("search", q ? `?${q}` : ""), null);
          }
          : null,
      );
    }
    get href() {
      return this.#parts.href;
    }
    set href(v) {
      this.#parts = parseUrl(String(v), null);
      this.#params = new URLSearchParams(this.#parts.search);
    }
    get origin() {
      return this.#parts.origin;
    }
    get protocol() {
      return this.#parts.protocol;
    }
    get username() {
      return this.#parts.username;
    }
    get password() {
      return this.#parts.password;
    }
    get host() {
      return this.#parts.host;
    }
    get hostname() {
      return this.#parts.hostname;
    }
    get port() {
      return this.#parts.port;
    }
    get pathname() {
      return this.#parts.pathname;
    }
    set pathname(v) {
      this.#set("pathname", String(v).startsWith("/") ? String(v) : `/${v}`);
    }
    get search() {
      return this.#parts.search;
    }
    set search(v) {
      const s = String(v);
      this.#set("search", s && !s.startsWith("?") ? `?${s}` : s);
    }
    get hash() {
      return this.#parts.hash;
    }
    set hash(v) {
      const s = String(v);
      this.#set("hash", s && !s.startsWith("#") ? `#${s}` : s);
    }
    get searchParams() {
      return this.#params;
    }
    toString() {
      return this.#parts.href;
    }
    toJSON() {
      return this.#parts.href;
    }
  }
  return { URL, URLSearchParams };
}
