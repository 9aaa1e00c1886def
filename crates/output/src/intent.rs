//! The intent filter: when the caller says what it is looking for, keep only the paragraphs
//! that mention enough of it. If nothing matches, the output is left alone: a filter that
//! returns nothing would lose the answer.

/// Words too common to say anything about intent.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "with", "what", "which", "who", "how", "find", "show",
    "get", "me", "all",
];

fn terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The paragraphs (blank-line separated) of `text` containing at least `min_ratio` of the
/// intent's terms, joined by blank lines; `None` when the intent has no terms or no
/// paragraph qualifies.
pub fn filter_by_intent(text: &str, intent: &str, min_ratio: f64) -> Option<String> {
    let wanted = terms(intent);
    if wanted.is_empty() {
        return None;
    }
    let needed = ((wanted.len() as f64) * min_ratio).ceil().max(1.0) as usize;
    let kept: Vec<&str> = text
        .split("\n\n")
        .filter(|paragraph| {
            let have = terms(paragraph);
            wanted
                .iter()
                .filter(|t| have.binary_search(t).is_ok())
                .count()
                >= needed
        })
        .collect();
    if kept.is_empty() {
        None
    } else {
        Some(kept.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_matching_paragraphs_and_leaves_misses_alone() {
        let text = "Invoices for March.\nTotal 10.\n\nShipping delays in Europe.\n\nMarch invoice for ACME overdue.";
        assert_eq!(
            filter_by_intent(text, "overdue invoices in March", 0.3).as_deref(),
            Some("Invoices for March.\nTotal 10.\n\nMarch invoice for ACME overdue.")
        );
        assert_eq!(filter_by_intent(text, "kangaroo", 0.3), None);
        assert_eq!(
            filter_by_intent(text, "the of", 0.3),
            None,
            "stopwords only"
        );
    }
}
