//! What a learned shape may keep of the text it sees: object keys that read as names, and
//! string values that read as words of a small vocabulary (`"open"`, `"in_progress"`). Anything
//! else (ids, tokens, sentences, numbers in text) is data, and a shape never keeps data.

/// Whether an object key names a secret (`token`, `password`, `api_key`, ...): the values under
/// it are never kept, not even as an enum, and approval questions mask them.
pub fn names_a_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api_key",
        "api-key",
        "authorization",
        "cookie",
        "credential",
        "private_key",
        "privatekey",
        "session",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// The longest key a shape keeps as a field name; a longer one makes its object a map.
const MAX_NAME_CHARS: usize = 40;
/// The most digits a field name may hold: more reads as an id or a token, which is data.
const MAX_NAME_DIGITS: usize = 4;

/// Whether `key` reads as a field name (`created_at`, `userId`, `@type`, `v2`) rather than data
/// used as a key (an id, a token, an address, a date). An object with a key that does not is a
/// map, and its keys are never kept.
pub fn is_field_name(key: &str) -> bool {
    let mut chars = key.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if key.len() > MAX_NAME_CHARS || !(first.is_ascii_alphabetic() || "_$@".contains(first)) {
        return false;
    }
    let mut digits = 0;
    for c in chars {
        if c.is_ascii_digit() {
            digits += 1;
        } else if !(c.is_ascii_alphabetic() || "_$-.:".contains(c)) {
            return false;
        }
    }
    digits <= MAX_NAME_DIGITS && !looks_like_a_token(key)
}

/// The longest string value a shape may keep as a member of an enum.
const MAX_WORD_CHARS: usize = 24;

/// Whether a string value may become a member of an enum once it repeats: letters with `_`,
/// `-`, `.` or single spaces between them, short, no digits. Tokens, ids, numbers, sentences and
/// anything with punctuation never are.
pub fn is_vocabulary_word(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    text.len() <= MAX_WORD_CHARS
        && first.is_ascii_alphabetic()
        && !text.ends_with(' ')
        && !text.contains("  ")
        && text
            .chars()
            .all(|c| c.is_ascii_alphabetic() || "_-. ".contains(c))
        && text.split(' ').count() <= 3
        && !looks_like_a_token(text)
}

/// Long runs of letters that change case at random read as a key or a token (`sk-AbCdEfGh…`),
/// and known credential prefixes are always tokens.
fn looks_like_a_token(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    if [
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "sk-",
        "sk_",
        "pk_",
        "xoxb-",
        "xoxp-",
        "akia",
        "eyj",
        "bearer",
    ]
    .iter()
    .any(|prefix| lower.starts_with(prefix))
    {
        return true;
    }
    // Case changes inside words: camelCase has a few, a random token has many.
    let changes = text
        .as_bytes()
        .windows(2)
        .filter(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
        .count();
    text.len() >= 12 && changes * 4 > text.len() / 2
}

/// A stable 64-bit hash of `text` (FNV-1a), the same in every process, so a value seen once is
/// known as seen without keeping it, and replicas that each saw it once agree.
pub(crate) fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_names_and_data_is_not() {
        for name in [
            "id",
            "created_at",
            "userId",
            "@type",
            "html_url",
            "v2",
            "x-rate",
        ] {
            assert!(is_field_name(name), "{name}");
        }
        for data in [
            "",
            "123",
            "2024-06-30",
            "user@example.com",
            "a b",
            "ghp_abcdefghijklmnopqrstuvwxyz",
            "550e8400-e29b-41d4-a716-446655440000",
            "ab12cd34ef56",
            "AbCdEfGhIjKlMnOpQrSt",
        ] {
            assert!(!is_field_name(data), "{data}");
        }
    }

    #[test]
    fn only_short_words_may_be_an_enum() {
        for word in [
            "open",
            "closed",
            "in_progress",
            "text",
            "image",
            "high priority",
        ] {
            assert!(is_vocabulary_word(word), "{word}");
        }
        for data in [
            "",
            "hunter2",
            "sk-live-abcdef",
            "a sentence that goes on and on",
            "user@example.com",
            "AbCdEfGhIjKlMnOpQr",
            "Bearer abc",
            "42",
        ] {
            assert!(!is_vocabulary_word(data), "{data}");
        }
    }

    #[test]
    fn secret_names_are_known_in_any_case() {
        assert!(names_a_secret("GITHUB_TOKEN"));
        assert!(names_a_secret("x-api-key"));
        assert!(!names_a_secret("title"));
    }
}
