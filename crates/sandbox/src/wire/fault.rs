//! What went wrong in the guest's own code, as a fact instead of an engine's words. Each engine
//! names the fault where it raises the error (QuickJS in `worker::engine::fault`, V8 in
//! `worker/v8/guest.js`), so the hints, the notes on ungranted capabilities and the
//! explanations of absent backends match on the fault; the engine's message is display text
//! only, and a third engine adds a classifier, not another set of parsers.

use serde::{Deserialize, Serialize};

/// A fault in the guest's code: what it reached for, and found absent or unusable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// A name no scope declares (`x is not defined`).
    NotDefined {
        /// The name.
        name: String,
    },
    /// A binding read before its declaration ran (the temporal dead zone).
    NotInitialized {
        /// The name.
        name: String,
    },
    /// A call of a value that is no function. The expression called is read from the source
    /// at the error's position: QuickJS does not say it.
    NotAFunction,
    /// A property read from `undefined` or `null`.
    NullishRead {
        /// The property.
        property: String,
        /// What it was read from.
        of: Nullish,
    },
    /// A property set on `undefined` or `null`.
    NullishWrite {
        /// The property.
        property: String,
        /// What it was set on.
        of: Nullish,
    },
    /// A spread, destructuring or `for…of` over a value that cannot be iterated.
    NotIterable,
    /// An import of a module the engine does not have (Python: `import requests`).
    NoModule {
        /// The module as the code named it.
        module: String,
    },
    /// A feature of the language the engine does not have (Python on Monty: class
    /// inheritance, `match`, generators), or a member of a module it lacks
    /// (`asyncio.create_task`).
    Unsupported {
        /// The feature, in the engine's words, or `module.member`.
        feature: String,
    },
    /// A key read from a dict that does not have it (Python's `KeyError`).
    MissingKey {
        /// The key, as the code wrote it (a string key's text).
        key: String,
    },
    /// A tool reached by a name that is in no backend (`mcp.call("name")`, sandgate's own
    /// preamble).
    NoSuchTool {
        /// The name as the code gave it.
        name: String,
    },
}

/// `undefined` or `null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Nullish {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
}

impl Nullish {
    /// The value as code writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Nullish::Undefined => "undefined",
            Nullish::Null => "null",
        }
    }

    /// `undefined` or `null` as code writes it.
    pub fn named(text: &str) -> Option<Nullish> {
        match text {
            "undefined" => Some(Nullish::Undefined),
            "null" => Some(Nullish::Null),
            _ => None,
        }
    }
}

impl Fault {
    /// Whether this is what code meets when it reaches for a tool, backend or global that is
    /// not there: a name not defined, a member that is no function, a read from nothing, a
    /// tool name in no backend.
    pub fn reaches_for_something_absent(&self) -> bool {
        matches!(
            self,
            Fault::NotDefined { .. }
                | Fault::NotAFunction
                | Fault::NullishRead { .. }
                | Fault::NoSuchTool { .. }
        )
    }

    /// The name a `NotDefined` fault names.
    pub fn undefined_name(&self) -> Option<&str> {
        match self {
            Fault::NotDefined { name } => Some(name),
            _ => None,
        }
    }
}

/// The prefix of the preamble's error for a tool name that is in no backend (both engines
/// run the same preamble, and both classifiers read it).
pub const NO_TOOL_NAMED: &str = "no tool named ";

/// The fault sandgate's preamble raised, whatever the engine: its words are sandgate's own.
pub fn preamble_fault(name: &str, message: &str) -> Option<Fault> {
    if name != "ReferenceError" {
        return None;
    }
    let rest = message.strip_prefix(NO_TOOL_NAMED)?;
    let quoted = rest.split(';').next().unwrap_or(rest);
    let name = serde_json::from_str::<String>(quoted).unwrap_or_else(|_| quoted.to_string());
    Some(Fault::NoSuchTool { name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_crosses_the_wire_as_tagged_json() {
        let fault = Fault::NullishRead {
            property: "items".into(),
            of: Nullish::Undefined,
        };
        let text = serde_json::to_string(&fault).expect("a fault serializes");
        assert_eq!(
            text,
            r#"{"fault":"nullish_read","property":"items","of":"undefined"}"#
        );
        assert_eq!(
            serde_json::from_str::<Fault>(&text).expect("and reads back"),
            fault
        );
    }

    #[test]
    fn the_preamble_names_the_tool_it_found_in_no_backend() {
        let fault = preamble_fault(
            "ReferenceError",
            r#"no tool named "memory.nope"; use backend.tool, e.g. memory.some_tool"#,
        );
        assert_eq!(
            fault,
            Some(Fault::NoSuchTool {
                name: "memory.nope".into()
            })
        );
        assert_eq!(preamble_fault("TypeError", "no tool named \"x\""), None);
    }
}
