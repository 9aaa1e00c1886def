//! The terms search works on: a text lowercased, split into words (camelCase, snake_case,
//! kebab-case), stopwords dropped, each word cut to a bound and lightly stemmed. The index,
//! the query and the synonym table all read text through [`tokenize`], so they meet.

use crate::names::split_words;

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "with", "me", "my", "i", "you", "your", "tool", "tools",
];

/// Lowercases, splits words (camelCase, snake_case, kebab-case), drops stopwords and stems
/// plurals, so "Numbers" and "number" meet. A word is kept to its first [`MAX_TERM_CHARS`]
/// characters, so what the index holds per word is bounded whatever a backend sends.
pub(crate) fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split_whitespace()
        .flat_map(split_words)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(cut_term(&w)))
}

/// Longest term indexed, in characters; a longer word is indexed (and looked up) by its start.
pub(crate) const MAX_TERM_CHARS: usize = 40;

fn cut_term(word: &str) -> &str {
    match word.char_indices().nth(MAX_TERM_CHARS) {
        Some((end, _)) => &word[..end],
        None => word,
    }
}

/// A light English stemmer: plurals, and the `-ing`, `-ed` and final `-e` of verbs, so
/// "creating", "created" and "create" meet (as do "numbers" and "number").
fn stem(word: &str) -> String {
    if word.len() > 4 && word.ends_with("ies") {
        return format!("{}y", &word[..word.len() - 3]);
    }
    let mut word = word;
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        word = &word[..word.len() - 1];
    }
    for suffix in ["ing", "ed"] {
        if word.len() > suffix.len() + 3 && word.is_ascii() && word.ends_with(suffix) {
            word = &word[..word.len() - suffix.len()];
            // "mapped" → "mapp" → "map".
            let bytes = word.as_bytes();
            if bytes.len() > 3
                && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
                && !b"lsz".contains(&bytes[bytes.len() - 1])
            {
                word = &word[..word.len() - 1];
            }
            return word.to_string();
        }
    }
    if word.len() > 4 && word.ends_with('e') && !word.ends_with("ee") {
        word = &word[..word.len() - 1];
    }
    word.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_and_plurals_meet_their_stem() {
        for (a, b) in [
            ("creating", "create"),
            ("created", "creates"),
            ("mapped", "map"),
            ("files", "file"),
            ("entities", "entity"),
            ("observations", "observation"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
        assert_eq!(stem("address"), "address");
        assert_eq!(stem("tree"), "tree");
    }

    #[test]
    fn tokenizer_normalizes() {
        let t: Vec<String> = tokenize("Returns the sum of two Numbers; getSum entities").collect();
        assert_eq!(
            t,
            ["return", "sum", "two", "number", "get", "sum", "entity"]
        );
    }
}
