//! Property tests of the glob matcher (the fuzz target of `tool` patterns): any pattern and
//! name, without a panic, agreeing with a plain reference matcher; and of tool grants over a
//! tool's spellings: a pattern denies or allows a tool exactly when it matches one of the
//! names the tool can be called by. `cargo test` runs a short
//! smoke; `PROPTEST_CASES=100000 cargo test --release -p sandgate-policy --test fuzz` runs long.

#![allow(clippy::expect_used)]

use proptest::prelude::*;
use std::sync::Arc;

use sandgate_policy::{Access, Grant, Profile, ToolCall, glob_match};

/// The obvious recursive matcher, by characters: slow, and plainly right.
fn reference(pattern: &[char], name: &[char]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some(('*', rest)) => (0..=name.len()).any(|i| reference(rest, &name[i..])),
        Some((c, rest)) => name.first() == Some(c) && reference(rest, &name[1..]),
    }
}

fn text() -> impl Strategy<Value = String> {
    // A small alphabet makes matches likely; `é` and `*` test characters and wildcards.
    proptest::collection::vec(
        prop::sample::select(vec!['a', 'b', '.', '_', 'é', '*']),
        0..12,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #[test]
    fn glob_agrees_with_the_reference(pattern in text(), name in text()) {
        let name: String = name.chars().filter(|c| *c != '*').collect();
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        prop_assert_eq!(glob_match(&pattern, &name), reference(&p, &n), "{:?} vs {:?}", pattern, name);
    }

    #[test]
    fn glob_never_panics(pattern in any::<String>(), name in any::<String>()) {
        let _ = glob_match(&pattern, &name);
    }

    #[test]
    fn a_grant_decides_by_every_spelling(
        pattern in text(),
        backend in text(), tool in text(), js_backend in text(), js_tool in text(),
    ) {
        let clean = |s: &str| s.chars().filter(|c| *c != '*' && *c != '.').collect::<String>();
        let (backend, tool, js_backend, js_tool) =
            (clean(&backend), clean(&tool), clean(&js_backend), clean(&js_tool));
        let spellings = [
            format!("{backend}.{tool}"),
            format!("{js_backend}.{js_tool}"),
            format!("{backend}.{js_tool}"),
            format!("{js_backend}.{tool}"),
        ];
        let any = spellings.iter().any(|s| glob_match(&pattern, s));
        let call = || ToolCall::new(backend.clone(), tool.clone()).called_in_code(&js_backend, &js_tool);
        let access = |grant: Grant| {
            let mut profile = Profile::granting_nothing("p", "profiles.p", "sandgate.toml");
            profile.tools = grant;
            Access::new(Arc::new(profile))
        };
        let denying = access(Grant::new(vec!["*".into()], vec![pattern.clone()]));
        prop_assert_eq!(denying.authorize_tool(call()).is_err(), any);
        prop_assert_eq!(denying.sees_tool(&call().name()), !any);
        let allowing = access(Grant::new(vec![pattern.clone()], vec![]));
        prop_assert_eq!(allowing.authorize_tool(call()).is_ok(), any);
        let narrowed = access(Grant::all_tools()).narrowed_to(vec![pattern.clone()]);
        prop_assert_eq!(narrowed.sees_tool(&call().name()), any);
    }
}
