//! The store: execution records, full outputs and stored tools, on one of two engines behind
//! one handle ([`StoreHandle`]): the embedded SQLite database (the default, for one machine)
//! or PostgreSQL (for replicas that share one store).
//!
//! It keeps a record of every execution (for `sandgate://stats` and `sandgate executions`) and
//! the full text of every output that shaping shortened, so that nothing a tool returned is
//! ever lost: the model gets the short version and can read any part of the rest. This is the
//! only crate that speaks SQL. The schema only moves forward, one numbered migration at a
//! time ([`migrate`]).
//!
//! The gateway never waits on a record: it talks to a [`StoreHandle`], which queues records
//! for the engine and hands back a [`Commit`] for an output. A read sees every record sent
//! before it through the same handle.

mod commit;
mod credentials;
mod error;
mod handle;
mod ids;
pub mod migrate;
mod outputs;
mod pins;
pub mod postgres;
mod records;
mod shapes;
mod sqlite;
mod sqlite_queue;
mod state;
mod tools;

pub use commit::Commit;
pub use credentials::{CredentialEntry, MAX_CREDENTIALS_PER_OWNER, MAX_SEALED_BYTES};
pub use error::StoreError;
pub use handle::StoreHandle;
pub use ids::{new_execution_id, new_random_id, now_ms};
pub use outputs::{OutputSlice, slice};
pub use pins::{MAX_PIN_BYTES, StoredHeld, StoredPin};
pub use postgres::notice::{Notice, SessionKind};
pub use postgres::rates::Admitted;
pub use postgres::sessions::SharedSession;
pub use records::{
    BackendStats, CallRow, ExecutionRecord, KEEP_SHOWN, MAX_CALL_ERROR_CHARS, MAX_SHOWN_BYTES,
    RUNNING, RecordFilter, Stats, TierStats,
};
pub use shapes::{MAX_SHAPE_BYTES, ShapeMerge, StoredShape};
pub use sqlite::{Retention, Store};
pub use state::{MAX_STATE_BYTES, MAX_STATE_KEY_BYTES, MAX_STATE_KEYS, MAX_STATE_VALUE_BYTES};
pub use tools::{Changer, StoredTool, ToolVersion};
