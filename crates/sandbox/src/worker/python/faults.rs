//! The typed fault of a Python error, named where Monty raised it: the hints and the notes on
//! ungranted capabilities match on the fault (see `wire::fault`), never on Monty's words, which
//! stay display text. The words are read here, once, at the engine's edge.

use monty_types::ExcType;

use crate::wire::fault::Fault;

/// The fault of an error of type `exc` with `message`; `undefined` are the names this run's
/// lookups answered as not defined (a `NameError` about one of them is that name).
pub fn classify(exc: ExcType, message: &str, undefined: &[String]) -> Option<Fault> {
    match exc {
        ExcType::NameError => {
            let name = quoted(message)?;
            (undefined.iter().any(|u| u == name) || message.starts_with("name '"))
                .then(|| Fault::NotDefined { name: name.to_string() })
        }
        // `cannot import name 'groupby' from 'itertools'`
        ExcType::ImportError if message.starts_with("cannot import name '") => {
            let mut parts = message.split('\'');
            let member = parts.nth(1)?;
            let module = parts.nth(1)?;
            Some(Fault::Unsupported {
                feature: format!("{module}.{member}"),
            })
        }
        // The worker's own refusal of an OS call (`open`, `os.environ`, `Path.read_text`).
        ExcType::PermissionError if message.contains(OS_REFUSED) => Some(Fault::Unsupported {
            feature: quoted_in(message, '`')?.to_string(),
        }),
        ExcType::ModuleNotFoundError | ExcType::ImportError => {
            let module = quoted(message)?;
            Some(Fault::NoModule {
                module: module.split('.').next().unwrap_or(module).to_string(),
            })
        }
        ExcType::NotImplementedError => {
            let feature = message
                .strip_prefix("The monty syntax parser does not yet support ")
                .unwrap_or(message);
            Some(Fault::Unsupported {
                feature: feature.to_string(),
            })
        }
        // `'items'`: a string key Monty quotes as Python's repr does.
        ExcType::KeyError => Some(Fault::MissingKey {
            key: quoted(message).unwrap_or(message).to_string(),
        }),
        // `module 'asyncio' has no attribute 'create_task'`
        ExcType::AttributeError if message.starts_with("module '") => {
            let mut parts = message.split('\'');
            let module = parts.nth(1)?;
            let member = parts.nth(1)?;
            Some(Fault::Unsupported {
                feature: format!("{module}.{member}"),
            })
        }
        _ => None,
    }
}

/// A limit of Monty's own that ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The heap limit (`memory limit exceeded: ...`).
    Memory,
    /// The time limit, while computing (`time limit exceeded: ...`).
    Time,
}

/// Which of Monty's limits an error of type `exc` with `message` is, if one.
pub fn limit(exc: ExcType, message: &str) -> Option<Limit> {
    match exc {
        ExcType::MemoryError if message.starts_with("memory limit exceeded") => Some(Limit::Memory),
        ExcType::TimeoutError if message.starts_with("time limit exceeded") => Some(Limit::Time),
        _ => None,
    }
}

/// What the worker says of an OS call it refuses, after the call's name in backquotes.
pub const OS_REFUSED: &str = "is not available in the sandbox";

/// The first single-quoted part of `message`.
fn quoted(message: &str) -> Option<&str> {
    quoted_in(message, '\'')
}

/// The first part of `message` between two `quote`s.
fn quoted_in(message: &str, quote: char) -> Option<&str> {
    let start = message.find(quote)? + quote.len_utf8();
    let end = start + message[start..].find(quote)?;
    Some(&message[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monty_words_become_faults() {
        let undefined = vec!["fs".to_string()];
        assert_eq!(
            classify(ExcType::NameError, "name 'fs' is not defined", &undefined),
            Some(Fault::NotDefined { name: "fs".into() })
        );
        assert_eq!(
            classify(ExcType::ModuleNotFoundError, "No module named 'requests.adapters'", &[]),
            Some(Fault::NoModule { module: "requests".into() })
        );
        assert_eq!(
            classify(ExcType::NotImplementedError, "The monty syntax parser does not yet support pattern matching (match statements)", &[]),
            Some(Fault::Unsupported { feature: "pattern matching (match statements)".into() })
        );
        assert_eq!(
            classify(ExcType::AttributeError, "module 'asyncio' has no attribute 'create_task'", &[]),
            Some(Fault::Unsupported { feature: "asyncio.create_task".into() })
        );
        assert_eq!(
            classify(ExcType::ImportError, "cannot import name 'groupby' from 'itertools' (unknown location)", &[]),
            Some(Fault::Unsupported { feature: "itertools.groupby".into() })
        );
        assert_eq!(
            classify(ExcType::PermissionError, "`open` is not available in the sandbox: ...", &[]),
            Some(Fault::Unsupported { feature: "open".into() })
        );
        assert_eq!(
            classify(ExcType::KeyError, "'items'", &[]),
            Some(Fault::MissingKey { key: "items".into() })
        );
        assert_eq!(classify(ExcType::ValueError, "bad", &[]), None);
    }
}
