//! Recognising code that is one tool call, so the gateway can skip the sandbox (tier 2).
//!
//! Models often send a whole "program" that is a single call: `return await github.get_issue({
//! number: 1 })`. Running it in a worker is correct but needless. This module reads the code
//! with oxc (never with regexes) and, when it is exactly one call of `backend.tool` with
//! literal arguments, says which tool and with what arguments, already in the form the guest's
//! `JSON.stringify` would have sent. It also recognises the two introspection forms,
//! `__getToolInterface("x")` and `__interfaces.backend.tool`.
//!
//! The rule is *same result or no answer*: anything this module is not sure behaves exactly as
//! in the sandbox (an alias like `mcp.b.t`, a shadowing variable, a spread, an `undefined`
//! value, a name that may be a JavaScript global) gives `None`, and the code runs in the
//! sandbox. Name resolution follows the preamble's binding rules.

use oxc::allocator::Allocator;
use oxc::ast::ast::{
    Argument, ArrayExpressionElement, BindingPattern, Expression, ObjectPropertyKind, PropertyKey,
    PropertyKind, Statement, UnaryOperator, VariableDeclarationKind,
};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::SourceType;
use serde_json::{Map, Value};

use crate::host::direct::js_json;
use crate::wire::protocol::ToolBinding;

/// Code the gateway can answer without a sandbox.
#[derive(Debug, Clone, PartialEq)]
pub enum Shortcut {
    /// One call of one tool, whose result is the execution's value.
    Call(SingleCall),
    /// `__getToolInterface("name")`: a tool's declaration.
    ToolInterface(String),
    /// `__interfaces.backend.tool`: a tool's declaration.
    InterfaceOf {
        /// The backend as written.
        backend: String,
        /// The tool as written.
        tool: String,
    },
}

/// `[const x =] [await] backend.tool(args)[; return x]`, or `.raw(args)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SingleCall {
    /// The backend as written (`my_server`, or `"my-server"` from `globalThis["my-server"]`).
    pub backend: String,
    /// The tool as written.
    pub tool: String,
    /// The arguments as the guest would send them.
    pub arguments: Map<String, Value>,
    /// `backend.tool.raw(args)`: the whole MCP result, no mapping, no `ToolError`.
    pub raw: bool,
}

/// Reads `code` and returns the shortcut it is, if any. Code that nests too deep is no
/// shortcut (the sandbox then reports it), and the parse runs on a stack sized for the code
/// (see [`crate::host::nesting`]).
pub fn recognise(sent: &str) -> Option<Shortcut> {
    // The code the model meant, as every tier reads it (see `normalize`).
    let model = crate::host::normalize::model_code(sent);
    let code: &str = &model.code;
    crate::host::nesting::check(code).ok()?;
    crate::host::nesting::on_sized_stack(code.len(), || recognise_on_this_stack(code))
}

/// [`recognise`] without the nesting check or the sized stack: for measuring how much stack a
/// parse needs (`examples/stack_probe.rs`). Untrusted code must go through [`recognise`].
#[doc(hidden)]
pub fn recognise_on_this_stack(code: &str) -> Option<Shortcut> {
    let allocator = Allocator::default();
    let program = parse_script(&allocator, code)?;
    if !program.directives.is_empty() || program.hashbang.is_some() {
        return None;
    }
    match program.body.as_slice() {
        [Statement::ExpressionStatement(statement)] => shortcut(&statement.expression, None),
        [Statement::ReturnStatement(statement)] => shortcut(statement.argument.as_ref()?, None),
        [
            Statement::VariableDeclaration(declaration),
            Statement::ReturnStatement(returned),
        ] => {
            if !matches!(
                declaration.kind,
                VariableDeclarationKind::Const
                    | VariableDeclarationKind::Let
                    | VariableDeclarationKind::Var
            ) {
                return None;
            }
            let [declarator] = declaration.declarations.as_slice() else {
                return None;
            };
            let BindingPattern::BindingIdentifier(name) = &declarator.id else {
                return None;
            };
            let Some(Expression::Identifier(returned)) =
                returned.argument.as_ref().map(|e| e.get_inner_expression())
            else {
                return None;
            };
            if returned.name != name.name {
                return None;
            }
            shortcut(declarator.init.as_ref()?, Some(name.name.as_str()))
        }
        _ => None,
    }
}

/// `code` parsed as a script's TypeScript module (a top-level `return` allowed), when it parses
/// with no error. Call it on a sized stack (see [`crate::host::nesting`]).
pub(crate) fn parse_script<'a>(
    allocator: &'a Allocator,
    code: &'a str,
) -> Option<oxc::ast::ast::Program<'a>> {
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(allocator, code, SourceType::ts().with_module(true))
        .with_options(options)
        .parse();
    if parsed.panicked || parsed.diagnostics.errors().next().is_some() {
        return None;
    }
    Some(parsed.program)
}

/// `declared` is the variable the value is assigned to: code that reads it before it is
/// initialised (`const github = await github.x()`) fails in the sandbox, so it is no shortcut.
fn shortcut(expression: &Expression, declared: Option<&str>) -> Option<Shortcut> {
    let mut expression = expression.get_inner_expression();
    if let Expression::AwaitExpression(awaited) = expression {
        expression = awaited.argument.get_inner_expression();
    }
    let reads = |root: &str| declared.is_some_and(|d| d == root);
    if let Some(path) = member_path(expression) {
        // `__interfaces.backend.tool`, read without a call.
        return match path.as_slice() {
            [root, backend, tool] if root == "__interfaces" && !reads(root) => {
                Some(Shortcut::InterfaceOf {
                    backend: backend.clone(),
                    tool: tool.clone(),
                })
            }
            _ => None,
        };
    }
    let Expression::CallExpression(call) = expression else {
        return None;
    };
    if call.optional {
        return None;
    }
    let path = member_path(call.callee.get_inner_expression())?;
    if path.first().is_some_and(|root| reads(root)) {
        return None;
    }
    if let [name] = path.as_slice() {
        if name != "__getToolInterface" {
            return None;
        }
        let [argument] = call.arguments.as_slice() else {
            return None;
        };
        return match literal(argument.as_expression()?)? {
            Value::String(tool) => Some(Shortcut::ToolInterface(tool)),
            _ => None,
        };
    }
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let (backend, tool, raw) = match path.as_slice() {
        ["globalThis", backend, tool] => (*backend, *tool, false),
        ["globalThis", backend, tool, "raw"] => (*backend, *tool, true),
        ["globalThis", ..] => return None,
        [backend, tool] => (*backend, *tool, false),
        [backend, tool, "raw"] => (*backend, *tool, true),
        _ => return None,
    };
    let arguments = match call.arguments.as_slice() {
        [] => Map::new(),
        [Argument::SpreadElement(_)] => return None,
        [argument] => match literal(argument.as_expression()?)? {
            Value::Object(map) => map,
            _ => return None,
        },
        _ => return None,
    };
    Some(Shortcut::Call(SingleCall {
        backend: backend.to_string(),
        tool: tool.to_string(),
        arguments,
        raw,
    }))
}

/// `a.b["c"]` → `["a", "b", "c"]`, for identifiers, dotted names and string keys only.
fn member_path(expression: &Expression) -> Option<Vec<String>> {
    match expression {
        Expression::Identifier(identifier) => Some(vec![identifier.name.to_string()]),
        Expression::StaticMemberExpression(member) if !member.optional => {
            let mut path = member_path(&member.object)?;
            path.push(member.property.name.to_string());
            Some(path)
        }
        Expression::ComputedMemberExpression(member) if !member.optional => {
            let Value::String(key) = literal(&member.expression)? else {
                return None;
            };
            let mut path = member_path(&member.object)?;
            path.push(key);
            Some(path)
        }
        _ => None,
    }
}

/// A literal as the JSON the guest would send, or `None` for anything that is not plainly
/// one (identifiers, `undefined`, spreads, holes, computed keys, `__proto__`).
pub(crate) fn literal(expression: &Expression) -> Option<Value> {
    let value = match expression.get_inner_expression() {
        Expression::NullLiteral(_) => Value::Null,
        Expression::BooleanLiteral(b) => Value::Bool(b.value),
        Expression::NumericLiteral(n) => number(n.value)?,
        Expression::StringLiteral(s) if !s.lone_surrogates => Value::String(s.value.to_string()),
        Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
            let [quasi] = t.quasis.as_slice() else {
                return None;
            };
            Value::String(quasi.value.cooked.as_ref()?.to_string())
        }
        Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
            match u.argument.get_inner_expression() {
                Expression::NumericLiteral(n) => number(-n.value)?,
                _ => return None,
            }
        }
        Expression::ArrayExpression(array) => Value::Array(
            array
                .elements
                .iter()
                .map(|element| match element {
                    ArrayExpressionElement::SpreadElement(_)
                    | ArrayExpressionElement::Elision(_) => None,
                    other => literal(other.as_expression()?),
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        Expression::ObjectExpression(object) => {
            let mut map = Map::new();
            for property in &object.properties {
                let ObjectPropertyKind::ObjectProperty(property) = property else {
                    return None;
                };
                if property.kind != PropertyKind::Init
                    || property.method
                    || property.shorthand
                    || property.computed
                {
                    return None;
                }
                let key = match &property.key {
                    PropertyKey::StaticIdentifier(id) => id.name.to_string(),
                    PropertyKey::StringLiteral(s) if !s.lone_surrogates => s.value.to_string(),
                    PropertyKey::NumericLiteral(n)
                        if n.value.fract() == 0.0 && (0.0..1e15).contains(&n.value) =>
                    {
                        format!("{}", n.value as u64)
                    }
                    _ => return None,
                };
                if key == "__proto__" {
                    return None;
                }
                map.insert(key, literal(&property.value)?);
            }
            Value::Object(map)
        }
        _ => return None,
    };
    Some(js_json(value))
}

fn number(x: f64) -> Option<Value> {
    serde_json::Number::from_f64(x).map(Value::Number)
}

/// Which tool a [`SingleCall`] names, following the preamble's bindings: a backend by its
/// identifier, or by its original name when that cannot be a JavaScript global (it is not an
/// identifier); a tool by its identifier, or by its original name when no other tool of the
/// backend has that identifier. `None` when unsure: the sandbox then decides.
pub fn resolve(tools: &[ToolBinding], backend: &str, tool: &str) -> Option<usize> {
    let backend = resolve_backend(tools, backend, true)?;
    resolve_tool(tools, backend, tool)
}

/// Like [`resolve`], for `__interfaces.backend.tool`, where original backend names are always
/// bound.
pub fn resolve_interface(tools: &[ToolBinding], backend: &str, tool: &str) -> Option<usize> {
    let backend = resolve_backend(tools, backend, false)?;
    resolve_tool(tools, backend, tool)
}

fn resolve_backend<'a>(tools: &'a [ToolBinding], written: &str, global: bool) -> Option<&'a str> {
    if let Some(t) = tools.iter().find(|t| t.js_backend == written) {
        return Some(&t.backend);
    }
    if tools.iter().any(|t| t.js_backend == written) {
        return None;
    }
    if global && could_be_a_global(written) {
        return None;
    }
    tools
        .iter()
        .find(|t| t.backend == written)
        .map(|t| t.backend.as_str())
}

/// Only a name made of identifier characters can already be a global (`JSON`, `console`), in
/// which case the preamble does not bind the backend under it.
fn could_be_a_global(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn resolve_tool(tools: &[ToolBinding], backend: &str, written: &str) -> Option<usize> {
    let of_backend = || {
        tools
            .iter()
            .enumerate()
            .filter(|(_, t)| t.backend == backend)
    };
    if let Some((i, _)) = of_backend().find(|(_, t)| t.js_tool == written) {
        return Some(i);
    }
    of_backend()
        .find(|(_, t)| t.name == written)
        .map(|(i, _)| i)
}

/// `__getToolInterface(name)` as the preamble answers it: `backend.tool`, or a bare tool name
/// looked up backend by backend in binding order.
pub fn tool_interface<'a>(tools: &'a [ToolBinding], name: &str) -> Option<&'a ToolBinding> {
    match name.find('.') {
        Some(dot) if dot > 0 => {
            let index = resolve_interface(tools, &name[..dot], &name[dot + 1..])?;
            tools.get(index)
        }
        _ => {
            let mut backends: Vec<&str> = Vec::new();
            for t in tools {
                if !backends.contains(&t.backend.as_str()) {
                    backends.push(&t.backend);
                }
            }
            backends
                .into_iter()
                .find_map(|b| resolve_tool(tools, b, name))
                .and_then(|i| tools.get(i))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(code: &str) -> Option<(String, String, Value, bool)> {
        match recognise(code)? {
            Shortcut::Call(c) => Some((c.backend, c.tool, Value::Object(c.arguments), c.raw)),
            _ => None,
        }
    }

    #[test]
    fn recognises_the_single_call_shapes() {
        let expected = Some(("b".into(), "t".into(), json!({"a": 1}), false));
        for code in [
            "b.t({a: 1})",
            "await b.t({a: 1});",
            "return await b.t({ a: 1, })",
            "return b.t({'a': 1})",
            "const x = await b.t({a: 1}); return x;",
            "let x: Foo = await b.t({\"a\": 1.0}) as Foo;\nreturn x",
            "globalThis.b.t({a: 1})",
            "return await globalThis[\"b\"][\"t\"]({a: 1})",
            "b[`t`]({a: 1})",
        ] {
            assert_eq!(call(code), expected, "{code}");
        }
        assert_eq!(
            call("b.t()"),
            Some(("b".into(), "t".into(), json!({}), false))
        );
        assert_eq!(
            call("b.t.raw({})"),
            Some(("b".into(), "t".into(), json!({}), true))
        );
        assert_eq!(
            call("globalThis['my-server']['get-sum']({a: -1, b: [true, null, 'x']})"),
            Some((
                "my-server".into(),
                "get-sum".into(),
                json!({"a": -1, "b": [true, null, "x"]}),
                false
            ))
        );
    }

    #[test]
    fn anything_else_is_left_to_the_sandbox() {
        for code in [
            "b.t(x)",
            "b.t({a})",
            "b.t({a: undefined})",
            "b.t({...o})",
            "b.t({[k]: 1})",
            "b.t({__proto__: {}})",
            "b.t([1])",
            "b.t({}, {})",
            "b?.t({})",
            "b.t?.({})",
            "const b = await b.t({}); return b;",
            "const x = await b.t({}); return y;",
            "const x = await b.t({});",
            "b.t({}); b.t({});",
            "mcp.b.t({})",
            "globalThis.fetch({})",
            "console.log({a: 1})",
            "b.t({a: `x${y}`})",
            "b.t({a: [1,,2]})",
            "'use strict'; b.t({})",
            "b.t({",
        ] {
            let recognised = recognise(code);
            let is_call_to_bt =
                matches!(&recognised, Some(Shortcut::Call(c)) if c.backend == "b" && c.tool == "t");
            assert!(!is_call_to_bt, "{code} gave {recognised:?}");
        }
        // `mcp.b.t` and `console.log` parse as calls on other receivers; resolving them finds
        // no tool named `b`/`log` on a backend `mcp`/`console`, so they run in the sandbox.
    }

    #[test]
    fn recognises_introspection() {
        assert_eq!(
            recognise("__getToolInterface('b.t')"),
            Some(Shortcut::ToolInterface("b.t".into()))
        );
        assert_eq!(
            recognise("return __interfaces.b[\"t-x\"]"),
            Some(Shortcut::InterfaceOf {
                backend: "b".into(),
                tool: "t-x".into()
            })
        );
    }

    fn binding(backend: &str, js_backend: &str, name: &str, js_tool: &str) -> ToolBinding {
        ToolBinding {
            backend: backend.into(),
            name: name.into(),
            js_backend: js_backend.into(),
            js_tool: js_tool.into(),
            declaration: format!("{js_backend}.{js_tool}"),
        }
    }

    #[test]
    fn resolves_names_as_the_preamble_binds_them() {
        let tools = vec![
            binding("my-server", "my_server", "get-sum", "get_sum"),
            binding("my-server", "my_server", "echo", "echo"),
            binding("JSON", "JSON_", "parse", "parse"),
        ];
        assert_eq!(resolve(&tools, "my_server", "get_sum"), Some(0));
        assert_eq!(resolve(&tools, "my-server", "get-sum"), Some(0));
        assert_eq!(resolve(&tools, "my_server", "echo"), Some(1));
        assert_eq!(resolve(&tools, "my_server", "nope"), None);
        // `JSON` is the JavaScript global, not the backend named "JSON".
        assert_eq!(resolve(&tools, "JSON", "parse"), None);
        assert_eq!(resolve(&tools, "JSON_", "parse"), Some(2));
        assert_eq!(resolve_interface(&tools, "JSON", "parse"), Some(2));
        assert_eq!(
            tool_interface(&tools, "get-sum").map(|t| t.js_tool.as_str()),
            Some("get_sum")
        );
        assert_eq!(
            tool_interface(&tools, "my-server.echo").map(|t| t.name.as_str()),
            Some("echo")
        );
        assert!(tool_interface(&tools, ".echo").is_none());
    }
}
