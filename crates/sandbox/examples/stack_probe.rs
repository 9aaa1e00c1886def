//! Measures how much native stack oxc needs per byte of code, for every nesting form we know,
//! by parsing each form (transpile, then single-call recognition, unguarded) on threads of
//! shrinking stacks until one overflows. An overflow aborts the process, so each attempt runs
//! in a child process: this program re-executes itself.
//!
//! `cargo run --release --example stack_probe -p sandgate-sandbox [levels]`
//!
//! The largest "bytes/byte" figure bounds `nesting::STACK_PER_INPUT_BYTE` (run it in debug
//! too: debug frames are larger). See docs/BENCHMARKS.md, "Parsing on a sized stack".

use std::process::Command;

/// Each form, as (name, prefix repeated, middle, suffix repeated).
const FORMS: &[(&str, &str, &str, &str)] = &[
    ("array", "[", "", "]"),
    ("paren", "(", "1", ")"),
    ("block", "{", "", "}"),
    ("arrow", "x=>", "x", ""),
    ("not", "!", "x", ""),
    ("plus", "1+", "1", ""),
    ("ternary", "a?b:", "c", ""),
    ("assign", "a=", "1", ""),
    ("template", "`${", "1", "}`"),
    ("async_fn", "async()=>{", "", "}"),
    ("function", "function f(){", "", "}"),
    ("object", "{a:", "1", "}"),
    ("generic", "A<", "number", ">"),
    ("if", "if(1)", ";", ""),
    ("else_if", "else if(1);", "", ""),
    ("new", "new ", "X", ""),
    ("member", "a.", "b", ""),
    ("call", "f(", "", ")"),
    ("pow", "2**", "1", ""),
    ("type_paren", "(", "number", ")"),
    ("class", "class A{m(){", "", "}}"),
    ("tool_args", "[", "1", "]"),
];

fn code(form: &(&str, &str, &str, &str), levels: usize) -> String {
    let (name, prefix, middle, suffix) = *form;
    let body = format!("{}{middle}{}", prefix.repeat(levels), suffix.repeat(levels));
    match name {
        "generic" | "type_paren" => format!("let x: {body} = 1"),
        "block" | "async_fn" | "function" | "class" | "if" => body,
        "else_if" => format!("if(1);{body}"),
        "tool_args" => format!("return await e.t({body})"),
        _ => format!("return {body}"),
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, mode, name, levels, stack_kib] = args.as_slice()
        && mode == "--attempt"
    {
        return attempt(name, levels, stack_kib);
    }
    let levels: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(3000);
    println!(
        "{:<12} {:>8} {:>12} {:>11} {:>12}",
        "form", "bytes", "stack KiB", "bytes/byte", "bytes/level"
    );
    for form in FORMS {
        let len = code(form, levels).len();
        let (mut fits, mut overflows) = (4096 * 1024usize, 16usize);
        if !runs(form.0, levels, fits) {
            println!("{:<12} needs more than {fits} KiB", form.0);
            continue;
        }
        while fits - overflows > (overflows / 50).max(8) {
            let middle = (fits + overflows) / 2;
            if runs(form.0, levels, middle) {
                fits = middle;
            } else {
                overflows = middle;
            }
        }
        let bytes = fits * 1024;
        println!(
            "{:<12} {len:>8} {fits:>12} {:>11.0} {:>12.0}",
            form.0,
            bytes as f64 / len as f64,
            bytes as f64 / levels as f64
        );
    }
    std::process::ExitCode::SUCCESS
}

/// Whether `name` at `levels` parses on a stack of `stack_kib`, in a child process.
fn runs(name: &str, levels: usize, stack_kib: usize) -> bool {
    let Ok(me) = std::env::current_exe() else {
        return false;
    };
    Command::new(me)
        .args([
            "--attempt",
            name,
            &levels.to_string(),
            &stack_kib.to_string(),
        ])
        .output()
        .is_ok_and(|out| out.status.success())
}

fn attempt(name: &str, levels: &str, stack_kib: &str) -> std::process::ExitCode {
    let (Some(form), Ok(levels), Ok(stack_kib)) = (
        FORMS.iter().find(|f| f.0 == name),
        levels.parse::<usize>(),
        stack_kib.parse::<usize>(),
    ) else {
        return std::process::ExitCode::FAILURE;
    };
    let source = code(form, levels);
    let parsed = std::thread::Builder::new()
        .stack_size(stack_kib * 1024)
        .spawn(move || {
            let transpiled = sandgate_sandbox::transpile::transpile_on_this_stack(&source);
            let shortcut = sandgate_sandbox::single_call::recognise_on_this_stack(&source);
            (transpiled.is_ok(), shortcut.is_some())
        })
        .map(|thread| thread.join().is_ok());
    match parsed {
        Ok(true) => std::process::ExitCode::SUCCESS,
        _ => std::process::ExitCode::FAILURE,
    }
}
