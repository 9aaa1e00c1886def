//! The guest's JavaScript, put together in one place for both engines.
//!
//! Each source below is one module (QuickJS compiles it to bytecode, `bytecode.rs`) or one
//! factory (V8's `main.js` turns its `export default function` into a returned function). A
//! part that stands on its own (SHA digests, the URL classes, the locale tables) is a file of
//! its own, put in front of the file that uses it, so each file stays small enough to read and
//! `deno fmt`/`deno lint` check every one; nothing else joins them.

/// The core preamble: backends, tools, console, timers. See `preamble.js`.
pub(crate) const PREAMBLE: &str = include_str!("preamble.js");
/// URL, TextEncoder and friends, with the digests and URL classes in front. See `web.js`.
pub(crate) const WEB: &str = concat!(
    include_str!("digest.js"),
    "\n",
    include_str!("url.js"),
    "\n",
    include_str!("web.js")
);
/// `Intl` and the locale methods of builtins, for an engine without ICU, with the locales'
/// data in front. See `locale.js`.
pub(crate) const LOCALE: &str = concat!(include_str!("locale_data.js"), "\n", include_str!("locale.js"));
