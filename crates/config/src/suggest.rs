//! "Did you mean" for misspelled keys: the closest known key by Jaro-Winkler similarity.

/// The closest candidate to `input`, if any is similar enough to be a likely typo.
pub fn closest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(input, c), *c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Formats a suggestion as ` (did you mean `x`?)`, or an empty string.
pub fn did_you_mean(input: &str, candidates: &[&str]) -> String {
    closest(input, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_keys_only() {
        assert_eq!(closest("comand", &["command", "args"]), Some("command"));
        assert_eq!(closest("zzz", &["command", "args"]), None);
    }
}
