//! A value that must not be shown: a token, an HTTP header's value, a backend's environment
//! value. It masks itself in `Debug` and `Display` (an unresolved `${VAR}` placeholder shows,
//! since it names a variable, not a value); [`Secret::expose`] is the one way to read it.

/// A value that masks itself when printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// `value`, kept.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself: for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What it shows when printed.
    fn shown(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.starts_with("${") && self.0.ends_with('}') {
            write!(f, "{:?}", self.0)
        } else {
            write!(f, "<{} characters, hidden>", self.0.chars().count())
        }
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_string())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(")?;
        self.shown(f)?;
        f.write_str(")")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shown(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_its_value() {
        let secret = Secret::new("hunter2-very-secret");
        for shown in [
            format!("{secret:?}"),
            format!("{secret}"),
            format!("{:#?}", vec![secret.clone()]),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("19 characters, hidden"), "{shown}");
        }
        assert_eq!(secret.expose(), "hunter2-very-secret");
        assert_eq!(
            format!("{:?}", Secret::new("${TOKEN}")),
            "Secret(\"${TOKEN}\")"
        );
    }
}
