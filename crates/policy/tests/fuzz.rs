//! Property tests of the glob matcher (the fuzz target of `tool` patterns): any pattern and
//! name, without a panic, agreeing with a plain reference matcher. `cargo test` runs a short
//! smoke; `PROPTEST_CASES=100000 cargo test --release -p sandgate-policy --test fuzz` runs long.

#![allow(clippy::expect_used)]

use proptest::prelude::*;
use sandgate_policy::glob_match;

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
}
