//! The preamble and the web basics, compiled to QuickJS bytecode once per worker.
//!
//! Parsing ~20 KB of JavaScript costs QuickJS about 2 ms on our machines, which would dwarf
//! everything else in an execution. Loading the same code as bytecode into each fresh context
//! is about ten times cheaper, and the web basics (URL, TextEncoder, ...) and the locale formats
//! (`Intl`) are only loaded when a script first touches one of them.

use std::sync::OnceLock;

use rquickjs::{Context, Ctx, Function, Module, Runtime, WriteOptions};

use crate::worker::engine::sources::{LOCALE, PREAMBLE, WEB};


struct Compiled {
    preamble: Vec<u8>,
    web: Vec<u8>,
    locale: Vec<u8>,
}

static COMPILED: OnceLock<Result<Compiled, String>> = OnceLock::new();

fn compiled() -> Result<&'static Compiled, String> {
    COMPILED
        .get_or_init(|| {
            let runtime = Runtime::new().map_err(|e| e.to_string())?;
            let context = Context::full(&runtime).map_err(|e| e.to_string())?;
            context.with(|ctx| {
                let compile = |name: &str, source: &str| {
                    Module::declare(ctx.clone(), name, source)
                        .and_then(|m| m.write(WriteOptions::default()))
                        .map_err(|e| format!("cannot compile {name}: {e}"))
                };
                Ok(Compiled {
                    preamble: compile("sandgate:preamble", PREAMBLE)?,
                    web: compile("sandgate:web", WEB)?,
                    locale: compile("sandgate:locale", LOCALE)?,
                })
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Compiles the modules now, so the first execution does not pay for it.
pub fn warm_up() -> Result<(), String> {
    compiled().map(|_| ())
}

/// The preamble's entry function, loaded into `ctx`.
pub(crate) fn preamble<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let compiled =
        compiled().map_err(|e| rquickjs::Error::new_from_js_message("bytecode", "preamble", e))?;
    load_default(ctx, &compiled.preamble)
}

/// The web basics' entry function, loaded into `ctx`.
pub(crate) fn web<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let compiled =
        compiled().map_err(|e| rquickjs::Error::new_from_js_message("bytecode", "web", e))?;
    load_default(ctx, &compiled.web)
}

/// The locale formats' entry function, loaded into `ctx`.
pub(crate) fn locale<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let compiled =
        compiled().map_err(|e| rquickjs::Error::new_from_js_message("bytecode", "locale", e))?;
    load_default(ctx, &compiled.locale)
}

/// Loads a module from bytecode, evaluates it and returns its default export.
#[expect(unsafe_code, reason = "`bytecode` was produced by `Module::write` in this very process, from our own source, by the same QuickJS build that reads it here; it is never read from outside.")]
fn load_default<'js>(ctx: &Ctx<'js>, bytecode: &[u8]) -> rquickjs::Result<Function<'js>> {
    // SAFETY: `bytecode` was produced by `Module::write` in this very process, from our own
    // source, by the same QuickJS build that reads it here; it is never read from outside.
    let module = unsafe { Module::load(ctx.clone(), bytecode) }?;
    let (module, evaluated) = module.eval()?;
    evaluated.finish::<()>()?;
    module.get("default")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_preamble_web_basics_and_locale_formats_compile() {
        super::warm_up().expect("the three modules compile");
    }
}
