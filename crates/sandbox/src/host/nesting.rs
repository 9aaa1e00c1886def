//! Reading untrusted code without trusting its depth.
//!
//! oxc parses, transforms and prints by recursion, one native stack frame (or several) per
//! level of nesting, with no depth limit of its own. A few thousand brackets of model-written
//! code would overflow a 2 MiB tokio thread and abort the whole gateway, for every session and
//! every backend. Two things here stop that:
//!
//! - [`check`]: a one-pass lexical estimate of how deep the code nests (brackets, and chains
//!   of operators, arrows and keywords with no `;` or `,` between them). Code past
//!   [`MAX_NESTING`] is refused with a `syntax` error that names the limit and the place.
//! - [`on_sized_stack`]: every parse runs on a stack sized for the *length* of its input, at
//!   more than the most stack per input byte measured for any construct (docs/BENCHMARKS.md,
//!   "Parsing on a sized stack"). When the calling thread has that much stack left, the parse
//!   runs in place; otherwise on a fresh stack segment of that size, on the same thread
//!   (`stacker`: a mapping and a stack switch, no thread). This is the sound backstop: a form
//!   of nesting that [`check`] does not see still cannot overflow, because no construct nests
//!   more than one level per byte of input.
//!
//! The length itself is bounded by `Limits::max_code_bytes`, so the largest stack ever asked
//! for is bounded too, and since stack pages are touched only as deep as the parse really
//! goes, what [`check`] lets through costs little memory.

/// The deepest nesting [`check`] accepts. Model-written code nests a few dozen levels; a
/// generated JSON literal a few dozen more.
pub const MAX_NESTING: usize = 1000;

/// Stack bytes a parse may use per byte of input. Measured (crates/sandbox/examples/
/// stack_probe.rs) at most 1.75 KiB per byte in a debug build (nested array arguments of a
/// tool call) and 0.8 KiB in release; twice that, rounded up.
const STACK_PER_INPUT_BYTE: usize = if cfg!(debug_assertions) { 4096 } else { 2048 };

/// Stack every parse needs whatever its input: oxc's own frames and the caller's.
const BASE_STACK: usize = 256 * 1024;

/// Stack left untouched below a parse that runs in place, for whatever runs after it.
const MARGIN: usize = 64 * 1024;

/// Runs `parse` (which reads `input_len` bytes of untrusted text) on a stack large enough for
/// any nesting those bytes can hold: in place when the calling thread has that much left,
/// otherwise on a fresh stack segment of that size (whose pages are touched only as deep as
/// the parse really goes). A panic in `parse` is the caller's either way. If the segment
/// cannot be mapped (the system is out of memory), that is a panic too, which the gateway
/// turns into an internal error for this request alone.
pub fn on_sized_stack<R>(input_len: usize, parse: impl FnOnce() -> R) -> R {
    let needed = stack_for(input_len);
    match stacker::remaining_stack() {
        Some(left) if left >= needed.saturating_add(MARGIN) => parse(),
        _ => stacker::grow(needed, parse),
    }
}

/// The stack a parse of `input_len` bytes may need.
pub fn stack_for(input_len: usize) -> usize {
    input_len
        .saturating_mul(STACK_PER_INPUT_BYTE)
        .saturating_add(BASE_STACK)
}

/// Code that nests deeper than [`MAX_NESTING`]: where it first does, as a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// Byte offset of the token that crossed the limit.
    pub offset: usize,
}

/// One open bracket, and the operator run of the level it opened in.
struct Open {
    /// `${` inside a template literal: its `}` returns to the template's text.
    template: bool,
    /// The enclosing level's run when the bracket opened.
    outer_run: usize,
}

/// What the previous significant token was, for regex literals and line breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Nothing yet, an operator or an opening bracket: an expression may start next.
    Operator,
    /// An identifier, literal or closing bracket: an expression may have ended.
    Operand,
}

/// What a word does to the estimate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    /// It can only start a statement: the chain before it has ended.
    StartsStatement,
    /// It nests what follows it, or joins two operands as a binary operator does; an
    /// expression (or a regular expression) may follow it.
    Nests,
    /// It nests what follows, which is not an expression (`if (`, `as Type`).
    NestsThenOperand,
    /// An identifier or a literal keyword.
    Operand,
}

/// The class of a word (one `match`, compiled to comparisons by length).
fn classify(word: &str) -> Word {
    // Every keyword is lowercase ASCII, 2 to 10 bytes: most identifiers are settled here.
    if !(2..=10).contains(&word.len()) || !word.as_bytes()[0].is_ascii_lowercase() {
        return Word::Operand;
    }
    match word {
        "const" | "let" | "var" | "return" | "throw" | "break" | "continue" | "function"
        | "class" | "try" | "switch" | "case" | "default" | "type" | "interface" | "enum" => {
            Word::StartsStatement
        }
        "typeof" | "void" | "delete" | "await" | "new" | "else" | "do" | "yield" | "instanceof"
        | "in" | "of" => Word::Nests,
        "if" | "while" | "for" | "with" | "extends" | "keyof" | "as" | "satisfies" => {
            Word::NestsThenOperand
        }
        _ => Word::Operand,
    }
}

/// Estimates how deep `source` nests and refuses it past [`MAX_NESTING`]. It counts open
/// brackets (`(`, `[`, `{`, `${`) plus, at every open level, the operators and nesting
/// keywords chained since the last `;`, `,` or statement break there. Strings, comments,
/// template text and regular expressions are skipped. One pass, no allocation beyond the
/// bracket stack (itself bounded by the limit).
pub fn check(source: &str) -> Result<(), TooDeep> {
    let bytes = source.as_bytes();
    let mut opens: Vec<Open> = Vec::new();
    // The operator run of the innermost level, and the total of all levels' runs plus the
    // brackets: the estimate of the depth at this point.
    let mut run = 0usize;
    let mut depth = 0usize;
    let mut last = Last::Operator;
    let mut newline = false;
    let mut i = 0usize;
    // Adds one level at `at`, failing past the limit.
    macro_rules! deeper {
        ($at:expr) => {{
            run += 1;
            depth += 1;
            if depth > MAX_NESTING {
                return Err(TooDeep { offset: $at });
            }
        }};
    }
    // Ends the innermost level's chain.
    macro_rules! chain_ends {
        () => {{
            depth -= run;
            run = 0;
        }};
    }
    // Template text from `$from` on: past its closing backtick, or into a `${` substitution,
    // which opens a level as a bracket does (`$at` is where).
    macro_rules! template_text {
        ($from:expr, $at:expr) => {{
            match skip_template_text(bytes, $from) {
                TemplateStop::End(next) => {
                    i = next;
                    last = Last::Operand;
                }
                TemplateStop::Substitution(next) => {
                    deeper!($at);
                    opens.push(Open {
                        template: true,
                        outer_run: run,
                    });
                    run = 0;
                    i = next;
                    last = Last::Operator;
                }
            }
        }};
    }
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' | b'\r' => {
                newline = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | 0x0b | 0x0c => {
                i += 1;
                continue;
            }
            _ => {}
        }
        // A line break between an operand and something that starts a new statement ends the
        // chain (automatic semicolon insertion); one before an operator or `(` does not.
        let starts_statement = b.is_ascii_alphanumeric()
            || matches!(b, b'_' | b'$' | b'"' | b'\'' | b'{')
            || b >= 0x80;
        if newline && last == Last::Operand && starts_statement {
            chain_ends!();
        }
        newline = false;
        match b {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    if bytes[i] == b'\n' {
                        newline = true;
                    }
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'/' if last == Last::Operator => {
                i = skip_regex(bytes, i);
                last = Last::Operand;
                continue;
            }
            b'"' | b'\'' => {
                i = skip_string(bytes, i);
                last = Last::Operand;
                continue;
            }
            b'`' => {
                template_text!(i + 1, i);
                continue;
            }
            b'(' | b'[' | b'{' => {
                deeper!(i);
                opens.push(Open {
                    template: false,
                    outer_run: run,
                });
                run = 0;
                last = Last::Operator;
                i += 1;
                continue;
            }
            b')' | b']' | b'}' => {
                // Unbalanced closers are the parser's to report; here they only end levels.
                chain_ends!();
                // The closed group stays one level of the chain it is part of (`f()()()`
                // nests calls), as the opening counted it.
                if let Some(open) = opens.pop() {
                    run = open.outer_run;
                    if open.template && b == b'}' {
                        template_text!(i + 1, i);
                        continue;
                    }
                }
                last = Last::Operand;
                i += 1;
                continue;
            }
            b';' | b',' => {
                chain_ends!();
                last = Last::Operator;
                i += 1;
                continue;
            }
            b'0'..=b'9' => {
                i = skip_number(bytes, i);
                last = Last::Operand;
                continue;
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = skip_number(bytes, i);
                last = Last::Operand;
                continue;
            }
            _ => {}
        }
        if is_word_byte(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            match classify(&source[start..i]) {
                Word::StartsStatement => {
                    chain_ends!();
                    last = Last::Operator;
                }
                Word::Nests => {
                    deeper!(start);
                    last = Last::Operator;
                }
                Word::NestsThenOperand => {
                    deeper!(start);
                    last = Last::Operand;
                }
                Word::Operand => last = Last::Operand,
            }
            continue;
        }
        // Any other byte is punctuation: one level per operator token, except that postfix
        // `++`/`--` after an operand keep it an operand.
        let Some(len) = operator_len(&bytes[i..]) else {
            // A byte that is none of the above (a stray control character): the parser's to
            // report.
            i += 1;
            continue;
        };
        let token = &bytes[i..i + len];
        let start = i;
        i += len;
        if last == Last::Operand && matches!(token, b"++" | b"--") {
            continue;
        }
        deeper!(start);
        last = Last::Operator;
    }
    Ok(())
}

/// Multi-character operators, longest first, so each is one token as in JavaScript.
const LONG_OPERATORS: &[&[u8]] = &[
    b">>>=", b"===", b"!==", b"**=", b"...", b"<<=", b">>=", b">>>", b"&&=", b"||=", b"??=", b"=>",
    b"==", b"!=", b"<=", b">=", b"&&", b"||", b"??", b"?.", b"**", b"++", b"--", b"+=", b"-=",
    b"*=", b"/=", b"%=", b"&=", b"|=", b"^=", b"<<", b">>",
];

/// The length of the operator token at the start of `rest`, if one starts there.
fn operator_len(rest: &[u8]) -> Option<usize> {
    let first = *rest.first()?;
    if !is_operator_char(first) {
        return None;
    }
    // Most operators stand alone: the list is searched only when another operator character
    // follows.
    if !rest.get(1).is_some_and(|b| is_operator_char(*b)) {
        return Some(1);
    }
    Some(
        LONG_OPERATORS
            .iter()
            .find(|op| rest.starts_with(op))
            .map_or(1, |long| long.len()),
    )
}

/// A byte of an identifier or keyword (digits never start one here: numbers are read first),
/// or of a private name, decorator or escape.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'\\' | b'#' | b'@') || b >= 0x80
}

fn is_operator_char(b: u8) -> bool {
    matches!(
        b,
        b'=' | b'+'
            | b'-'
            | b'*'
            | b'/'
            | b'%'
            | b'!'
            | b'~'
            | b'<'
            | b'>'
            | b'&'
            | b'|'
            | b'^'
            | b'?'
            | b':'
            | b'.'
    )
}

/// Past a string literal that starts at `i`.
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    j
}

/// Where template text that starts at `i` stops.
enum TemplateStop {
    /// After the closing backtick.
    End(usize),
    /// After a `${`.
    Substitution(usize),
}

fn skip_template_text(bytes: &[u8], mut i: usize) -> TemplateStop {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'`' => return TemplateStop::End(i + 1),
            b'$' if bytes.get(i + 1) == Some(&b'{') => return TemplateStop::Substitution(i + 2),
            _ => i += 1,
        }
    }
    TemplateStop::End(i)
}

/// Past a regular expression literal that starts at `i` (classes may hold a `/`).
fn skip_regex(bytes: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    let mut in_class = false;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            b'[' => {
                in_class = true;
                j += 1;
            }
            b']' => {
                in_class = false;
                j += 1;
            }
            b'/' if !in_class => {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
                    j += 1;
                }
                return j;
            }
            _ => j += 1,
        }
    }
    j
}

/// Past a numeric literal (decimal, hex, exponent, separators, `n`).
fn skip_number(bytes: &[u8], start: usize) -> usize {
    let hex = matches!(bytes.get(start..start + 2), Some(b"0x" | b"0X"));
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        let exponent_sign =
            !hex && matches!(b, b'+' | b'-') && i > start && matches!(bytes[i - 1], b'e' | b'E');
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(code: &str) -> bool {
        check(code).is_ok()
    }

    #[test]
    fn ordinary_code_passes() {
        let code = r#"
const issues = await github.list_issues({ owner: "a", repo: "b", state: "open" })
const titles = issues.filter(i => i.labels.some(l => l.name === "bug")).map(i => `#${i.number}: ${i.title}`)
let total = 0
for (const i of issues) { total += i.comments > 10 ? 2 : 1 }
const re = /[(\[{]+/g; const half = total / 2 / 1
return { titles, total, half, m: "((((", c: '}}}}' } // ((((((
"#;
        assert!(depth_ok(code));
        // A long script of short statements never accumulates.
        let many = "x.y = a.b.c + d * e - f\n".repeat(5000);
        assert!(depth_ok(&many));
        let semis = "const a = b?.c ?? d && e || !f;".repeat(5000);
        assert!(depth_ok(&semis));
        let flat_data = format!(
            "return [{}]",
            "{\"a\": [1, 2], \"b\": {\"c\": 3}},".repeat(5000)
        );
        assert!(depth_ok(&flat_data));
    }

    #[test]
    fn every_deep_form_is_refused() {
        let n = MAX_NESTING + 10;
        let forms = [
            format!("return {}{}", "[".repeat(n), "]".repeat(n)),
            format!("return {}1{}", "(".repeat(n), ")".repeat(n)),
            format!("{}{}", "{".repeat(n), "}".repeat(n)),
            format!("return {}x", "x=>".repeat(n)),
            format!("return {}x", "!".repeat(n)),
            format!("return {}1", "1+".repeat(n)),
            format!("return {}1", "- ".repeat(n)),
            format!("return {}c", "a?b:".repeat(n)),
            format!("let a; return {}1", "a=".repeat(n)),
            format!("return {}1{}", "`${".repeat(n), "}`".repeat(n)),
            format!("{}{}", "async()=>{".repeat(n), "}".repeat(n)),
            format!("let x: {}number{} = 1", "A<".repeat(n), ">".repeat(n)),
            format!("{};", "if(1)".repeat(n)),
            format!("return {}X", "new ".repeat(n)),
            format!("return {}1", "typeof ".repeat(n)),
            format!("return {}1", "await ".repeat(n)),
            format!("return a{}", ".b".repeat(n)),
            format!("return a{}", "?.b".repeat(n)),
            format!("return f{}", "()".repeat(n)),
            format!("return {}x", "x =>\n".repeat(n)),
            format!("return a\n{}", ".b\n".repeat(n)),
        ];
        for form in &forms {
            let found = check(form);
            assert!(
                found.is_err(),
                "not refused: {}",
                &form[..60.min(form.len())]
            );
        }
    }

    #[test]
    fn the_place_is_where_the_limit_is_crossed() {
        let code = format!("const a = 1;\nreturn {}", "[".repeat(MAX_NESTING + 1));
        let TooDeep { offset } = check(&code).expect_err("too deep");
        assert_eq!(offset, "const a = 1;\nreturn ".len() + MAX_NESTING);
    }

    #[test]
    fn strings_comments_and_templates_do_not_count() {
        let n = 3 * MAX_NESTING;
        let inside = "(".repeat(n);
        for code in [
            format!("return \"{inside}\""),
            format!("return '{inside}'"),
            format!("return `{inside}`"),
            format!("// {inside}\nreturn 1"),
            format!("/* {inside} */ return 1"),
            format!("return /{}/.source", "\\(".repeat(n)),
            format!("return `a${{1}}b{inside}`"),
        ] {
            assert!(depth_ok(&code), "{}", &code[..40]);
        }
    }

    #[test]
    fn a_sized_stack_parses_what_the_callers_would_not() {
        // Far deeper than a 2 MiB thread survives, in a form `check` does not count (a flat
        // chain of `else if`, which oxc still nests): parsed on a thread of its own.
        let code = format!("if (a) b;{}", " else if (a) b;".repeat(40_000));
        assert!(depth_ok(&code));
        let parsed = on_sized_stack(code.len(), || {
            crate::host::transpile::transpile_on_this_stack(&code).is_ok()
        });
        assert!(parsed);
    }
}
