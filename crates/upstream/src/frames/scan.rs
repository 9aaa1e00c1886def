//! One pass over a JSON-RPC message as bytes, for the inspector: how deep it nests, its id,
//! whether it is a response and whether its result lists tools, with lone surrogate escapes
//! rewritten in place; and a copy with everything past a depth cut to `null`. It never builds
//! the message, so a line of any size or depth costs one linear walk.

/// Most bytes of a captured id; a longer "id" is not one a client sent.
const MAX_ID_BYTES: usize = 256;

/// Copies a JSON text, writing `null` for every value nested deeper than `limit`.
pub(super) fn cut_deeper_than(line: &[u8], limit: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut skipping_from: Option<usize> = None;
    for &b in line {
        if in_string {
            if skipping_from.is_none() {
                out.push(b);
            }
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit && skipping_from.is_none() {
                    skipping_from = Some(depth);
                    out.extend_from_slice(b"null");
                }
            }
            b'}' | b']' => {
                let closing = depth;
                depth = depth.saturating_sub(1);
                if skipping_from == Some(closing) {
                    skipping_from = None;
                    continue;
                }
            }
            _ => {}
        }
        if skipping_from.is_none() {
            out.push(b);
        }
    }
    out
}

/// Where the scanner is in an escape sequence inside a string.
#[derive(Debug, Default, Clone, Copy)]
enum Escape {
    #[default]
    None,
    /// Just after a backslash at this offset.
    Backslash(usize),
    /// In `\uXXXX` begun at this offset, with `digits` read so far.
    Unicode {
        start: usize,
        digits: u8,
        value: u16,
    },
}

/// Top-level keys of a JSON-RPC message the scanner cares about.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum TopKey {
    #[default]
    Other,
    Id,
    Method,
    Result,
}

/// One pass over a message: how deep it nests, its id, whether it is a response, whether its
/// result lists tools; and, when repairing, lone surrogate escapes rewritten to `\ufffd`.
#[derive(Debug, Default)]
pub(super) struct Scanner {
    depth: usize,
    pub(super) max_depth: usize,
    in_string: bool,
    escape: Escape,
    /// The high surrogate escape just seen (start offset, end offset) awaiting its low half.
    high: Option<(usize, usize)>,
    /// Whether the current string is an object key at depth 1 or 2.
    key_string: bool,
    key: Vec<u8>,
    /// Whether the next string at depth 1 or 2 is an object key.
    expect_key: bool,
    /// Whether the containers at depth 1 and 2 are objects.
    object_at: [bool; 3],
    top_key: TopKey,
    pub(super) id: Vec<u8>,
    capturing_id: bool,
    has_method: bool,
    has_result_or_error: bool,
    pub(super) result_lists_tools: bool,
}

impl Scanner {
    pub(super) fn is_response(&self) -> bool {
        !self.has_method && self.has_result_or_error
    }

    /// Scans a whole line, rewriting lone surrogate escapes to `\ufffd` (same length).
    pub(super) fn feed_repairing(&mut self, line: &mut [u8]) {
        let mut lone = Vec::new();
        let mut i = 0;
        while i < line.len() {
            i = self.step(line, i, &mut |start| lone.push(start));
        }
        lone.extend(self.high.take().map(|(start, _)| start));
        for start in lone {
            line[start..start + 6].copy_from_slice(b"\\ufffd");
        }
    }

    /// Scans part of a line that is not kept (nothing is rewritten).
    pub(super) fn feed_streaming(&mut self, part: &[u8]) {
        self.high = None;
        let mut i = 0;
        while i < part.len() {
            i = self.step(part, i, &mut |_| {});
        }
    }

    /// Handles the byte at `i` (or a run of plain string bytes from it); returns the next
    /// offset. `lone` is told the start of each lone surrogate escape.
    fn step(&mut self, bytes: &[u8], i: usize, lone: &mut dyn FnMut(usize)) -> usize {
        let b = bytes[i];
        if self.in_string {
            return self.step_in_string(bytes, i, lone);
        }
        if self.capturing_id
            && self.depth == 1
            && !matches!(b, b',' | b'}')
            && self.id.len() < MAX_ID_BYTES
            && !b.is_ascii_whitespace()
        {
            self.id.push(b);
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.key_string = self.expect_key && (1..=2).contains(&self.depth);
                self.key.clear();
                if self.key_string {
                    self.expect_key = false;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
                if self.depth <= 2 {
                    self.object_at[self.depth] = b == b'{';
                    self.expect_key =
                        b == b'{' && (self.depth == 1 || self.top_key == TopKey::Result);
                }
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.capturing_id = false;
                }
            }
            b',' if (1..=2).contains(&self.depth) => {
                if self.depth == 1 {
                    self.capturing_id = false;
                }
                self.expect_key = self.object_at[self.depth]
                    && (self.depth == 1 || self.top_key == TopKey::Result);
            }
            b':' if self.depth == 1 => {
                self.capturing_id = self.top_key == TopKey::Id;
                if self.capturing_id {
                    self.id.clear();
                }
            }
            _ => {}
        }
        i + 1
    }

    fn step_in_string(&mut self, bytes: &[u8], i: usize, lone: &mut dyn FnMut(usize)) -> usize {
        let b = bytes[i];
        // A high surrogate must be followed at once by a `\u` escape (checked when it ends).
        if let Some((start, end)) = self.high
            && matches!(self.escape, Escape::None)
            && (i != end || b != b'\\')
        {
            self.high = None;
            lone(start);
        }
        match self.escape {
            Escape::Backslash(start) => {
                self.escape = if b == b'u' {
                    Escape::Unicode {
                        start,
                        digits: 0,
                        value: 0,
                    }
                } else {
                    if let Some((high, _)) = self.high.take() {
                        lone(high);
                    }
                    Escape::None
                };
                self.capture(b);
                return i + 1;
            }
            Escape::Unicode {
                start,
                digits,
                value,
            } => {
                let digit = (b as char).to_digit(16).unwrap_or(0) as u16;
                let value = value << 4 | digit;
                self.capture(b);
                if digits + 1 < 4 {
                    self.escape = Escape::Unicode {
                        start,
                        digits: digits + 1,
                        value,
                    };
                    return i + 1;
                }
                self.escape = Escape::None;
                self.unicode_escape(start, i + 1, value, lone);
                return i + 1;
            }
            Escape::None => {}
        }
        match b {
            b'\\' => {
                self.escape = Escape::Backslash(i);
                self.capture(b);
                i + 1
            }
            b'"' => {
                self.in_string = false;
                if let Some((high, _)) = self.high.take() {
                    lone(high);
                }
                if self.key_string {
                    self.key_string = false;
                    self.key_closed();
                } else if self.capturing_id {
                    self.id.push(b'"');
                }
                i + 1
            }
            _ => {
                // A run of plain bytes: jump to the next quote or backslash.
                let run = memchr::memchr2(b'"', b'\\', &bytes[i..]).unwrap_or(bytes.len() - i);
                for &c in &bytes[i..i + run] {
                    self.capture(c);
                }
                i + run
            }
        }
    }

    fn unicode_escape(
        &mut self,
        start: usize,
        end: usize,
        value: u16,
        lone: &mut dyn FnMut(usize),
    ) {
        let pending = self.high.take();
        match value {
            0xD800..=0xDBFF => {
                if let Some((high, _)) = pending {
                    lone(high);
                }
                self.high = Some((start, end));
            }
            0xDC00..=0xDFFF => {
                if pending.is_none_or(|(_, high_end)| high_end != start) {
                    if let Some((high, _)) = pending {
                        lone(high);
                    }
                    lone(start);
                }
            }
            _ => {
                if let Some((high, _)) = pending {
                    lone(high);
                }
            }
        }
    }

    /// Keeps the bytes of a key (or of a string id) being read.
    fn capture(&mut self, b: u8) {
        if self.key_string {
            if self.key.len() < 16 {
                self.key.push(b);
            }
        } else if self.capturing_id && self.depth == 1 && self.id.len() < MAX_ID_BYTES {
            self.id.push(b);
        }
    }

    fn key_closed(&mut self) {
        if self.depth == 1 {
            self.top_key = match self.key.as_slice() {
                b"id" => TopKey::Id,
                b"method" => TopKey::Method,
                b"result" => TopKey::Result,
                _ => TopKey::Other,
            };
            match self.top_key {
                TopKey::Method => self.has_method = true,
                TopKey::Result => self.has_result_or_error = true,
                _ if self.key == b"error" => self.has_result_or_error = true,
                _ => {}
            }
        } else if self.depth == 2 && self.top_key == TopKey::Result && self.key == b"tools" {
            self.result_lists_tools = true;
        }
    }
}

/// The scanner against `serde_json` as the oracle: for any JSON-RPC message, the depth, the id,
/// whether it is a response and whether its result lists tools are what parsing it says; a
/// well-formed line is left as it is; a lone surrogate escape is repaired into one that parses;
/// and a cut copy is the message with everything deeper than the limit made `null`.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\"\\\\/ \t\n]{0,12}".prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(8, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn message() -> impl Strategy<Value = Value> {
        let id = prop_oneof![
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,20}".prop_map(Value::String),
        ];
        (
            prop::option::of(id),
            0..3u8,
            value(),
            any::<bool>(),
            prop::collection::btree_map("[a-z]{1,5}", value(), 0..3),
        )
            .prop_map(|(id, kind, body, tools, extra)| {
                let mut m = Map::new();
                m.insert("jsonrpc".into(), json!("2.0"));
                if let Some(id) = id {
                    m.insert("id".into(), id);
                }
                match kind {
                    0 => {
                        m.insert("method".into(), json!("tools/call"));
                        m.insert("params".into(), body);
                    }
                    1 => {
                        let mut result = Map::new();
                        if tools {
                            result.insert("tools".into(), body);
                        } else {
                            result.insert("content".into(), body);
                        }
                        m.insert("result".into(), Value::Object(result));
                    }
                    _ => {
                        m.insert(
                            "error".into(),
                            json!({"code": -1, "message": body.to_string()}),
                        );
                    }
                }
                for (k, v) in extra {
                    m.entry(format!("x{k}")).or_insert(v);
                }
                Value::Object(m)
            })
    }

    fn depth(v: &Value) -> usize {
        match v {
            Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    fn cut(v: &Value, limit: usize, at: usize) -> Value {
        match v {
            Value::Array(_) | Value::Object(_) if at + 1 > limit => Value::Null,
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| cut(i, limit, at + 1)).collect())
            }
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, i)| (k.clone(), cut(i, limit, at + 1)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn the_scan_agrees_with_parsing(m in message()) {
            let text = serde_json::to_vec(&m).expect("serializes");
            let mut line = text.clone();
            let mut scanner = Scanner::default();
            scanner.feed_repairing(&mut line);
            prop_assert_eq!(&line, &text, "a well-formed line is left as it is");
            prop_assert_eq!(scanner.max_depth, depth(&m));
            match m.get("id") {
                Some(id) => {
                    let captured: Value = serde_json::from_slice(&scanner.id).expect("the id's text");
                    prop_assert_eq!(&captured, id);
                }
                None => prop_assert!(scanner.id.is_empty()),
            }
            let response = m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some());
            prop_assert_eq!(scanner.is_response(), response);
            let lists = m.get("result").and_then(|r| r.get("tools")).is_some();
            prop_assert_eq!(scanner.result_lists_tools, lists);
        }

        #[test]
        fn a_cut_copy_is_the_message_with_deep_parts_null(m in message(), limit in 1usize..6) {
            let text = serde_json::to_vec(&m).expect("serializes");
            let copy: Value = serde_json::from_slice(&cut_deeper_than(&text, limit)).expect("the cut copy parses");
            prop_assert_eq!(copy, cut(&m, limit, 0));
        }

        #[test]
        fn a_lone_surrogate_is_repaired_into_json_that_parses(before in "[a-z ]{0,8}", after in "[a-z ]{0,8}", high in any::<bool>()) {
            let escape = if high { "\\ud83d" } else { "\\ude00" };
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{before}{escape}{after}"}}}}"#);
            prop_assert!(serde_json::from_str::<Value>(&text).is_err(), "the oracle refuses it as sent");
            let mut line = text.into_bytes();
            Scanner::default().feed_repairing(&mut line);
            let repaired: Value = serde_json::from_slice(&line).expect("repaired");
            let expected = format!("{before}\u{fffd}{after}");
            prop_assert_eq!(repaired["result"]["text"].as_str(), Some(expected.as_str()));
        }
    }
}
