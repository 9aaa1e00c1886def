//! The granted capabilities in Python spelling: `await state.get("k")`,
//! `await state.set("k", v, ttl=60)`, `await env.get("NAME")`, `await fs.read_file(path)`, and
//! `resp = await fetch(url, method=..., headers=..., body=...)`, whose body is read by the time
//! the call returns, as httpx does (`resp.status`, `resp.json()`, `resp.text()`).
//!
//! Each is the same host function TypeScript's is (`state.get`, `fs.readFile`, `fetch`...),
//! with the same JSON arguments, so the door grants, refuses and records it the same way. What
//! the execution was not given does not exist: the name is undefined.

use monty_types::{DictPairs, ExcType, MontyClassInstance, MontyClassType, MontyException, MontyObject};
use serde_json::{Map, Value, json};

use super::values;

/// The objects capabilities hang on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// `state`: this caller's values between executions.
    State,
    /// `env`: granted environment variables.
    Env,
    /// `fs`: files beneath the granted roots.
    Fs,
}

impl Space {
    const ALL: [Space; 3] = [Space::State, Space::Env, Space::Fs];

    /// The space's global name.
    pub fn name(self) -> &'static str {
        match self {
            Space::State => "state",
            Space::Env => "env",
            Space::Fs => "fs",
        }
    }

    /// The space a global name is, if it is one.
    pub fn named(name: &str) -> Option<Space> {
        Space::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Its number in ids.
    pub fn index(self) -> u32 {
        self as u32
    }

    /// The space numbered `index`.
    pub fn at(index: u32) -> Option<Space> {
        Space::ALL.get(index as usize).copied()
    }

    /// The host function a Python method of the space is.
    pub fn host_function(self, method: &str) -> Option<&'static str> {
        Some(match (self, method) {
            (Space::State, "get") => "state.get",
            (Space::State, "set") => "state.set",
            (Space::State, "delete") => "state.delete",
            (Space::State, "keys") => "state.keys",
            (Space::Env, "get") => "env.get",
            (Space::Fs, "read_file" | "readFile") => "fs.readFile",
            (Space::Fs, "write_file" | "writeFile") => "fs.writeFile",
            (Space::Fs, "readdir" | "listdir") => "fs.readdir",
            (Space::Fs, "stat") => "fs.stat",
            _ => return None,
        })
    }

    /// Its methods, for an error that names them.
    pub fn methods(self) -> &'static str {
        match self {
            Space::State => "get, set, delete, keys",
            Space::Env => "get",
            Space::Fs => "read_file, write_file, readdir, stat",
        }
    }
}

/// How a host function's answer becomes what `await` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A tool's raw MCP result (see `values::tool_value`).
    Tool,
    /// The JSON value as it is.
    Plain,
    /// A `state.*` answer, `{value}` or `null`: the value, or `None`.
    StateValue,
    /// `fetch`'s response: a response object.
    Response,
}

/// The JSON arguments of host function `function` called with Python's `args` and `kwargs`,
/// and how its answer is read; or the `TypeError` that says how to call it.
pub fn arguments(
    function: &str,
    args: &[MontyObject],
    kwargs: &[(MontyObject, MontyObject)],
) -> Result<(String, Answer), MontyException> {
    let mut positional = args
        .iter()
        .map(|a| values::to_json(a).map_err(|why| type_error(format!("{function}(): {why}"))))
        .collect::<Result<Vec<Value>, _>>()?;
    let mut named = Map::new();
    for (key, value) in kwargs {
        let MontyObject::String(key) = key else {
            return Err(type_error("keyword names must be strings".into()));
        };
        let value =
            values::to_json(value).map_err(|why| type_error(format!("{function}(): {why}")))?;
        named.insert(key.clone(), value);
    }
    let answer = match function {
        "fetch" => {
            let request = fetch_request(positional, named)?;
            return Ok((json!([request]).to_string(), Answer::Response));
        }
        // Every `state.*` answers `{value}`, or null for none.
        "state.set" => {
            if let Some(ttl) = named.remove("ttl") {
                positional.push(json!({ "ttl": ttl }));
            }
            Answer::StateValue
        }
        f if f.starts_with("state.") => Answer::StateValue,
        "fs.readFile" | "fs.writeFile" => {
            if let Some(encoding) = named.remove("encoding") {
                positional.push(encoding);
            }
            Answer::Plain
        }
        _ => Answer::Plain,
    };
    if let Some(extra) = named.keys().next() {
        return Err(type_error(format!(
            "{function}() got an unexpected keyword argument '{extra}'"
        )));
    }
    Ok((Value::Array(positional).to_string(), answer))
}

/// `fetch(url, method=, headers=, body=, json=)` as the request TypeScript's `fetch` sends.
fn fetch_request(positional: Vec<Value>, mut named: Map<String, Value>) -> Result<Value, MontyException> {
    let mut positional = positional.into_iter();
    let url = match (positional.next(), named.remove("url")) {
        (Some(Value::String(url)), None) | (None, Some(Value::String(url))) => url,
        _ => return Err(type_error("fetch(url, method=..., headers=..., body=...) takes the URL as a string".into())),
    };
    if positional.next().is_some() {
        return Err(type_error("fetch() takes the URL, then keyword arguments: method=, headers=, body=, json=".into()));
    }
    let method = match named.remove("method") {
        None => "GET".to_string(),
        Some(Value::String(m)) => m.to_ascii_uppercase(),
        Some(_) => return Err(type_error("fetch(): method= is a string such as \"POST\"".into())),
    };
    let mut headers: Vec<Value> = match named.remove("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(v) => Ok(json!([k, v])),
                other => Ok(json!([k, other.to_string()])),
            })
            .collect::<Result<_, MontyException>>()?,
        Some(_) => return Err(type_error("fetch(): headers= is a dict of names to values".into())),
    };
    let mut request = json!({ "url": url, "method": method });
    match (named.remove("body"), named.remove("json")) {
        (Some(_), Some(_)) => return Err(type_error("fetch(): give body= or json=, not both".into())),
        (Some(Value::String(body)), None) => request["body"] = Value::String(body),
        (Some(Value::Null) | None, None) => {}
        (Some(other), None) | (None, Some(other)) => {
            if !headers.iter().any(|h| h[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case("content-type"))) {
                headers.push(json!(["content-type", "application/json"]));
            }
            request["body"] = Value::String(other.to_string());
        }
    }
    if let Some(extra) = named.keys().next() {
        return Err(type_error(format!(
            "fetch() got an unexpected keyword argument '{extra}'; it takes method=, headers=, body=, json="
        )));
    }
    request["headers"] = Value::Array(headers);
    Ok(request)
}

/// A fetched response as a Python object: its status and headers as attributes, its body read
/// through `json()` and `text()` (which the host answers at once).
pub fn response_object(raw: &Value, class: MontyClassType, id: monty_types::MontyUuid) -> MontyObject {
    let status = raw.get("status").and_then(Value::as_i64).unwrap_or(0);
    let mut headers = Vec::new();
    if let Some(Value::Array(pairs)) = raw.get("headers") {
        for pair in pairs {
            if let (Some(k), Some(v)) = (pair.get(0).and_then(Value::as_str), pair.get(1).and_then(Value::as_str)) {
                headers.push((MontyObject::String(k.to_ascii_lowercase()), MontyObject::String(v.to_string())));
            }
        }
    }
    let text = |key: &str| MontyObject::String(raw.get(key).and_then(Value::as_str).unwrap_or_default().to_string());
    let attrs = vec![
        (MontyObject::String("status".into()), MontyObject::Int(status)),
        (MontyObject::String("status_code".into()), MontyObject::Int(status)),
        (MontyObject::String("ok".into()), MontyObject::Bool((200..300).contains(&status))),
        (MontyObject::String("url".into()), text("url")),
        (MontyObject::String("reason".into()), text("statusText")),
        (MontyObject::String("headers".into()), MontyObject::Dict(DictPairs::from(headers))),
    ];
    MontyObject::ClassInstance(Box::new(MontyClassInstance {
        class_type: class,
        instance_id: id,
        attrs: DictPairs::from(attrs),
    }))
}

/// A response's method: `json()`, `text()`, or what it has instead.
pub fn response_method(raw: &Value, method: &str) -> Result<MontyObject, MontyException> {
    let body = || -> Result<String, MontyException> {
        match (raw.get("body"), raw.get("body_base64")) {
            (Some(Value::String(text)), _) => Ok(text.clone()),
            (_, Some(_)) => Err(MontyException::new(
                ExcType::UnicodeDecodeError,
                Some("the response body is not UTF-8 text".into()),
            )),
            _ => Ok(String::new()),
        }
    };
    match method {
        "text" => Ok(MontyObject::String(body()?)),
        "json" => serde_json::from_str::<Value>(&body()?)
            .map(|value| values::to_python(&value))
            .map_err(|e| MontyException::new(ExcType::ValueError, Some(format!("the response body is not JSON: {e}")))),
        "raise_for_status" => {
            let status = raw.get("status").and_then(Value::as_i64).unwrap_or(0);
            if (200..400).contains(&status) {
                Ok(MontyObject::None)
            } else {
                Err(MontyException::new(ExcType::RuntimeError, Some(format!("HTTP {status} from {}", raw.get("url").and_then(Value::as_str).unwrap_or("")))))
            }
        }
        other => Err(MontyException::new(
            ExcType::AttributeError,
            Some(format!("a response has no `{other}`; it has status, ok, headers, url, json(), text()")),
        )),
    }
}

fn type_error(message: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(message))
}
