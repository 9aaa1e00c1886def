//! The store's one error type.

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file cannot be opened or created.
    #[error(
        "cannot open the store at {path}: {message}. Check that the directory is writable, or set [store] path in the config"
    )]
    Open {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The database was written by a newer sandgate.
    #[error(
        "the store is at schema version {found}, newer than this sandgate knows ({known}). Upgrade sandgate, or point [store] path at another file"
    )]
    TooNew {
        /// The file's version.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// No stored output under that id.
    #[error(
        "no stored output for execution {id}: it was never shortened (the response held all of it), or it expired. Re-run the code to get it again"
    )]
    NoOutput {
        /// The execution id.
        id: String,
    },
    /// No execution record under that id.
    #[error("no execution {id}. `sandgate executions list` shows the recent ones")]
    NoExecution {
        /// The execution id.
        id: String,
    },
    /// No stored tool under that name.
    #[error("no stored tool named `{name}`. `sandgate tools stored` lists them")]
    NoTool {
        /// The name.
        name: String,
    },
    /// No such version of a stored tool.
    #[error(
        "stored tool `{name}` has no version {version}. `sandgate tools versions {name}` lists them"
    )]
    NoToolVersion {
        /// The name.
        name: String,
        /// The version asked for.
        version: u32,
    },
    /// A profile tried to change a stored tool another profile registered.
    #[error(
        "user.{name} belongs to `{owner}` (a profile, or one user of a profile): only its owner may update it (and only it, or an admin profile, remove it). Register yours under another name"
    )]
    OwnedByOther {
        /// The tool's name.
        name: String,
        /// The profile that registered its current version.
        owner: String,
    },
    /// A byte range outside the output.
    #[error(
        "offset {offset} is past the end of the output ({total} bytes). Read from an offset below {total}"
    )]
    Range {
        /// The asked offset.
        offset: usize,
        /// The output's size.
        total: usize,
    },
    /// Something read back is not what was written.
    #[error("the store holds something it cannot read: {what}")]
    Corrupt {
        /// What.
        what: &'static str,
    },
    /// What was asked to be kept is not allowed (too large, too many).
    #[error("{0}")]
    Invalid(String),
    /// PostgreSQL cannot be reached now.
    #[error(
        "the store (PostgreSQL) cannot be reached: {0}. Check that the server is up and [store] url; the request may be retried"
    )]
    Unavailable(String),
    /// PostgreSQL failed.
    #[error("store (PostgreSQL): {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The store's thread has stopped.
    #[error("the store is closed")]
    Closed,
    /// SQLite failed.
    #[error("store: {0}")]
    Sql(#[from] rusqlite::Error),
}
