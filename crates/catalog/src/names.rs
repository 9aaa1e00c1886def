//! Turning backend and tool names into JavaScript identifiers.
//!
//! Backends and tools may be named anything (`my-server`, `123x`, `delete`). The sandbox
//! exposes them as `backend.tool(...)`, so each name needs an identifier form. The rules are
//! those of DESIGN.md section 5: invalid characters become `_`, a leading digit gets a `_`
//! prefix, and a reserved word gets a trailing `_`. The original names stay reachable by
//! bracket access, so sanitizing never makes a tool unreachable.

/// Words that cannot be used as a binding or that would shadow something the sandbox needs.
const RESERVED: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    "async",
    "of",
    "constructor",
    "prototype",
    "__proto__",
    "globalThis",
];

/// Whether `word` is reserved in JavaScript or in the sandbox.
pub fn is_reserved_word(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// The JavaScript identifier for a backend or tool name.
pub fn sanitize_ident(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if is_reserved_word(&out) {
        out.push('_');
    }
    out
}

/// Splits an identifier-ish name into lowercase words: `getSum`, `get-sum` and `GET_SUM` all
/// give `["get", "sum"]`. Used for search and for TypeScript type names.
pub(crate) fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// `get-sum` → `GetSum`, for TypeScript type names.
pub(crate) fn pascal_case(name: &str) -> String {
    let mut out: String = split_words(name)
        .iter()
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|f| f.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out.retain(|c| c.is_ascii_alphanumeric());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_as_the_design_says() {
        assert_eq!(sanitize_ident("my-server"), "my_server");
        assert_eq!(sanitize_ident("123x"), "_123x");
        assert_eq!(sanitize_ident("delete"), "delete_");
        assert_eq!(sanitize_ident("get-sum"), "get_sum");
        assert_eq!(sanitize_ident("a.b c"), "a_b_c");
        assert_eq!(sanitize_ident(""), "_");
        assert_eq!(sanitize_ident("naïve"), "na_ve");
        assert_eq!(sanitize_ident("__proto__"), "__proto___");
    }

    #[test]
    fn splits_words_across_conventions() {
        assert_eq!(split_words("getSum"), ["get", "sum"]);
        assert_eq!(split_words("get-sum"), ["get", "sum"]);
        assert_eq!(split_words("GET_SUM"), ["get", "sum"]);
        assert_eq!(split_words("read_file2"), ["read", "file2"]);
        assert_eq!(pascal_case("create_entities"), "CreateEntities");
        assert_eq!(pascal_case("123"), "T123");
    }
}
