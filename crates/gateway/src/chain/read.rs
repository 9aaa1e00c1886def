//! Reading back what shaping kept out of a response: the `read_output` meta-tool and the
//! `sandgate://executions/{id}/output|logs` resources. Any byte range, or the part of a JSON
//! result at a path, so a model can fetch exactly the piece it needs.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::caller::{Caller, Part};
use crate::gateway::Gateway;

/// Prefix of stored-output resources.
pub const EXECUTIONS_PREFIX: &str = "sandgate://executions/";

/// Arguments of `read_output`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    execution_id: String,
    part: Option<String>,
    offset: Option<usize>,
    length: Option<usize>,
    json_path: Option<String>,
}

/// Runs `read_output`.
pub async fn read_output(
    gateway: &Gateway,
    caller: &Caller,
    args: ReadArgs,
) -> Result<CallToolResult, String> {
    let store = gateway
        .chain()
        .and_then(|c| c.store.clone())
        .ok_or("this gateway keeps no outputs (it has no store)")?;
    let max = gateway
        .chain()
        .map_or(sandgate_output::DEFAULT_MAX_CHARS, |c| c.output.max_chars);
    let part = args.part.as_deref().unwrap_or("output");
    let id = super::bounds::short_text("execution_id", &args.execution_id)?;
    if let Some(path) = &args.json_path {
        super::bounds::short_text("json_path", path)?;
    }
    let named = Part::named(part)
        .ok_or_else(|| format!("part must be \"output\", \"logs\" or \"error\", not {part:?}"))?;
    let offset = args.offset.unwrap_or(0);
    let length = Some(args.length.unwrap_or(max).clamp(1, max.max(1)));
    let full = stored(gateway, &store, caller, id.trim(), named).await?;
    let slice = match &args.json_path {
        None => sandgate_store::slice(&full, offset, length).map_err(|e| e.to_string())?,
        Some(path) => {
            let value: Value = serde_json::from_str(&full).map_err(|_| {
                "this output is not JSON, so json_path does not apply; read it by offset and length".to_string()
            })?;
            let selected = sandgate_output::select(&value, path)?;
            let text = crate::chain::response::render_value(selected);
            sandgate_store::slice(&text, offset, length).map_err(|e| e.to_string())?
        }
    };
    let next = (slice.end < slice.total_bytes).then_some(slice.end);
    let mut text = slice.text.clone();
    match next {
        Some(next) => text.push_str(&format!(
            "\n[bytes {}–{} of {}; more from offset {next}]",
            slice.start, slice.end, slice.total_bytes
        )),
        None if slice.start > 0 => text.push_str(&format!(
            "\n[bytes {}–{} of {}; end]",
            slice.start, slice.end, slice.total_bytes
        )),
        None => {}
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({
        "execution_id": args.execution_id,
        "part": part,
        "json_path": args.json_path,
        "text": slice.text,
        "start": slice.start,
        "end": slice.end,
        "total_bytes": slice.total_bytes,
        "next_offset": next,
    }));
    Ok(result)
}

/// The full text behind `sandgate://executions/{id}/output` or `/logs`; `None` for a URI of
/// another shape, `Some(Err)` when there is nothing stored under it.
pub async fn read_resource(
    gateway: &Gateway,
    caller: &Caller,
    uri: &str,
) -> Option<Result<String, String>> {
    let rest = uri.strip_prefix(EXECUTIONS_PREFIX)?;
    let (id, part) = rest.rsplit_once('/')?;
    let part = Part::named(part)?;
    let Some(store) = gateway.chain().and_then(|c| c.store.clone()) else {
        return Some(Err("this gateway keeps no outputs (it has no store)".into()));
    };
    Some(stored(gateway, &store, caller, id, part).await)
}

/// The stored `part` of execution `id` that `caller` may read: its own (its session and
/// profile), or anyone's for an admin profile. Another caller's is "not found", as if it never
/// existed; when it belongs to another profile, the refusal goes to the audit log.
pub(crate) async fn stored(
    gateway: &Gateway,
    store: &sandgate_store::StoreHandle,
    caller: &Caller,
    id: &str,
    part: Part,
) -> Result<String, String> {
    let error = match store.output(&caller.key(id, part)).await {
        Ok(body) => return Ok(body),
        Err(error) => error,
    };
    let profile = caller.access.profile();
    if profile.admin {
        return store
            .output_any_owner(&part.base_key(id))
            .await
            .map_err(|e| e.to_string());
    }
    if let Ok(record) = store.get(id).await
        && record.profile != profile.name
    {
        let knock = crate::door::Knock::new(caller.clone(), id.to_string());
        gateway.door().record_line(
            &knock,
            crate::audit::Subject::Output,
            &format!("{id}/{}", part.as_str()),
            false,
            "stored outputs are readable only by the profile that produced them (or an admin profile)",
            None,
        );
    }
    Err(format!(
        "{error}. Outputs are readable only by the caller that produced them (its token or user, in any session; without auth, its MCP session) under its profile (`{}`), and by admin profiles.",
        profile.name
    ))
}

/// Execution statistics for `sandgate://stats`, when there is a store: the caller's
/// profile's, or every profile's for an admin.
pub async fn stats(gateway: &Gateway, caller: &Caller) -> Option<Value> {
    let store = gateway.chain()?.store.clone()?;
    let profile = caller.access.profile();
    store
        .stats((!profile.admin).then_some(profile.name.as_str()))
        .await
        .ok()
        .and_then(|s| serde_json::to_value(s).ok())
}
