//! The one error type of the config crate. Every variant says where (file and key), what is
//! wrong, and how to fix it, because the person reading it is editing a file by hand.

use std::path::PathBuf;

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("cannot read config file {path}: {cause}. Check the path given to --config.")]
    Read {
        /// The file we tried to read.
        path: PathBuf,
        /// The I/O error (in the message, not chained, so it is said once).
        cause: std::io::Error,
    },
    /// The file is not valid TOML or JSON, or a value has the wrong shape.
    #[error("{file}: {message}")]
    Syntax {
        /// The file (or `<inline>`).
        file: String,
        /// Parser message, including line and key where known.
        message: String,
    },
    /// A key that sandgate does not know.
    #[error(
        "{file}: unknown key `{key}`{suggestion}. Remove it or fix its spelling; docs/config.md lists every key."
    )]
    UnknownKey {
        /// The file.
        file: String,
        /// Dotted path of the unknown key, e.g. `servers.github.comand`.
        key: String,
        /// ` (did you mean `command`?)` or empty.
        suggestion: String,
    },
    /// A value that parses but makes no sense.
    #[error("{file}: `{key}` {problem}. Fix: {fix}")]
    Invalid {
        /// The file.
        file: String,
        /// Dotted path of the offending key.
        key: String,
        /// What is wrong with it.
        problem: String,
        /// What to do about it.
        fix: String,
    },
    /// A secret (a token) that references an unset variable.
    #[error(
        "`{key}` references ${{{var}}}, which is not set in sandgate's environment. Export {var} before starting sandgate."
    )]
    MissingSecret {
        /// Which secret.
        key: String,
        /// The variable name.
        var: String,
    },
    /// A configured token too short to resist guessing.
    #[error(
        "`{key}` is shorter than {min} characters, so it could be guessed. Use a long random token, e.g. from `openssl rand -hex 32`."
    )]
    WeakToken {
        /// Which token.
        key: String,
        /// The shortest accepted.
        min: usize,
    },
}
