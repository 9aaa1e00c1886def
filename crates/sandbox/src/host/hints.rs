//! Turning a guest error into something a model can act on: the kind, the position in its own
//! code, and a hint for the mistakes models make most (a variable shadowing a backend, a
//! misspelled tool, a bare tool name, a meta-tool called from code, `fetch`/`require`/`import`,
//! a result that cannot be serialized, and limit hits).

mod expressions;
mod persisted;

use crate::wire::protocol::{BackendCondition, Fault, GuestError, ToolBinding};
use crate::host::result::{ErrorKind, ExecError};
use crate::host::transpile::PositionMap;


/// The longest declaration a hint quotes; a longer one is left to `tool_info`.
const MAX_DECLARATION_IN_HINT: usize = 3000;

/// What the hint builder knows about the execution.
pub struct HintContext<'a> {
    /// The user's source.
    pub source: &'a str,
    /// The tools the code could call.
    pub tools: &'a [ToolBinding],
    /// Host function names.
    pub host_functions: &'a [String],
    /// Generated → source positions.
    pub positions: &'a PositionMap,
    /// The tool whose failure ended the execution, when that is known for sure (the only
    /// tool whose calls failed).
    pub failed_tool: Option<&'a ToolBinding>,
    /// What the failed call's backend was, when it failed because of it.
    pub failed_condition: Option<BackendCondition>,
    /// Tools the model calls outside code (the embedder's meta-tools).
    pub outside_tools: &'a [String],
}

/// Classifies a guest error and attaches position and hint.
pub fn explain(error: &GuestError, cx: &HintContext) -> ExecError {
    if out_of_memory_without_error_object(error, cx.source) {
        let message = "out of memory: the execution exhausted its heap (so completely that not even an error object could be made)".to_string();
        return ExecError {
            kind: ErrorKind::Memory,
            message,
            line: None,
            column: None,
            hint: hint(ErrorKind::Memory, error, cx, None),
            fault: None,
        };
    }
    let kind = match error.kind {
        // The worker's classification: a failed call's kind (see `FailureKind`), a limit, or
        // code QuickJS could not compile (a `SyntaxError` thrown while the code runs, by
        // `JSON.parse` of text that is not JSON, is a runtime error).
        Some(kind) => kind,
        // A result with `isError`, thrown by the preamble as a ToolError.
        None if error.name == "ToolError" => ErrorKind::ToolFailed,
        None => ErrorKind::Runtime,
    };
    let (line, mut column) = crate::host::stacks::first_user_position(&error.stack, cx.positions)
        .map_or((None, None), |(l, c)| (Some(l), Some(c)));
    // A failed call points at the call, not at whatever argument QuickJS evaluated last.
    if let (
        ErrorKind::ToolFailed
        | ErrorKind::ToolDenied
        | ErrorKind::ToolHeld
        | ErrorKind::SignInRequired,
        Some(tool),
        Some((l, c)),
    ) =
        (kind, cx.failed_tool, line.zip(column))
    {
        let callee = format!("{}.{}", tool.js_backend, tool.js_tool);
        column = expressions::call_column(cx.source, l, c, &callee).or(column);
    }
    // A property read from nothing points at what it was read from.
    if let (ErrorKind::Runtime, Some(Fault::NullishRead { property, .. }), Some((l, c))) =
        (kind, &error.fault, line.zip(column))
    {
        column = expressions::holder_column(cx.source, l, c, property).or(column);
    }
    // A name no scope declares points at the name.
    if let (ErrorKind::Runtime, Some(Fault::NotDefined { name }), Some((l, c))) =
        (kind, &error.fault, line.zip(column))
    {
        column = expressions::name_column(cx.source, l, c, name).or(column);
    }
    // An error the code constructs and throws points at its `throw`.
    if let (ErrorKind::Runtime, Some((l, c))) = (kind, line.zip(column)) {
        column = expressions::throw_column(cx.source, l, c, &error.name).or(column);
    }
    // QuickJS does not say what was not a function; the source at the error's position does.
    let not_a_function = (kind == ErrorKind::Runtime && error.fault == Some(Fault::NotAFunction))
        .then(|| line.zip(column))
        .flatten()
        .and_then(|(l, c)| expressions::callee_at(cx.source, l, c));
    let message = match (kind, not_a_function) {
        (_, Some(expression)) => format!("{}: {expression} is not a function", error.name),
        (
            ErrorKind::Runtime
            | ErrorKind::Syntax
            | ErrorKind::ToolFailed
            | ErrorKind::ToolDenied
            | ErrorKind::ToolHeld
            | ErrorKind::SignInRequired,
            None,
        ) => {
            format!("{}: {}", error.name, error.message)
        }
        _ => error.message.clone(),
    };
    ExecError {
        kind,
        message,
        line,
        column,
        hint: hint(kind, error, cx, line.zip(column)),
        fault: error.fault.clone(),
    }
}

/// QuickJS reports an exhausted heap as `null` being thrown when it cannot even allocate the
/// error object. The user's own `throw null` looks the same, so code that could throw or
/// reject with nothing is given the benefit of the doubt.
fn out_of_memory_without_error_object(error: &GuestError, source: &str) -> bool {
    let bare = error.kind.is_none()
        && error.stack.is_empty()
        && (error.message == "uncaught null" || error.message == "uncaught undefined");
    let user_could_throw_nothing = [
        "throw null",
        "throw undefined",
        "throw void",
        "throw;",
        "reject(",
        "Promise.reject",
    ]
    .iter()
    .any(|pattern| source.contains(pattern));
    bare && !user_could_throw_nothing
}

/// `at`: where the error happened in the user's code, if known.
fn hint(
    kind: ErrorKind,
    error: &GuestError,
    cx: &HintContext,
    at: Option<(u32, u32)>,
) -> Option<String> {
    let message = error.message.as_str();
    match kind {
        ErrorKind::Timeout => Some("The code ran out of time. Look for an endless loop; run independent calls together with Promise.all; or ask for fewer items per call.".into()),
        ErrorKind::Memory => Some("The code used too much memory. Process data in smaller pieces and keep only the fields you need instead of building large arrays or strings.".into()),
        ErrorKind::Stack => Some("The call stack overflowed, usually from recursion without an end. Check the base case, or use a loop.".into()),
        ErrorKind::Busy => Some("None of the code ran, so it is safe to run again: retry shortly, or run fewer executions at once.".into()),
        ErrorKind::OutputLimit => Some("Return less: pick the fields you need (e.g. items.map(i => ({ id: i.id, title: i.title }))) or a count, not whole objects.".into()),
        ErrorKind::ToolDenied if error.name == "ApprovalDenied" => Some("A person did not approve the call (they said no, did not answer in time, or this client cannot ask them); the message says which. The call did not run. Catch it to go on without it: try { ... } catch (e) { if (e instanceof ApprovalDenied) ... }.".into()),
        ErrorKind::ToolDenied => Some("The gateway's policy refused it; the message names the rule and where an operator changes it. Use what this caller is granted: search_tools lists its tools.".into()),
        ErrorKind::ToolFailed => tool_failed_hint(message, cx.failed_tool, cx.failed_condition),
        ErrorKind::ToolHeld => Some("The tool's definition waits for a person's review (the gateway holds a tool whose description or parameters changed, or that is new), so the call was not sent; retrying will not help until an operator decides. Use another tool, or tell the user which tool is held. Catch it to go on without it: catch (e) { if (e.kind === \"tool_held\") ... }.".into()),
        ErrorKind::SignInRequired => Some("The backend takes each user's own sign-in, and this user has not signed in (or did not in time); the call was not sent. Tell the user to sign in: the console's Credentials page, Connect beside the backend (the message names it), then run the code again. Catch it to go on without it: catch (e) { if (e.kind === \"sign_in_required\") ... }.".into()),
        ErrorKind::Runtime => runtime_hint(error, cx, at).or_else(|| call_site(error, cx)),
        _ => None,
    }
}

/// Where an error thrown inside a function was called from: "Thrown in `fail`, called at line
/// 5, column 1." (innermost call first, at most three), when the stack says so.
fn call_site(error: &GuestError, cx: &HintContext) -> Option<String> {
    const SHOWN: usize = 3;
    let frames = crate::host::stacks::user_frames(&error.stack, cx.positions);
    let (Some((Some(thrower), _, _)), Some(_)) = (frames.first(), frames.get(1)) else {
        return None;
    };
    let calls: Vec<String> = frames
        .windows(2)
        .take(SHOWN)
        .map(|pair| {
            let (callee, (caller, line, column)) = (&pair[0].0, &pair[1]);
            let callee = callee.as_deref().unwrap_or("the function");
            // QuickJS places a call at its last argument; the user looks for the callee.
            let column =
                expressions::call_column(cx.source, *line, *column, callee).unwrap_or(*column);
            let caller = caller
                .as_deref()
                .map(|name| format!(" in `{name}`"))
                .unwrap_or_default();
            format!("`{callee}` was called at line {line}, column {column}{caller}")
        })
        .collect();
    Some(format!("Thrown in `{thrower}`; {}.", calls.join("; ")))
}

fn tool_failed_hint(
    message: &str,
    tool: Option<&ToolBinding>,
    condition: Option<BackendCondition>,
) -> Option<String> {
    // Refused before it left: there is no output to read (`wire::errors::arguments_too_large`).
    if message.contains(crate::wire::errors::NOT_SENT) {
        return Some("Nothing was sent, so there is no output to read. Send less per call: split the data over several calls, or pass a reference the tool can read (a path, an id, a URL) instead of the content.".into());
    }
    if rejected_arguments(message) {
        return Some(match tool {
            Some(tool)
                if !tool.declaration.is_empty()
                    && tool.declaration.chars().count() <= MAX_DECLARATION_IN_HINT =>
            {
                format!(
                    "The tool rejected its arguments. {}.{} is declared as:\n{}\nPass arguments that match it.",
                    tool.js_backend, tool.js_tool, tool.declaration
                )
            }
            Some(tool) => format!(
                "The tool rejected its arguments. Check them against tool_info(\"{}.{}\").",
                tool.backend, tool.name
            ),
            None => "The tool rejected its arguments. Check them against its declaration: tool_info, or __getToolInterface(\"backend.tool\") in code.".into(),
        });
    }
    match condition {
        Some(BackendCondition::Starting | BackendCondition::Restarting) => {
            return Some("The backend is not ready yet. Retry in a few seconds; its status is in sandgate://backend/<name>.".into());
        }
        Some(BackendCondition::Unavailable) => {
            return Some("The backend is down. Its status and last error are in sandgate://backend/<name>; use another tool meanwhile.".into());
        }
        Some(BackendCondition::Unknown) | None => {}
    }
    Some("Catch it with try { ... } catch (e) { if (e instanceof ToolError) ... } to handle the failure in code; e.tool names the tool and e.content has its output.".into())
}

/// Whether a tool's failure says its arguments were wrong: JSON-RPC's "invalid params" code,
/// the gateway's own check ("invalid arguments"), or the wording MCP servers use for a failed
/// schema check.
fn rejected_arguments(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "-32602",
        "invalid arguments",
        "invalid params",
        "input validation error",
        // Pydantic's words, as Python (FastMCP) servers answer a call in an `isError` result.
        "validation error for",
    ]
    .iter()
    .any(|sign| lower.contains(sign))
}

fn runtime_hint(error: &GuestError, cx: &HintContext, at: Option<(u32, u32)>) -> Option<String> {
    let message = error.message.as_str();
    let fault = error.fault.as_ref();
    if let Some(Fault::NotInitialized { name }) = fault {
        let name = name.as_str();
        if backend_names(cx).any(|b| b == name) {
            return Some(format!(
                "`{name}` is a backend, but this code also declares a variable named `{name}`, which hides it (and is not ready yet where it is used). Rename the variable, e.g. `const {name}Result = await {name}.some_tool(...)`."
            ));
        }
        return Some(format!(
            "`{name}` is used before its declaration runs; move the declaration up."
        ));
    }
    if let Some(Fault::NotDefined { name }) = fault {
        return Some(not_defined_hint(name, cx));
    }
    if error.name == "SyntaxError" && cx.source.contains("JSON.parse") {
        return Some("JSON.parse was given text that is not JSON. Tool results arrive already parsed: JSON text as an object or array, any other text as a string, so they need no JSON.parse.".into());
    }
    if message.contains("circular") {
        return Some("The returned value refers to itself, which JSON cannot express. Return a plain copy of the fields you need.".into());
    }
    if message.contains("BigInt") {
        return Some(
            "JSON has no BigInt. Convert it first: String(value), or Number(value) if it fits."
                .into(),
        );
    }
    if let Some(hint) = positional_arguments_hint(message, cx) {
        return Some(hint);
    }
    if fault == Some(&Fault::NotAFunction) && unawaited_fetch(cx.source) {
        return Some("`fetch(...)` returns a Promise of the Response: `await fetch(url).json()` calls `.json()` on the Promise. Write `(await fetch(url)).json()`, or `const res = await fetch(url); await res.json()`.".into());
    }
    if matches!(fault, Some(Fault::NotAFunction | Fault::NullishRead { .. })) {
        return unknown_member_hint(cx)
            .or_else(|| unawaited_hint(cx, at))
            .or_else(|| persisted::hint(error, cx, at))
            .or_else(|| {
            let shape = "If it came from a tool, check the shape of its result: results follow the tool's declared output type (tool_info, or __getToolInterface(\"backend.tool\") in code); a tool without one returns text or its content array.";
            Some(match undefined_holder(error, cx, at) {
                // `res.content[0].text` on a result that is already the text.
                Some((holder, _, _)) if holder == "content" || holder.ends_with(".content") => format!(
                    "`{holder}` is undefined because a tool's result arrives already mapped: a single text item is the text itself (JSON text is parsed into its value), so read the result directly instead of `.content[0].text`. For the whole MCP result, call the tool with `.raw(...)`."
                ),
                Some((holder, property, nothing)) => format!(
                    "`{holder}` is {nothing}, so `{property}` cannot be read from it. {shape}"
                ),
                None => format!("A value is not what the code expects. {shape}"),
            })
        });
    }
    None
}

/// Whether the code reads a body from `fetch(...)`'s Promise (`await fetch(url).json()`): a
/// `.json(`, `.text(` or `.arrayBuffer(` right after the call's own closing parenthesis
/// (`(await fetch(url)).json()` has a `)` there instead).
fn unawaited_fetch(source: &str) -> bool {
    source.match_indices("fetch(").any(|(at, _)| {
        let bytes = source.as_bytes();
        let mut depth = 0usize;
        let mut end = None;
        for (i, &b) in bytes.iter().enumerate().skip(at + "fetch".len()) {
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        end.is_some_and(|end| {
            let after = &source[end..];
            [".json(", ".text(", ".arrayBuffer("]
                .iter()
                .any(|read| after.starts_with(read))
        })
    })
}

fn not_defined_hint(name: &str, cx: &HintContext) -> String {
    match name {
        "fetch" | "XMLHttpRequest" | "WebSocket" => return "There is no network access in this execution: `fetch` exists only when the caller's profile grants network hosts. Use a backend tool that fetches (search_tools with \"fetch url\" or \"http request\").".into(),
        "require" | "module" | "exports" => return "There are no modules in the sandbox. Backends are globals: call them directly, e.g. `await backend.tool({...})`.".into(),
        "process" | "Deno" | "Bun" => return "There is no process or runtime object. Files (`fs`) and environment variables (`env.get`) exist only when the caller's profile grants them; otherwise pass data in through tool calls or the `context` global.".into(),
        // `import fs from "fs"` where `fs` is a backend: the model meant the backend.
        "fs" | "env" if backend_names(cx).any(|b| b == name) => return format!("`{name}` here is a backend, not Node's `{name}` module: call its tools directly, without an import, e.g. `await {name}.{}(...)` (search_tools or __interfaces lists them).", cx.tools.iter().find(|t| t.js_backend == name).map_or("some_tool", |t| t.js_tool.as_str())),
        "fs" | "env" => return format!("There is no `{name}` in this execution: the caller's profile grants no {}. Ask the operator for a grant, or use a backend tool that does it.", if name == "fs" { "files (`fs` roots)" } else { "environment variables (`env`)" }),
        "state" => return "There is no `state` in this execution: the caller's profile keeps no state between executions (`state = false`). Pass what the next execution needs through your reply.".into(),
        // What browsers and Node keep between runs: here, what `state` is for.
        "localStorage" | "sessionStorage" | "indexedDB" | "caches" => return if has_state(cx) {
            format!("There is no `{name}`. Values that must outlive this execution go in `state`: `await state.set(key, value, {{ ttl: seconds }})` keeps JSON (a Date comes back as its ISO text), `await state.get(key)` reads it in a later execution, `state.delete(key)`, `state.keys()`. Globals and module-level variables do not outlive an execution.")
        } else {
            format!("There is no `{name}`, and this caller's profile keeps no state between executions (`state = false`): pass what the next execution needs through your reply.")
        },
        "axios" | "got" | "superagent" => return if cx.host_functions.iter().any(|f| f == "fetch") {
            "There are no modules in the sandbox; use `await fetch(url, init)`, which this execution has.".into()
        } else {
            "There are no modules and no network in this execution; use a backend tool that fetches (search_tools with \"http request\").".into()
        },
        "Buffer" => return "There is no Buffer: use TextEncoder and TextDecoder for bytes, and btoa and atob for base64.".into(),
        "setImmediate" => return "There is no setImmediate: use `setTimeout(fn, 0)`, or `await null` to let other work run.".into(),
        "__dirname" | "__filename" => return "There are no module paths: fs takes paths beneath the roots the caller's profile grants.".into(),
        _ => {}
    }
    if cx.outside_tools.iter().any(|t| t == name) {
        return format!(
            "`{name}` is one of sandgate's meta-tools, callable only by the model, not from code. In code, use __interfaces or __getToolInterface(\"backend.tool\") to inspect tools, and call backend tools directly."
        );
    }
    let owners: Vec<&ToolBinding> = cx
        .tools
        .iter()
        .filter(|t| t.js_tool == name || t.name == name)
        .collect();
    if !owners.is_empty() {
        let calls: Vec<String> = owners
            .iter()
            .map(|t| format!("{}.{}(...)", t.js_backend, t.js_tool))
            .collect();
        return format!(
            "`{name}` is a tool, not a global: call it through its backend, as {}.",
            calls.join(" or ")
        );
    }
    let known: Vec<String> = backend_names(cx)
        .map(str::to_string)
        .chain(cx.host_functions.iter().cloned())
        .collect();
    match closest(name, known.iter().map(String::as_str)) {
        Some(best) => format!(
            "Did you mean `{best}`? Available backends: {}.",
            list(backend_names(cx))
        ),
        None if known.is_empty() => "No backends are available to this execution.".into(),
        None => format!(
            "No backend or global is named `{name}`. Available backends: {}.",
            list(backend_names(cx))
        ),
    }
}

/// For `backend.tool("text")`: the tool takes one object of named arguments; names them from
/// its declaration.
fn positional_arguments_hint(message: &str, cx: &HintContext) -> Option<String> {
    let qualified = message
        .split_once(" takes one object of named arguments")?
        .0
        .rsplit(' ')
        .next()?;
    let (backend, name) = qualified.split_once('.')?;
    let tool = cx
        .tools
        .iter()
        .find(|t| t.js_backend == backend && t.js_tool == name)?;
    let parameters = declared_parameters(&tool.declaration);
    if parameters.is_empty() {
        return Some(format!(
            "Pass the arguments as one object with named fields: `{qualified}({{ ... }})`; tool_info shows its fields."
        ));
    }
    let fields: Vec<String> = parameters.iter().map(|p| format!("{p}: …")).collect();
    Some(format!(
        "Pass the arguments by name, as one object: `{qualified}({{ {} }})`.",
        fields.join(", ")
    ))
}

/// The parameters a tool's TypeScript declaration lists: the top-level property names of its
/// first `{ ... }` (the arguments' interface), comments skipped.
fn declared_parameters(declaration: &str) -> Vec<String> {
    let mut text = String::with_capacity(declaration.len());
    let mut rest = declaration;
    // Comments out first (descriptions may hold braces and colons).
    while let Some(at) = rest.find("/*") {
        text.push_str(&rest[..at]);
        rest = rest[at..]
            .find("*/")
            .map_or("", |end| &rest[at + end + 2..]);
    }
    text.push_str(rest);
    let text: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    // The arguments' type: an interface named after `args:` (as the catalog writes it, inside
    // the backend's namespace), an object literal right there, or else the first `{`.
    let args_type = text.find("args").and_then(|at| {
        let rest = text[at + 4..]
            .trim_start()
            .trim_start_matches('?')
            .trim_start();
        let rest = rest.strip_prefix(':')?.trim_start();
        if rest.starts_with('{') {
            return Some(text.len() - rest.len());
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let interface = format!("interface {name}");
        let declared = text
            .find(&format!("{interface} {{"))
            .or_else(|| text.find(&format!("{interface}{{")))?;
        text[declared..].find('{').map(|brace| declared + brace)
    });
    let Some(open) = args_type.or_else(|| text.find('{')) else {
        return vec![];
    };
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut expecting_name = true;
    let chars: Vec<char> = text[open..].chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '(' | '[' => {
                depth += 1;
                expecting_name = depth == 1;
            }
            '}' | ')' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            ';' | ',' | '\n' if depth == 1 => expecting_name = true,
            c if depth == 1
                && expecting_name
                && (c.is_alphanumeric() || c == '_' || c == '$' || c == '"' || c == '\'') =>
            {
                let mut name = String::new();
                if c == '"' || c == '\'' {
                    i += 1;
                    while i < chars.len() && chars[i] != c {
                        name.push(chars[i]);
                        i += 1;
                    }
                } else {
                    while i < chars.len()
                        && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                    {
                        name.push(chars[i]);
                        i += 1;
                    }
                    i -= 1;
                }
                let mut j = i + 1;
                while j < chars.len() && (chars[j] == ' ' || chars[j] == '?') {
                    j += 1;
                }
                if chars.get(j) == Some(&':') && !name.is_empty() {
                    names.push(name);
                }
                expecting_name = false;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// For a property read from `undefined` or `null`: the expression on the error's line that
/// the property was read from, with the property and what the holder was.
fn undefined_holder<'s>(
    error: &'s GuestError,
    cx: &HintContext<'s>,
    at: Option<(u32, u32)>,
) -> Option<(&'s str, &'s str, &'static str)> {
    let (line, _) = at?;
    let Some(Fault::NullishRead { property, of }) = &error.fault else {
        return None;
    };
    let holder = expressions::holder_of(cx.source, line, property)?;
    Some((holder, property, of.as_str()))
}

/// For a Promise used as a result: the failing expression's variable was assigned from a
/// tool call without `await`.
fn unawaited_hint(cx: &HintContext, at: Option<(u32, u32)>) -> Option<String> {
    let (line, column) = at?;
    let expression = expressions::expression_at(cx.source, line, column)?;
    let variable = expression.split(['.', '?']).next()?;
    let backends: Vec<&str> = backend_names(cx).collect();
    if let Some(call) = expressions::unawaited_call(cx.source, variable, &backends) {
        return Some(format!(
            "`{variable}` holds a Promise, not the tool's result: `{call}(...)` was called without `await`. Write `await {call}(...)`."
        ));
    }
    // The host capabilities answer with Promises too (`fs.readFile`, `env.get`, `state.get`).
    let spaces: Vec<&str> = cx
        .host_functions
        .iter()
        .filter_map(|f| f.split_once('.').map(|(space, _)| space))
        .collect();
    let call = expressions::unawaited_call(cx.source, variable, &spaces)?;
    Some(format!(
        "`{variable}` holds a Promise, not the value: `{call}(...)` was called without `await`. Write `await {call}(...)`."
    ))
}

/// For `backend.misspelled(...)` or `mcp.nobackend.tool(...)`: finds the member in the source
/// that names nothing, and suggests the closest real name.
/// Whether the execution has `state` (the caller's profile keeps it).
fn has_state(cx: &HintContext) -> bool {
    cx.host_functions.iter().any(|f| f.starts_with("state."))
}

/// The methods of `state`, and the names models reach for from the Web Storage API.
const STATE_METHODS: &[&str] = &["get", "set", "delete", "keys"];

fn unknown_member_hint(cx: &HintContext) -> Option<String> {
    for (object, member) in member_accesses(cx.source) {
        if object == "state" && has_state(cx) && !STATE_METHODS.contains(&member) {
            let meant = match member {
                "getItem" | "read" | "load" | "fetch" => "`await state.get(key)`",
                "setItem" | "put" | "write" | "save" | "store" => {
                    "`await state.set(key, value, { ttl: seconds })`"
                }
                "removeItem" | "remove" | "del" | "clear" => "`await state.delete(key)`",
                _ => "`await state.get(key)`, `state.set(key, value)`",
            };
            return Some(format!(
                "`state` has no `{member}`: it has get, set, delete and keys, each awaited. Write {meant}."
            ));
        }
        if object == "mcp" || object == "tools" {
            if !backend_names(cx).any(|b| b == member) {
                let best = closest(member, backend_names(cx))
                    .map(|b| format!(" Did you mean `{object}.{b}`?"))
                    .unwrap_or_default();
                return Some(format!(
                    "`{object}.{member}` is not a backend.{best} Backends: {}.",
                    list(backend_names(cx))
                ));
            }
            continue;
        }
        let tools: Vec<&ToolBinding> = cx
            .tools
            .iter()
            .filter(|t| t.js_backend == object || t.backend == object)
            .collect();
        if tools.is_empty()
            || tools
                .iter()
                .any(|t| t.js_tool == member || t.name == member)
            || member == "raw"
        {
            continue;
        }
        // A doubled prefix (`everything.everything_echo`) or another case (`everything.Echo`).
        let unprefixed = member
            .strip_prefix(object)
            .map(|rest| rest.trim_start_matches(['_', '.']));
        let meant = tools.iter().find(|t| {
            Some(t.js_tool.as_str()) == unprefixed
                || Some(t.name.as_str()) == unprefixed
                || t.js_tool.eq_ignore_ascii_case(member)
                || t.name.eq_ignore_ascii_case(member)
        });
        if let Some(meant) = meant {
            return Some(format!(
                "`{object}` has no tool `{member}`. Did you mean `{object}.{}`?",
                meant.js_tool
            ));
        }
        // A tool that says it is deprecated is offered only when nothing else is close.
        let best = closest(
            member,
            tools
                .iter()
                .filter(|t| !says_deprecated(t))
                .map(|t| t.js_tool.as_str()),
        )
        .or_else(|| closest(member, tools.iter().map(|t| t.js_tool.as_str())));
        return Some(match best {
            Some(best) => {
                format!("`{object}` has no tool `{member}`. Did you mean `{object}.{best}`?")
            }
            None => format!(
                "`{object}` has no tool `{member}`. Its tools: {}.",
                list(tools.iter().map(|t| t.js_tool.as_str()))
            ),
        });
    }
    None
}

/// Whether a tool's declaration says it is deprecated (`DEPRECATED: Use read_text_file`).
fn says_deprecated(tool: &ToolBinding) -> bool {
    tool.declaration.contains("DEPRECATED") || tool.declaration.contains("Deprecated:")
}

/// Every `a.b` in the source where both sides are identifiers and `a` is where a chain starts
/// (or the backend after `mcp.` or `tools.`): in `res.tickets.map`, `tickets` is a property of
/// a result, not the backend of that name, and `map` is no tool of it.
fn member_accesses(source: &str) -> Vec<(&str, &str)> {
    let bytes = source.as_bytes();
    let is_ident = expressions::is_ident;
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || (!is_ident(bytes[i - 1]) && bytes[i - 1] != b'.')) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let head = &source[start..i];
            let mut object = head;
            let mut depth = 0;
            while i < bytes.len()
                && bytes[i] == b'.'
                && i + 1 < bytes.len()
                && is_ident(bytes[i + 1])
            {
                let member_start = i + 1;
                i += 1;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                let member = &source[member_start..i];
                if depth == 0 || (depth == 1 && (head == "mcp" || head == "tools")) {
                    found.push((object, member));
                }
                object = member;
                depth += 1;
            }
        } else {
            i += 1;
        }
    }
    found
}

fn backend_names<'a>(cx: &'a HintContext) -> impl Iterator<Item = &'a str> + 'a {
    let mut seen: Vec<&str> = Vec::new();
    cx.tools.iter().filter_map(move |t| {
        if seen.contains(&t.js_backend.as_str()) {
            None
        } else {
            seen.push(&t.js_backend);
            Some(t.js_backend.as_str())
        }
    })
}

fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| {
            (
                strsim::jaro_winkler(&name.to_lowercase(), &c.to_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parameters_a_declaration_lists() {
        let declaration = "interface EchoInput {\n  /** Message to echo: {not a field} */\n  message: string;\n  count?: number;\n  'odd-key': boolean;\n  nested: { inner: string; other: Array<string> };\n  callback: (x: number) => void;\n}\nfunction echo(args: EchoInput): Promise<unknown>;";
        assert_eq!(
            declared_parameters(declaration),
            ["message", "count", "odd-key", "nested", "callback"]
        );
        assert!(declared_parameters("function ping(args?: {}): Promise<unknown>;").is_empty());
        // As the catalog writes it: inside the backend's namespace.
        let namespaced = "declare namespace everything {\n  interface EverythingEchoInput {\n    /** Message to echo */\n    message: string;\n  }\n  /** Echoes back the input string */\n  function echo(args: EverythingEchoInput): Promise<unknown>;\n}\n";
        assert_eq!(declared_parameters(namespaced), ["message"]);
        assert_eq!(
            declared_parameters("function f(args: { a: number; b?: string }): Promise<unknown>;"),
            ["a", "b"]
        );
    }

    #[test]
    fn finds_member_accesses() {
        assert_eq!(
            member_accesses("await github.create_issue({a: x.y})"),
            [("github", "create_issue"), ("x", "y")]
        );
        assert_eq!(
            member_accesses("mcp.gh.list()"),
            [("mcp", "gh"), ("gh", "list")]
        );
        // A property of a result that shares a backend's name is not that backend.
        assert_eq!(
            member_accesses("return res.tickets.map((t) => t.id)"),
            [("res", "tickets"), ("t", "id")]
        );
    }
}
