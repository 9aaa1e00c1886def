//! TLS to PostgreSQL, with rustls: on unless the URL says `sslmode=disable`. With `prefer`
//! (the default, as with libpq) a server without TLS is still reached in the clear; with
//! `require` it is refused. Unlike libpq, the server's certificate is always checked: against
//! the system's roots, and against `[store] ca_file` when it comes from a private CA.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::StoreError;

/// The TLS connector for `url`, or `None` when it asks for no TLS.
pub(super) fn connector(
    url: &str,
    ca_file: Option<&Path>,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    let mode = tokio_postgres::Config::from_str(url)
        .map(|c| c.get_ssl_mode())
        .unwrap_or(SslMode::Prefer);
    if mode == SslMode::Disable {
        return Ok(None);
    }
    let problem = |message: String| StoreError::Open {
        path: redacted(url),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            problem(format!(
                "cannot read [store] ca_file {}: {e}",
                path.display()
            ))
        })?;
        let mut added = 0;
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
            let cert: rustls::pki_types::CertificateDer = cert.map_err(|e| {
                problem(format!(
                    "[store] ca_file {} is not PEM: {e}",
                    path.display()
                ))
            })?;
            roots
                .add(cert)
                .map_err(|e| problem(format!("[store] ca_file {}: {e}", path.display())))?;
            added += 1;
        }
        if added == 0 {
            return Err(problem(format!(
                "[store] ca_file {} holds no certificate",
                path.display()
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| problem(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// `url` without its password, for messages: in the user part of a URL, or as a
/// `password=` key of a key-value string or of a URL's query.
pub(super) fn redacted(url: &str) -> String {
    let url = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => match url[scheme + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    };
    url.split_inclusive(['?', '&', ' '])
        .map(|part| match part.strip_prefix("password=") {
            Some(rest) => {
                let end = rest.find(['&', ' ']).unwrap_or(rest.len());
                format!("password=***{}", &rest[end..])
            }
            None => part.to_string(),
        })
        .collect()
}
