//! What a client needs to find the issuer by itself (RFC 9728, as the MCP authorization spec
//! uses it): the protected resource's metadata, where it is served, and the
//! `WWW-Authenticate` value a 401 carries to point at it.

use serde_json::{Value, json};

use crate::settings::{OAuthSettings, origin};

/// The metadata document of `settings`' resource.
pub fn document(settings: &OAuthSettings) -> Value {
    let mut servers: Vec<&str> = Vec::new();
    for issuer in &settings.issuers {
        if !servers.contains(&issuer.issuer.as_str()) {
            servers.push(&issuer.issuer);
        }
    }
    json!({
        "resource": settings.resource,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "sandgate",
    })
}

/// The path the document is served at: `/.well-known/oauth-protected-resource` followed by the
/// resource's path (RFC 9728 §3.1), so `https://gw/mcp` has it at
/// `/.well-known/oauth-protected-resource/mcp`.
pub fn path(settings: &OAuthSettings) -> String {
    let resource = settings.resource.trim_end_matches('/');
    let rest = &resource[origin(resource).len()..];
    format!("/.well-known/oauth-protected-resource{rest}")
}

/// The document's full URL.
pub fn url(settings: &OAuthSettings) -> String {
    format!("{}{}", origin(&settings.resource), path(settings))
}

/// The `WWW-Authenticate` value of a 401: where the metadata is.
pub fn challenge(settings: &OAuthSettings) -> String {
    format!("Bearer resource_metadata=\"{}\"", url(settings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{DEFAULT_LEEWAY, IssuerSettings};

    #[test]
    fn the_document_is_at_the_resource_path() {
        let settings = OAuthSettings {
            resource: "https://gw.example:8443/mcp".into(),
            issuers: vec![IssuerSettings {
                issuer: "https://idp.example".into(),
                audience: "https://gw.example:8443/mcp".into(),
                algorithms: vec![],
                jwks_uri: None,
                introspection: None,
                token_exchange: None,
            }],
            rules: vec![],
            leeway: DEFAULT_LEEWAY,
        };
        assert_eq!(path(&settings), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(
            challenge(&settings),
            "Bearer resource_metadata=\"https://gw.example:8443/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            document(&settings)["authorization_servers"],
            json!(["https://idp.example"])
        );
    }
}
