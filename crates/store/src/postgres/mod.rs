//! The PostgreSQL engine: the store shared by several replicas. The same operations as the
//! SQLite engine, in PostgreSQL's words, on a pool of connections (`deadpool-postgres`).
//!
//! Records are written by one task that batches what queued up, as the SQLite thread does,
//! and a read of records first waits for the records queued before it, so a replica reads its
//! own writes. Outputs and stored tools are written at once, and the caller waits for the
//! commit.

mod batch;
mod credentials;
pub(crate) mod listen;
pub(crate) mod notice;
mod outputs;
mod pins;
pub(crate) mod rates;
pub(crate) mod records;
pub mod schema;
pub(crate) mod sessions;
mod shapes;
mod state;
pub(crate) mod tls;
mod tools;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::error::StoreError;
use crate::records::ExecutionRecord;
use crate::sqlite::Retention;
use notice::Notice;
use tls::redacted;

/// Connections a replica keeps to PostgreSQL at most.
const POOL_SIZE: usize = 16;
/// Notices kept for a slow listener before the oldest are skipped (it is told it lagged).
const NOTICES_BUFFERED: usize = 1024;

/// The shared store on PostgreSQL.
#[derive(Debug)]
pub struct PgStore {
    pool: Pool,
    retention: Retention,
    records: mpsc::UnboundedSender<Queued>,
    /// Moves when another replica (or this one) announces a change (see `listen`).
    changes: watch::Receiver<u64>,
    /// What replicas announce (see `listen`).
    notices: broadcast::Sender<Notice>,
    /// Ends the listener when the store goes.
    _stop_listening: oneshot::Sender<()>,
}

/// What the record writer takes.
enum Queued {
    /// A record, and who waits for its write, if anyone does.
    Record(
        Box<ExecutionRecord>,
        Option<oneshot::Sender<Result<(), StoreError>>>,
    ),
    /// Answered once every record queued before it is written.
    Flush(oneshot::Sender<()>),
}

impl PgStore {
    /// Connects to the database at `url` (a `postgres://` URL; see `tls` for `sslmode`, and
    /// `ca_file` for a private CA), migrates it, and starts the record writer. Needs a tokio
    /// runtime.
    pub async fn connect(
        url: &str,
        ca_file: Option<&Path>,
        retention: Retention,
    ) -> Result<Arc<PgStore>, StoreError> {
        let config = tokio_postgres::Config::from_str(url).map_err(|e| StoreError::Open {
            path: redacted(url),
            message: format!("the URL is not a PostgreSQL connection URL: {e}"),
        })?;
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let tls = tls::connector(url, ca_file)?;
        let manager = match tls.clone() {
            Some(tls) => Manager::from_config(config.clone(), tls, manager_config),
            None => Manager::from_config(config.clone(), tokio_postgres::NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::Open {
                path: redacted(url),
                message: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|e| {
            let said = with_causes(&e);
            let hint = if said.contains("certificate") {
                ". The server's certificate is not one this machine trusts: set [store] ca_file to the PEM of the CA that signed it"
            } else {
                ""
            };
            StoreError::Open {
                path: redacted(url),
                message: format!("cannot connect: {said}{hint}"),
            }
        })?;
        schema::migrate(&mut client).await?;
        drop(client);
        let (records, queue) = mpsc::unbounded_channel();
        let (announce, changes) = watch::channel(0);
        let (stop_listening, stop) = oneshot::channel();
        let (notices, _) = broadcast::channel(NOTICES_BUFFERED);
        tokio::spawn(listen::listen(config, tls, announce, notices.clone(), stop));
        let store = Arc::new(PgStore {
            pool,
            retention,
            records,
            changes,
            notices,
            _stop_listening: stop_listening,
        });
        tokio::spawn(records::write_queued(Arc::downgrade(&store), queue));
        store.prune().await?;
        Ok(store)
    }

    /// A connection from the pool.
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(with_causes(&e)))
    }

    /// A counter that moves when a change may have been made elsewhere: read the store again.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// What every replica announces from now on: sessions ended (this replica's too).
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    /// Queues a record; it is written with the others that queued up.
    pub fn record(&self, record: ExecutionRecord) {
        let _ = self.records.send(Queued::Record(Box::new(record), None));
    }

    /// Queues a record and answers once it is written, or once its first attempt failed (the
    /// record is then held and tried again, as any other). The writer does not wait for more
    /// records when one is waited for: records that queue up during its write go together in
    /// the next one.
    pub fn record_waited(&self, record: ExecutionRecord) -> crate::commit::Commit {
        let (reply, answer) = oneshot::channel();
        if let Err(mpsc::error::SendError(Queued::Record(_, Some(reply)))) = self
            .records
            .send(Queued::Record(Box::new(record), Some(reply)))
        {
            let _ = reply.send(Err(StoreError::Closed));
        }
        crate::commit::Commit(answer)
    }

    /// Waits until every record queued before this call is written.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (done, written) = oneshot::channel();
        self.records
            .send(Queued::Flush(done))
            .map_err(|_| StoreError::Closed)?;
        written.await.map_err(|_| StoreError::Closed)
    }
}

/// An error and every error under it, as one line: a failed TLS handshake says why.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        if !said.contains(&text) {
            said.push_str(": ");
            said.push_str(&text);
        }
        cause = inner.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::tls::redacted;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redacted("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redacted("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(
            redacted("host=db password=s3cret user=app"),
            "host=db password=*** user=app"
        );
        assert_eq!(
            redacted("postgres://db/x?password=s3cret&sslmode=require"),
            "postgres://db/x?password=***&sslmode=require"
        );
    }
}
