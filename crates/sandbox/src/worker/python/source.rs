//! What a Python script's result is: Monty gives the value of a final expression (and of a
//! top-level `return`); a script that ends by assigning one name returns that value too, as
//! models expect (`result = await memory.read_graph()` as the last line).
//!
//! Read with the parser Monty itself uses (which bounds its own nesting: 60,000 open brackets
//! are a syntax error, not a deep stack), and only appended to: the user's lines keep their
//! numbers.

use ruff_python_ast::visitor::{Visitor, walk_expr};
use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

/// The names TypeScript code catches failed calls by, as Python's own exceptions: Monty 0.0.23
/// has no exception subclasses, so `except ToolError` catches the `RuntimeError` a failed call
/// raises, and `except ApprovalDenied` the `PermissionError` of a refused one.
const ALIASES: &str = "ToolError = RuntimeError; ToolCallError = RuntimeError; ApprovalDenied = PermissionError; ToolDeniedError = PermissionError\n";

/// `code` with the exception aliases in front when it names one, and how many lines that put
/// before the user's first (tracebacks take them off again).
pub fn with_aliases(code: String) -> (String, u32) {
    let names = ["ToolError", "ToolCallError", "ApprovalDenied", "ToolDeniedError"];
    if names.iter().any(|name| code.contains(name)) {
        (format!("{ALIASES}{code}"), 1)
    } else {
        (code, 0)
    }
}

/// `code`, with its last assigned name read back at the end when it ends in an assignment to
/// one name; else `code` as it is.
pub fn with_final_value(code: String) -> String {
    let Ok(parsed) = ruff_python_parser::parse_module(&code) else {
        return code;
    };
    let name = match parsed.syntax().body.last() {
        Some(Stmt::Assign(assign)) => match assign.targets.as_slice() {
            [Expr::Name(name)] => Some(name.id.to_string()),
            _ => None,
        },
        Some(Stmt::AnnAssign(assign)) if assign.value.is_some() => match assign.target.as_ref() {
            Expr::Name(name) => Some(name.id.to_string()),
            _ => None,
        },
        Some(Stmt::AugAssign(assign)) => match assign.target.as_ref() {
            Expr::Name(name) => Some(name.id.to_string()),
            _ => None,
        },
        _ => None,
    };
    match name {
        Some(name) => format!("{code}\n{name}\n"),
        None => code,
    }
}

/// `code` with `asyncio.sleep` spelled `asyncio_sleep`, a name the worker answers as a timer
/// that parks the run (Monty 0.0.23's `asyncio` has only `gather` and `run`); `None` when the
/// code has no `asyncio.sleep`. The same length, so every column stays where it was. Call it
/// only on code Monty compiled, whose nesting Monty bounds (the walk recurses).
pub fn with_sleep(code: &str) -> Option<String> {
    if !code.contains("asyncio.sleep") {
        return None;
    }
    let parsed = ruff_python_parser::parse_module(code).ok()?;
    let mut dots = Dots(Vec::new());
    for stmt in &parsed.syntax().body {
        dots.visit_stmt(stmt);
    }
    if dots.0.is_empty() {
        return None;
    }
    let mut bytes = code.as_bytes().to_vec();
    for at in dots.0 {
        if bytes.get(at) == Some(&b'.') {
            bytes[at] = b'_';
        }
    }
    String::from_utf8(bytes).ok()
}

/// Where the dots of `asyncio.sleep` are.
struct Dots(Vec<usize>);

impl<'a> Visitor<'a> for Dots {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Attribute(attribute) = expr
            && attribute.attr.as_str() == "sleep"
            && let Expr::Name(name) = attribute.value.as_ref()
            && name.id.as_str() == "asyncio"
        {
            self.0.push(name.range().end().to_usize());
        }
        walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::with_final_value;

    #[test]
    fn a_final_assignment_to_one_name_is_the_result() {
        assert_eq!(with_final_value("x = 1".into()), "x = 1\nx\n");
        assert_eq!(with_final_value("n: int = 2".into()), "n: int = 2\nn\n");
        assert_eq!(with_final_value("t = 0\nt += 3".into()), "t = 0\nt += 3\nt\n");
        let multi = "r = [\n  1,\n  2,\n]";
        assert_eq!(with_final_value(multi.into()), format!("{multi}\nr\n"));
    }

    #[test]
    fn the_aliases_come_first_only_for_code_that_names_one() {
        assert_eq!(super::with_aliases("x = 1".into()), ("x = 1".to_string(), 0));
        let (code, lines) = super::with_aliases("try:\n    pass\nexcept ToolError:\n    pass".into());
        assert_eq!(lines, 1);
        assert!(code.starts_with("ToolError = RuntimeError;") && code.ends_with("except ToolError:\n    pass"));
    }

    #[test]
    fn asyncio_sleep_becomes_the_workers_timer_and_nothing_else_moves() {
        let code = "import asyncio\nawait asyncio.sleep(0.1)\nx = 'asyncio.sleep'\nawait asyncio.gather(asyncio.sleep(1))";
        let slept = super::with_sleep(code).expect("rewritten");
        assert_eq!(slept, "import asyncio\nawait asyncio_sleep(0.1)\nx = 'asyncio.sleep'\nawait asyncio.gather(asyncio_sleep(1))");
        assert_eq!(super::with_sleep("await other.sleep(1)"), None);
    }

    #[test]
    fn anything_else_is_left_as_it_is() {
        for code in ["x = 1\nx + 1", "a, b = 1, 2", "a = b = 1", "d['k'] = 1", "print(1)", "if True:\n    x = 1", "x = (", ""] {
            assert_eq!(with_final_value(code.into()), code, "{code}");
        }
    }
}
