//! Listing one backend's tools, with the backend's bounds applied to everything it sends.
//!
//! rmcp's typed `tools/list` fails the whole list when one tool is malformed (an
//! `inputSchema` that is not an object), and follows `nextCursor` forever. Here the list is
//! read as plain JSON, page by page, and each tool is judged on its own: a tool that cannot be
//! used is dropped, a schema too deep or too large to render becomes `unknown`, a description
//! too long is cut, and each of these is kept as a [`ToolProblem`] that `sandgate status` and
//! `sandgate://backend/{name}` show. Pages, tools and bytes per list are capped; past a cap
//! the tools read so far are kept and the cut is reported. Problems are capped too (the first
//! [`MAX_PROBLEMS_KEPT`], then a count), and pages are judged off the async threads.

use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use rmcp::service::{Peer, RoleClient};
use sandgate_catalog::{ToolSpec, sanitize_ident};
use sandgate_config::{BackendBounds, BackendConfig, MAX_TOOL_NAME_BYTES};
use serde::Serialize;

use crate::error::cut_at_chars;
use sandgate_pins::Definition;
use serde_json::{Map, Value};

/// Something wrong with one tool (or with the list) that a backend sent, and what sandgate did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolProblem {
    /// The tool's name as sent (cut to 100 characters), or `*` for the list as a whole.
    pub tool: String,
    /// What was wrong and what sandgate did about it.
    pub problem: String,
}

/// The tools of one listing, and what was wrong with what the backend sent.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// The tools as the catalog shows them (hidden text taken out).
    pub tools: Vec<ToolSpec>,
    /// The same tools as served (within the bounds, hidden text kept): what pins are of.
    pub definitions: Vec<Definition>,
    pub problems: Vec<ToolProblem>,
    /// Tools the supply-chain guard holds, by name (see `guard`).
    pub held: std::collections::BTreeMap<String, sandgate_pins::HeldKind>,
}

/// How many problems one listing keeps; past it they are counted, not kept. A backend that
/// sent a million entries that are not tools would otherwise make a million problems, and a
/// status that size.
pub(crate) const MAX_PROBLEMS_KEPT: usize = 100;

/// The problems of one listing: the first [`MAX_PROBLEMS_KEPT`], and how many more there were.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    kept: Vec<ToolProblem>,
    more: usize,
}

impl Problems {
    fn push(&mut self, problem: ToolProblem) {
        if self.kept.len() < MAX_PROBLEMS_KEPT {
            self.kept.push(problem);
        } else {
            self.more += 1;
        }
    }

    /// The problems kept, with one more that counts those that were not.
    fn into_vec(mut self) -> Vec<ToolProblem> {
        if self.more > 0 {
            self.kept.push(whole_list(format!(
                "{} more problems were found and not kept (only the first {MAX_PROBLEMS_KEPT} are)",
                self.more
            )));
        }
        self.kept
    }
}

/// What has been read of one list so far, carried from page to page.
struct Reading {
    config: BackendConfig,
    tools: Vec<ToolSpec>,
    definitions: Vec<Definition>,
    problems: Problems,
    seen: std::collections::HashSet<String>,
    bytes: usize,
}

/// Lists every tool of a backend (following pagination within the bounds) and applies the
/// config's allow/deny filter.
pub(crate) async fn list_tools(
    config: &BackendConfig,
    peer: &Peer<RoleClient>,
) -> Result<Listing, String> {
    let mut reading = Reading {
        config: config.clone(),
        tools: Vec::new(),
        definitions: Vec::new(),
        problems: Problems::default(),
        seen: std::collections::HashSet::new(),
        bytes: 0,
    };
    let mut cursor: Option<String> = None;
    for page in 0.. {
        if page == config.bounds.max_list_pages {
            reading.problems.push(whole_list(format!(
                "tools/list went on past {page} pages (max_list_pages); the tools of the first {page} are kept"
            )));
            break;
        }
        let params = cursor.as_ref().map(|c| serde_json::json!({ "cursor": c }));
        let result = peer
            .send_request(ClientRequest::CustomRequest(CustomRequest::new(
                "tools/list",
                params,
            )))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        // Judging a page of 50,000 tools takes a while: off the async threads, so the calls
        // of other backends do not wait behind it.
        let (back, next) = tokio::task::spawn_blocking(move || {
            let next = reading.take_page(result);
            (reading, next)
        })
        .await
        .map_err(|_| "tools/list failed: judging the page was cut short".to_string())?;
        reading = back;
        match next? {
            Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
            _ => break,
        }
    }
    Ok(Listing {
        tools: reading.tools,
        definitions: reading.definitions,
        problems: reading.problems.into_vec(),
        held: Default::default(),
    })
}

impl Reading {
    /// Judges the tools of one page. Returns the next page's cursor, or `None` when the list
    /// ends here: it has no next page, or a bound was reached.
    fn take_page(&mut self, result: ServerResult) -> Result<Option<String>, String> {
        let bounds = &self.config.bounds;
        let result = match result {
            ServerResult::CustomResult(custom) => custom.0,
            other => serde_json::to_value(other).map_err(|e| format!("tools/list failed: {e}"))?,
        };
        let Value::Object(mut result) = result else {
            return Err("tools/list answered with something that is not an object".into());
        };
        let Some(Value::Array(tools)) = result.remove("tools") else {
            return Err("tools/list answered without a `tools` array".into());
        };
        for raw in tools {
            if self.tools.len() == bounds.max_tools {
                self.problems.push(whole_list(format!(
                    "the backend lists more than {} tools (max_tools); the first {} are kept",
                    bounds.max_tools, bounds.max_tools
                )));
                return Ok(None);
            }
            match judge(raw, &self.config, &mut self.problems) {
                Some((definition, size)) if self.seen.insert(definition.name.clone()) => {
                    self.bytes += size;
                    if self.bytes > bounds.max_list_bytes {
                        self.problems.push(whole_list(format!(
                            "the tool list is larger than {} bytes (max_list_bytes); the first {} tools are kept",
                            bounds.max_list_bytes,
                            self.tools.len()
                        )));
                        return Ok(None);
                    }
                    if permitted(&self.config, &definition.name) {
                        let (spec, cleaned) = spec_of(&self.config.name, &definition);
                        if cleaned {
                            self.problems.push(ToolProblem {
                                tool: shown_name(&spec.name),
                                problem: HIDDEN_TEXT_PROBLEM.into(),
                            });
                        }
                        self.tools.push(spec);
                        self.definitions.push(definition);
                    }
                }
                Some((definition, _)) => self.problems.push(ToolProblem {
                    tool: shown_name(&definition.name),
                    problem: "is listed twice; the first one is kept".into(),
                }),
                None => {}
            }
        }
        Ok(match result.remove("nextCursor") {
            Some(Value::String(next)) if !next.is_empty() => Some(next),
            _ => None,
        })
    }
}

fn whole_list(problem: String) -> ToolProblem {
    ToolProblem {
        tool: "*".into(),
        problem,
    }
}

/// The name as an operator may read it: cut to 100 characters, with characters no person sees
/// written as escapes.
fn shown_name(name: &str) -> String {
    let name = sandgate_pins::escaped(name);
    match cut_at_chars(&name, 100) {
        Some((kept, _)) => format!("{kept}…"),
        None => name.to_string(),
    }
}

/// What the operator is told of a tool whose definition held text no person sees.
const HIDDEN_TEXT_PROBLEM: &str = "its definition holds text no person sees (zero-width, bidirectional or tag characters, or HTML comments); it is taken out before any model reads it";

/// A definition as the catalog shows it: text no person sees (tag characters that spell an
/// instruction, zero-width and bidirectional characters, HTML comments) never reaches a model,
/// so it is taken out here, where every definition from a backend becomes a spec (issue 49).
/// Says whether anything was taken out.
pub(crate) fn spec_of(backend: &str, definition: &Definition) -> (ToolSpec, bool) {
    let mut spec = ToolSpec {
        backend: backend.to_string(),
        name: definition.name.clone(),
        description: definition.description.clone(),
        input_schema: definition.input_schema.clone(),
        output_schema: definition.output_schema.clone(),
        annotations: definition.annotations.clone(),
        origin: Default::default(),
    };
    let cleaned = spec.take_out_hidden_text();
    (spec, cleaned)
}

/// One tool as sent, judged against the bounds: the definition to keep (with its size in
/// bytes), or `None` when it is dropped. Problems are recorded either way.
fn judge(
    raw: Value,
    config: &BackendConfig,
    problems: &mut Problems,
) -> Option<(Definition, usize)> {
    let bounds = &config.bounds;
    let Value::Object(mut raw) = raw else {
        problems.push(whole_list(
            "an entry of the tools array is not an object; it is skipped".into(),
        ));
        return None;
    };
    let name = match raw.remove("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => {
            problems.push(whole_list(
                "a tool has no name (a non-empty string); it is skipped".into(),
            ));
            return None;
        }
    };
    let mut drop = |problem: String| {
        problems.push(ToolProblem {
            tool: shown_name(&name),
            problem,
        });
        None
    };
    if name.len() > MAX_TOOL_NAME_BYTES {
        return drop(format!(
            "its name is {} bytes, over the {MAX_TOOL_NAME_BYTES} sandgate accepts; the tool is dropped",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return drop("its name holds control characters; the tool is dropped".into());
    }
    if sandgate_pins::hidden(&name).any() {
        return drop(
            "its name holds characters no person sees (zero-width, bidirectional or tag characters), so it can pass for another; the tool is dropped"
                .into(),
        );
    }
    let input_schema = match raw.remove("inputSchema") {
        Some(Value::Object(schema)) => schema,
        Some(_) => {
            return drop(
                "its inputSchema is not an object (MCP requires a JSON Schema object); the tool is dropped"
                    .into(),
            );
        }
        None => {
            return drop("it has no inputSchema (MCP requires one); the tool is dropped".into());
        }
    };
    let mut notes = Vec::new();
    let (input_schema, input_size) = bounded_schema(input_schema, "input", bounds, &mut notes);
    let (output_schema, output_size) = match raw.remove("outputSchema") {
        Some(Value::Object(schema)) => {
            let (schema, size) = bounded_schema(schema, "output", bounds, &mut notes);
            (Some(schema), size)
        }
        Some(Value::Null) | None => (None, 0),
        Some(_) => {
            notes.push("its outputSchema is not an object; results are typed unknown".into());
            (None, 0)
        }
    };
    let description = match raw.remove("description") {
        Some(Value::String(text)) => Some(cut_description(text, "description", bounds, &mut notes)),
        _ => None,
    };
    // A title is a line, not a description: cut where a description would be.
    let title = match raw.remove("title") {
        Some(Value::String(text)) => Some(cut_description(text, "title", bounds, &mut notes)),
        _ => None,
    };
    let annotations = raw
        .remove("annotations")
        .filter(|a| a.is_object() && serde_json::to_vec(a).is_ok_and(|b| b.len() <= 4096));
    for note in notes {
        problems.push(ToolProblem {
            tool: shown_name(&name),
            problem: note,
        });
    }
    let size = name.len()
        + description.as_ref().map_or(0, String::len)
        + title.as_ref().map_or(0, String::len)
        + input_size
        + output_size;
    Some((
        Definition {
            name,
            title,
            description,
            input_schema,
            output_schema,
            annotations,
        },
        size,
    ))
}

/// The schema itself, or an empty schema (rendered `unknown`) when it is too deep or too
/// large; with its size in bytes.
fn bounded_schema(
    schema: Map<String, Value>,
    which: &str,
    bounds: &BackendBounds,
    notes: &mut Vec<String>,
) -> (Value, usize) {
    let schema = Value::Object(schema);
    let depth = depth_of(&schema);
    if depth > bounds.max_schema_depth {
        notes.push(format!(
            "its {which} schema nests {depth} levels, over max_schema_depth ({}); it is shown as unknown",
            bounds.max_schema_depth
        ));
        return (Value::Object(Map::new()), 2);
    }
    let size = serde_json::to_vec(&schema).map_or(usize::MAX, |b| b.len());
    if size > bounds.max_schema_bytes {
        notes.push(format!(
            "its {which} schema is {size} bytes, over max_schema_bytes ({}); it is shown as unknown",
            bounds.max_schema_bytes
        ));
        return (Value::Object(Map::new()), 2);
    }
    (schema, size)
}

fn cut_description(
    text: String,
    what: &str,
    bounds: &BackendBounds,
    notes: &mut Vec<String>,
) -> String {
    let Some((kept, _)) = cut_at_chars(&text, bounds.max_description_chars) else {
        return text;
    };
    notes.push(format!(
        "its {what} has more than {} characters (max_description_chars); it is cut",
        bounds.max_description_chars
    ));
    format!("{kept}…")
}

/// How many levels of arrays and objects a value nests (a scalar is 0). Iterative, so a
/// value of any depth is measured without recursion.
fn depth_of(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        deepest = deepest.max(depth);
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    deepest
}

/// Whether the backend's own `allow_tools`/`deny_tools` let `tool` through, by any name it is
/// called by (as a profile's grant matches it).
fn permitted(config: &BackendConfig, tool: &str) -> bool {
    let (js_backend, js_tool) = (sanitize_ident(&config.name), sanitize_ident(tool));
    config.tools.permits(&sandgate_policy::ToolName {
        backend: &config.name,
        tool,
        js_backend: &js_backend,
        js_tool: &js_tool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BackendConfig {
        sandgate_config::parse_str(
            "[servers.b]\ncommand = \"x\"\nmax_schema_depth = 4\nmax_description_chars = 20\n",
            sandgate_config::Format::Toml,
            "test.toml",
        )
        .expect("config")
        .backends
        .remove(0)
    }

    fn judged(raw: Value) -> (Option<ToolSpec>, Vec<ToolProblem>) {
        let mut problems = Problems::default();
        let spec = judge(raw, &config(), &mut problems).map(|(d, _)| spec_of("b", &d).0);
        (spec, problems.into_vec())
    }

    #[test]
    fn a_tool_without_an_object_schema_is_dropped_with_a_reason() {
        for schema in [
            None,
            Some(Value::Bool(true)),
            Some(Value::String("x".into())),
        ] {
            let mut raw = serde_json::json!({"name": "t"});
            if let Some(schema) = schema {
                raw["inputSchema"] = schema;
            }
            let (spec, problems) = judged(raw);
            assert!(spec.is_none());
            assert!(problems[0].problem.contains("inputSchema"), "{problems:?}");
        }
    }

    #[test]
    fn a_deep_schema_becomes_unknown_and_the_tool_stays() {
        let deep = serde_json::json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object"}}}}});
        let (spec, problems) = judged(serde_json::json!({"name": "t", "inputSchema": deep}));
        let spec = spec.expect("kept");
        assert_eq!(spec.input_schema, serde_json::json!({}));
        assert!(
            problems[0].problem.contains("max_schema_depth (4)"),
            "{problems:?}"
        );
    }

    #[test]
    fn long_descriptions_and_names_are_bounded() {
        let (spec, problems) = judged(
            serde_json::json!({"name": "t", "inputSchema": {}, "description": "é".repeat(50)}),
        );
        assert_eq!(
            spec.expect("kept").description,
            Some(format!("{}…", "é".repeat(20)))
        );
        assert_eq!(problems.len(), 1);
        let (spec, problems) =
            judged(serde_json::json!({"name": "n".repeat(300), "inputSchema": {}}));
        assert!(spec.is_none());
        assert!(problems[0].tool.ends_with('…') && problems[0].tool.len() < 110);
    }

    #[test]
    fn problems_past_the_cap_are_counted_not_kept() {
        let mut problems = Problems::default();
        for _ in 0..MAX_PROBLEMS_KEPT + 250 {
            judge(Value::from(5), &config(), &mut problems);
        }
        let problems = problems.into_vec();
        assert_eq!(problems.len(), MAX_PROBLEMS_KEPT + 1);
        assert!(
            problems[MAX_PROBLEMS_KEPT]
                .problem
                .starts_with("250 more problems were found and not kept"),
            "{problems:?}"
        );
    }

    #[test]
    fn depth_is_measured_without_recursion() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        assert_eq!(depth_of(&value), 100_000);
        // Dropping a value this deep recurses in serde_json; leak it in the test instead.
        std::mem::forget(value);
    }
}
