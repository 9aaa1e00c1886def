//! The meta-tools the model sees instead of hundreds of backend tools.
//!
//! `search_tools` finds tools by what they do, `tool_info` gives one tool's TypeScript
//! declaration and an example call, and `list_tools_meta` pages through everything. Each
//! answers with readable text for the model and the same data as `structuredContent` for
//! programs. Bad arguments produce an `isError` result that says how to fix the call, because
//! a model reads those and retries; protocol errors would be hidden from it.
//!
//! `call_tool_chain` and `read_output` live in `chain`; they are listed and dispatched here
//! with the others.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use sandgate_catalog::{Catalog, CatalogError, Entry, Observed, PyDecl, TsDecl};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::chain::bounds::{bounded, short_text};
use crate::chain::{self, ChainArgs};
use crate::door::granted;
use crate::gateway::Gateway;
use crate::mcp::starting;
use crate::progress::ProgressSink;
use crate::runtime::Cancellation;

/// Most results `search_tools` returns.
pub const MAX_SEARCH_LIMIT: usize = 50;
/// Results `search_tools` returns when no limit is given.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Default page size of `list_tools_meta`.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Largest page size of `list_tools_meta`.
pub const MAX_PAGE_SIZE: usize = 200;

/// The names of the meta-tools, in listing order (the route table follows it: see `routes`).
pub const META_TOOLS: &[&str] = &[
    "search_tools",
    "tool_info",
    "list_tools_meta",
    "call_tool_chain",
    "read_output",
    "wait_execution",
];

/// What `call_tool_chain` tells the model about itself.
const CHAIN_DESCRIPTION: &str = "Run tools. `code` is TypeScript in which every backend is an object and every tool an async function \
(`await memory.read_graph({})`; names with dashes become underscores, originals stay reachable as globalThis[\"my-server\"][\"get-sum\"]). \
Loop, branch, fan out with Promise.all, catch ToolError, and `return` only what you need; console.log output comes back too. \
A single call can also be sent as JSON: {\"tool\": \"backend.tool\", \"arguments\": {...}}. No require or import. \
Large results are shortened (with `intent`, to the parts about it) and kept whole: read_output reads any part. \
For code that may run long (clients often give up after a minute), pass yield_after_ms (e.g. 20000): if it still runs then, \
the answer is its execution_id with status \"running\" and the logs and calls so far, and it keeps running; call wait_execution to get its result.";

/// `description`, saying which calls a person must approve first, when rules name any this
/// caller can reach (at most ten patterns are named). Backends still starting count: the
/// list may be read before they are ready.
fn with_approvals(gateway: &Gateway, caller: &Caller, description: String) -> String {
    let description = with_script_approvals(gateway, caller, description);
    let mut patterns: Vec<String> = caller.access.profile().approve.clone();
    for status in gateway.backends().statuses() {
        let ident = sandgate_catalog::sanitize_ident(&status.name);
        if caller.access.may_reach_backend(&status.name, &ident) {
            patterns.extend(gateway.backends().approval_patterns(&status.name));
        }
    }
    if patterns.is_empty() {
        return description;
    }
    patterns.sort();
    patterns.dedup();
    let more = patterns.len().saturating_sub(10);
    patterns.truncate(10);
    format!(
        "{description} Calls to {}{} need a person's approval first: such a call waits for the answer, and throws ApprovalDenied (catch it: e instanceof ApprovalDenied) when it is refused or not given in time; the other calls of the script go on meanwhile.",
        patterns.join(", "),
        if more > 0 {
            format!(" (and {more} more patterns)")
        } else {
            String::new()
        }
    )
}

/// `description`, saying which scripts a person approves before they run, when this caller's
/// rule (`approve_scripts`, else `[approvals] scripts`) asks about any.
fn with_script_approvals(gateway: &Gateway, caller: &Caller, description: String) -> String {
    let mode = caller
        .access
        .profile()
        .approve_scripts
        .unwrap_or(gateway.door().approvals().settings().scripts);
    let which = match mode {
        sandgate_policy::ScriptApproval::Never => return description,
        sandgate_policy::ScriptApproval::Writes => {
            "A script that names a tool that may write (or reaches tools by computed names) waits, before any of it runs, until a person approves it; name tools as backend.tool so the person sees them, and keep reads apart from writes so reads run at once"
        }
        sandgate_policy::ScriptApproval::Always => {
            "Every script waits, before any of it runs, until a person approves it"
        }
    };
    format!(
        "{description} {which}: a no answers with kind approval_denied, and none of it ran. A single JSON call is asked about only where a rule gates its tool."
    )
}

/// What `call_tool_chain` says of Python where the gateway runs it.
const PYTHON_DESCRIPTION: &str = "Python works too: send `language: \"python\"` (or code fenced as ```python). It runs on Monty, a subset of Python 3 (functions, comprehensions, f-strings, async/await, asyncio.gather, json, re, math, datetime; no classes with inheritance, no match, no generators, no third-party modules). Each backend is an object whose tools are async keyword-only functions: `await memory.read_graph()`, `await everything.get_sum(a=1, b=2)`, getattr(everything, \"get-sum\") for a name that is not an identifier; a failed call raises (catch Exception). The value of the last expression is the result; print() goes to the logs.";

/// What `call_tool_chain` says of `state` where the profile keeps it.
const STATE_DESCRIPTION: &str = "Values last between executions in `state`, this caller's own: await state.set(key, value, { ttl: seconds }) keeps a JSON value (default 1 day, at most 30; 64 KiB a value, 1,000 keys and 4 MiB in all), await state.get(key) reads it (undefined when absent or expired), state.delete(key), state.keys(). Keep what the next execution needs (fetched lists, ids, cursors) there rather than in your reply.";

/// Tool definitions for `tools/list`, as `caller` sees them. The search description names the
/// backends it can reach, so a client that rereads the list after `list_changed` learns what
/// is reachable without a call; `call_tool_chain` says which host capabilities it has.
pub fn definitions(gateway: &Gateway, caller: &Caller) -> Vec<Tool> {
    let catalog = gateway.view(&caller.access).catalog;
    let (state, capabilities): (Vec<String>, Vec<String>) = granted(&caller.access)
        .into_iter()
        .partition(|name| name.starts_with("state."));
    let chain_description = if capabilities.is_empty() {
        format!(
            "{CHAIN_DESCRIPTION} There is no fetch, fs or env: this profile grants no network, files or environment."
        )
    } else {
        format!(
            "{CHAIN_DESCRIPTION} This profile grants {}: fetch(url, init) answers with a Response (status, headers, text(), json()); await fs.readFile(path, {{encoding}}), fs.writeFile(path, data), fs.readdir(path) and fs.stat(path) work beneath the granted roots; await env.get(name) reads a granted variable. Anything else is refused with the rule that refused it.",
            capabilities.join(", ")
        )
    };
    let chain_description = if state.is_empty() {
        chain_description
    } else {
        format!("{chain_description} {STATE_DESCRIPTION}")
    };
    let chain_description = with_approvals(gateway, caller, chain_description);
    let python = caller.access.profile().languages.python
        && gateway
            .chain()
            .is_some_and(|runtime| runtime.sandbox.has(sandgate_sandbox::Engine::Monty));
    let chain_description = if python {
        format!("{chain_description} {PYTHON_DESCRIPTION}")
    } else {
        chain_description
    };
    let backends: Vec<String> = catalog
        .backend_idents()
        .keys()
        .map(|b| format!("{b} ({})", catalog.backend_tools(b).count()))
        .collect();
    let reachable = if backends.is_empty() {
        "no backends are connected yet".to_string()
    } else {
        backends.join(", ")
    };
    let tools = vec![
        tool(
            "search_tools",
            &format!(
                "Find backend tools by what they do. Returns each match's qualified name, a one-line description and a TypeScript call signature. Reachable backends (tool counts): {reachable}."
            ),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What you want to do, in words, e.g. \"create a github issue\""},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "description": "Most results to return (default 10)"},
                "detail": {"type": "string", "enum": ["summary", "signature", "full"], "description": "summary: names and descriptions; signature (default): plus call signatures; full: plus full TypeScript declarations"},
                "language": {"type": "string", "enum": ["typescript", "python"], "description": "The language of the signatures (default typescript)"}
            }, "required": ["query"], "additionalProperties": false}),
        ),
        tool(
            "tool_info",
            "Get one tool's full TypeScript declaration (argument and result types, documented) and an example call. Accepts qualified (backend.tool), bare or sanitized names.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "Tool name, e.g. \"memory.create_entities\""},
                "detail": {"type": "string", "enum": ["signature", "full"], "description": "signature: one line; full (default): declaration and example"},
                "language": {"type": "string", "enum": ["typescript", "python"], "description": "The language of the declaration (default typescript)"}
            }, "required": ["name"], "additionalProperties": false}),
        ),
        tool(
            "list_tools_meta",
            "List every reachable tool (name and one-line description), a page at a time.",
            json!({"type": "object", "properties": {
                "cursor": {"type": "string", "description": "nextCursor from the previous page"},
                "page_size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "description": "Tools per page (default 50)"}
            }, "additionalProperties": false}),
        ),
        tool(
            "call_tool_chain",
            &chain_description,
            json!({"type": "object", "properties": {
                "code": {"type": "string", "description": "TypeScript to run (top-level await and return allowed), or a JSON call as text: {\"tool\": \"backend.tool\", \"arguments\": {...}}"},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Stop after this many milliseconds (default and maximum: the gateway's limit, 30000 unless configured)"},
                "max_output_size": {"type": "integer", "minimum": 1, "description": "Characters of result to return (default 20000); the rest is kept for read_output"},
                "intent": {"type": "string", "description": "What you are looking for; a large text result keeps the paragraphs about it"},
                "force_sandbox": {"type": "boolean", "description": "Run in the sandbox even when a shortcut would give the same result (debugging)"},
                "allow_tools": {"type": "array", "items": {"type": "string"}, "description": "Narrow this execution to tools matching these backend.tool patterns (e.g. [\"memory.read_*\"]): drop write tools before running code that handles untrusted input. It never widens what your profile allows"},
                "yield_after_ms": {"type": "integer", "minimum": 0, "description": "Answer after this many milliseconds even if the code still runs (it runs on; wait_execution gets its result). The code's own time limit still applies"},
                "engine": {"type": "string", "enum": ["quickjs", "v8"], "description": "The JavaScript engine, where your profile allows both: v8 compiles (for heavy computation over large data), quickjs (usually the default) starts fastest"},
                "language": {"type": "string", "enum": ["typescript", "python"], "description": "The language of `code` (default typescript; code fenced as ```python is Python)"}
            }, "required": ["code"], "additionalProperties": false}),
        ),
        tool(
            "read_output",
            "Read a part of an execution's full result (or logs) that call_tool_chain shortened: any byte range, or the value at a JSON path.",
            json!({"type": "object", "properties": {
                "execution_id": {"type": "string", "description": "execution_id from call_tool_chain"},
                "part": {"type": "string", "enum": ["output", "logs", "error"], "description": "output (default), logs, or error (an error message too long to show whole)"},
                "offset": {"type": "integer", "minimum": 0, "description": "First byte to read (default 0)"},
                "length": {"type": "integer", "minimum": 1, "description": "Bytes to read (default and maximum 20000)"},
                "json_path": {"type": "string", "description": "Read only the value at this path of a JSON result, e.g. $.items[3].name"}
            }, "required": ["execution_id"], "additionalProperties": false}),
        ),
        tool(
            "wait_execution",
            "Wait for an execution that call_tool_chain answered as \"running\" (it was given yield_after_ms): returns its result, exactly as call_tool_chain would have, once it finishes, or, if it still runs after timeout_ms, its logs and calls so far again (call again to keep waiting). cancel: true stops it.",
            json!({"type": "object", "properties": {
                "execution_id": {"type": "string", "description": "execution_id from the running answer"},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": chain::detach::MAX_WAIT_MS, "description": "How long to wait (default 25000)"},
                "cancel": {"type": "boolean", "description": "Stop the execution instead of waiting for it"}
            }, "required": ["execution_id"], "additionalProperties": false}),
        ),
    ];
    tools
}

pub(crate) fn tool(name: &'static str, description: &str, schema: Value) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description.to_string(), Arc::new(schema))
}

/// `call_tool_chain`.
pub(crate) async fn run_chain(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
    progress: Option<ProgressSink>,
    cancel: &Cancellation,
) -> Result<CallToolResult, String> {
    let args = parse::<ChainArgs>("call_tool_chain", args)?;
    Ok(chain::call_tool_chain(gateway, caller, args, progress, cancel).await)
}

/// `wait_execution`.
pub(crate) async fn wait_execution(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
    cancel: &Cancellation,
) -> Result<CallToolResult, String> {
    let args = parse("wait_execution", args)?;
    chain::detach::wait_execution(gateway, caller, args, cancel).await
}

/// `read_output`.
pub(crate) async fn read_output(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
) -> Result<CallToolResult, String> {
    chain::read::read_output(gateway, caller, parse("read_output", args)?).await
}

/// `search_tools`, over what the caller sees now (naming the backends still starting).
pub(crate) async fn search(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
) -> Result<CallToolResult, String> {
    let (catalog, starting) = starting::meta_catalog(gateway, caller).await;
    let answer = search_tools(&catalog, &gateway.observed(), parse("search_tools", args)?);
    starting::noted(answer, &starting)
}

/// `tool_info`: a tool outside the caller's view is answered like a missing one; one of a
/// backend still starting says so.
pub(crate) async fn info(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
) -> Result<CallToolResult, String> {
    let (catalog, starting) = starting::meta_catalog(gateway, caller).await;
    let args = parse::<InfoArgs>("tool_info", args)?;
    let asked = args.name.clone();
    tool_info(&catalog, &gateway.observed(), args)
        .map_err(|e| {
            // A tool held as new is in no list; asked for by name, it is said to be held.
            crate::pins::held_by_name(gateway.backends().as_ref(), &caller.access, &asked)
                .unwrap_or(e)
        })
        .map_err(|e| crate::chain::ungranted::outside_view(gateway, caller, &asked, e))
        .map_err(|e| starting::lookup_error(e, &asked, &starting))
}

/// `list_tools_meta`, of what the caller sees now (naming the backends still starting).
pub(crate) async fn list(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    args: Value,
) -> Result<CallToolResult, String> {
    let (catalog, starting) = starting::meta_catalog(gateway, caller).await;
    let answer = list_tools_meta(&catalog, parse("list_tools_meta", args)?);
    starting::noted(answer, &starting)
}

fn parse<T: for<'de> Deserialize<'de>>(tool: &str, args: Value) -> Result<T, String> {
    serde_json::from_value(args)
        .map_err(|e| format!("invalid arguments for {tool}: {e}. Check the tool's input schema."))
}

fn ok(text: String, structured: Value) -> Result<CallToolResult, String> {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    Ok(result)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    limit: Option<usize>,
    detail: Option<String>,
    language: Option<String>,
}

/// A tool's declaration in the language the caller asked for (`typescript`, the default, or
/// `python`), and the fence its text goes in.
struct Declared {
    signature: String,
    declaration: String,
    example: String,
    fence: &'static str,
}

fn declared(
    entry: &Entry,
    observed: Option<&Observed>,
    language: Option<&str>,
) -> Result<Declared, String> {
    match language.map(str::to_ascii_lowercase).as_deref() {
        None | Some("typescript" | "ts") => {
            let decl = TsDecl::for_entry_observed(entry, observed);
            Ok(Declared {
                signature: decl.signature,
                declaration: decl.declaration,
                example: decl.example,
                fence: "ts",
            })
        }
        Some("python" | "py") => {
            let decl = PyDecl::for_entry_observed(entry, observed);
            Ok(Declared {
                signature: decl.signature,
                declaration: decl.declaration,
                example: decl.example,
                fence: "py",
            })
        }
        Some(other) => Err(format!(
            "language must be \"typescript\" or \"python\", not {other:?}"
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Detail {
    Summary,
    Signature,
    Full,
}

fn detail(value: Option<&str>, default: Detail) -> Result<Detail, String> {
    match value {
        None => Ok(default),
        Some("summary") => Ok(Detail::Summary),
        Some("signature") => Ok(Detail::Signature),
        Some("full") => Ok(Detail::Full),
        Some(other) => Err(format!(
            "detail must be \"summary\", \"signature\" or \"full\", not {other:?}"
        )),
    }
}

fn search_tools(
    catalog: &Catalog,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
    args: SearchArgs,
) -> Result<CallToolResult, String> {
    let query = short_text("query", &args.query)?.trim();
    if query.is_empty() {
        return Err("query is empty. Describe what you want to do, e.g. {\"query\": \"read a file\"}; or use list_tools_meta to see every tool.".into());
    }
    let limit = match args.limit {
        None => DEFAULT_SEARCH_LIMIT,
        Some(n @ 1..=MAX_SEARCH_LIMIT) => n,
        Some(n) => {
            return Err(format!(
                "limit must be between 1 and {MAX_SEARCH_LIMIT}, not {n}"
            ));
        }
    };
    let detail = detail(args.detail.as_deref(), Detail::Signature)?;
    let language = args.language.as_deref();
    // Checked before the search, so a bad language is an error even when nothing matches.
    if let Some(first) = catalog.entries().first() {
        declared(first, None, language)?;
    }
    let hits = catalog.search_index().search(query, limit);
    if hits.is_empty() {
        let text = if catalog.is_empty() {
            "No tools are available yet: no backend has connected. Read sandgate://backends for their status.".to_string()
        } else {
            format!(
                "No tool matches {query:?}. Try other words, or list_tools_meta to browse all {} tools.",
                catalog.len()
            )
        };
        return ok(text, json!({"query": query, "results": []}));
    }
    let mut text = format!("{} tool(s) match {query:?}:\n", hits.len());
    let mut results = Vec::with_capacity(hits.len());
    for hit in &hits {
        let entry = &catalog.entries()[hit.entry];
        let decl = declared(entry, observed(entry).as_ref(), language)?;
        text.push_str(&format!("\n- {} — {}\n", entry.qualified, one_line(entry)));
        let mut item = entry_json(entry);
        match detail {
            Detail::Summary => {}
            Detail::Signature => {
                let signature = shown(&decl.signature, SIGNATURE_SHOWN, entry, decl.fence);
                text.push_str(&format!("  {signature}\n"));
                item["signature"] = json!(signature);
            }
            Detail::Full => {
                let declaration =
                    shown(&decl.declaration, DECLARATION_SHOWN / 5, entry, decl.fence);
                text.push_str(&format!("{declaration}\n"));
                item["signature"] =
                    json!(shown(&decl.signature, SIGNATURE_SHOWN, entry, decl.fence));
                item["declaration"] = json!(declaration);
            }
        }
        item["score"] = json!((hit.score * 1000.0).round() / 1000.0);
        results.push(item);
    }
    text.push_str("\nCall tool_info with a name for its full declaration and an example.");
    ok(text, json!({"query": query, "results": results}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InfoArgs {
    name: String,
    detail: Option<String>,
    language: Option<String>,
}

fn tool_info(
    catalog: &Catalog,
    observed: &dyn Fn(&Entry) -> Option<Observed>,
    args: InfoArgs,
) -> Result<CallToolResult, String> {
    let detail = detail(args.detail.as_deref(), Detail::Full)?;
    let entry = resolve(catalog, &args.name)?;
    let seen = observed(entry).filter(|_| entry.spec.output_schema.is_none());
    let decl = declared(entry, seen.as_ref(), args.language.as_deref())?;
    let mut item = entry_json(entry);
    if let Some(seen) = &seen {
        item["returns"] = json!({"observed": true, "calls": seen.calls, "since": seen.since});
    }
    let signature = shown(&decl.signature, SIGNATURE_SHOWN, entry, decl.fence);
    item["signature"] = json!(signature);
    let text = if detail == Detail::Full {
        let declaration = shown(&decl.declaration, DECLARATION_SHOWN, entry, decl.fence);
        let example = shown(&decl.example, SIGNATURE_SHOWN, entry, decl.fence);
        item["declaration"] = json!(declaration);
        item["example"] = json!(example);
        let schema_bytes = serde_json::to_vec(&entry.spec.input_schema).map_or(0, |b| b.len());
        if schema_bytes <= SCHEMA_SHOWN_BYTES {
            item["inputSchema"] = entry.spec.input_schema.clone();
        } else {
            item["inputSchemaBytes"] = json!(schema_bytes);
        }
        if let Some(annotations) = &entry.spec.annotations {
            item["annotations"] = annotations.clone();
        }
        format!(
            "{} — {}\n\n```{fence}\n{declaration}```\n\nExample:\n```{fence}\n{example}\n```",
            entry.qualified,
            one_line(entry),
            fence = decl.fence,
        )
    } else {
        format!("{}\n  {signature}", entry.qualified)
    };
    ok(text, item)
}

/// Resolves a name, or explains the miss with "did you mean" and, for a meta-tool name, that
/// it is called directly rather than looked up.
fn resolve<'a>(catalog: &'a Catalog, name: &str) -> Result<&'a Entry, String> {
    let name = short_text("name", name)?;
    if META_TOOLS.contains(&name.trim()) {
        return Err(format!(
            "`{}` is one of sandgate's own meta-tools; call it directly. tool_info describes backend tools.",
            name.trim()
        ));
    }
    catalog.resolve(name).map_err(|e| match e {
        CatalogError::NotFound { .. } if catalog.is_empty() => {
            format!("{e} No backend has connected yet; read sandgate://backends for their status.")
        }
        other => other.to_string(),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    cursor: Option<String>,
    page_size: Option<usize>,
}

fn list_tools_meta(catalog: &Catalog, args: ListArgs) -> Result<CallToolResult, String> {
    let page_size = match args.page_size {
        None => DEFAULT_PAGE_SIZE,
        Some(n @ 1..=MAX_PAGE_SIZE) => n,
        Some(n) => {
            return Err(format!(
                "page_size must be between 1 and {MAX_PAGE_SIZE}, not {n}"
            ));
        }
    };
    let start = match args.cursor.as_deref() {
        None | Some("") => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= catalog.len())
            .ok_or_else(|| format!("cursor {cursor:?} is not one this gateway issued (the tool set may have changed); start again without a cursor"))?,
    };
    let page: Vec<&Entry> = catalog
        .entries()
        .iter()
        .skip(start)
        .take(page_size)
        .collect();
    let end = start + page.len();
    let next = (end < catalog.len()).then(|| end.to_string());
    let mut text = format!(
        "Tools {}–{} of {}:\n",
        if page.is_empty() { 0 } else { start + 1 },
        end,
        catalog.len()
    );
    for entry in &page {
        text.push_str(&format!("- {} — {}\n", entry.qualified, one_line(entry)));
    }
    if let Some(next) = &next {
        text.push_str(&format!(
            "\nMore: call list_tools_meta with cursor \"{next}\"."
        ));
    }
    ok(
        text,
        json!({"tools": page.iter().map(|e| entry_json(e)).collect::<Vec<_>>(), "total": catalog.len(), "nextCursor": next}),
    )
}

/// The most characters of a tool's one-line summary shown in listings.
const SUMMARY_SHOWN: usize = 300;
/// The most characters of a call signature shown per search hit.
const SIGNATURE_SHOWN: usize = 1_000;
/// The most characters of one declaration shown by `tool_info` (and per hit with
/// `detail: "full"`, a fifth of it).
const DECLARATION_SHOWN: usize = 20_000;
/// Largest input schema `tool_info` repeats in `structuredContent`, in JSON bytes; a larger
/// one is described by its declaration alone.
const SCHEMA_SHOWN_BYTES: usize = 20_000;

fn entry_json(entry: &Entry) -> Value {
    json!({"name": entry.qualified, "call": entry.js_qualified(), "backend": entry.spec.backend, "description": bounded(entry.summary(), SUMMARY_SHOWN).0})
}

fn one_line(entry: &Entry) -> String {
    match entry.summary() {
        "" => "(no description)".into(),
        s => bounded(s, SUMMARY_SHOWN).0,
    }
}

/// `text` within `max_chars`; when cut, it says where the whole is.
fn shown(text: &str, max_chars: usize, entry: &Entry, fence: &str) -> String {
    match bounded(text, max_chars) {
        (text, false) => text,
        (text, true) if fence == "py" => format!(
            "{text}\n# cut at {max_chars} characters; the whole declaration is in sandgate://types.pyi"
        ),
        (text, true) => format!(
            "{text}\n/* cut at {max_chars} characters; the whole declaration is in sandgate://types.d.ts, or __getToolInterface({:?}) in code */",
            entry.qualified
        ),
    }
}
