//! A stored tool's `meta`: its description, input and output schemas, and the capabilities it
//! declares. Read from the literal in the tool file and checked here, each problem named by
//! its path in `meta` (`meta.input.properties.xs.type`, `meta.capabilities.tools[1]`).

use serde_json::{Map, Value};

/// What a stored tool declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// What it does (shown by search and `tool_info`).
    pub description: String,
    /// JSON Schema of its input (an object).
    pub input: Value,
    /// JSON Schema of its result's `data`, when given.
    pub output: Option<Value>,
    /// The capabilities it declares.
    pub capabilities: Declared,
}

/// The capabilities a stored tool declares (each must be held by its owner's profile).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Declared {
    /// `backend.tool` names (including `user.<name>` for other stored tools).
    pub tools: Vec<String>,
    /// `host[:port]` entries.
    pub net: Vec<String>,
    /// Roots: `{ path, write }` (or a path string, read-only).
    pub fs: Vec<(String, bool)>,
    /// Environment variable names.
    pub env: Vec<String>,
}

/// Longest description kept.
const MAX_DESCRIPTION: usize = 4_000;

impl Meta {
    /// Reads `meta` (as the tool file's literal made it), or lists every problem with its path.
    pub fn from_json(value: &Value) -> Result<Meta, Vec<String>> {
        let mut problems = Vec::new();
        let Some(map) = value.as_object() else {
            return Err(vec!["meta: must be an object".into()]);
        };
        for key in map.keys() {
            if !["description", "input", "output", "capabilities"].contains(&key.as_str()) {
                problems.push(format!(
                    "meta.{key}: unknown key; meta holds description, input, output and capabilities"
                ));
            }
        }
        let description = match map.get("description") {
            Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_DESCRIPTION => {
                s.clone()
            }
            Some(Value::String(s)) if s.len() > MAX_DESCRIPTION => {
                problems.push(format!(
                    "meta.description: longer than {MAX_DESCRIPTION} characters"
                ));
                String::new()
            }
            _ => {
                problems.push(
                    "meta.description: required, a sentence saying what the tool does".into(),
                );
                String::new()
            }
        };
        let input = match map.get("input") {
            Some(schema) => {
                schema_problems("meta.input", schema, &mut problems);
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    problems.push(
                        "meta.input.type: must be \"object\" (a tool takes named arguments)".into(),
                    );
                }
                schema.clone()
            }
            None => {
                problems.push(
                    "meta.input: required, the JSON Schema of the tool's input (type \"object\")"
                        .into(),
                );
                Value::Null
            }
        };
        let output = map.get("output").map(|schema| {
            schema_problems("meta.output", schema, &mut problems);
            schema.clone()
        });
        let capabilities = match map.get("capabilities") {
            None => Declared::default(),
            Some(Value::Object(caps)) => declared(caps, &mut problems),
            Some(_) => {
                problems
                    .push("meta.capabilities: must be an object { tools, net, fs, env }".into());
                Declared::default()
            }
        };
        if problems.is_empty() {
            Ok(Meta {
                description,
                input,
                output,
                capabilities,
            })
        } else {
            Err(problems)
        }
    }
}

/// Problems of `schema` against the JSON Schema metaschema (its `$schema`, else 2020-12).
fn schema_problems(path: &str, schema: &Value, problems: &mut Vec<String>) {
    if !schema.is_object() {
        problems.push(format!("{path}: must be a JSON Schema object"));
        return;
    }
    if let Err(error) = jsonschema::meta::validate(schema) {
        let at = error.instance_path().to_string();
        let at = at.trim_start_matches('/').replace('/', ".");
        let shown = if at.is_empty() {
            path.to_string()
        } else {
            format!("{path}.{at}")
        };
        problems.push(format!("{shown}: {error}"));
        return;
    }
    if let Err(error) = jsonschema::validator_for(schema) {
        problems.push(format!("{path}: {error}"));
    }
}

fn declared(caps: &Map<String, Value>, problems: &mut Vec<String>) -> Declared {
    let mut out = Declared::default();
    for (key, value) in caps {
        let path = format!("meta.capabilities.{key}");
        if !["tools", "net", "fs", "env"].contains(&key.as_str()) {
            problems.push(format!(
                "{path}: unknown capability; use tools, net, fs and env"
            ));
            continue;
        }
        let Some(list) = value.as_array() else {
            problems.push(format!("{path}: must be a list"));
            continue;
        };
        for (i, item) in list.iter().enumerate() {
            let at = format!("{path}[{i}]");
            match (key.as_str(), item) {
                ("tools", Value::String(name))
                    if sandgate_catalog::ToolRef::parse(name).is_some() && !name.contains('*') =>
                {
                    out.tools.push(name.clone());
                }
                ("tools", _) => problems.push(format!(
                    "{at}: must name one tool as \"backend.tool\" (no wildcards)"
                )),
                ("net", Value::String(entry)) => match sandgate_policy::HostPattern::parse(entry) {
                    Ok(_) => out.net.push(entry.clone()),
                    Err(why) => problems.push(format!("{at}: {why}")),
                },
                ("fs", Value::String(path)) => out.fs.push((path.clone(), false)),
                ("fs", Value::Object(root)) => match (root.get("path"), root.get("write")) {
                    (Some(Value::String(path)), None | Some(Value::Bool(_))) => {
                        out.fs
                            .push((path.clone(), root.get("write") == Some(&Value::Bool(true))));
                    }
                    _ => problems.push(format!("{at}: must be {{ path: \"/dir\", write: false }}")),
                },
                ("env", Value::String(name))
                    if !name.is_empty() && !name.contains(['=', '\0', '*']) =>
                {
                    out.env.push(name.clone());
                }
                _ => problems.push(format!("{at}: not a valid entry")),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_valid_meta_is_read_and_every_problem_has_a_path() {
        let meta = Meta::from_json(&json!({
            "description": "sum",
            "input": {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}}}, "required": ["xs"]},
            "output": {"type": "object"},
            "capabilities": {"tools": ["everything.get_sum"], "net": [], "fs": [{"path": "/srv", "write": true}], "env": ["HOME"]},
        }))
        .expect("valid");
        assert_eq!(meta.capabilities.tools, ["everything.get_sum"]);
        assert_eq!(meta.capabilities.fs, [("/srv".to_string(), true)]);
        let problems = Meta::from_json(&json!({
            "input": {"type": "object", "properties": {"xs": {"type": "nonsense"}}},
            "output": {"minimum": "ten"},
            "capabilities": {"tools": ["memory.*", "nodot"], "net": ["http://x"], "disk": []},
            "extra": 1,
        }))
        .expect_err("invalid");
        let text = problems.join("\n");
        for expect in [
            "meta.extra: unknown key",
            "meta.description: required",
            "meta.input.properties.xs.type",
            "meta.output.minimum",
            "meta.capabilities.tools[0]",
            "meta.capabilities.tools[1]",
            "meta.capabilities.net[0]",
            "meta.capabilities.disk: unknown capability",
        ] {
            assert!(text.contains(expect), "missing {expect:?} in:\n{text}");
        }
        let problems = Meta::from_json(&json!({"description": "x", "input": {"type": "string"}}))
            .expect_err("not an object");
        assert!(problems[0].contains("meta.input.type"), "{problems:?}");
    }
}
