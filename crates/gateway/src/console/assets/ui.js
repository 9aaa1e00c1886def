// The console's small parts, shared by its pages: elements made from text (never markup),
// the API, and who is signed in. The pages (`app.js`, `runs.js`, `access.js`) import from here;
// this file imports nothing.
export const main = document.getElementById("main");
// Who is signed in (`/ui/api/me`), and what to do when the server says nobody is (`app.js`
// shows the login page).
export const session = { me: null, signedOut: () => {} };
// What the open page does with the server's events.
export const live = { onExecution: null, onBackends: null };

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "on") { for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn); }
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// Text with `code` spans (as tool descriptions write them): the spans become <code>
// elements, made here; everything stays text, nothing is parsed as markup.
export function inline(text) {
  return String(text).split("`").map((part, i) => (i % 2 === 1 && part ? el("code", {}, part) : part));
}

export function plural(count, one, many) {
  return count + " " + (count === 1 ? one : many);
}

export function show(...nodes) {
  main.replaceChildren(...nodes);
}

export function badge(text) {
  return el("span", { class: "badge " + String(text) }, text);
}

export function ms(value) {
  if (value === null || value === undefined) return "unfinished";
  return value < 10 ? value.toFixed(2) + " ms" : value.toFixed(1) + " ms";
}

export function when(unixMs) {
  return new Date(unixMs).toLocaleString();
}

export function kb(bytes) {
  return bytes < 1024 ? bytes + " B" : (bytes / 1024).toFixed(1) + " KB";
}

export async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  if (response.status === 401) {
    session.signedOut();
    throw new Error("log in first");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
  return body;
}

export function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

export function failure(error) {
  return el("p", { class: "error-text" }, String(error.message || error));
}
