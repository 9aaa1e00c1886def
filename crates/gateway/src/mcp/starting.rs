//! What the meta-tools answer from while backends start: the catalog as it stands, at once,
//! and a note naming the backends the caller may reach that are still on their first
//! connection attempt. A client that searches right after start-up used to wait up to ten
//! seconds for a slow backend; now it gets what is ready and is told when to ask again. An
//! operator who writes `[gateway] startup_wait` in the config gets the wait back (it holds
//! `tools/list` too).

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock};
use sandgate_catalog::Catalog;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::gateway::Gateway;

/// The catalog the caller sees for a meta-tool, and the backends it may reach that are still
/// starting (their tools are not in it).
pub(crate) async fn meta_catalog(
    gateway: &Arc<Gateway>,
    caller: &Caller,
) -> (Arc<Catalog>, Vec<String>) {
    let view = if gateway.catalogs().list_waits() {
        gateway.settled_view(&caller.access).await
    } else {
        gateway.known_view(&caller.access).await
    };
    (view.catalog, gateway.starting_backends(&caller.access))
}

/// The note a model reads: which backends are missing from the answer, and what to do.
pub(crate) fn note(starting: &[String]) -> Option<String> {
    if starting.is_empty() {
        return None;
    }
    let names: Vec<String> = starting.iter().map(|name| format!("`{name}`")).collect();
    Some(format!(
        "Still starting (first connection): {}; {} tools are not in this answer yet. Ask again in a few seconds, or read sandgate://backends for their status. A call_tool_chain whose code names one waits for it.",
        names.join(", "),
        if starting.len() == 1 { "its" } else { "their" }
    ))
}

/// `result` with the note as a text block of its own and the names as `starting` in its
/// structured content.
pub(crate) fn noted(
    result: Result<CallToolResult, String>,
    starting: &[String],
) -> Result<CallToolResult, String> {
    let Some(note) = note(starting) else {
        return result;
    };
    let mut result = result?;
    result.content.push(ContentBlock::text(note));
    if let Some(Value::Object(fields)) = result.structured_content.as_mut() {
        fields.insert("starting".into(), json!(starting));
    }
    Ok(result)
}

/// A failed lookup of `asked` (`backend.tool`), with the note when its backend is starting.
pub(crate) fn lookup_error(error: String, asked: &str, starting: &[String]) -> String {
    let backend = asked.split_once('.').map_or(asked, |(backend, _)| backend);
    let is_starting = starting
        .iter()
        .any(|name| name == backend || sandgate_catalog::sanitize_ident(name) == backend);
    match note(starting).filter(|_| is_starting) {
        Some(note) => format!("{error} {note}"),
        None => error,
    }
}
