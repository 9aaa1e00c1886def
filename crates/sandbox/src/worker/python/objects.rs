//! The host objects a Python run sees, and what a name or a method call on one is.
//!
//! Monty routes a method call or an attribute read on a host-defined instance back to the host
//! by the instance's id. Here an id says what the instance is (a backend, a capability space, a
//! fetched response) and which one, in fixed bytes that never encode an address:
//! - a backend's methods are its tools (`await everything.echo(message="hi")`), and reading one
//!   as an attribute gives a function that calls it (`getattr(everything, "get-sum")`);
//! - a space's methods are its host functions (`await state.get("k")`, see `capabilities`);
//! - a response's methods read its body (`resp.json()`), answered at once.

use monty::{FunctionCall, NameLookup};
use monty_types::{
    DictPairs, ExcType, MontyClassInstance, MontyClassType, MontyException, MontyObject, MontyUuid,
    NameLookupResult,
};

use super::capabilities::Space;
use crate::worker::engine::ToolSet;

/// The name `source::with_sleep` gives `asyncio.sleep`.
const SLEEP_NAME: &str = "asyncio_sleep";

const BACKEND: u8 = 0x1A;
const SPACE: u8 = 0x2B;
const RESPONSE: u8 = 0x3C;
const CLASS: u8 = 0x80;

/// What a call reaches.
pub enum Target {
    /// A tool, by its index in the run's tools.
    Tool(u32),
    /// A host function, by its index in the run's host functions, and its name.
    Host(u32, &'static str),
    /// A method of fetched response `n`.
    Response(usize),
    /// `asyncio.sleep` (spelled `asyncio_sleep` by `source::with_sleep`): the worker's timer.
    Sleep,
    /// Nothing: the exception that says so.
    Missing(MontyException),
}

/// The tools and capabilities of one run, as Python objects.
pub struct Objects<'r> {
    /// The run's tools.
    pub tools: &'r ToolSet,
    /// The run's host functions, by name; calls name them by index.
    pub host_functions: &'r [String],
}

impl Objects<'_> {
    /// What a name the code reached for is: a backend, a granted space, `fetch`, or nothing;
    /// and for an attribute of a backend, its tool as a function.
    pub fn lookup(&self, lookup: &NameLookup) -> NameLookupResult {
        match lookup.object_id().and_then(tagged) {
            None => self.global(&lookup.name),
            Some((BACKEND, b)) => match self.tool_of(b as usize, &lookup.name) {
                Some(tool) => NameLookupResult::Value(MontyObject::Function {
                    name: self.qualified(tool),
                    docstring: None,
                }),
                None => NameLookupResult::Undefined,
            },
            Some(_) => NameLookupResult::Undefined,
        }
    }

    fn global(&self, name: &str) -> NameLookupResult {
        if let Some(b) = self.tools.backends.iter().position(|b| b.js == name) {
            return NameLookupResult::Value(instance(BACKEND, b as u32, name));
        }
        if let Some(space) = Space::named(name).filter(|s| self.grants_space(*s)) {
            return NameLookupResult::Value(instance(SPACE, space.index(), name));
        }
        if name == SLEEP_NAME {
            return NameLookupResult::Value(MontyObject::Function {
                name: "asyncio.sleep".into(),
                docstring: None,
            });
        }
        if name == "fetch" && self.host_index("fetch").is_some() {
            return NameLookupResult::Value(MontyObject::Function {
                name: "fetch".into(),
                docstring: None,
            });
        }
        NameLookupResult::Undefined
    }

    /// What `call` reaches.
    pub fn target(&self, call: &FunctionCall) -> Target {
        let name = call.function_name.as_str();
        match call.object_id.and_then(tagged) {
            Some((BACKEND, b)) => match self.tool_of(b as usize, name) {
                Some(tool) => Target::Tool(tool),
                None => Target::Missing(self.no_such_tool(b as usize, name)),
            },
            Some((SPACE, s)) => match Space::at(s).and_then(|space| Some((space, space.host_function(name)?))) {
                Some((_, function)) => match self.host_index(function) {
                    Some(index) => Target::Host(index, function),
                    None => Target::Missing(not_defined(name)),
                },
                None => {
                    let space = Space::at(s).map_or("", Space::name);
                    let methods = Space::at(s).map_or("", Space::methods);
                    Target::Missing(MontyException::new(
                        ExcType::AttributeError,
                        Some(format!("`{space}` has no `{name}`; it has {methods}")),
                    ))
                }
            },
            Some((RESPONSE, n)) => Target::Response(n as usize),
            Some(_) => Target::Missing(not_defined(name)),
            None if name == "asyncio.sleep" || name == SLEEP_NAME => Target::Sleep,
            None if name == "fetch" => match self.host_index("fetch") {
                Some(index) => Target::Host(index, "fetch"),
                None => Target::Missing(not_defined(name)),
            },
            None => match self.tool_qualified(name) {
                Some(tool) => Target::Tool(tool),
                None => Target::Missing(not_defined(name)),
            },
        }
    }

    /// `backend.tool`, as errors and calls name a tool.
    pub fn qualified(&self, tool: u32) -> String {
        let binding = &self.tools.bindings[tool as usize];
        format!("{}.{}", binding.js_backend, binding.js_tool)
    }

    fn grants_space(&self, space: Space) -> bool {
        let prefix = format!("{}.", space.name());
        self.host_functions.iter().any(|f| f.starts_with(&prefix))
    }

    fn host_index(&self, function: &str) -> Option<u32> {
        self.host_functions
            .iter()
            .position(|f| f == function)
            .map(|i| i as u32)
    }

    /// Backend `b`'s tool named `name` (its identifier or its own name): its index.
    fn tool_of(&self, b: usize, name: &str) -> Option<u32> {
        let backend = self.tools.backends.get(b)?;
        backend.tools.iter().copied().find(|&i| {
            let tool = &self.tools.bindings[i as usize];
            tool.js_tool == name || tool.name == name
        })
    }

    /// The tool a `backend.tool` function (made by an attribute read) names.
    fn tool_qualified(&self, name: &str) -> Option<u32> {
        let (backend, tool) = name.split_once('.')?;
        let b = self.tools.backends.iter().position(|b| b.js == backend)?;
        self.tool_of(b, tool)
    }

    fn no_such_tool(&self, b: usize, name: &str) -> MontyException {
        let Some(backend) = self.tools.backends.get(b) else {
            return not_defined(name);
        };
        let names: Vec<&str> = backend
            .tools
            .iter()
            .take(20)
            .map(|&i| self.tools.bindings[i as usize].js_tool.as_str())
            .collect();
        MontyException::new(
            ExcType::AttributeError,
            Some(format!(
                "`{}` has no tool `{name}`; its tools: {}",
                backend.js,
                names.join(", ")
            )),
        )
    }
}

/// Fetched response `n` as a Python object (see `capabilities::response_object`).
pub fn response(raw: &serde_json::Value, n: usize) -> MontyObject {
    super::capabilities::response_object(raw, class(RESPONSE, 0, "Response"), uuid(RESPONSE, n as u32))
}

/// A bare name Monty does not have (`eval`, `globals`, `open`...), as Python says it.
fn not_defined(name: &str) -> MontyException {
    MontyException::new(ExcType::NameError, Some(format!("name '{name}' is not defined")))
}

fn instance(tag: u8, index: u32, name: &str) -> MontyObject {
    MontyObject::ClassInstance(Box::new(MontyClassInstance {
        class_type: class(tag, index, name),
        instance_id: uuid(tag, index),
        attrs: DictPairs::from(Vec::new()),
    }))
}

/// Each backend and space is a class of its own (its name is its repr and in its errors).
fn class(tag: u8, index: u32, name: &str) -> MontyClassType {
    MontyClassType {
        name: name.to_string(),
        id: uuid(tag | CLASS, index),
        host_defined: true,
        is_dataclass: false,
        attrs: DictPairs::from(Vec::new()),
    }
}

/// The id of object `index` of kind `tag`: fixed bytes, never an address.
fn uuid(tag: u8, index: u32) -> MontyUuid {
    let mut bytes = [0u8; 16];
    bytes[0] = tag;
    bytes[1..5].copy_from_slice(b"sgpy");
    bytes[12..16].copy_from_slice(&index.to_le_bytes());
    MontyUuid::from_bytes(bytes)
}

/// The kind and index an instance id names, if it is one of ours.
fn tagged(id: MontyUuid) -> Option<(u8, u32)> {
    let bytes = id.as_bytes();
    (&bytes[1..5] == b"sgpy" && bytes[0] & CLASS == 0)
        .then(|| (bytes[0], u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]])))
}
