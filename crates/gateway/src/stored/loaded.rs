//! A stored tool's current version as the gateway holds it: its record, its checked meta and
//! its compiled schemas, and how the catalog lists it. Below everything that runs stored tools,
//! so the catalog can list them without knowing how they run.

use std::collections::BTreeMap;
use std::sync::Arc;

use sandgate_catalog::ToolSpec;
use sandgate_store::StoredTool;
use serde_json::{Value, json};

use super::meta::Meta;

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
    pub(crate) input: jsonschema::Validator,
    pub(crate) output: Option<jsonschema::Validator>,
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
        let mut spec = ToolSpec {
            backend: BACKEND.to_string(),
            name: self.stored.name.clone(),
            description: Some(self.meta.description.clone()),
            input_schema: self.meta.input.clone(),
            output_schema: Some(result_schema(self.meta.output.as_ref())),
            annotations: None,
            origin: sandgate_catalog::Origin::Stored,
        };
        // A stored tool's text reaches every model as a backend's does (issue 49).
        spec.take_out_hidden_text();
        spec
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

/// The schema of what a stored tool answers: `{ok: true, data}`, `data` as `meta.output` says.
pub(crate) fn result_schema(output: Option<&Value>) -> Value {
    json!({
        "type": "object",
        "properties": {"ok": {"const": true}, "data": output.cloned().unwrap_or(json!({}))},
        "required": ["ok", "data"],
    })
}
