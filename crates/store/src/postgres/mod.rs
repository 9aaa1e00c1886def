//! The PostgreSQL engine: the store shared by several replicas. The same operations as the
//! SQLite engine, in PostgreSQL's words, on a pool of connections (`deadpool-postgres`).
//!
//! Records are written by one task that batches what queued up, as the SQLite thread does,
//! and a read of records first waits for the records queued before it, so a replica reads its
//! own writes. Outputs and stored tools are written at once, and the caller waits for the
//! commit.

mod outputs;
mod records;
pub mod schema;
mod tls;
mod tools;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};

use crate::{ExecutionRecord, Retention, StoreError};

/// Connections a replica keeps to PostgreSQL at most.
const POOL_SIZE: usize = 16;

/// The shared store on PostgreSQL.
#[derive(Debug)]
pub struct PgStore {
    pool: Pool,
    retention: Retention,
    records: mpsc::UnboundedSender<Queued>,
}

/// What the record writer takes.
enum Queued {
    Record(Box<ExecutionRecord>),
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
        let manager = match tls::connector(url, ca_file)? {
            Some(tls) => Manager::from_config(config, tls, manager_config),
            None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::Open {
                path: redacted(url),
                message: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|e| StoreError::Open {
            path: redacted(url),
            message: format!("cannot connect: {e}"),
        })?;
        schema::migrate(&mut client).await?;
        drop(client);
        let (records, queue) = mpsc::unbounded_channel();
        let store = Arc::new(PgStore {
            pool,
            retention,
            records,
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
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    /// Queues a record; it is written with the others that queued up.
    pub fn record(&self, record: ExecutionRecord) {
        let _ = self.records.send(Queued::Record(Box::new(record)));
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

/// `url` without its password, for messages: in the user part of a URL, or as a
/// `password=` key of a key-value string or of a URL's query.
fn redacted(url: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::redacted;

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
