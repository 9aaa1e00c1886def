//! QuickJS's words for the faults a guest's code meets, read once, here, where QuickJS raised
//! them: the rest of sandgate matches on the [`Fault`] and shows the words as they are.

use crate::wire::fault::{Fault, Nullish, preamble_fault};

/// The fault an uncaught error of `name` with `message` is, as QuickJS words it; `None` for
/// any other error (a thrown value of the code's own, a failed call, a limit).
pub(super) fn classify(name: &str, message: &str) -> Option<Fault> {
    if let Some(fault) = preamble_fault(name, message) {
        return Some(fault);
    }
    match name {
        "ReferenceError" => {
            if let Some(name) = message.strip_suffix(" is not defined") {
                return Some(Fault::NotDefined {
                    name: name.to_string(),
                });
            }
            message
                .strip_suffix(" is not initialized")
                .map(|name| Fault::NotInitialized {
                    name: name.to_string(),
                })
        }
        "TypeError" => {
            if message == "not a function" || message.ends_with(" is not a function") {
                return Some(Fault::NotAFunction);
            }
            if message.ends_with("is not iterable") {
                return Some(Fault::NotIterable);
            }
            nullish_access(message, "cannot read property '")
                .map(|(property, of)| Fault::NullishRead { property, of })
                .or_else(|| {
                    nullish_access(message, "cannot set property '")
                        .map(|(property, of)| Fault::NullishWrite { property, of })
                })
        }
        _ => None,
    }
}

/// `p` and what it was accessed on, of "cannot read property 'p' of undefined".
fn nullish_access(message: &str, prefix: &str) -> Option<(String, Nullish)> {
    let rest = message.strip_prefix(prefix)?;
    let (property, of) = rest.rsplit_once("' of ")?;
    Some((property.to_string(), Nullish::named(of)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quickjs_words_become_faults() {
        assert_eq!(
            classify("ReferenceError", "memroy is not defined"),
            Some(Fault::NotDefined {
                name: "memroy".into()
            })
        );
        assert_eq!(
            classify("TypeError", "cannot read property 'a' of null"),
            Some(Fault::NullishRead {
                property: "a".into(),
                of: Nullish::Null
            })
        );
        assert_eq!(classify("TypeError", "not a function"), Some(Fault::NotAFunction));
        // The code's own error that happens to use the words is not the engine's fault.
        assert_eq!(classify("Error", "x is not defined"), None);
    }
}
