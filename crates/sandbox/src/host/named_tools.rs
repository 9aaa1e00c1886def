//! Which tools a script names, read by parsing it (oxc for TypeScript, ruff's parser for
//! Python), so a person asked to approve the script is shown them, and the gateway can tell a
//! script that may write from one that only reads.
//!
//! A tool is named where the code reads it off its backend with a name fixed in the text:
//! `github.create_issue(…)`, `github["create-issue"]`, `mcp.github.create_issue`,
//! `globalThis.github.x`, in Python `github.create_issue(…)`. Anything else that reaches a
//! backend (`const g = github`, `github[name]`, `getattr(github, n)`), code that does not
//! parse, code nested past the limit or longer than `max_bytes`, makes the reading *unsure*:
//! the script may call tools the list does not show. The gateway treats an unsure script as
//! one that may call any tool, and the door enforces the same at run time, so this reading is
//! what a person sees, never the only guard.

use std::collections::{BTreeSet, HashMap};

use oxc::allocator::Allocator;
use oxc::ast::ast::{Expression, IdentifierReference, MemberExpression};
use oxc::ast_visit::{Visit, walk};
use ruff_python_ast::visitor::{Visitor, walk_expr};
use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::host::single_call::{resolve, resolve_interface};
use crate::wire::protocol::ToolBinding;

/// The tools a script names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedTools {
    /// Indices into the bindings, in binding order, each once.
    pub tools: Vec<usize>,
    /// The script may reach tools this list does not show (see the module's words).
    pub unsure: bool,
}

/// The tools `code` names, in TypeScript or (when `python`) Python, of those in `bindings`.
/// Code longer than `max_bytes` is not read (and is unsure).
pub fn named_tools(code: &str, python: bool, bindings: &[ToolBinding], max_bytes: usize) -> NamedTools {
    let unsure = NamedTools {
        tools: Vec::new(),
        unsure: true,
    };
    let model;
    let code: &str = if python {
        crate::host::python::strip_fence(code).0
    } else {
        model = crate::host::normalize::model_code(code);
        &model.code
    };
    if code.len() > max_bytes || crate::host::nesting::check(code).is_err() {
        return unsure;
    }
    let paths = crate::host::nesting::on_sized_stack(code.len(), || {
        if python { python_paths(code) } else { typescript_paths(code) }
    });
    let Some(paths) = paths else {
        return unsure;
    };
    read(paths, bindings)
}

/// What a parse found: each chain of fixed names read off one identifier (`a.b["c"].d`), by
/// where that identifier is, and every place a name that could be a backend is used.
#[derive(Debug, Default)]
struct Paths {
    chains: HashMap<u32, Vec<String>>,
    uses: Vec<(u32, String)>,
}

impl Paths {
    fn chain(&mut self, at: u32, chain: Vec<String>) {
        let kept = self.chains.entry(at).or_default();
        if chain.len() > kept.len() {
            *kept = chain;
        }
    }
}

/// Names under which the whole set of backends is reachable in TypeScript.
const ROOTS: [&str; 3] = ["globalThis", "mcp", "tools"];
/// Names that run text as code, which can reach any backend by a name no parse sees.
const EVALUATORS: [&str; 3] = ["eval", "exec", "Function"];

/// Which tools the chains name, and whether every use of a backend's name is one of them.
fn read(paths: Paths, bindings: &[ToolBinding]) -> NamedTools {
    let backend_named = |name: &str| {
        bindings
            .iter()
            .any(|b| b.js_backend == name || b.backend == name)
    };
    let mut tools = BTreeSet::new();
    let mut unsure = false;
    for (at, name) in &paths.uses {
        if EVALUATORS.contains(&name.as_str()) {
            unsure = true;
            continue;
        }
        if !(ROOTS.contains(&name.as_str()) || backend_named(name)) {
            continue;
        }
        let chain = paths.chains.get(at).map(Vec::as_slice).unwrap_or(&[]);
        let found = match chain {
            [root, backend, tool, ..] if ROOTS.contains(&root.as_str()) => {
                resolve_interface(bindings, backend, tool)
            }
            [backend, tool, ..] => resolve(bindings, backend, tool),
            _ => None,
        };
        match found {
            Some(index) => {
                tools.insert(index);
            }
            None => unsure = true,
        }
    }
    NamedTools {
        tools: tools.into_iter().collect(),
        unsure,
    }
}

/// The chains and uses in TypeScript `code`; `None` when it does not parse.
fn typescript_paths(code: &str) -> Option<Paths> {
    let allocator = Allocator::default();
    let program = crate::host::single_call::parse_script(&allocator, code)?;
    let mut paths = Paths::default();
    paths.visit_program(&program);
    Some(paths)
}

impl<'a> Visit<'a> for Paths {
    fn visit_member_expression(&mut self, it: &MemberExpression<'a>) {
        let mut names = Vec::new();
        let mut at = Some(it);
        let mut head = None;
        while let Some(member) = at {
            let name = match member {
                MemberExpression::StaticMemberExpression(m) => Some(m.property.name.to_string()),
                MemberExpression::ComputedMemberExpression(m) => match &m.expression {
                    Expression::StringLiteral(s) => Some(s.value.to_string()),
                    _ => None,
                },
                MemberExpression::PrivateFieldExpression(_) => None,
            };
            let Some(name) = name else {
                // A name computed at run time cuts the chain: what is left of it is its own.
                names.clear();
                head = None;
                break;
            };
            names.push(name);
            let object = member.object().get_inner_expression();
            at = object.as_member_expression();
            if at.is_none()
                && let Expression::Identifier(identifier) = object
            {
                names.push(identifier.name.to_string());
                head = Some(identifier.span.start);
            }
        }
        if let Some(head) = head {
            names.reverse();
            self.chain(head, names);
        }
        walk::walk_member_expression(self, it);
    }

    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        self.uses.push((it.span.start, it.name.to_string()));
    }
}

/// The chains and uses in Python `code`; `None` when it does not parse.
fn python_paths(code: &str) -> Option<Paths> {
    let parsed = ruff_python_parser::parse_module(code).ok()?;
    let mut paths = Paths::default();
    for stmt in &parsed.syntax().body {
        Visitor::visit_stmt(&mut paths, stmt);
    }
    Some(paths)
}

impl<'a> Visitor<'a> for Paths {
    fn visit_expr(&mut self, expr: &'a Expr) {
        let mut names = Vec::new();
        let mut at = expr;
        let head = loop {
            match at {
                Expr::Attribute(attribute) => {
                    names.push(attribute.attr.as_str().to_string());
                    at = attribute.value.as_ref();
                }
                Expr::Subscript(subscript) => match subscript.slice.as_ref() {
                    Expr::StringLiteral(s) => {
                        names.push(s.value.to_str().to_string());
                        at = subscript.value.as_ref();
                    }
                    _ => break None,
                },
                Expr::Name(name) if !names.is_empty() => {
                    names.push(name.id.to_string());
                    break Some(name.range().start().to_u32());
                }
                Expr::Name(name) => {
                    self.uses
                        .push((name.range().start().to_u32(), name.id.to_string()));
                    break None;
                }
                _ => break None,
            }
        };
        if let Some(head) = head {
            names.reverse();
            self.chain(head, names);
        }
        if !matches!(expr, Expr::Name(_)) {
            walk_expr(self, expr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(backend: &str, name: &str) -> ToolBinding {
        ToolBinding {
            backend: backend.into(),
            name: name.into(),
            js_backend: backend.replace('-', "_"),
            js_tool: name.replace('-', "_"),
            declaration: String::new(),
        }
    }

    fn tools() -> Vec<ToolBinding> {
        vec![
            binding("github", "get_issue"),
            binding("github", "create-issue"),
            binding("files", "read"),
        ]
    }

    fn named(code: &str, python: bool) -> (Vec<usize>, bool) {
        let found = named_tools(code, python, &tools(), 100_000);
        (found.tools, found.unsure)
    }

    #[test]
    fn typescript_names_tools_read_off_their_backend_with_fixed_names() {
        let code = r#"
            const a = await github.get_issue({ number: 1 });
            await github["create-issue"]({ title: a.title });
            const t = mcp.files.read; await t({});
        "#;
        assert_eq!(named(code, false), (vec![0, 1, 2], false));
        assert_eq!(named("return await github.get_issue.raw({})", false), (vec![0], false));
        assert_eq!(named("const github = 1; return github", false), (vec![], true));
        assert_eq!(named("return 1 + 1", false), (vec![], false));
        assert_eq!(named("return other.create_issue()", false), (vec![], false));
    }

    #[test]
    fn typescript_that_reaches_a_backend_another_way_is_unsure() {
        for code in [
            "const g = github; await g.create_issue({})",
            "const n = 'create-issue'; await github[n]({})",
            "await globalThis['git' + 'hub'].get_issue({})",
            "const { get_issue } = github",
            "await mcp[x].read({})",
            "await eval('git' + 'hub').get_issue({})",
            "await new Function('return github')().get_issue({})",
            "this is not code",
        ] {
            assert!(named(code, false).1, "{code}");
        }
    }

    #[test]
    fn python_names_tools_read_off_their_backend() {
        let code = "a = await github.get_issue(number=1)\nawait github['create-issue'](title=a['title'])\n";
        assert_eq!(named(code, true), (vec![0, 1], false));
        assert_eq!(named("```python\nawait files.read()\n```", true), (vec![2], false));
        for code in ["g = github\nawait g.get_issue()", "await getattr(github, n)()", "eval('github')", "def f(:"] {
            assert!(named(code, true).1, "{code}");
        }
    }

    #[test]
    fn deep_or_long_code_is_unsure_and_read_on_no_small_stack() {
        let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(named(&deep, false).1);
        assert!(named(&deep, true).1);
        // Deeper than the nesting check sees or not, it is read without overflowing.
        for unary in [format!("x = {}1", "not ".repeat(20_000)), format!("x = {}1", "-".repeat(90_000))] {
            let (tools, _) = named(&unary, true);
            assert!(tools.is_empty());
        }
        let long = "github.get_issue({})\n".repeat(10);
        assert!(named_tools(&long, false, &tools(), 50).unsure);
    }
}
