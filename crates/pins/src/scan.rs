//! The scan of a tool definition for text aimed at the model rather than at a person: every
//! string of it (name, title, description, and each string of its schemas: property
//! descriptions, enum values, defaults, examples) is read as the model would read it, and again
//! with the usual disguises undone (look-alike characters, letters spelt apart, digits for
//! letters, text smuggled in tag characters or base64).
//!
//! A high-severity finding (an instruction to conceal, to override, to read secrets, to send
//! data elsewhere, to use another server's tool; hidden or smuggled text; a name of mixed
//! scripts) holds the tool until a person accepts it. A warning is shown to the operator and
//! holds nothing. Real servers' descriptions are full of "IMPORTANT", "must", "never", paths
//! and URLs: the rules look for what those lack (`tests/real_tools.rs` holds them to zero
//! false alarms on the published tool lists in `tests/fixtures/real_tools`).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

use crate::digest::Definition;
use crate::text;

mod rules;
use rules::says;

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Shown to the operator; holds nothing.
    Warning,
    /// Holds the tool until accepted.
    High,
}

/// What was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Tells the model to keep something from the user.
    Concealment,
    /// Tells the model to set aside its instructions, or poses as them.
    Override,
    /// Tells the model to read or pass on secrets (keys, credentials, config files, history).
    SecretRead,
    /// Tells the model to send data to an address or URL of the text's choosing.
    Exfiltration,
    /// Tells the model how to use another server's tool.
    Shadowing,
    /// Characters no person sees (zero-width, bidirectional controls, tag characters), or HTML
    /// comments.
    HiddenText,
    /// A long encoded blob (base64 or hex).
    Encoded,
    /// A tool name that mixes scripts (a look-alike of another name).
    ConfusableName,
    /// A definition far larger than a tool needs.
    Oversize,
}

/// One finding: what, how much it weighs, where, and the words that raised it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What was found.
    pub kind: FindingKind,
    /// How much it weighs.
    pub severity: Severity,
    /// Where: `description`, `title`, `name`, or a schema path (`inputSchema.properties.path.description`).
    pub place: String,
    /// The words that raised it (cleaned of hidden characters, at most 120 characters).
    pub excerpt: String,
}

/// Every tool name the gateway lists, made once for a listing: a matcher over each name as a
/// description could use it (qualified, quoted, or bare when it reads as a name).
#[derive(Debug)]
pub struct Names {
    /// `(backend, tool)` of each pattern of `matcher`, lower case.
    owners: Vec<(String, String)>,
    /// Each backend's tools, lower case (a name a backend shares is its own to mention).
    by_backend: HashMap<String, HashSet<String>>,
    matcher: Option<aho_corasick::AhoCorasick>,
}

impl Names {
    /// The names of `tools` (`(backend, tool)` of every tool the gateway lists).
    pub fn new(tools: &[(String, String)]) -> Names {
        let mut by_backend: HashMap<String, HashSet<String>> = HashMap::new();
        let mut patterns = Vec::new();
        let mut owners = Vec::new();
        for (backend, tool) in tools {
            let (backend, name) = (backend.to_lowercase(), tool.to_lowercase());
            by_backend
                .entry(backend.clone())
                .or_default()
                .insert(name.clone());
            let mut add = |pattern: String| {
                patterns.push(pattern);
                owners.push((backend.clone(), name.clone()));
            };
            add(format!("{backend}.{name}"));
            for (open, close) in [('`', '`'), ('"', '"'), ('\'', '\''), ('“', '”')] {
                add(format!("{open}{name}{close}"));
            }
            if rules::distinctive(tool) {
                add(name.clone());
            }
        }
        let matcher = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&patterns)
            .ok();
        Names {
            owners,
            by_backend,
            matcher,
        }
    }

    /// What the scan of a definition of `backend` knows.
    pub fn context<'a>(&'a self, backend: &str) -> Context<'a> {
        let backend = backend.to_lowercase();
        Context {
            own: self.by_backend.get(&backend),
            backend,
            names: self,
        }
    }

    /// Whether the name of `pattern` is another backend's, not one the backend of `context`
    /// has too.
    fn foreign(&self, context: &Context<'_>, pattern: usize) -> bool {
        self.owners.get(pattern).is_some_and(|(owner, name)| {
            owner != &context.backend && !context.own.is_some_and(|tools| tools.contains(name))
        })
    }
}

/// What the scan knows besides the definition: its backend, and every other backend's tools
/// (a description that tells the model how to use one of those shadows it).
#[derive(Debug)]
pub struct Context<'a> {
    backend: String,
    own: Option<&'a HashSet<String>>,
    names: &'a Names,
}

/// A description longer than this is a warning (the longest of hundreds of real tools is about
/// 6,000 characters).
const LONG_DESCRIPTION: usize = 10_000;
/// A definition whose JSON is larger than this is a warning.
const LARGE_DEFINITION: usize = 48 * 1024;
/// Most strings read from one definition's schemas, and the deepest level read.
const MAX_STRINGS: usize = 2_000;
const MAX_DEPTH: usize = 32;

/// Scans `definition` (see the module's documentation).
pub fn scan(definition: &Definition, context: &Context<'_>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut strings: Vec<(String, Cow<'_, str>)> = Vec::new();
    strings.push(("name".into(), Cow::Borrowed(&definition.name)));
    if let Some(title) = &definition.title {
        strings.push(("title".into(), Cow::Borrowed(title)));
    }
    if let Some(description) = &definition.description {
        strings.push(("description".into(), Cow::Borrowed(description)));
    }
    collect(&definition.input_schema, "inputSchema", 0, &mut strings);
    if let Some(schema) = &definition.output_schema {
        collect(schema, "outputSchema", 0, &mut strings);
    }
    for (place, raw) in &strings {
        read(raw, place, context, &mut findings);
    }
    name_scripts(&definition.name, &mut findings);
    if definition
        .description
        .as_ref()
        .is_some_and(|d| d.chars().count() > LONG_DESCRIPTION)
    {
        push(
            &mut findings,
            FindingKind::Oversize,
            Severity::Warning,
            "description",
            "a description of over 10,000 characters",
        );
    }
    let size = serde_json::to_vec(definition).map_or(0, |b| b.len());
    if size > LARGE_DEFINITION {
        push(
            &mut findings,
            FindingKind::Oversize,
            Severity::Warning,
            "definition",
            &format!("a definition of {} KiB", size / 1024),
        );
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    findings.dedup_by(|a, b| a.kind == b.kind && a.place == b.place);
    findings
}

/// Compiles every pattern the scan uses now, so the first listing scanned does not wait for it
/// (tens of milliseconds in a release build, most of a second in a debug one).
pub fn warm() {
    rules::warm();
    let definition = Definition {
        name: "warm".into(),
        title: None,
        description: Some("Warms the scan up: every pattern is compiled once.".into()),
        input_schema: Value::Null,
        output_schema: None,
        annotations: None,
    };
    scan(&definition, &Names::new(&[]).context("warm"));
}

/// Whether any finding holds the tool.
pub fn holds(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::High)
}

/// Every string under `value` with its path (object keys too), up to the bounds. A property's
/// description is also read with its default beside it: "post a copy here" with a URL for a
/// default says where.
fn collect<'v>(value: &'v Value, path: &str, depth: usize, out: &mut Vec<(String, Cow<'v, str>)>) {
    if depth > MAX_DEPTH || out.len() >= MAX_STRINGS {
        return;
    }
    match value {
        Value::String(text) => out.push((path.to_string(), Cow::Borrowed(text))),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect(item, &format!("{path}[{i}]"), depth + 1, out);
            }
        }
        Value::Object(fields) => {
            if let (Some(Value::String(description)), Some(Value::String(default))) =
                (fields.get("description"), fields.get("default"))
            {
                out.push((
                    format!("{path}.description"),
                    Cow::Owned(format!("{default} — {description}")),
                ));
            }
            for (key, inner) in fields {
                let here = format!("{path}.{key}");
                if out.len() < MAX_STRINGS {
                    out.push((format!("{here} (key)"), Cow::Borrowed(key)));
                }
                collect(inner, &here, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn push(
    findings: &mut Vec<Finding>,
    kind: FindingKind,
    severity: Severity,
    place: &str,
    excerpt: &str,
) {
    let excerpt: String = text::clean(excerpt).chars().take(120).collect();
    findings.push(Finding {
        kind,
        severity,
        place: place.to_string(),
        excerpt,
    });
}

/// Reads one string: its hidden text, then what it says, as written and with disguises undone.
fn read(raw: &str, place: &str, context: &Context<'_>, findings: &mut Vec<Finding>) {
    let hidden = text::hidden(raw);
    if hidden.tags > 0 || hidden.bidi > 0 {
        push(
            findings,
            FindingKind::HiddenText,
            Severity::High,
            place,
            "tag characters or bidirectional controls a person does not see",
        );
    } else if hidden.comments > 0 {
        let severity = if raw.contains("<!--") && comment_has_words(raw) {
            Severity::High
        } else {
            Severity::Warning
        };
        push(
            findings,
            FindingKind::HiddenText,
            severity,
            place,
            "an HTML comment the model reads and a page does not show",
        );
    } else if hidden.invisible > 0 {
        push(
            findings,
            FindingKind::HiddenText,
            Severity::Warning,
            place,
            "zero-width characters",
        );
    }
    // A single short word (a type, a key, an enum value) says nothing to a model but a tag
    // posing as its instructions (`[system]`): the phrase rules are for sentences.
    if hidden.tag_text.is_empty() && raw.len() < 40 && !raw.contains(char::is_whitespace) {
        rules::tag(&raw.to_lowercase(), place, findings);
        return;
    }
    let mut versions = vec![normal(raw)];
    if !hidden.tag_text.is_empty() {
        versions.push(normal(&hidden.tag_text));
    }
    let undone = undisguised(&versions[0]);
    if undone != versions[0] {
        versions.push(undone);
    }
    for blob in decoded_blobs(raw) {
        versions.push(normal(&blob));
    }
    if long_blob(raw) {
        push(
            findings,
            FindingKind::Encoded,
            Severity::Warning,
            place,
            "a long encoded blob",
        );
    }
    for version in &versions {
        says(version, place, context, findings);
    }
}

fn comment_has_words(raw: &str) -> bool {
    raw.split("<!--").skip(1).any(|rest| {
        let inside = rest.split("-->").next().unwrap_or(rest);
        inside
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count()
            >= 3
    })
}

/// The text as a model reads it: hidden characters out, NFKC, lower case, one space.
fn normal(raw: &str) -> String {
    let cleaned = text::clean(raw);
    let folded: String = cleaned.nfkc().collect::<String>().to_lowercase();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The usual disguises undone: digits and signs for letters in words, letters spelt apart
/// (`i.g.n.o.r.e`, `i g n o r e`), Cyrillic and Greek look-alikes.
fn undisguised(text: &str) -> String {
    // Letters joined by a sign (`i.g.n.o.r.e`, words stay apart), then by single spaces.
    static SIGNS_APART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(?:\p{L}[.\-_*+|/]){2,}\p{L}\b\.?").unwrap_or_else(|_| unreachable_regex())
    });
    static SPACES_APART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(?:\p{L} ){3,}\p{L}\b").unwrap_or_else(|_| unreachable_regex())
    });
    let letters_only = |m: &regex::Captures<'_>| {
        m[0].chars()
            .filter(|c| c.is_alphabetic())
            .collect::<String>()
    };
    let joined = SIGNS_APART.replace_all(text, letters_only);
    let joined = SPACES_APART.replace_all(&joined, letters_only);
    joined
        .split(' ')
        .map(|word| {
            let letters = word.chars().filter(|c| c.is_alphabetic()).count();
            word.chars()
                .map(|c| match (c, letters >= 1) {
                    ('0', true) => 'o',
                    ('1', true) | ('!', true) => 'i',
                    ('3', true) => 'e',
                    ('4', true) | ('@', true) => 'a',
                    ('5', true) | ('$', true) => 's',
                    ('7', true) => 't',
                    _ => look_alike(c),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A Cyrillic or Greek letter that looks like a Latin one, as that Latin letter.
fn look_alike(c: char) -> char {
    match c {
        'а' => 'a',
        'е' => 'e',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'у' => 'y',
        'х' => 'x',
        'і' => 'i',
        'ј' => 'j',
        'ѕ' => 's',
        'һ' => 'h',
        'ԁ' => 'd',
        'ο' => 'o',
        'ν' => 'v',
        'α' => 'a',
        'ι' => 'i',
        'κ' => 'k',
        'τ' => 't',
        'ρ' => 'p',
        other => other,
    }
}

/// A regex that cannot be built is a bug caught by this crate's tests; this one matches nothing.
fn unreachable_regex() -> Regex {
    #[expect(clippy::expect_used, reason = "a fixed pattern that compiles")]
    Regex::new(r"[^\s\S]").expect("an empty class compiles")
}

fn long_blob(raw: &str) -> bool {
    static BLOB: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z0-9+/]{80,}={0,2}|\b[0-9a-fA-F]{96,}\b")
            .unwrap_or_else(|_| unreachable_regex())
    });
    BLOB.find_iter(raw).any(|m| {
        let s = m.as_str();
        s.chars().any(|c| c.is_ascii_digit())
            && s.chars().any(|c| c.is_ascii_uppercase())
            && s.chars().any(|c| c.is_ascii_lowercase())
    })
}

/// The base64 runs of `raw` (24 characters or more) that decode to readable text.
fn decoded_blobs(raw: &str) -> Vec<String> {
    static RUN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z0-9+/]{24,}={0,2}").unwrap_or_else(|_| unreachable_regex())
    });
    let mut out = Vec::new();
    for m in RUN.find_iter(raw).take(16) {
        if let Some(bytes) = base64(m.as_str())
            && let Ok(text) = String::from_utf8(bytes)
            && text
                .chars()
                .filter(|c| c.is_alphabetic() || *c == ' ')
                .count()
                * 10
                >= text.chars().count() * 8
        {
            out.push(text);
        }
    }
    out
}

fn base64(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = ALPHABET.iter().position(|&a| a == byte)? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A tool name of letters from more than one script (`reаd_file` with a Cyrillic `а`).
fn name_scripts(name: &str, findings: &mut Vec<Finding>) {
    if name.is_ascii() {
        return;
    }
    let latin = name.chars().any(|c| c.is_ascii_alphabetic());
    let other = name.chars().any(|c| c.is_alphabetic() && !c.is_ascii());
    let severity = if latin && other {
        Severity::High
    } else {
        Severity::Warning
    };
    push(
        findings,
        FindingKind::ConfusableName,
        severity,
        "name",
        name,
    );
}
