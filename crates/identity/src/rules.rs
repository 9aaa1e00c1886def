//! Claims to profiles. A rule names a claim (a dotted path, as Keycloak's
//! `realm_access.roles`), a value, and the profile a token whose claim holds that value gets.
//! The first rule that matches wins; a token no rule matches gets no profile at all (deny by
//! default).
//!
//! Matching is exact, on values only: a string claim equals the value, an array claim holds
//! it, and `scope` (or `scp`), which OAuth writes as space-separated words, holds it as a word.
//! A claim's text is never read as a pattern or a path, so a claim cannot widen a rule.

use serde_json::Value;

/// One rule of `[[auth.oauth.rules]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRule {
    /// The claim, as a dotted path into the token's claims.
    pub claim: String,
    /// The value it must hold.
    pub value: String,
    /// The profile a matching token gets.
    pub profile: String,
}

impl ClaimRule {
    /// Whether `claims` holds this rule's value. The claim is a key of its own first (Auth0's
    /// namespaced `https://example.com/roles` holds dots), then a dotted path.
    pub fn matches(&self, claims: &Value) -> bool {
        let found = claims.get(&self.claim).or_else(|| {
            let mut at = claims;
            for part in self.claim.split('.') {
                at = at.get(part)?;
            }
            Some(at)
        });
        let Some(at) = found else {
            return false;
        };
        let words = matches!(self.claim.as_str(), "scope" | "scp");
        match at {
            Value::String(text) if words => text.split(' ').any(|w| w == self.value),
            Value::String(text) => *text == self.value,
            Value::Array(items) => items.iter().any(|i| i.as_str() == Some(&self.value)),
            _ => false,
        }
    }
}

/// The profile the first matching rule gives, if any.
pub(crate) fn profile_for<'a>(rules: &'a [ClaimRule], claims: &Value) -> Option<&'a str> {
    rules
        .iter()
        .find(|r| r.matches(claims))
        .map(|r| r.profile.as_str())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(claim: &str, value: &str, profile: &str) -> ClaimRule {
        ClaimRule {
            claim: claim.into(),
            value: value.into(),
            profile: profile.into(),
        }
    }

    #[test]
    fn values_match_exactly_and_the_first_rule_wins() {
        let rules = [
            rule("realm_access.roles", "admin", "operator"),
            rule("groups", "eng", "builder"),
            rule("scope", "sandgate:read", "reader"),
        ];
        let claims = json!({"groups": ["ops", "eng"], "scope": "openid sandgate:read"});
        assert_eq!(profile_for(&rules, &claims), Some("builder"));
        let nested = json!({"realm_access": {"roles": ["admin"]}, "groups": ["eng"]});
        assert_eq!(profile_for(&rules, &nested), Some("operator"));
        assert_eq!(
            profile_for(&rules, &json!({"scope": "sandgate:read"})),
            Some("reader")
        );
    }

    #[test]
    fn claims_cannot_widen_a_rule() {
        let rules = [
            rule("groups", "eng", "builder"),
            rule("scope", "admin", "operator"),
        ];
        for claims in [
            json!({"groups": "eng builder"}),
            json!({"groups": ["eng*"]}),
            json!({"groups": [["eng"]]}),
            json!({"groups": {"eng": true}}),
            json!({"groups.eng": "eng"}),
            json!({"scope": "administrator"}),
            json!({"scope": "admin\tx"}),
            json!({}),
        ] {
            assert_eq!(profile_for(&rules, &claims), None, "{claims}");
        }
        // An array `scope` holds the value as an element: that is its exact form.
        assert_eq!(
            profile_for(&rules, &json!({"scope": ["admin"]})),
            Some("operator")
        );
    }
}
