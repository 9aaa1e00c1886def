//! Stored tools: TypeScript tools users keep, versioned in the store, listed as `user.<name>`
//! beside the backends' tools and run in the sandbox with only the capabilities they declare.
//!
//! - `meta.rs` reads and checks a tool's `meta`;
//! - `register.rs` checks a whole tool file before anything is written, and computes the
//!   access a tool runs with (what it declares, cut to what its owner holds at call time);
//! - `run.rs` calls one: input validated before any code runs, the sandbox in tool mode, the
//!   result normalised (`{ok: true, data}`) and checked against `meta.output`.
//!
//! The gateway keeps the current version of every tool in memory (with its compiled schemas)
//! and reloads them when the store changes, whoever changed it (the CLI is another process).

pub(crate) mod mcp;
mod meta;
mod register;
mod run;

use std::collections::BTreeMap;
use std::sync::Arc;

use sandgate_catalog::ToolSpec;
use sandgate_store::StoredTool;

pub use meta::{Declared, Meta};
pub use register::{MAX_TOOL_BYTES, Registration, bad_name, check};

/// The backend stored tools appear under.
pub const BACKEND: &str = sandgate_config::STORED_TOOLS_BACKEND;

/// How deep stored tools may call stored tools.
pub const MAX_DEPTH: usize = 8;

/// The current version of one stored tool, ready to run.
pub struct Loaded {
    /// Its record in the store.
    pub stored: StoredTool,
    /// Its meta, read and checked.
    pub meta: Meta,
    input: jsonschema::Validator,
    output: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("name", &self.stored.name)
            .field("version", &self.stored.version)
            .finish_non_exhaustive()
    }
}

impl Loaded {
    /// Reads a stored version (its meta was checked when it was registered; a version that no
    /// longer reads is skipped with the reason).
    pub fn from_stored(stored: StoredTool) -> Result<Loaded, String> {
        let value: serde_json::Value =
            serde_json::from_str(&stored.meta).map_err(|e| format!("its meta is not JSON: {e}"))?;
        let meta = Meta::from_json(&value).map_err(|p| p.join("; "))?;
        let input = jsonschema::validator_for(&meta.input).map_err(|e| e.to_string())?;
        let output = match &meta.output {
            Some(schema) => Some(jsonschema::validator_for(schema).map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(Loaded {
            stored,
            meta,
            input,
            output,
        })
    }

    /// How the catalog lists it.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            backend: BACKEND.to_string(),
            name: self.stored.name.clone(),
            description: Some(self.meta.description.clone()),
            input_schema: self.meta.input.clone(),
            output_schema: Some(run::result_schema(self.meta.output.as_ref())),
            annotations: None,
        }
    }
}

/// Every stored tool's current version, by name.
pub type Tools = Arc<BTreeMap<String, Arc<Loaded>>>;

/// Loads the current versions of `stored`, skipping (and logging) any that no longer read.
pub fn load(stored: Vec<StoredTool>) -> Tools {
    let mut tools = BTreeMap::new();
    for tool in stored {
        let name = tool.name.clone();
        match Loaded::from_stored(tool) {
            Ok(loaded) => {
                tools.insert(name, Arc::new(loaded));
            }
            Err(why) => tracing::warn!(tool = %name, "stored tool skipped: {why}"),
        }
    }
    Arc::new(tools)
}
