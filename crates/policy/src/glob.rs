//! `*` wildcard matching for tool patterns such as `github.*` or `*_read`.

/// Matches `name` against a pattern where `*` stands for any run of characters. It allocates
/// nothing: every decision runs it once per pattern and spelling.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let (middle, last) = match rest.rsplit_once('*') {
        Some((middle, last)) => (middle, last),
        None => ("", rest),
    };
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return false;
    }
    // Both ends matched, so these are character boundaries.
    let mut remaining = &name[first.len()..name.len() - last.len()];
    for part in middle.split('*').filter(|p| !p.is_empty()) {
        match remaining.find(part) {
            Some(i) => remaining = &remaining[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn matches_wildcards() {
        assert!(glob_match("get-*", "get-sum"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("a*c*e", "abcde"));
        assert!(!glob_match("a*c*e", "abde"));
        assert!(!glob_match("ab*ba", "aba"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
        assert!(glob_match("é*", "école"));
    }
}
