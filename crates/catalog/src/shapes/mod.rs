//! Return shapes learned from results, for tools that declare no output schema.
//!
//! Most MCP servers declare no `outputSchema`, so a model has to guess what a tool returns, or
//! spend a call finding out. A [`LearnedShape`] is what sandgate has seen a tool return: which
//! kinds of value, which keys (and which of them are sometimes missing), what arrays hold, and
//! for a string that takes a few word-like values, those values. It is merged across calls and
//! across replicas ([`LearnedShape::merge`] is commutative), bounded in depth, keys and size
//! whatever a backend returns, and rendered as JSON Schema ([`LearnedShape::schema`]) for the
//! TypeScript generator.
//!
//! A shape never keeps data: keys that do not read as names turn their object into a map whose
//! keys are not kept, and a string value is kept only when it is a short word seen at least
//! twice under a key that does not name a secret (a value seen once is remembered as a hash).
//! The test suite feeds secrets as values and keys and checks that no declaration shows one.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

mod words;

pub use words::{is_field_name, is_vocabulary_word, names_a_secret};

/// Values nested deeper than this are `unknown`.
pub const MAX_SHAPE_DEPTH: usize = 8;
/// The most distinct keys an object keeps as fields; past it the object is a map.
pub const MAX_SHAPE_FIELDS: usize = 40;
/// The most nodes (values, fields, array elements) one shape holds; past it new keys are not
/// kept and their object takes any key (`[key: string]: unknown`).
pub const MAX_SHAPE_NODES: usize = 600;
/// The most words a string enum may have; a key with more values is a plain `string`.
const MAX_WORDS: usize = 8;
/// The most word-like values seen once that a string remembers (as hashes) before it gives up
/// on being an enum.
const MAX_PENDING: usize = 16;
/// A string is shown as an enum only after this many values.
const MIN_ENUM_SIGHTINGS: u64 = 4;

/// What is known of the values seen at one place in a result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// How many values were seen here.
    #[serde(rename = "c", default)]
    seen: u64,
    #[serde(rename = "n", default, skip_serializing_if = "is_false")]
    null: bool,
    #[serde(rename = "b", default, skip_serializing_if = "is_false")]
    boolean: bool,
    #[serde(rename = "d", default, skip_serializing_if = "is_false")]
    number: bool,
    /// Too deep, or past the bound: anything.
    #[serde(rename = "u", default, skip_serializing_if = "is_false")]
    unknown: bool,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    string: Option<Strings>,
    /// What the arrays seen here hold, merged over every element.
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    array: Option<Box<Shape>>,
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    object: Option<Fields>,
}

/// The strings seen at one place: the words among them, never other text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Strings {
    #[serde(rename = "c", default)]
    seen: u64,
    /// Word-like values seen at least twice, with how often.
    #[serde(rename = "w", default, skip_serializing_if = "BTreeMap::is_empty")]
    words: BTreeMap<String, u64>,
    /// Hashes of word-like values seen once.
    #[serde(rename = "p", default, skip_serializing_if = "BTreeSet::is_empty")]
    pending: BTreeSet<u64>,
    /// A value that is no word was seen, or too many: a plain string, for good.
    #[serde(rename = "x", default, skip_serializing_if = "is_false")]
    open: bool,
}

/// The objects seen at one place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Fields {
    /// How many objects.
    #[serde(rename = "c", default)]
    count: u64,
    /// Each key that reads as a name, with its values.
    #[serde(rename = "k", default, skip_serializing_if = "BTreeMap::is_empty")]
    keys: BTreeMap<String, Shape>,
    /// Set once the objects are maps (keys that are data, or too many): every value merged.
    #[serde(rename = "m", default, skip_serializing_if = "Option::is_none")]
    map: Option<Box<Shape>>,
    /// Keys were seen that the bound left out: any key is allowed.
    #[serde(rename = "x", default, skip_serializing_if = "is_false")]
    open: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// A tool's learned return shape, with how many results taught it and since when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnedShape {
    #[serde(rename = "shape", default)]
    root: Shape,
    #[serde(default)]
    calls: u64,
    /// When the first of them was seen, in Unix milliseconds.
    #[serde(default)]
    since_ms: i64,
}

impl LearnedShape {
    /// Learns from one result, as the script sees it, seen at `now_ms`.
    pub fn observe(&mut self, value: &Value, now_ms: i64) {
        let mut budget = MAX_SHAPE_NODES.saturating_sub(self.root.nodes());
        observe(&mut self.root, value, 0, false, &mut budget);
        self.calls += 1;
        if self.since_ms == 0 || now_ms < self.since_ms {
            self.since_ms = now_ms;
        }
    }

    /// Adds what `other` learned (another process, or an earlier write); the result is the same
    /// whichever side merges into which, and stays within the bounds.
    pub fn merge(&mut self, other: &LearnedShape) {
        merge(&mut self.root, &other.root);
        let mut budget = MAX_SHAPE_NODES;
        trim(&mut self.root, &mut budget);
        self.calls += other.calls;
        self.since_ms = match (self.since_ms, other.since_ms) {
            (0, theirs) => theirs,
            (ours, 0) => ours,
            (ours, theirs) => ours.min(theirs),
        };
    }

    /// How many results taught it.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// When the first of them was seen, in Unix milliseconds.
    pub fn since_ms(&self) -> i64 {
        self.since_ms
    }

    /// How many nodes it holds (at most [`MAX_SHAPE_NODES`]).
    pub fn nodes(&self) -> usize {
        self.root.nodes()
    }

    /// The shape as JSON Schema, which every result seen satisfies.
    pub fn schema(&self) -> Value {
        schema_of(&self.root)
    }

    /// Reads a shape kept as [`LearnedShape::to_json`]; `None` for text that is not one.
    pub fn from_json(text: &str) -> Option<LearnedShape> {
        let mut shape: LearnedShape = serde_json::from_str(text).ok()?;
        let mut budget = MAX_SHAPE_NODES;
        trim(&mut shape.root, &mut budget);
        Some(shape)
    }

    /// Forgets every value it kept (the words of string enums, and the hashes of those seen
    /// once), keeping only the structure: what a shape of a backend that serves each user
    /// with their own data may show everyone. A string is `string` from then on, also after
    /// a merge with a shape that kept words.
    pub fn forget_values(&mut self) {
        self.root.forget_values();
    }

    /// The shape as the store keeps it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Shape {
    fn nodes(&self) -> usize {
        1 + self.array.as_ref().map_or(0, |a| a.nodes())
            + self.object.as_ref().map_or(0, |o| {
                o.map.as_ref().map_or(0, |m| m.nodes())
                    + o.keys.values().map(Shape::nodes).sum::<usize>()
            })
    }

    fn forget_values(&mut self) {
        if let Some(strings) = &mut self.string {
            strings.give_up();
        }
        if let Some(element) = &mut self.array {
            element.forget_values();
        }
        if let Some(fields) = &mut self.object {
            if let Some(values) = &mut fields.map {
                values.forget_values();
            }
            for field in fields.keys.values_mut() {
                field.forget_values();
            }
        }
    }

    fn make_unknown(&mut self) {
        self.unknown = true;
        self.string = None;
        self.array = None;
        self.object = None;
    }
}

fn observe(shape: &mut Shape, value: &Value, depth: usize, secret: bool, budget: &mut usize) {
    shape.seen += 1;
    if shape.unknown {
        return;
    }
    if depth > MAX_SHAPE_DEPTH {
        shape.make_unknown();
        return;
    }
    match value {
        Value::Null => shape.null = true,
        Value::Bool(_) => shape.boolean = true,
        Value::Number(_) => shape.number = true,
        Value::String(text) => shape.string.get_or_insert_default().see(text, secret),
        Value::Array(items) => {
            let element = shape.array.get_or_insert_with(|| {
                *budget = budget.saturating_sub(1);
                Box::default()
            });
            for item in items {
                observe(element, item, depth + 1, secret, budget);
            }
        }
        Value::Object(map) => observe_object(
            shape.object.get_or_insert_default(),
            map,
            depth,
            secret,
            budget,
        ),
    }
}

fn observe_object(
    fields: &mut Fields,
    map: &Map<String, Value>,
    depth: usize,
    secret: bool,
    budget: &mut usize,
) {
    fields.count += 1;
    if fields.map.is_none() {
        let new = map.keys().filter(|k| !fields.keys.contains_key(*k)).count();
        if map.keys().any(|k| !is_field_name(k)) || fields.keys.len() + new > MAX_SHAPE_FIELDS {
            fields.become_map();
        }
    }
    if let Some(values) = &mut fields.map {
        for (key, value) in map {
            observe(
                values,
                value,
                depth + 1,
                secret || names_a_secret(key),
                budget,
            );
        }
        return;
    }
    for (key, value) in map {
        let secret = secret || names_a_secret(key);
        if let Some(field) = fields.keys.get_mut(key) {
            observe(field, value, depth + 1, secret, budget);
        } else if *budget > 0 {
            *budget -= 1;
            let mut field = Shape::default();
            observe(&mut field, value, depth + 1, secret, budget);
            fields.keys.insert(key.clone(), field);
        } else {
            fields.open = true;
        }
    }
}

impl Fields {
    /// From now on, these objects are maps: their keys are forgotten, their values merged.
    fn become_map(&mut self) {
        let mut values = self.map.take().unwrap_or_default();
        for field in std::mem::take(&mut self.keys).values() {
            merge(&mut values, field);
        }
        self.map = Some(values);
        self.open = false;
    }
}

impl Strings {
    fn see(&mut self, text: &str, secret: bool) {
        self.seen += 1;
        if self.open {
            return;
        }
        if secret || !is_vocabulary_word(text) {
            self.give_up();
            return;
        }
        if let Some(count) = self.words.get_mut(text) {
            *count += 1;
            return;
        }
        let hash = words::stable_hash(text);
        if self.pending.remove(&hash) {
            self.words.insert(text.to_string(), 2);
        } else {
            self.pending.insert(hash);
        }
        self.check_bounds();
    }

    fn give_up(&mut self) {
        self.open = true;
        self.words.clear();
        self.pending.clear();
    }

    fn check_bounds(&mut self) {
        if self.words.len() > MAX_WORDS || self.pending.len() > MAX_PENDING {
            self.give_up();
        }
    }

    /// The words, when every value seen is one of them and they are few.
    fn vocabulary(&self) -> Option<Vec<&str>> {
        (!self.open
            && self.pending.is_empty()
            && self.words.len() >= 2
            && self.seen >= MIN_ENUM_SIGHTINGS)
            .then(|| self.words.keys().map(String::as_str).collect())
    }

    fn merge(&mut self, other: &Strings) {
        self.seen += other.seen;
        if self.open || other.open {
            self.give_up();
            return;
        }
        for (word, count) in &other.words {
            let hash = words::stable_hash(word);
            let before = if self.pending.remove(&hash) { 1 } else { 0 };
            *self.words.entry(word.clone()).or_insert(before) += count;
        }
        let known: BTreeMap<u64, String> = self
            .words
            .keys()
            .map(|w| (words::stable_hash(w), w.clone()))
            .collect();
        for hash in &other.pending {
            match known.get(hash).and_then(|word| self.words.get_mut(word)) {
                Some(count) => *count += 1,
                // Seen once on each side: seen twice, but its text was kept by neither; it
                // becomes a word the next time it is seen.
                None => {
                    self.pending.insert(*hash);
                }
            }
        }
        self.check_bounds();
    }
}

fn merge(into: &mut Shape, other: &Shape) {
    into.seen += other.seen;
    into.null |= other.null;
    into.boolean |= other.boolean;
    into.number |= other.number;
    if into.unknown || other.unknown {
        into.make_unknown();
        return;
    }
    match (&mut into.string, &other.string) {
        (Some(ours), Some(theirs)) => ours.merge(theirs),
        (None, Some(theirs)) => into.string = Some(theirs.clone()),
        _ => {}
    }
    match (&mut into.array, &other.array) {
        (Some(ours), Some(theirs)) => merge(ours, theirs),
        (None, Some(theirs)) => into.array = Some(theirs.clone()),
        _ => {}
    }
    match (&mut into.object, &other.object) {
        (Some(ours), Some(theirs)) => merge_fields(ours, theirs),
        (None, Some(theirs)) => into.object = Some(theirs.clone()),
        _ => {}
    }
}

fn merge_fields(into: &mut Fields, other: &Fields) {
    into.count += other.count;
    into.open |= other.open;
    if other.map.is_some() && into.map.is_none() {
        into.become_map();
    }
    match &mut into.map {
        Some(values) => {
            if let Some(theirs) = &other.map {
                merge(values, theirs);
            }
            for field in other.keys.values() {
                merge(values, field);
            }
        }
        None => {
            for (key, field) in &other.keys {
                match into.keys.get_mut(key) {
                    Some(ours) => merge(ours, field),
                    None => {
                        into.keys.insert(key.clone(), field.clone());
                    }
                }
            }
            if into.keys.len() > MAX_SHAPE_FIELDS {
                into.become_map();
            }
        }
    }
}

/// Keeps `shape` within `budget` nodes: what does not fit is dropped, and its place takes
/// anything.
fn trim(shape: &mut Shape, budget: &mut usize) {
    *budget = budget.saturating_sub(1);
    if let Some(element) = &mut shape.array {
        if *budget == 0 {
            element.make_unknown();
        } else {
            trim(element, budget);
        }
    }
    if let Some(fields) = &mut shape.object {
        if let Some(values) = &mut fields.map {
            if *budget == 0 {
                values.make_unknown();
            } else {
                trim(values, budget);
            }
        }
        let mut dropped = false;
        fields.keys.retain(|_, field| {
            if *budget == 0 {
                dropped = true;
                false
            } else {
                trim(field, budget);
                true
            }
        });
        fields.open |= dropped;
    }
}

fn schema_of(shape: &Shape) -> Value {
    if shape.unknown || shape.seen == 0 {
        return json!({});
    }
    let mut options = Vec::new();
    if let Some(fields) = &shape.object {
        options.push(object_schema(fields));
    }
    if let Some(element) = &shape.array {
        options.push(json!({"type": "array", "items": schema_of(element)}));
    }
    if let Some(strings) = &shape.string {
        options.push(match strings.vocabulary() {
            Some(words) => json!({ "enum": words }),
            None => json!({"type": "string"}),
        });
    }
    for (seen, kind) in [
        (shape.number, "number"),
        (shape.boolean, "boolean"),
        (shape.null, "null"),
    ] {
        if seen {
            options.push(json!({ "type": kind }));
        }
    }
    match options.len() {
        0 => json!({}),
        1 => options.pop().unwrap_or_default(),
        _ => json!({ "anyOf": options }),
    }
}

fn object_schema(fields: &Fields) -> Value {
    if let Some(values) = &fields.map {
        return json!({"type": "object", "additionalProperties": schema_of(values)});
    }
    let properties: Map<String, Value> = fields
        .keys
        .iter()
        .map(|(key, field)| (key.clone(), schema_of(field)))
        .collect();
    let required: Vec<&str> = fields
        .keys
        .iter()
        .filter(|(_, field)| field.seen >= fields.count)
        .map(|(key, _)| key.as_str())
        .collect();
    let mut schema = json!({"type": "object", "properties": properties, "required": required});
    if fields.open {
        schema["additionalProperties"] = json!({});
    }
    schema
}

/// A learned shape as declarations show it: the schema, and what it was learned from.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The shape as JSON Schema.
    pub schema: Value,
    /// How many results taught it.
    pub calls: u64,
    /// The day the first was seen (`2026-11-27`).
    pub since: String,
}
