//! A small JSON path for reading part of a stored output: `$.items[3].name`,
//! `items[0]["display name"]`, `[-1]` (from the end). Enough to pull one piece out of a large
//! result without reading all of it; not a query language.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(i64),
}

/// The part of `value` at `path`, or a message saying where the path stopped matching.
pub fn select<'v>(value: &'v Value, path: &str) -> Result<&'v Value, String> {
    let steps = parse(path)?;
    let mut current = value;
    let mut walked = String::from("$");
    for step in steps {
        current = match (&step, current) {
            (Step::Key(key), Value::Object(map)) => map.get(key).ok_or_else(|| {
                let keys: Vec<&str> = map.keys().take(20).map(String::as_str).collect();
                format!("{walked} has no key {key:?}; its keys are {keys:?}")
            })?,
            (Step::Index(i), Value::Array(items)) => {
                let len = items.len() as i64;
                let at = if *i < 0 { len + i } else { *i };
                items
                    .get(usize::try_from(at).unwrap_or(usize::MAX))
                    .ok_or_else(|| format!("{walked} has {len} items; index {i} is outside it"))?
            }
            (Step::Key(key), Value::Array(_)) => {
                return Err(format!(
                    "{walked} is an array; use an index like [0], not .{key}"
                ));
            }
            (Step::Index(i), Value::Object(_)) => {
                return Err(format!(
                    "{walked} is an object; use a key like .name, not [{i}]"
                ));
            }
            (_, other) => {
                return Err(format!("{walked} is {}, which has no parts", kind(other)));
            }
        };
        match step {
            Step::Key(key) => walked.push_str(&format!(".{key}")),
            Step::Index(i) => walked.push_str(&format!("[{i}]")),
        }
    }
    Ok(current)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Appends `.key` to a path, or `["key"]` when the key is not a plain name (the form [`select`]
/// reads back).
pub(crate) fn push_key(path: &mut String, key: &str) {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&Value::String(key.to_string()).to_string());
        path.push(']');
    }
}

/// Appends `[index]` to a path.
pub(crate) fn push_index(path: &mut String, index: usize) {
    path.push('[');
    path.push_str(&index.to_string());
    path.push(']');
}

/// The key quoted at the start of `text` (by `quote`, with `\` escaping the next character, and
/// JSON's escapes for a double quote), and how many bytes the quoted key takes.
fn quoted_key(text: &str, quote: char) -> Option<(String, usize)> {
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if c == quote {
            let literal = &text[..=i];
            let key = if quote == '"' {
                serde_json::from_str(literal).ok()?
            } else {
                let mut key = String::new();
                let mut inner = literal[1..literal.len() - 1].chars();
                while let Some(c) = inner.next() {
                    key.push(if c == '\\' { inner.next()? } else { c });
                }
                key
            };
            return Some((key, i + 1));
        }
    }
    None
}

fn parse(path: &str) -> Result<Vec<Step>, String> {
    let bad = |why: &str| {
        format!(
            "bad JSON path {path:?}: {why}. Write it like $.items[0].name or items[0][\"a key\"]"
        )
    };
    let mut rest = path.trim();
    rest = rest.strip_prefix('$').unwrap_or(rest);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let after = after.trim_start();
            if let Some(quote @ ('"' | '\'')) = after.chars().next() {
                // A quoted key, with `\` escapes: it may hold `]`, `.` or its own quote.
                let (key, len) =
                    quoted_key(after, quote).ok_or_else(|| bad("a quoted key is not closed"))?;
                let tail = after[len..].trim_start();
                rest = tail
                    .strip_prefix(']')
                    .ok_or_else(|| bad("a quoted key must be followed by ]"))?;
                steps.push(Step::Key(key));
                continue;
            }
            let close = after.find(']').ok_or_else(|| bad("a [ is not closed"))?;
            let index = after[..close]
                .trim()
                .parse()
                .map_err(|_| bad("an index must be a whole number"))?;
            steps.push(Step::Index(index));
            rest = &after[close + 1..];
        } else {
            let body = rest.strip_prefix('.').unwrap_or(rest);
            let end = body.find(['.', '[']).unwrap_or(body.len());
            if end == 0 {
                return Err(bad("an empty key"));
            }
            steps.push(Step::Key(body[..end].to_string()));
            rest = &body[end..];
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by the fuzz target (tests/fuzz.rs): a quoted key holding `]` or its quote.
    #[test]
    fn quoted_keys_may_hold_brackets_and_quotes() {
        let v = json!({"a]\"b": 1, "it's": 2, "x.y": {"[0]": 3}});
        assert_eq!(select(&v, r#"$["a]\"b"]"#), Ok(&json!(1)));
        assert_eq!(select(&v, r#"$['it\'s']"#), Ok(&json!(2)));
        assert_eq!(select(&v, r#"[ "x.y" ][ "[0]" ]"#), Ok(&json!(3)));
        assert!(select(&v, r#"$["open"#).is_err());
        assert!(select(&v, r#"$["a"x]"#).is_err());
    }

    #[test]
    fn selects_keys_indices_and_quoted_keys() {
        let v = json!({"items": [{"name": "a"}, {"name": "b", "display name": "B"}]});
        assert_eq!(select(&v, "$.items[1].name").unwrap(), &json!("b"));
        assert_eq!(
            select(&v, "items[-1][\"display name\"]").unwrap(),
            &json!("B")
        );
        assert_eq!(select(&v, "$").unwrap(), &v);
        assert_eq!(select(&v, "").unwrap(), &v);
    }

    #[test]
    fn says_where_the_path_stopped() {
        let v = json!({"items": [1, 2]});
        assert!(
            select(&v, "$.itemz")
                .unwrap_err()
                .contains("no key \"itemz\"")
        );
        assert!(
            select(&v, "$.items[5]")
                .unwrap_err()
                .contains("has 2 items")
        );
        assert!(select(&v, "$.items.x").unwrap_err().contains("is an array"));
        assert!(select(&v, "$.items[0].x").unwrap_err().contains("a number"));
        assert!(
            select(&v, "$.items[x]")
                .unwrap_err()
                .contains("bad JSON path")
        );
    }
}
