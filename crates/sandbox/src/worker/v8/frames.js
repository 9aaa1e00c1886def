// deno-lint-ignore-file no-unused-vars -- its functions are used by `main.js`, which follows it.
// The frame codec of sandgate's V8 worker, as `wire/protocol.rs` defines the frames: each is a
// little-endian u32 length, then a body. A body is JSON, except two binary ones that carry JSON
// text as raw bytes after a header: a call (`C`, worker to host) and its reply (`R`, host to
// worker). Pure functions, with no I/O: `main.js` runs them on stdin and stdout, and
// `tests/v8_frames.rs` runs them against the Rust encoder and decoder for every frame kind.
// It is the start of the worker's script (`v8/mod.rs` puts it before `main.js`).
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });
// The largest frame read: past it the stream is not one of ours.
const MAX_FRAME_BYTES = 64 * 1024 * 1024;

// A body with its length in front.
const frameOf = (body) => {
  const out = new Uint8Array(4 + body.length);
  new DataView(out.buffer).setUint32(0, body.length, true);
  out.set(body, 4);
  return out;
};
const putU64 = (view, at, n) => {
  view.setUint32(at, n % 4294967296, true);
  view.setUint32(at + 4, Math.floor(n / 4294967296), true);
};
const getU64 = (view, at) => view.getUint32(at, true) + view.getUint32(at + 4, true) * 4294967296;
// A JSON frame (`Ready`, `Log`, `CancelCall`, `Done`).
const jsonFrame = (frame) => frameOf(encoder.encode(JSON.stringify(frame)));
// A call travels as `C`, run, id, callee kind (0 a tool, 1 a host function) and index, line
// and column (0 for no site), then the arguments' JSON text.
const callFrame = (run, id, tool, index, args, site) => {
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
  return frameOf(body);
};
// A host frame's body: a reply (`R`, run, id, 0 and the result's JSON text, or 1 and the
// failure's JSON) as `{ Reply: { run, id, ok | err } }`, else the JSON frame (`Run`, `Cancel`).
const readHostFrame = (body) => {
  if (body.length > 0 && body[0] === 0x52) {
    if (body.length < 18) throw new Error("a reply frame cut short");
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    const run = getU64(view, 1);
    const id = getU64(view, 9);
    const rest = decoder.decode(body.subarray(18));
    if (body[17] === 0) return { Reply: { run, id, ok: rest } };
    if (body[17] !== 1) throw new Error("a reply frame of no known kind");
    const failure = JSON.parse(rest);
    return { Reply: { run, id, err: { kind: failure.kind, message: failure.message } } };
  }
  return JSON.parse(decoder.decode(body));
};
// The bodies of the whole frames in `buffer[at..filled]`, each given to `onBody`; returns where
// the first incomplete frame starts. A length past `MAX_FRAME_BYTES` throws.
const takeFrames = (buffer, filled, onBody) => {
  let at = 0;
  while (filled - at >= 4) {
    const length = new DataView(buffer.buffer, buffer.byteOffset + at, 4).getUint32(0, true);
    if (length > MAX_FRAME_BYTES) throw new Error(`a frame of ${length} bytes is over the limit`);
    if (filled - at - 4 < length) break;
    onBody(buffer.slice(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return at;
};
