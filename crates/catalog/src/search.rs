//! BM25 search over tool names, descriptions and parameter names.
//!
//! Models search with phrases such as "sum two numbers" or "create github issue". BM25 over
//! a small field-weighted document per tool answers those well and runs in microseconds for
//! thousands of tools. Words are stemmed (plurals, `-ing`, `-ed`), and a query term also
//! matches the words models use for the same thing (`synonyms`), at reduced weight. Query
//! terms that match nothing fall back to fuzzy matches against the vocabulary (typos) and to
//! prefixes (partial words), at reduced weight. Ties are broken by
//! qualified name, so results are deterministic.

use std::collections::HashMap;

use crate::catalog::Entry;
use crate::terms::tokenize;

/// Weight of a term occurrence in the tool or backend name.
const NAME_WEIGHT: u32 = 3;
/// Weight of a term occurrence in a parameter name.
const PARAM_WEIGHT: u32 = 2;
/// Weight of a term occurrence in the description.
const DESCRIPTION_WEIGHT: u32 = 1;
/// BM25 saturation.
const K1: f32 = 1.2;
/// BM25 length normalization.
const B: f32 = 0.75;
/// Score multiplier for a fuzzy (typo) match of a query term.
const FUZZY_FACTOR: f32 = 0.7;
/// Score multiplier for a prefix match of a query term.
const PREFIX_FACTOR: f32 = 0.5;

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// Index into [`crate::catalog::Catalog::entries`].
    pub entry: usize,
    /// BM25 score (higher is better).
    pub score: f32,
}

/// An inverted index over the catalog's entries.
#[derive(Debug, Default)]
pub struct SearchIndex {
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// The vocabulary, sorted, for prefix lookups.
    vocabulary: Vec<String>,
    /// Single-deletion variants of each vocabulary term → the terms (indexes into
    /// `vocabulary`). Any one-edit typo of a term shares a variant with it (SymSpell), so typo
    /// lookup costs a few hash probes instead of a scan of the vocabulary.
    deletions: HashMap<String, Vec<u32>>,
    doc_len: Vec<f32>,
    avg_len: f32,
    qualified: Vec<String>,
    /// Entries whose description says they are deprecated: ranked below the tools that
    /// replace them ("read a file" ranked the filesystem server's `DEPRECATED` `read_file`
    /// first).
    deprecated: Vec<bool>,
}

/// What a deprecated tool's score is multiplied by.
const DEPRECATED_FACTOR: f32 = 0.5;

/// Whether a tool's first description line says the tool is deprecated: `DEPRECATED` in
/// capitals, or "deprecated" opening the line or followed by `:` or `)` (a description that
/// mentions another tool as "the deprecated read_file" is not).
fn says_deprecated(entry: &Entry) -> bool {
    let summary = entry.summary();
    let lower = summary.to_lowercase();
    summary.contains("DEPRECATED")
        || lower.starts_with("deprecated")
        || lower.contains("deprecated:")
        || lower.contains("deprecated)")
}

impl SearchIndex {
    /// Indexes entries. Parameter names come from the input schema's top-level properties.
    pub(crate) fn build(entries: &[Entry]) -> SearchIndex {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut doc_len = Vec::with_capacity(entries.len());
        for (doc, entry) in entries.iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut add = |text: &str, weight: u32| {
                for term in tokenize(text) {
                    *counts.entry(term).or_default() += weight;
                }
            };
            add(&entry.spec.name, NAME_WEIGHT);
            add(&entry.spec.backend, DESCRIPTION_WEIGHT);
            if let Some(description) = &entry.spec.description {
                add(description, DESCRIPTION_WEIGHT);
            }
            if let Some(props) = entry
                .spec
                .input_schema
                .get("properties")
                .and_then(|p| p.as_object())
            {
                for name in props.keys() {
                    add(name, PARAM_WEIGHT);
                }
            }
            doc_len.push(counts.values().sum::<u32>() as f32);
            for (term, tf) in counts {
                postings.entry(term).or_default().push((doc as u32, tf));
            }
        }
        let avg_len = if doc_len.is_empty() {
            1.0
        } else {
            doc_len.iter().sum::<f32>() / doc_len.len() as f32
        };
        let qualified = entries.iter().map(|e| e.qualified.clone()).collect();
        let deprecated = entries.iter().map(says_deprecated).collect();
        let mut vocabulary: Vec<String> = postings.keys().cloned().collect();
        vocabulary.sort();
        let mut deletions: HashMap<String, Vec<u32>> = HashMap::new();
        for (id, term) in vocabulary.iter().enumerate() {
            if (MIN_FUZZY_LEN - 1..=MAX_FUZZY_LEN + 1).contains(&term.chars().count()) {
                for variant in deletion_variants(term).chain(std::iter::once(term.clone())) {
                    deletions.entry(variant).or_default().push(id as u32);
                }
            }
        }
        SearchIndex {
            postings,
            vocabulary,
            deletions,
            doc_len,
            avg_len: avg_len.max(1.0),
            qualified,
            deprecated,
        }
    }

    /// The best `limit` matches for `query`, best first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<SearchHit> {
        let mut scores = vec![0f32; self.doc_len.len()];
        let mut query_terms: Vec<String> = tokenize(query).collect();
        query_terms.dedup();
        for term in &query_terms {
            // The words a model may mean by it (synonyms.rs), at a reduced weight: a tool in
            // the model's own words still ranks first.
            for other in crate::synonyms::of(term) {
                if !query_terms.contains(other)
                    && let Some(list) = self.postings.get(other)
                {
                    self.accumulate(list, crate::synonyms::SYNONYM_FACTOR, &mut scores);
                }
            }
            match self.postings.get(term) {
                Some(list) => self.accumulate(list, 1.0, &mut scores),
                None => {
                    // Sorted, so float sums (and so rankings) do not depend on hash order.
                    let mut expansions: Vec<(&str, f32)> = self.expansions(term).collect();
                    expansions.sort_by(|a, b| a.0.cmp(b.0));
                    for (other, factor) in expansions {
                        if let Some(list) = self.postings.get(other) {
                            self.accumulate(list, factor, &mut scores);
                        }
                    }
                }
            }
        }
        let mut hits: Vec<SearchHit> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .map(|(entry, score)| SearchHit {
                entry,
                score: if self.deprecated.get(entry) == Some(&true) {
                    score * DEPRECATED_FACTOR
                } else {
                    score
                },
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.qualified[a.entry].cmp(&self.qualified[b.entry]))
        });
        hits.truncate(limit);
        hits
    }

    fn accumulate(&self, list: &[(u32, u32)], factor: f32, scores: &mut [f32]) {
        let n = self.doc_len.len() as f32;
        let df = list.len() as f32;
        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
        for &(doc, tf) in list {
            let tf = tf as f32;
            let norm = K1 * (1.0 - B + B * self.doc_len[doc as usize] / self.avg_len);
            scores[doc as usize] += factor * idf * tf * (K1 + 1.0) / (tf + norm);
        }
    }

    /// Vocabulary terms that a query term probably meant: words it is a prefix of, and words
    /// one edit away (insertion, deletion, substitution or transposition).
    fn expansions<'a>(&'a self, term: &'a str) -> impl Iterator<Item = (&'a str, f32)> + 'a {
        let mut found: Vec<(&str, f32)> = Vec::new();
        if term.len() >= MIN_PREFIX_LEN {
            let start = self.vocabulary.partition_point(|v| v.as_str() < term);
            for candidate in self.vocabulary[start..]
                .iter()
                .take_while(|v| v.starts_with(term))
            {
                found.push((candidate, PREFIX_FACTOR));
            }
        }
        if (MIN_FUZZY_LEN..=MAX_FUZZY_LEN).contains(&term.chars().count()) {
            let probes = deletion_variants(term).chain(std::iter::once(term.to_string()));
            for probe in probes {
                for &id in self
                    .deletions
                    .get(&probe)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let candidate = self.vocabulary[id as usize].as_str();
                    if strsim::osa_distance(term, candidate) > 1 {
                        continue;
                    }
                    // A word that is both a prefix match and one edit away counts as the
                    // closer of the two.
                    match found.iter_mut().find(|(f, _)| *f == candidate) {
                        Some(seen) => seen.1 = seen.1.max(FUZZY_FACTOR),
                        None => found.push((candidate, FUZZY_FACTOR)),
                    }
                }
            }
        }
        found.into_iter()
    }
}

/// Query terms shorter than this never match by prefix.
const MIN_PREFIX_LEN: usize = 3;
/// Query terms shorter than this never match fuzzily (too many false friends).
const MIN_FUZZY_LEN: usize = 4;
/// Query terms longer than this match by prefix, not fuzzily: the deletion variants of a term
/// cost the square of its length, so typo tolerance is capped per word (a 40,000-character
/// word once took 3.2 GB).
const MAX_FUZZY_LEN: usize = 20;

/// Every string obtained by deleting one character of `term`.
fn deletion_variants(term: &str) -> impl Iterator<Item = String> + '_ {
    term.char_indices().map(move |(i, c)| {
        let mut variant = String::with_capacity(term.len());
        variant.push_str(&term[..i]);
        variant.push_str(&term[i + c.len_utf8()..]);
        variant
    })
}
