//! One immutable snapshot of every tool the gateway can reach, with name resolution.
//!
//! A new snapshot is built whenever a backend's tool list changes; readers hold an `Arc` to the
//! one they started with. Building it is where identifier collisions are detected and
//! reported, so nothing about names can fail later, at call time.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::CatalogError;
use crate::names::sanitize_ident;
use crate::search::SearchIndex;
use crate::tool_ref::{Origin, ToolRef};

/// A tool as a backend described it. This is the catalog's input, and what the tool cache
/// file stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The backend's configured name.
    pub backend: String,
    /// The tool's name as the backend gives it.
    pub name: String,
    /// Its description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// JSON Schema of its structured result, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, ...), kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Where the tool comes from (a backend, unless a stored tool's spec says otherwise):
    /// never stored in the tool cache, which holds backends' tools only.
    #[serde(skip)]
    pub origin: Origin,
}

impl ToolSpec {
    /// Whether its annotations say it only reads (`readOnlyHint: true`). A tool that says
    /// nothing may write, as the MCP specification assumes.
    pub fn says_read_only(&self) -> bool {
        self.annotations
            .as_ref()
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// Takes out text no person sees (zero-width, bidirectional and tag characters, HTML
    /// comments: `sandgate_pins::clean`) from the description, the schemas and the annotations.
    /// Every way a spec enters the catalog calls it: a backend's listing (`upstream::listing`),
    /// the tool cache (which an older build wrote uncleaned) and a stored tool, so no surface
    /// made from the catalog shows any. Says whether it took anything out.
    pub fn take_out_hidden_text(&mut self) -> bool {
        let mut took_out = false;
        if let Some(description) = &self.description
            && let std::borrow::Cow::Owned(cleaned) = sandgate_pins::clean(description)
        {
            self.description = Some(cleaned);
            took_out = true;
        }
        took_out |= sandgate_pins::clean_json(&mut self.input_schema);
        if let Some(schema) = self.output_schema.as_mut() {
            took_out |= sandgate_pins::clean_json(schema);
        }
        if let Some(annotations) = self.annotations.as_mut() {
            took_out |= sandgate_pins::clean_json(annotations);
        }
        took_out
    }
}

/// A tool in the catalog: its spec plus the names it is reachable by.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What the backend said.
    pub spec: ToolSpec,
    /// `backend.tool`, with original names.
    pub qualified: String,
    /// The backend's JavaScript identifier.
    pub js_backend: String,
    /// The tool's JavaScript identifier (unique within its backend).
    pub js_tool: String,
}

impl Entry {
    /// `js_backend.js_tool`, the form a model writes in code.
    pub fn js_qualified(&self) -> String {
        format!("{}.{}", self.js_backend, self.js_tool)
    }

    /// The first line of the description, for listings.
    pub fn summary(&self) -> &str {
        self.spec
            .description
            .as_deref()
            .unwrap_or("")
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
    }
}

/// Two names that sanitize to the same identifier. The first keeps the identifier; the
/// second gets a numbered one, and both stay reachable by their original names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collision {
    /// The backend, or `None` when two backends collide.
    pub backend: Option<String>,
    /// The original names that collided.
    pub names: Vec<String>,
    /// The identifier they both wanted.
    pub identifier: String,
    /// What the later name got instead.
    pub assigned: String,
}

/// An immutable snapshot of all tools.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    by_qualified: HashMap<String, usize>,
    by_js: HashMap<String, usize>,
    by_bare: HashMap<String, Vec<usize>>,
    backend_idents: BTreeMap<String, String>,
    collisions: Vec<Collision>,
    index: SearchIndex,
}

impl Catalog {
    /// Builds a snapshot. Tools are ordered by backend, then name, so every listing and every
    /// identifier assignment is deterministic whatever order the backends answered in.
    pub fn new(mut tools: Vec<ToolSpec>) -> Catalog {
        tools.sort_by(|a, b| (&a.backend, &a.name).cmp(&(&b.backend, &b.name)));
        tools.dedup_by(|a, b| a.backend == b.backend && a.name == b.name);
        let mut collisions = Vec::new();

        let mut backend_idents: BTreeMap<String, String> = BTreeMap::new();
        let mut taken_backends: HashMap<String, String> = HashMap::new();
        for backend in tools.iter().map(|t| t.backend.clone()) {
            if backend_idents.contains_key(&backend) {
                continue;
            }
            let ident = unique_ident(&backend, &mut taken_backends, None, &mut collisions);
            backend_idents.insert(backend, ident);
        }

        // The sandbox also offers `mcp.<backend>` and `tools.<backend>` as aliases; a backend that
        // is itself named so keeps the name, and the alias is not available.
        for (backend, ident) in &backend_idents {
            if ident == "mcp" || ident == "tools" {
                collisions.push(Collision {
                    backend: None,
                    names: vec![
                        backend.clone(),
                        format!("the `{ident}.<backend>.<tool>` alias"),
                    ],
                    identifier: ident.clone(),
                    assigned: format!("{ident} (the backend; the alias is off)"),
                });
            }
        }

        let mut entries = Vec::with_capacity(tools.len());
        // A tool whose name already is an identifier keeps it; the others are sanitized and,
        // when that is taken, numbered in name order (`get_sum_2`). So `get_sum` is always
        // `get_sum`, whatever other tools sanitize to, and no identifier is another tool's name.
        let mut taken_tools: HashMap<String, HashMap<String, String>> = HashMap::new();
        for spec in tools.iter().filter(|t| sanitize_ident(&t.name) == t.name) {
            taken_tools
                .entry(spec.backend.clone())
                .or_default()
                .insert(spec.name.clone(), spec.name.clone());
        }
        for spec in tools {
            let js_backend = backend_idents
                .get(&spec.backend)
                .cloned()
                .unwrap_or_default();
            let taken = taken_tools.entry(spec.backend.clone()).or_default();
            let js_tool = if sanitize_ident(&spec.name) == spec.name {
                spec.name.clone()
            } else {
                unique_ident(&spec.name, taken, Some(&spec.backend), &mut collisions)
            };
            entries.push(Entry {
                qualified: ToolRef::new(&spec.backend, &spec.name).to_string(),
                js_backend,
                js_tool,
                spec,
            });
        }

        let mut by_qualified = HashMap::new();
        let mut by_js = HashMap::new();
        let mut by_bare: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            by_qualified.insert(e.qualified.clone(), i);
            by_js.insert(e.js_qualified(), i);
            by_bare.entry(e.spec.name.clone()).or_default().push(i);
            if e.js_tool != e.spec.name {
                by_bare.entry(e.js_tool.clone()).or_default().push(i);
            }
        }
        let index = SearchIndex::build(&entries);
        Catalog {
            entries,
            by_qualified,
            by_js,
            by_bare,
            backend_idents,
            collisions,
            index,
        }
    }

    /// Every tool, ordered by backend then name.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no tools at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tools of one backend.
    pub fn backend_tools<'a>(&'a self, backend: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.spec.backend == backend)
    }

    /// Backend name → JavaScript identifier.
    pub fn backend_idents(&self) -> &BTreeMap<String, String> {
        &self.backend_idents
    }

    /// Identifier collisions found while building.
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// The search index over these tools.
    pub fn search_index(&self) -> &SearchIndex {
        &self.index
    }

    /// The entry of `tool`, by its original names.
    pub fn entry(&self, tool: &ToolRef) -> Option<&Entry> {
        self.by_qualified
            .get(&tool.to_string())
            .map(|&i| &self.entries[i])
    }

    /// Resolves a qualified (`my-server.get-sum`), sanitized (`my_server.get_sum`) or bare
    /// (`get-sum`, `get_sum`) name. Bare names must be unique across backends.
    pub fn resolve(&self, name: &str) -> Result<&Entry, CatalogError> {
        let name = name.trim();
        if let Some(&i) = self.by_qualified.get(name).or_else(|| self.by_js.get(name)) {
            return Ok(&self.entries[i]);
        }
        if let Some(found) = self.by_bare.get(name) {
            let mut found = found.clone();
            found.dedup();
            return match found.as_slice() {
                [one] => Ok(&self.entries[*one]),
                many => Err(CatalogError::Ambiguous {
                    name: name.to_string(),
                    candidates: many
                        .iter()
                        .map(|&i| self.entries[i].qualified.clone())
                        .collect(),
                }),
            };
        }
        Err(CatalogError::NotFound {
            name: name.to_string(),
            suggestions: self.suggest(name, 3),
        })
    }

    /// The qualified names closest to `name`, best first, for "did you mean".
    pub fn suggest(&self, name: &str, limit: usize) -> Vec<String> {
        let lower = name.to_lowercase();
        let mut scored: Vec<(f64, &str)> = self
            .entries
            .iter()
            .map(|e| {
                let full = strsim::jaro_winkler(&lower, &e.qualified.to_lowercase());
                let js = strsim::jaro_winkler(&lower, &e.js_qualified().to_lowercase());
                let bare = strsim::jaro_winkler(&lower, &e.spec.name.to_lowercase());
                (full.max(js).max(bare), e.qualified.as_str())
            })
            .filter(|(score, _)| *score >= 0.75)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        // Only names nearly as close as the best are worth offering.
        let best = scored.first().map(|s| s.0).unwrap_or(0.0);
        scored
            .into_iter()
            .take_while(|(score, _)| *score >= best - 0.05)
            .take(limit)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

/// Picks the identifier for `name`, numbering it if a different name already took it.
fn unique_ident(
    name: &str,
    taken: &mut HashMap<String, String>,
    backend: Option<&str>,
    collisions: &mut Vec<Collision>,
) -> String {
    let wanted = sanitize_ident(name);
    let Some(holder) = taken.get(&wanted).cloned() else {
        taken.insert(wanted.clone(), name.to_string());
        return wanted;
    };
    let mut n = 2;
    let assigned = loop {
        let candidate = format!("{wanted}_{n}");
        if !taken.contains_key(&candidate) {
            break candidate;
        }
        n += 1;
    };
    taken.insert(assigned.clone(), name.to_string());
    collisions.push(Collision {
        backend: backend.map(str::to_string),
        names: vec![holder, name.to_string()],
        identifier: wanted,
        assigned: assigned.clone(),
    });
    assigned
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(backend: &str, name: &str) -> ToolSpec {
        ToolSpec {
            backend: backend.into(),
            name: name.into(),
            description: None,
            input_schema: json!({}),
            output_schema: None,
            annotations: None,
            origin: Default::default(),
        }
    }

    #[test]
    fn resolves_every_name_form() {
        let c = Catalog::new(vec![tool("my-server", "get-sum"), tool("other", "echo")]);
        for name in [
            "my-server.get-sum",
            "my_server.get_sum",
            "get-sum",
            "get_sum",
        ] {
            assert_eq!(
                c.resolve(name).map(|e| e.qualified.as_str()),
                Ok("my-server.get-sum"),
                "{name}"
            );
        }
    }

    #[test]
    fn ambiguous_bare_names_list_candidates() {
        let c = Catalog::new(vec![tool("a", "echo"), tool("b", "echo")]);
        let err = c.resolve("echo").expect_err("ambiguous");
        assert_eq!(
            err,
            CatalogError::Ambiguous {
                name: "echo".into(),
                candidates: vec!["a.echo".into(), "b.echo".into()]
            }
        );
    }

    #[test]
    fn misses_suggest_the_closest_name() {
        let c = Catalog::new(vec![
            tool("memory", "create_entities"),
            tool("memory", "read_graph"),
        ]);
        let err = c.resolve("memory.create_entitys").expect_err("typo");
        assert!(
            err.to_string()
                .contains("did you mean `memory.create_entities`"),
            "{err}"
        );
    }

    #[test]
    fn a_backend_named_like_an_alias_is_reported() {
        let c = Catalog::new(vec![tool("mcp", "x"), tool("other", "y")]);
        assert_eq!(c.collisions().len(), 1);
        assert_eq!(c.collisions()[0].identifier, "mcp");
        assert_eq!(c.resolve("mcp.x").map(|e| e.js_backend.as_str()), Ok("mcp"));
    }

    #[test]
    fn collisions_are_reported_and_both_tools_stay_reachable() {
        let c = Catalog::new(vec![
            tool("s", "get-sum"),
            tool("s", "get_sum"),
            tool("my-b", "x"),
            tool("my_b", "y"),
        ]);
        assert_eq!(c.collisions().len(), 2);
        let hyphen = c.resolve("s.get-sum").expect("first");
        let under = c.resolve("s.get_sum").expect("second");
        assert_ne!(hyphen.js_tool, under.js_tool);
        assert_eq!(
            c.backend_idents().get("my-b").map(String::as_str),
            Some("my_b")
        );
        assert_eq!(
            c.backend_idents().get("my_b").map(String::as_str),
            Some("my_b_2")
        );
    }
}
