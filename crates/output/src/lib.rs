//! Output shaping: what the model sees of a large result.
//!
//! A tool or an execution can return far more than a model should read. This crate turns a
//! result into a shorter text in up to four stages, each optional and each deterministic:
//!
//! 1. **Intent filter**: with an intent and a large output, keep the paragraphs that mention
//!    enough of the intent's words.
//! 2. **JSON fitting**: a JSON value over the budget is cut to it, keeping as much data as
//!    fits: a uniform array as many rows in full as fit and the identities of (some of) the
//!    rest; anything else its shape, with every array, object and string cut alike and each
//!    cut marked (`fit`). The key-path outline is the last resort.
//! 3. **Smart truncation**: keep the head (60%) and the tail (40%) on line boundaries, with a
//!    marker saying what was cut. Cuts never split a UTF-8 character.
//! 4. **Size footer**: when a meaningful amount was removed, say how much.
//!
//! A result within the budget is never summarised or cut: shaping costs the model a
//! `read_output` round trip, which code mode exists to save. Only an `intent` the caller gave
//! filters a large output that would fit.
//!
//! The crate is pure: no I/O. Keeping the full output (so nothing is lost) is the caller's job;
//! [`Shaped::reduced`] tells it when to.

mod chunk;
mod fit;
mod intent;
mod path;
mod truncate;

use serde::{Deserialize, Serialize};

pub use chunk::summarize_json;
pub use fit::{REST_IDS, fit_json};
pub use intent::filter_by_intent;
pub use path::select;
pub use truncate::{floor_char_boundary, truncate};

/// Characters of output a response holds by default: about 5,000 tokens.
pub const DEFAULT_MAX_CHARS: usize = 20_000;

/// Settings of the pipeline (`[output]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Characters a response holds when the caller does not ask for less (or more).
    pub max_chars: usize,
    /// Apply the intent filter only to outputs of at least this many bytes.
    pub intent_min_bytes: usize,
    /// Fraction of the intent's words a paragraph must contain to be kept.
    pub intent_min_term_ratio: f64,
    /// Fit JSON values to the budget only above this many bytes (and only when they exceed the
    /// budget); smaller ones are cut as text.
    pub json_chunk_min_bytes: usize,
    /// Items shown in full at the start of a uniform array in the outline of last resort (a
    /// fitted array shows as many as the budget holds).
    pub json_sample_items: usize,
    /// Add the size footer when more than this many bytes were removed.
    pub footer_min_removed_bytes: usize,
    /// Turn the intent filter on.
    pub intent_filter: bool,
    /// Turn JSON summaries on.
    pub json_chunking: bool,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            max_chars: DEFAULT_MAX_CHARS,
            intent_min_bytes: 5_000,
            intent_min_term_ratio: 0.3,
            json_chunk_min_bytes: 10_240,
            json_sample_items: 3,
            footer_min_removed_bytes: 200,
            intent_filter: true,
            json_chunking: true,
        }
    }
}

/// The shaped output and what happened to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shaped {
    /// What the model gets.
    pub text: String,
    /// Size of the input, in bytes.
    pub original_bytes: usize,
    /// Stages that changed something, in order.
    pub stages: Vec<&'static str>,
}

impl Shaped {
    /// Whether anything was removed, in which case the caller should keep the full output.
    pub fn reduced(&self) -> bool {
        !self.stages.is_empty()
    }
}

/// Runs the pipeline. `max_chars` is the output limit in characters (the footer is added
/// after truncation and is not counted against it).
pub fn shape(
    output: &str,
    intent: Option<&str>,
    max_chars: usize,
    config: &OutputConfig,
) -> Shaped {
    let original_bytes = output.len();
    let mut stages = Vec::new();
    let mut text = output.to_string();
    if config.intent_filter
        && let Some(intent) = intent
        && text.len() >= config.intent_min_bytes
        && let Some(filtered) = filter_by_intent(&text, intent, config.intent_min_term_ratio)
    {
        text = filtered;
        stages.push("intent");
    }
    let over = |text: &str| text.len() > max_chars && text.chars().count() > max_chars;
    if config.json_chunking
        && over(&text)
        && text.len() > config.json_chunk_min_bytes
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
    {
        let fitted = fit_json(&value, max_chars)
            .unwrap_or_else(|| summarize_json(&value, config.json_sample_items));
        if fitted.len() < text.len() {
            text = fitted;
            stages.push("json_summary");
        }
    }
    if text.chars().count() > max_chars {
        text = truncate(&text, max_chars);
        stages.push("truncate");
    }
    let removed = original_bytes.saturating_sub(text.len());
    if removed > config.footer_min_removed_bytes {
        text.push_str(&format!(
            "\n[Output: {} returned, {} processed, {}% reduced]",
            kb(text.len()),
            kb(original_bytes),
            removed * 100 / original_bytes.max(1)
        ));
    }
    Shaped {
        text,
        original_bytes,
        stages,
    }
}

/// `12.3KB`: sizes as the markers and footer print them.
pub fn kb(bytes: usize) -> String {
    format!("{:.1}KB", bytes as f64 / 1024.0)
}
