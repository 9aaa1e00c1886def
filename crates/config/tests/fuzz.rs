//! Property tests of config parsing (its fuzz target): any text, in either format, ends in a
//! config or an error that names the file, never a panic or a stack overflow, however deep it
//! nests. `cargo test` runs a short smoke; `PROPTEST_CASES=100000 cargo test --release -p
//! sandgate-config --test fuzz` runs long.

#![allow(clippy::expect_used)]

use proptest::prelude::*;
use sandgate_config::{Format, parse_str};

fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "[servers.a]\n",
        "command = \"node\"\n",
        "args = [\"x\", 1]\n",
        "env = { K = \"v\" }\n",
        "url = \"http://h\"\n",
        "timeout = \"5s\"\n",
        "max_argument_bytes = 9\n",
        "[",
        "]",
        "{",
        "}",
        "\"mcpServers\"",
        ":",
        ",",
        "\"a\"",
        "{\"command\": \"x\"}",
        "${HOME}",
        "\n",
        "=",
        "\"",
        "[output]\nmax_chars = 0\n",
        "[sandbox]\nworkers = -1\n",
        "[http]\nlisten = \"x\"\n",
    ])
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(piece(), 0..40).prop_map(|p| p.concat()),
        (
            prop::sample::select(vec!["[", "{", "a = [", "{\"a\":", "x = {y = "]),
            1000usize..20000
        )
            .prop_map(|(p, n)| p.repeat(n)),
        any::<String>(),
    ]
}

proptest! {
    #[test]
    fn any_text_is_a_config_or_an_error(text in text()) {
        for format in [Format::Toml, Format::McpServersJson] {
            if let Err(e) = parse_str(&text, format, "fuzz.toml") {
                prop_assert!(e.to_string().contains("fuzz.toml"), "{}", e);
            }
        }
    }
}
