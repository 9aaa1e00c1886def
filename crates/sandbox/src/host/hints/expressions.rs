//! Reading the user's source around an error, for what QuickJS leaves out of its messages:
//! which expression was "not a function", which one was undefined when a property was read
//! from it, and whether a variable holds the Promise of a tool call made without `await`
//! (models' most common slip: `const r = backend.tool(...)`, then `r.items`). Text-based, and
//! run on the error path only.

/// Whether `b` can be part of a JavaScript identifier (ASCII only, which is what models write).
pub(super) fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Where the dotted chain (`a.b?.c`) that ends at byte `end` of `text` starts.
fn chain_start(text: &str, end: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = end;
    while start > 0 && (is_ident(bytes[start - 1]) || matches!(bytes[start - 1], b'.' | b'?')) {
        start -= 1;
    }
    start
}

/// Whether a chain starts with a name (not after `]` or `)`, as in `a[0].b` or `f().b`, which
/// have no name to give).
fn named(chain: &str) -> bool {
    chain
        .as_bytes()
        .first()
        .is_some_and(|&b| is_ident(b) && !b.is_ascii_digit())
}

/// Line `line` (1-based) of `source`.
fn line_of(source: &str, line: u32) -> Option<&str> {
    source.lines().nth(line.checked_sub(1)? as usize)
}

/// The byte offset in `text` of its `column`th (1-based) character.
fn offset_of(text: &str, column: u32) -> Option<usize> {
    text.char_indices()
        .nth(column.checked_sub(1)? as usize)
        .map(|(i, _)| i)
}

/// The dotted expression that ends at the identifier at `column` (1-based, in characters) of
/// `line` (1-based): `r.toUpperCase` for a QuickJS "not a function" at `toUpperCase`.
pub(super) fn expression_at(source: &str, line: u32, column: u32) -> Option<&str> {
    let text = line_of(source, line)?;
    let at = offset_of(text, column)?;
    let end = at + text[at..].bytes().take_while(|&b| is_ident(b)).count();
    let expression = &text[chain_start(text, at)..end];
    (end > at && named(expression)).then_some(expression)
}

/// What was not a function, for an error at `line`:`column`: the expression there, unless it
/// is an argument of a call (QuickJS reports the position of the last argument it read, so
/// `console.tabel(rows)` fails "at" `rows`): then the call's callee, `console.tabel`.
pub(super) fn callee_at(source: &str, line: u32, column: u32) -> Option<&str> {
    let text = line_of(source, line)?;
    let at = offset_of(text, column)?;
    let bytes = text.as_bytes();
    let mut before = at;
    while before > 0 && bytes[before - 1] == b' ' {
        before -= 1;
    }
    // Inside a template literal's `${…}` (``fs.readFile(`${ROOT}/a`)`` fails "at" `ROOT`):
    // the argument is the literal, which starts at its backtick.
    if before >= 2
        && &text[before - 2..before] == "${"
        && let Some(tick) = text[..before - 2].rfind('`')
    {
        before = tick;
        while before > 0 && bytes[before - 1] == b' ' {
            before -= 1;
        }
    }
    let argument = before > 0 && matches!(bytes[before - 1], b'(' | b',');
    if argument {
        // The innermost `(` still open before the argument.
        let mut depth = 0usize;
        let mut i = before;
        while i > 0 {
            i -= 1;
            match bytes[i] {
                b')' | b']' | b'}' => depth += 1,
                b'(' if depth == 0 => {
                    let mut end = i;
                    while end > 0 && bytes[end - 1] == b' ' {
                        end -= 1;
                    }
                    let callee = &text[chain_start(text, end)..end];
                    if named(callee) {
                        return Some(callee);
                    }
                    break;
                }
                b'(' | b'[' | b'{' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    expression_at(source, line, column)
}

/// On line `line` (1-based) of `source`, the dotted expression that `.property` (or
/// `[property]`, `["property"]`) is read from, when the line reads it from exactly one:
/// `r.data` for "cannot read property 'items' of undefined" on `return r.data.items.length`.
pub(super) fn holder_of<'s>(source: &'s str, line: u32, property: &str) -> Option<&'s str> {
    let text = line_of(source, line)?;
    let bytes = text.as_bytes();
    let accesses = [
        format!(".{property}"),
        format!("[{property}]"),
        format!("[\"{property}\"]"),
        format!("['{property}']"),
    ];
    let mut holders: Vec<&str> = Vec::new();
    for access in &accesses {
        for (at, _) in text.match_indices(access.as_str()) {
            let after = at + access.len();
            if access.starts_with('.') && bytes.get(after).is_some_and(|&b| is_ident(b)) {
                continue; // `.items` inside `.itemsCount`
            }
            // `?.` reads the same property.
            let end = if at > 0 && bytes[at - 1] == b'?' {
                at - 1
            } else {
                at
            };
            let holder = &text[chain_start(text, end)..end];
            if named(holder) && !holders.contains(&holder) {
                holders.push(holder);
            }
        }
    }
    match holders.as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

/// Where, on line `line` of `source`, the last `callee` (`backend.tool`) before `column`
/// starts, as a 1-based column: QuickJS places a call at the last thing it evaluated before
/// calling (often inside the arguments), while the user looks for the call itself.
pub(super) fn call_column(source: &str, line: u32, column: u32, callee: &str) -> Option<u32> {
    let text = line_of(source, line)?;
    column.checked_sub(1)?;
    // A column past the line's end still means "before here".
    let limit = offset_of(text, column).unwrap_or(text.len());
    let bytes = text.as_bytes();
    let at = text
        .match_indices(callee)
        .map(|(at, _)| at)
        .filter(|&at| at <= limit)
        .filter(|&at| at == 0 || !is_ident(bytes[at - 1]))
        .filter(|&at| bytes.get(at + callee.len()).is_none_or(|&b| !is_ident(b)))
        .last()?;
    Some(text[..at].chars().count() as u32 + 1)
}

/// For "cannot read property 'p' of undefined" placed at the property (`o.p`, `o?.p`, `o[p]`,
/// as V8 places it), where the holder's chain starts, as a 1-based column: QuickJS places it
/// at the holder, which is what the hint is about. `None` when `column` is not at `property`.
pub(super) fn holder_column(source: &str, line: u32, column: u32, property: &str) -> Option<u32> {
    let text = line_of(source, line)?;
    let at = offset_of(text, column)?;
    // At `[` of `o[0]`, or at the property itself (`0`, `"p"`, `p`).
    let (at, rest) = match text[at..].strip_prefix('[') {
        Some(inside) => (at + 1, inside),
        None => (at, &text[at..]),
    };
    let quoted = rest.starts_with(['"', '\'']) && rest[1..].starts_with(property);
    if !(rest.starts_with(property) || quoted) {
        return None;
    }
    let before = &text[..at];
    let end = before
        .strip_suffix("?.")
        .or_else(|| before.strip_suffix('.'))
        .or_else(|| before.strip_suffix('['))?
        .len();
    let start = chain_start(text, end);
    (start < end).then(|| text[..start].chars().count() as u32 + 1)
}

/// Where, on line `line` of `source`, the identifier `name` that a `NotDefined` fault at
/// `column` is about starts, as a 1-based column: the first whole-word `name` from `column` on
/// (V8 places the error at the start of the statement that reads it; QuickJS at the name).
pub(super) fn name_column(source: &str, line: u32, column: u32, name: &str) -> Option<u32> {
    let text = line_of(source, line)?;
    let from = offset_of(text, column)?;
    let bytes = text.as_bytes();
    let at = text
        .match_indices(name)
        .map(|(at, _)| at)
        .filter(|&at| at >= from)
        .filter(|&at| at == 0 || !(is_ident(bytes[at - 1]) || bytes[at - 1] == b'.'))
        .find(|&at| bytes.get(at + name.len()).is_none_or(|&b| !is_ident(b)))?;
    Some(text[..at].chars().count() as u32 + 1)
}

/// Where, on line `line` of `source`, the `throw new <constructor>(` before `column` starts, as
/// a 1-based column: QuickJS places an error the code constructs at the last thing it evaluated
/// for the constructor (the end of a template literal's last `${}`), while the user looks for
/// the `throw`.
pub(super) fn throw_column(source: &str, line: u32, column: u32, constructor: &str) -> Option<u32> {
    let text = line_of(source, line)?;
    column.checked_sub(1)?;
    let limit = offset_of(text, column).unwrap_or(text.len());
    let bytes = text.as_bytes();
    let at = text
        .match_indices("throw")
        .map(|(at, _)| at)
        .filter(|&at| at <= limit)
        .filter(|&at| at == 0 || !is_ident(bytes[at - 1]))
        .filter(|&at| {
            let rest = text[at + "throw".len()..].trim_start();
            rest.strip_prefix("new")
                .filter(|r| r.starts_with(char::is_whitespace))
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix(constructor))
                .is_some_and(|r| r.trim_start().starts_with('('))
        })
        .last()?;
    Some(text[..at].chars().count() as u32 + 1)
}

/// If `variable` is assigned somewhere in `source` straight from a tool call with no `await`
/// (`const r = backend.tool(`, `r = mcp.backend.tool(`), that call's `backend.tool`.
pub(super) fn unawaited_call<'s>(
    source: &'s str,
    variable: &str,
    backends: &[&str],
) -> Option<&'s str> {
    let bytes = source.as_bytes();
    let mut from = 0;
    while let Some(found) = source[from..].find(variable) {
        let start = from + found;
        let end = start + variable.len();
        from = end;
        let whole_word = (start == 0 || !is_ident(bytes[start - 1]) && bytes[start - 1] != b'.')
            && bytes.get(end).is_none_or(|&b| !is_ident(b));
        if !whole_word {
            continue;
        }
        let rest = source[end..].trim_start();
        // An assignment, not a comparison or an arrow.
        let Some(value) = rest
            .strip_prefix('=')
            .filter(|v| !v.starts_with(['=', '>']))
        else {
            continue;
        };
        let value = value.trim_start();
        let call = value
            .strip_prefix("mcp.")
            .or_else(|| value.strip_prefix("tools."))
            .unwrap_or(value);
        let Some(backend) = backends
            .iter()
            .find(|b| call.strip_prefix(**b).is_some_and(|r| r.starts_with('.')))
        else {
            continue;
        };
        let tool_start = backend.len() + 1;
        let tool_len = call[tool_start..]
            .bytes()
            .take_while(|&b| is_ident(b))
            .count();
        if tool_len > 0 && call[tool_start + tool_len..].trim_start().starts_with('(') {
            return Some(&call[..tool_start + tool_len]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_failing_expression() {
        let source = "const r = x();\nreturn r.items[0].title.toUpperCase();";
        assert_eq!(
            expression_at(source, 2, 25),
            None,
            "the chain starts after `]`"
        );
        assert_eq!(expression_at(source, 2, 10), Some("r.items"));
        let chained = "return a?.b.c();";
        assert_eq!(expression_at(chained, 1, 13), Some("a?.b.c"));
        assert_eq!(expression_at(chained, 1, 40), None, "past the line");
        assert_eq!(
            expression_at("return 1 + (2)();", 1, 12),
            None,
            "no name there"
        );
    }

    #[test]
    fn a_call_given_a_template_literal_names_its_callee() {
        let source = "const text = await fs.readFile(`${ROOT}/hello.txt`);";
        let at = source.find("ROOT}").map_or(0, |i| i as u32 + 1);
        assert_eq!(callee_at(source, 1, at), Some("fs.readFile"));
        let two = "f(a, `x ${b}`)";
        let at = two.find("b}").map_or(0, |i| i as u32 + 1);
        assert_eq!(callee_at(two, 1, at), Some("f"));
    }

    #[test]
    fn finds_what_a_property_was_read_from() {
        let source = "const r = x();\nreturn r.data.items.length + r.data?.itemsCount;";
        assert_eq!(holder_of(source, 2, "items"), Some("r.data"));
        assert_eq!(holder_of(source, 2, "itemsCount"), Some("r.data"));
        assert_eq!(holder_of("a.rows[0].id", 1, "0"), Some("a.rows"));
        assert_eq!(holder_of("a[\"k\"].b", 1, "k"), Some("a"));
        assert_eq!(holder_of("a.x + b.x", 1, "x"), None, "two candidates");
        assert_eq!(holder_of("f().x", 1, "x"), None, "no name");
        assert_eq!(holder_of("a.x", 2, "x"), None, "no such line");
    }

    #[test]
    fn finds_where_a_call_starts() {
        let source =
            "const x = 1;\nconst r = await mcp.test.strict({ count: n, more: test.strict });";
        assert_eq!(call_column(source, 2, 43, "test.strict"), Some(21));
        assert_eq!(
            call_column(source, 2, 10, "test.strict"),
            None,
            "none before"
        );
        assert_eq!(
            call_column(source, 2, 43, "test.stric"),
            None,
            "a whole name only"
        );
    }

    #[test]
    fn finds_assignments_from_unawaited_calls() {
        let backends = ["everything", "memory"];
        let source = "const r = everything.echo({ message: \"x\" });\nreturn r.toUpperCase();";
        assert_eq!(
            unawaited_call(source, "r", &backends),
            Some("everything.echo")
        );
        let aliased = "let graph;\ngraph = mcp.memory.read_graph({});";
        assert_eq!(
            unawaited_call(aliased, "graph", &backends),
            Some("memory.read_graph")
        );
        for fine in [
            "const r = await everything.echo({});",
            "const r = other.echo({});",
            "const result = everything.echo({});",
            "if (r == everything.echo) {}",
            "const r = everything.echo;",
        ] {
            assert_eq!(unawaited_call(fine, "r", &backends), None, "{fine}");
        }
    }
}
