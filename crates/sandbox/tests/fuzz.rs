//! Property tests of the sandbox's readers of untrusted input (its fuzz targets): code for the
//! transpiler, the single-call recogniser and the nesting check; worker frames; JSON text from
//! the guest. Random text and structured token soup, for any panic, any stack overflow (which
//! would abort this test binary), and these oracles:
//!
//! - code the nesting check accepts parses without overflowing, whatever its shape;
//! - code recognised as a single call also transpiles;
//! - a frame decodes back to what was encoded, and garbage decodes to an error, never a panic;
//! - well-formed JSON text stays JSON with the same value wherever it had no lone surrogate.
//!
//! `cargo test` runs a short smoke; `PROPTEST_CASES=100000 cargo test --release -p
//! sandgate-sandbox --test fuzz` runs long.

#![allow(clippy::expect_used)]
#![expect(
    clippy::disallowed_methods,
    reason = "a test or benchmark harness reads its settings (PATH, RUSTC, PROPTEST_CASES, BENCH_WORKERS) from the environment"
)]

use proptest::prelude::*;
use sandgate_sandbox::encoding::{head_and_tail, well_formed_json};
use sandgate_sandbox::protocol::{Callee, Frame, HostFrame, WorkerFrame, read_frame, write_frame};
use sandgate_sandbox::{CallFailure, FailureKind, nesting, single_call, transpile};

/// Pieces of TypeScript, joined at random: brackets and operators that nest, keywords,
/// literals, comments and templates that must be skipped, and tool-call shapes.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "`${",
        "}`",
        "`",
        "=>",
        "x",
        "y",
        "1",
        "2.5e-3",
        "0x1f",
        "+",
        "-",
        "!",
        "?",
        ":",
        "=",
        "==",
        "&&",
        "??",
        "?.",
        ".",
        ",",
        ";",
        "\n",
        " ",
        "'s'",
        "\"t\"",
        "/re[)]/g",
        "// c\n",
        "/* (( */",
        "async",
        "await",
        "function f(",
        "return",
        "if",
        "else",
        "new",
        "typeof",
        "const a =",
        "let",
        "<",
        ">",
        "A<",
        "as",
        "everything.echo(",
        "{message: ",
        "}",
        ")",
        "import(",
        "export default async function main() {",
        "@d",
    ])
}

fn soup() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(token(), 0..80).prop_map(|t| t.concat()),
        // Long runs of one nesting piece: the shapes that overflow an unguarded parser.
        (token(), 500usize..3000).prop_map(|(t, n)| t.repeat(n)),
        any::<String>(),
    ]
}

proptest! {
    // 64 cases a property by default (each may parse a few thousand tokens); PROPTEST_CASES
    // sets more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn code_is_read_without_panic_or_overflow(code in soup()) {
        let checked = nesting::check(&code);
        let transpiled = transpile::transpile(&code);
        let recognised = single_call::recognise(&code);
        if checked.is_err() {
            prop_assert!(transpiled.is_err(), "too deep, yet transpiled");
            prop_assert!(recognised.is_none(), "too deep, yet recognised");
        }
        if recognised.is_some() {
            prop_assert!(transpiled.is_ok(), "recognised but not transpiled: {:?}", transpiled.err());
        }
    }

    #[test]
    fn worker_frames_round_trip(run in any::<u64>(), id in any::<u64>(), index in any::<u32>(), host in any::<bool>(), args in any::<String>(), site in proptest::option::of((1u32.., any::<u32>()))) {
        let callee = if host { Callee::Host(index) } else { Callee::Tool(index) };
        let frame = WorkerFrame::Call { run, id, callee, args: args.clone(), site };
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &frame).expect("encodes");
        let back: Option<WorkerFrame> = read_frame(&mut bytes.as_slice()).expect("decodes");
        let same = matches!(back, Some(WorkerFrame::Call { run: r, id: i, callee: c, args: a, site: s }) if r == run && i == id && c == callee && a == args && s == site);
        prop_assert!(same, "the call frame came back different");
    }

    #[test]
    fn host_frames_round_trip(run in any::<u64>(), id in any::<u64>(), ok in any::<bool>(), text in any::<String>()) {
        let result = if ok { Ok(text.clone()) } else { Err(CallFailure::new(FailureKind::Failed, text.clone())) };
        let frame = HostFrame::Reply { run, id, result };
        let mut bytes = Vec::new();
        write_frame(&mut bytes, &frame).expect("encodes");
        let back: Option<HostFrame> = read_frame(&mut bytes.as_slice()).expect("decodes");
        match back {
            Some(HostFrame::Reply { run: r, id: i, result: Ok(t) }) => prop_assert!(ok && r == run && i == id && t == text),
            Some(HostFrame::Reply { run: r, id: i, result: Err(f) }) => prop_assert!(!ok && r == run && i == id && f.message == text),
            _ => prop_assert!(false, "not a reply"),
        }
    }

    #[test]
    fn garbage_frames_are_errors_not_panics(body in proptest::collection::vec(any::<u8>(), 0..200), prefix in prop::sample::select(vec![b'R', b'C', b'{', b'x'])) {
        let mut framed = body.clone();
        framed.insert(0, prefix);
        let _ = WorkerFrame::decode_body(&framed);
        let _ = HostFrame::decode_body(&framed);
        let mut stream = (framed.len() as u32).to_le_bytes().to_vec();
        stream.extend(&framed);
        let _: std::io::Result<Option<WorkerFrame>> = read_frame(&mut stream.as_slice());
        // A length prefix past the limit is refused before anything is allocated for it.
        let huge = u32::MAX.to_le_bytes();
        prop_assert!(read_frame::<_, WorkerFrame>(&mut huge.as_slice()).is_err());
    }

    #[test]
    fn json_text_stays_json(value in "[a-zé😀\\\\\"\\u{0}-\\u{1f}]{0,12}", lone in prop::sample::select(vec!["", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\\\ud800"])) {
        let json = format!("[{},\"{lone}\"]", serde_json::to_string(&value).expect("a string"));
        let fixed = well_formed_json(&json);
        let parsed: serde_json::Value = serde_json::from_str(&fixed).expect("well-formed JSON parses");
        prop_assert_eq!(&parsed[0], &serde_json::Value::String(value));
    }

    #[test]
    fn head_and_tail_keeps_to_its_budget(text in any::<String>(), max in 0usize..300) {
        let cut = head_and_tail(&text, max);
        // Within the budget plus the marker, and never longer than the text itself.
        prop_assert!(cut.len() <= max + 64 && cut.len() <= text.len(), "{} bytes from {}", cut.len(), text.len());
    }
}
