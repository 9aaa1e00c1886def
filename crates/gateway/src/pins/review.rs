//! A person's review of what the supply-chain guard holds: the one implementation behind
//! `sandgate pins list|diff|accept|reject` and the console's Pins page. It reads and writes the
//! store only; every running replica follows a decision within `FOLLOW_EVERY` (the one that
//! made it at once, when it is told). Each decision is an audit line naming who made it.

use std::collections::BTreeMap;

use sandgate_pins::{Definition, Finding, Names};
use sandgate_store::StoreHandle;
use serde::Serialize;

use crate::audit::{AuditLog, Decision as AuditDecision, Subject};
use crate::error::GatewayError;

/// One tool as the review shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Reviewed {
    /// `BACKEND.TOOL`.
    pub name: String,
    /// The backend.
    pub backend: String,
    /// The tool, as the backend names it.
    pub tool: String,
    /// `pinned`, or `held` when a change or a new tool waits for review.
    pub state: &'static str,
    /// For a held one: `changed` or `new`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// Who accepted the pinned definition (`first use`, or a person).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_by: Option<String>,
    /// Who rejected the held change, if someone did (it stays held).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_by: Option<String>,
    /// What the scan found: in the held definition when one is held, else in the pinned one
    /// (warnings, or what a person accepted).
    pub findings: Vec<Finding>,
}

/// One line of a diff between the pinned and the served definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    /// `same`, `pinned` (only in the pinned definition) or `served` (only in the served one).
    pub side: &'static str,
    /// The line, with characters no person sees written as escapes.
    pub text: String,
}

/// A held change, for a person to decide.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// `BACKEND.TOOL`.
    pub name: String,
    /// `changed` or `new`.
    pub held: String,
    /// Who rejected it, if someone did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_by: Option<String>,
    /// The pinned definition (none for a new tool).
    pub pinned: Option<Definition>,
    /// The definition the backend serves now.
    pub served: Definition,
    /// What the scan found in the served definition.
    pub findings: Vec<Finding>,
    /// The two definitions line by line (pretty JSON, keys sorted).
    pub lines: Vec<DiffLine>,
}

/// Every pin and every held change, one tool a line, by name.
pub async fn list(store: &StoreHandle) -> Result<Vec<Reviewed>, GatewayError> {
    let pins = store.pins(None).await.map_err(store_failed)?;
    let held = store.held(None).await.map_err(store_failed)?;
    let names = Names::new(
        &pins
            .iter()
            .map(|p| (p.backend.clone(), p.tool.clone()))
            .chain(held.iter().map(|h| (h.backend.clone(), h.tool.clone())))
            .collect::<Vec<_>>(),
    );
    let mut rows: BTreeMap<(String, String), Reviewed> = BTreeMap::new();
    for pin in &pins {
        let findings = definition_of(&pin.definition)
            .map(|d| sandgate_pins::scan(&d, &names.context(&pin.backend)))
            .unwrap_or_default();
        rows.insert(
            (pin.backend.clone(), pin.tool.clone()),
            Reviewed {
                name: format!("{}.{}", pin.backend, pin.tool),
                backend: pin.backend.clone(),
                tool: pin.tool.clone(),
                state: "pinned",
                held: None,
                pinned_by: Some(pin.decided_by.clone()),
                rejected_by: None,
                findings,
            },
        );
    }
    for change in &held {
        let row = rows
            .entry((change.backend.clone(), change.tool.clone()))
            .or_insert_with(|| Reviewed {
                name: format!("{}.{}", change.backend, change.tool),
                backend: change.backend.clone(),
                tool: change.tool.clone(),
                state: "held",
                held: None,
                pinned_by: None,
                rejected_by: None,
                findings: Vec::new(),
            });
        row.state = "held";
        row.held = Some(change.kind.clone());
        row.rejected_by = change.rejected_by.clone();
        row.findings = serde_json::from_str(&change.findings).unwrap_or_default();
    }
    Ok(rows.into_values().collect())
}

/// The held change of `name` (`BACKEND.TOOL`) beside its pinned definition.
pub async fn diff(store: &StoreHandle, name: &str) -> Result<Diff, GatewayError> {
    let (backend, tool) = split(name)?;
    let held = store.held(Some(backend)).await.map_err(store_failed)?;
    let Some(change) = held.into_iter().find(|h| h.tool == tool) else {
        return Err(nothing_held(name));
    };
    let pinned = store
        .pins(Some(backend))
        .await
        .map_err(store_failed)?
        .into_iter()
        .find(|p| p.tool == tool)
        .and_then(|p| definition_of(&p.definition));
    let served = definition_of(&change.definition).ok_or_else(|| {
        GatewayError::Pins(format!(
            "the held definition of `{name}` cannot be read; `sandgate pins reject {name}` keeps it held"
        ))
    })?;
    let lines = diff_lines(
        &pinned.as_ref().map(pretty).unwrap_or_default(),
        &pretty(&served),
    );
    Ok(Diff {
        name: name.to_string(),
        held: change.kind,
        rejected_by: change.rejected_by,
        pinned,
        served,
        findings: serde_json::from_str(&change.findings).unwrap_or_default(),
        lines,
    })
}

/// Decides the held changes `target` names (`BACKEND.TOOL`, or `BACKEND` for all of its), as
/// `by`, with an audit line each. Accepted, a change becomes the pin; rejected, it stays held (a
/// call to the tool keeps failing with the held error, and the pinned definition stays shown),
/// marked rejected by `by`. Returns the names decided.
pub async fn decide(
    store: &StoreHandle,
    audit: &AuditLog,
    target: &str,
    by: &str,
    accept: bool,
) -> Result<Vec<String>, GatewayError> {
    let mut decided = Vec::new();
    for (backend, tool) in targets(store, target).await? {
        let rule = if accept {
            store
                .accept_held(&backend, &tool, by)
                .await
                .map_err(store_failed)?
                .map(|change| format!("accepted by {by}: {} {}", change.kind, change.digest))
        } else {
            store
                .reject_held(&backend, &tool, by)
                .await
                .map_err(store_failed)?
                .then(|| format!("rejected by {by}"))
        };
        if let Some(rule) = rule {
            let name = format!("{backend}.{tool}");
            record(audit, &name, accept, &rule);
            decided.push(name);
        }
    }
    Ok(decided)
}

/// The held changes `target` names: one tool, or every one of a backend.
async fn targets(store: &StoreHandle, target: &str) -> Result<Vec<(String, String)>, GatewayError> {
    let (backend, tool) = match target.split_once('.') {
        Some((backend, tool)) => (backend, Some(tool)),
        None => (target, None),
    };
    let held = store.held(Some(backend)).await.map_err(store_failed)?;
    let chosen: Vec<(String, String)> = held
        .into_iter()
        .filter(|h| tool.is_none_or(|t| h.tool == t))
        .map(|h| (h.backend, h.tool))
        .collect();
    if chosen.is_empty() {
        return Err(nothing_held(target));
    }
    Ok(chosen)
}

fn record(audit: &AuditLog, target: &str, allowed: bool, rule: &str) {
    audit.record(&AuditDecision {
        profile: None,
        token_id: None,
        execution_id: None,
        subject: Subject::Pin,
        target,
        allowed,
        rule,
        arguments: None,
        asked: false,
    });
}

fn split(name: &str) -> Result<(&str, &str), GatewayError> {
    name.split_once('.').ok_or_else(|| {
        GatewayError::Pins(format!(
            "`{name}` names no tool: write BACKEND.TOOL, as `sandgate pins list` shows it"
        ))
    })
}

fn nothing_held(name: &str) -> GatewayError {
    GatewayError::Pins(format!(
        "nothing is held for `{name}`; `sandgate pins list` shows every pin and what is held"
    ))
}

fn store_failed(e: sandgate_store::StoreError) -> GatewayError {
    GatewayError::Pins(format!("the store could not be read or written: {e}"))
}

fn definition_of(text: &str) -> Option<Definition> {
    serde_json::from_str(text).ok()
}

/// A definition as pretty JSON with its keys sorted, so a diff shows what changed, not where.
fn pretty(definition: &Definition) -> String {
    let value = serde_json::to_value(definition).unwrap_or_default();
    serde_json::to_string_pretty(&sorted(value)).unwrap_or_default()
}

fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

/// The lines of `pinned` and `served` as a diff, with hidden characters escaped.
fn diff_lines(pinned: &str, served: &str) -> Vec<DiffLine> {
    let diff = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(pinned, served);
    diff.iter_all_changes()
        .map(|change| DiffLine {
            side: match change.tag() {
                similar::ChangeTag::Equal => "same",
                similar::ChangeTag::Delete => "pinned",
                similar::ChangeTag::Insert => "served",
            },
            text: sandgate_pins::escaped(change.value().trim_end_matches('\n')).into_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_shows_each_side_and_escapes_what_no_person_sees() {
        let lines = diff_lines("a\nb\nc", "a\nb\u{200B}x\nc");
        let sides: Vec<&str> = lines.iter().map(|l| l.side).collect();
        assert_eq!(sides, vec!["same", "pinned", "served", "same"]);
        assert!(lines[2].text.contains("\\u{200b}"), "{:?}", lines[2]);
    }

    #[test]
    fn pretty_sorts_keys() {
        let d: Definition = serde_json::from_value(serde_json::json!({
            "name": "t", "inputSchema": {"z": 1, "a": 2}
        }))
        .expect("definition");
        let text = pretty(&d);
        assert!(text.find("\"a\"") < text.find("\"z\""), "{text}");
    }
}
