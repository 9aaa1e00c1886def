//! `${VAR}` interpolation for backend `env` values and HTTP headers, so secrets stay in the
//! environment and out of config files. `${VAR:-default}` gives a fallback for an unset (or
//! empty) variable, as in the shell, and `$${` escapes a literal `${`.

/// Replaces every `${NAME}` in `value` using `lookup`. Returns the name of the first variable
/// that `lookup` cannot resolve. An unterminated `${` is kept literally.
pub fn interpolate(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(stripped) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = stripped;
        } else if let Some(stripped) = after.strip_prefix("${") {
            match stripped.find('}') {
                Some(end) => {
                    let reference = &stripped[..end];
                    let (name, default) = match reference.split_once(":-") {
                        Some((name, default)) => (name, Some(default)),
                        None => (reference, None),
                    };
                    let value = lookup(name).filter(|v| default.is_none() || !v.is_empty());
                    match (value, default) {
                        (Some(value), _) => out.push_str(&value),
                        (None, Some(default)) => out.push_str(default),
                        (None, None) => return Err(name.to_string()),
                    }
                    rest = &stripped[end + 1..];
                }
                None => {
                    out.push_str(after);
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn replaces_known_variables() {
        assert_eq!(
            interpolate("Bearer ${TOKEN}", &env).as_deref(),
            Ok("Bearer s3cret")
        );
        assert_eq!(interpolate("a$b", &env).as_deref(), Ok("a$b"));
        assert_eq!(interpolate("$${TOKEN}", &env).as_deref(), Ok("${TOKEN}"));
        assert_eq!(interpolate("${UNCLOSED", &env).as_deref(), Ok("${UNCLOSED"));
        assert_eq!(
            interpolate("${NOPE:-/tmp/x}", &env).as_deref(),
            Ok("/tmp/x")
        );
        assert_eq!(
            interpolate("${TOKEN:-/tmp/x}", &env).as_deref(),
            Ok("s3cret")
        );
    }

    #[test]
    fn names_the_missing_variable() {
        assert_eq!(interpolate("x ${NOPE} y", &env), Err("NOPE".to_string()));
    }
}
