//! Users' own backend secrets, sealed: AES-256-GCM with a key the operator keeps outside the
//! config (the environment, or a file), and a fresh random nonce for every seal.
//!
//! A sealed secret is bound to its owner and backend (they are the cipher's associated data),
//! so a row copied to another user, or to another backend, does not open. It also carries a
//! short id of the key that sealed it, so a secret sealed under an old key is reported as such
//! ("set it again"), not as a corrupt store. The store only ever holds what [`Vault::seal`]
//! returns; the secret itself lives in memory only while a call is sent.

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::Engine as _;
use sandgate_config::Secret;
use sha2::{Digest, Sha256};

use crate::error::IdentityError;

/// The first byte of every sealed secret: the format's version.
const FORMAT: u8 = 1;
/// Bytes of the key id after the version.
const KEY_ID_LEN: usize = 4;
/// The most bytes of one secret (a token, a key, a password).
pub const MAX_SECRET_BYTES: usize = 8 * 1024;

/// Seals and opens users' secrets with one key.
pub struct Vault {
    key: RandomizedNonceKey,
    key_id: [u8; KEY_ID_LEN],
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").finish_non_exhaustive()
    }
}

impl Vault {
    /// A vault over the key written as `text`: 32 bytes in base64 (standard or URL-safe) or
    /// hex, as `openssl rand -base64 32` or `openssl rand -hex 32` prints it.
    pub fn from_key_text(text: &str) -> Result<Vault, IdentityError> {
        let text = text.trim();
        let bytes = decode_key(text).ok_or_else(|| {
            IdentityError::Key(format!(
                "is not 32 bytes in base64 or hex ({} characters given); make one with `openssl rand -base64 32`",
                text.chars().count()
            ))
        })?;
        let key = RandomizedNonceKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| IdentityError::Key("cannot be used as an AES-256 key".into()))?;
        let digest = Sha256::digest(bytes);
        let mut key_id = [0; KEY_ID_LEN];
        key_id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Ok(Vault { key, key_id })
    }

    /// `secret`, sealed for `owner`'s use of `backend`.
    pub fn seal(&self, owner: &str, backend: &str, secret: &str) -> Result<Vec<u8>, IdentityError> {
        if secret.is_empty() || secret.len() > MAX_SECRET_BYTES {
            return Err(IdentityError::Credential(format!(
                "a secret is 1 to {MAX_SECRET_BYTES} bytes; this one is {}",
                secret.len()
            )));
        }
        let mut in_out = secret.as_bytes().to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(bound_to(owner, backend)), &mut in_out)
            .map_err(|_| IdentityError::Credential("sealing failed".into()))?;
        let mut sealed = Vec::with_capacity(1 + KEY_ID_LEN + NONCE_LEN + in_out.len());
        sealed.push(FORMAT);
        sealed.extend_from_slice(&self.key_id);
        sealed.extend_from_slice(nonce.as_ref());
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    /// The secret in `sealed`, if it was sealed with this key for `owner` and `backend`.
    pub fn open(&self, owner: &str, backend: &str, sealed: &[u8]) -> Result<Secret, IdentityError> {
        let header = 1 + KEY_ID_LEN + NONCE_LEN;
        if sealed.len() <= header || sealed[0] != FORMAT {
            return Err(IdentityError::Credential(
                "the stored credential is not one sandgate sealed; set it again".into(),
            ));
        }
        if sealed[1..1 + KEY_ID_LEN] != self.key_id {
            return Err(IdentityError::Credential(
                "the stored credential was sealed with another [credentials] key (the key changed); set it again".into(),
            ));
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1 + KEY_ID_LEN..header])
            .map_err(|_| IdentityError::Credential("the stored credential is cut short".into()))?;
        let mut in_out = sealed[header..].to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(bound_to(owner, backend)), &mut in_out)
            .map_err(|_| {
                IdentityError::Credential(
                    "the stored credential does not open for this user and backend; set it again"
                        .into(),
                )
            })?;
        let text = std::str::from_utf8(plain)
            .map_err(|_| IdentityError::Credential("the stored credential is not text".into()))?;
        Ok(Secret::new(text))
    }
}

/// What a sealed secret is bound to.
fn bound_to(owner: &str, backend: &str) -> Vec<u8> {
    let mut aad = b"sandgate-credential\0".to_vec();
    aad.extend_from_slice(owner.as_bytes());
    aad.push(0);
    aad.extend_from_slice(backend.as_bytes());
    aad
}

/// 32 key bytes from base64 (either alphabet, padded or not) or hex.
fn decode_key(text: &str) -> Option<[u8; 32]> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let from_hex = || -> Option<Vec<u8>> {
        if text.len() != 64 {
            return None;
        }
        (0..64)
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
            .collect()
    };
    let bytes = from_hex().or_else(|| {
        [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|engine| engine.decode(text).ok())
    })?;
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "q2b0JmG5pTg3lQ0YkR9m1kX2mW8xV3nE4cB7dF6aH1s=";

    fn vault() -> Vault {
        Vault::from_key_text(KEY).expect("a key")
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_owner_and_backend_under_its_key() {
        let sealed = vault()
            .seal("user:aa", "notes", "ghp_alice")
            .expect("sealed");
        assert!(
            !sealed.windows(9).any(|w| w == b"ghp_alice"),
            "the secret is not in the sealed bytes"
        );
        assert_eq!(
            vault()
                .open("user:aa", "notes", &sealed)
                .expect("opens")
                .expose(),
            "ghp_alice"
        );
        assert_ne!(
            sealed,
            vault()
                .seal("user:aa", "notes", "ghp_alice")
                .expect("sealed"),
            "a fresh nonce each time"
        );
        for (owner, backend) in [("user:bb", "notes"), ("user:aa", "other")] {
            let refused = vault().open(owner, backend, &sealed).expect_err("refused");
            assert!(refused.to_string().contains("does not open"), "{refused}");
        }
        let other_key = Vault::from_key_text(&"ab".repeat(32)).expect("a hex key");
        let refused = other_key
            .open("user:aa", "notes", &sealed)
            .expect_err("refused");
        assert!(
            refused.to_string().contains("another [credentials] key"),
            "{refused}"
        );
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(vault().open("user:aa", "notes", &flipped).is_err());
        assert!(vault().open("user:aa", "notes", &sealed[..10]).is_err());
    }

    #[test]
    fn a_key_that_is_not_32_bytes_and_an_empty_or_huge_secret_are_refused() {
        for bad in ["", "short", &"a".repeat(44), &"zz".repeat(32)] {
            let error = Vault::from_key_text(bad).expect_err("refused");
            assert!(error.to_string().contains("openssl rand"), "{error}");
        }
        assert!(vault().seal("o", "b", "").is_err());
        assert!(
            vault()
                .seal("o", "b", &"x".repeat(MAX_SECRET_BYTES + 1))
                .is_err()
        );
    }
}
