//! Hints for Python as models write it: what Monty (the Python subset the sandbox runs) lacks
//! and models reach for, and what to write instead. They match on the typed fault the worker
//! named (`wire::fault`) and on sandgate's own words; Monty's words are only shown.

use crate::wire::fault::Fault;

/// What the hint is about.
pub(super) struct Failure<'a> {
    /// The exception's type (`NameError`, `TypeError`, ...).
    pub name: &'a str,
    /// Its message.
    pub message: &'a str,
    /// The fault the worker named, if any.
    pub fault: Option<&'a Fault>,
    /// The code as sent.
    pub code: &'a str,
    /// The host functions the execution was granted (`fetch`, `fs.readFile`, ...).
    pub granted: &'a [String],
}

/// The modules Monty 0.0.23 has, for hints that say what exists.
const MODULES: &str = "asyncio (gather, and sleep), json, re, math, datetime, collections, itertools, functools, base64, typing, dataclasses, unicodedata";

/// The hint for a failed Python execution, if one applies.
pub(super) fn hint(failure: &Failure) -> Option<String> {
    let granted = |name: &str| failure.granted.iter().any(|g| g == name || g.starts_with(&format!("{name}.")));
    match failure.fault {
        Some(Fault::NoModule { module }) => return Some(no_module(module, granted("fetch"))),
        Some(Fault::Unsupported { feature }) => {
            return Some(match feature.as_str() {
                "open" | "os.listdir" | "os.path.exists" => not_defined("open", granted("fs")).unwrap_or_default(),
                f if f.starts_with("Path.") => not_defined("open", granted("fs")).unwrap_or_default(),
                f if f.starts_with("os.getenv") || f.starts_with("os.environ") => {
                    if granted("env") {
                        "Read a granted variable with `await env.get(\"NAME\")`.".into()
                    } else {
                        "The sandbox has no environment, and this profile grants no variables.".into()
                    }
                }
                _ => unsupported(feature),
            });
        }
        Some(Fault::NotDefined { name }) => {
            if let Some(hint) = not_defined(name, granted("fs")) {
                return Some(hint);
            }
        }
        _ => {}
    }
    if failure.name == "SyntaxError" && looks_like_typescript(failure.code) {
        return Some("This looks like TypeScript: send it without `language: \"python\"`, or write it in Python: `x = await backend.tool(name=value)`.".into());
    }
    if failure.message.contains("takes keyword arguments only") {
        return Some("Pass a tool's arguments as keywords, `backend.tool(name=value)`, or unpack a dict: `backend.tool(**args)`.".into());
    }
    if failure.name == "TypeError" && failure.message.contains("'await'") && failure.code.contains(".json()") {
        return Some("`resp.json()` and `resp.text()` are not awaited in Python: the body was read when `await fetch(...)` returned. Write `data = resp.json()`.".into());
    }
    if failure.name == "TypeError" && failure.message.contains("%") {
        return Some("Format with an f-string: f\"{name}: {value:.2f}\".".into());
    }
    if failure.name == "TypeError" && (failure.message.contains("coroutine") || failure.message.contains("future")) {
        return Some("A tool call gives a coroutine: `await` it (`x = await backend.tool(...)`), or await many at once with `await asyncio.gather(...)`.".into());
    }
    if failure.name == "MemoryError" {
        return Some("Hold less at once: ask tools for fewer items or pages, keep only the fields you need, and return a summary rather than everything.".into());
    }
    if failure.name == "TimeoutError" && failure.message.contains("computing") {
        return Some("Do less work per execution: split the data across executions (keep progress in `state` where granted), or return sooner.".into());
    }
    if failure.name == "KeyError" {
        return Some("The dict has no such key: read it with `.get(\"key\")`, or `print(list(value))` to see its keys.".into());
    }
    None
}

fn no_module(module: &str, fetch_granted: bool) -> String {
    match module {
        "requests" | "httpx" | "urllib" | "urllib3" | "aiohttp" | "http" => {
            if fetch_granted {
                "There is no HTTP library here: `resp = await fetch(url, method=\"POST\", headers={...}, json={...})`, then `resp.status`, `resp.json()`, `resp.text()`.".into()
            } else {
                "There is no HTTP library, and this profile grants no network: reach services through their MCP tools (search_tools).".into()
            }
        }
        "subprocess" | "shutil" | "socket" | "multiprocessing" | "threading" | "signal" | "ctypes" => {
            "The sandbox runs no programs, threads or sockets: call a backend's tool for that (search_tools).".into()
        }
        "pandas" | "numpy" | "scipy" | "polars" | "matplotlib" | "sklearn" | "bs4" | "yaml" | "pydantic" | "requests_html" => {
            "There are no third-party packages here: work with lists and dicts (sum, sorted, max, min, comprehensions); a mean is sum(xs) / len(xs).".into()
        }
        "time" => "There is no `time` module: `await asyncio.sleep(seconds)` waits, and `datetime.now()` reads the clock.".into(),
        "statistics" => format!("There is no `statistics` module: mean = sum(xs) / len(xs); median = sorted(xs)[len(xs) // 2]. This Python has {MODULES}."),
        "csv" => format!("There is no `csv` module: split the text, [line.split(\",\") for line in text.splitlines()]. This Python has {MODULES}."),
        "decimal" | "fractions" => format!("There is no `{module}` module: use int cents, or round(x, 2). This Python has {MODULES}."),
        other => format!("There is no `{other}` module in this Python (Monty, a subset of Python 3). It has {MODULES}."),
    }
}

fn unsupported(feature: &str) -> String {
    let is = |word: &str| feature.contains(word);
    if is("inheritance") || is("metaclass") {
        "Classes cannot inherit here: use a plain class without a base, a dict, or functions.".into()
    } else if is("match") {
        "There is no `match` here: use if / elif / else.".into()
    } else if is("yield") || is("generator") {
        "There are no generators here: build a list and return it.".into()
    } else if is("async for") || is("async with") || is("asynchronous") {
        "There is no `async for` or `async with` here: await the call, then loop over its result with a plain `for`.".into()
    } else if feature.starts_with("asyncio.") {
        "asyncio has gather and sleep here: `results = await asyncio.gather(*[backend.tool(x=i) for i in items])`.".into()
    } else if feature == "itertools.groupby" {
        "Group with a dict: groups = {}; then for x in xs: groups.setdefault(key(x), []).append(x).".into()
    } else if feature.starts_with("dataclasses.") {
        "Use a dict, or a dataclass with plain default values (no field(), no asdict()).".into()
    } else if feature.starts_with("time.") {
        "There is no `time` module: `await asyncio.sleep(seconds)` waits, and `datetime.now()` reads the clock.".into()
    } else {
        format!("Monty, the Python this sandbox runs (a subset of Python 3), does not have {feature}: write it another way.")
    }
}

fn not_defined(name: &str, fs_granted: bool) -> Option<String> {
    Some(match name {
        "open" if fs_granted => "There is no open(): `text = await fs.read_file(path)`, `await fs.write_file(path, text)`.".into(),
        "open" => "There is no open(), and this profile grants no files: reach them through a backend's tools (search_tools).".into(),
        "eval" | "exec" | "compile" | "__import__" | "globals" | "locals" | "vars" => {
            format!("The sandbox's Python has no `{name}`: write the code itself.")
        }
        "require" | "console" | "JSON" | "Promise" | "const" | "let" => {
            "This looks like TypeScript: send it without `language: \"python\"`.".into()
        }
        _ => return None,
    })
}

/// Whether code sent as Python reads like TypeScript.
pub(super) fn looks_like_typescript(code: &str) -> bool {
    let code = code.trim_start();
    ["const ", "let ", "=> ", "});", "function ", "return await ", "console.log(", "Promise.all("]
        .iter()
        .any(|mark| code.contains(mark))
}

/// Whether code sent as TypeScript reads like Python (for the TypeScript side's syntax errors).
pub fn looks_like_python(code: &str) -> bool {
    let lines: Vec<&str> = code.lines().map(str::trim_end).collect();
    let block = lines.iter().any(|l| {
        let t = l.trim_start();
        (t.starts_with("def ") || t.starts_with("for ") || t.starts_with("if ") || t.starts_with("elif ") || t.starts_with("try") || t.starts_with("except") || t.starts_with("with "))
            && t.ends_with(':')
    });
    let python_words = ["import asyncio", "print(", "asyncio.gather(", " elif ", "None", "True", "False", "f\""]
        .iter()
        .any(|w| code.contains(w));
    let keywords_call = code.contains("await ") && code.contains("=") && code.contains("(") && !code.contains("({");
    block || (python_words && keywords_call)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure<'a>(name: &'a str, message: &'a str, fault: Option<&'a Fault>, code: &'a str) -> Failure<'a> {
        Failure {
            name,
            message,
            fault,
            code,
            granted: &[],
        }
    }

    #[test]
    fn a_missing_module_says_what_to_write_instead() {
        let requests = Fault::NoModule { module: "requests".into() };
        let hint = hint(&failure("ModuleNotFoundError", "", Some(&requests), "import requests")).expect("a hint");
        assert!(hint.contains("grants no network"), "{hint}");
        let granted = ["fetch".to_string()];
        let with_fetch = hint_with(&Failure { granted: &granted, ..failure("ModuleNotFoundError", "", Some(&requests), "") });
        assert!(with_fetch.contains("await fetch(url"), "{with_fetch}");
        let time = Fault::NoModule { module: "time".into() };
        assert!(hint_with(&failure("", "", Some(&time), "")).contains("asyncio.sleep"));
        let pandas = Fault::NoModule { module: "pandas".into() };
        assert!(hint_with(&failure("", "", Some(&pandas), "")).contains("no third-party packages"));
    }

    fn hint_with(f: &Failure) -> String {
        hint(f).expect("a hint")
    }

    #[test]
    fn what_monty_lacks_is_named_with_what_to_write() {
        for (feature, says) in [
            ("class inheritance and metaclasses", "cannot inherit"),
            ("pattern matching (match statements)", "if / elif"),
            ("asyncio.create_task", "asyncio.gather"),
            ("itertools.groupby", "setdefault"),
        ] {
            let fault = Fault::Unsupported { feature: feature.into() };
            assert!(hint_with(&failure("", "", Some(&fault), "")).contains(says), "{feature}");
        }
    }

    #[test]
    fn typescript_sent_as_python_and_python_sent_as_typescript_are_recognised() {
        assert!(looks_like_typescript("const x = await memory.read_graph({});\nreturn x;"));
        assert!(!looks_like_typescript("x = await memory.read_graph()\nx"));
        assert!(looks_like_python("import asyncio\nr = await everything.echo(message='hi')\nprint(r)"));
        assert!(looks_like_python("for x in items:\n    print(x)"));
        assert!(!looks_like_python("const r = await everything.echo({message: 'hi'});\nreturn r;"));
        let hint = hint_with(&failure("SyntaxError", "", None, "const x = 1;"));
        assert!(hint.contains("TypeScript"), "{hint}");
    }
}
