//! The SQLite engine as the gateway uses it: a thread that owns the connection and a queue in
//! front of it. Records are sent and forgotten, so recording never slows an execution; an
//! output comes back as a [`Commit`] to wait for; reads wait for their answer and, coming
//! through the same queue, see every earlier write.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::handle::Commit;
use crate::{ExecutionRecord, Store, StoreError};

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    Record(Box<ExecutionRecord>),
    SaveOutput {
        id: String,
        body: String,
        reply: Reply<()>,
    },
    Flush {
        reply: Reply<()>,
    },
    /// Any work on the store, run on its thread in queue order (stored tools use it).
    Run(Box<dyn FnOnce(&mut Store) + Send>),
}

/// A cheap, cloneable handle to the SQLite store's thread.
#[derive(Debug, Clone)]
pub(crate) struct SqliteQueue {
    queue: mpsc::Sender<Command>,
}

impl SqliteQueue {
    /// Moves `store` to its own thread and returns the handle to it.
    pub(crate) fn spawn(store: Store) -> Result<SqliteQueue, StoreError> {
        let (queue, commands) = mpsc::channel::<Command>();
        std::thread::Builder::new()
            .name("sandgate-store".into())
            .spawn(move || serve(store, commands))
            .map_err(|e| StoreError::Open {
                path: "<thread>".into(),
                message: e.to_string(),
            })?;
        Ok(SqliteQueue { queue })
    }

    /// Records an execution, without waiting.
    pub(crate) fn record(&self, record: ExecutionRecord) {
        let _ = self.queue.send(Command::Record(Box::new(record)));
    }

    /// Keeps a full output. A read sent afterwards sees it; the [`Commit`] says when it is
    /// written (a response names the output only then).
    pub(crate) fn save_output(&self, id: String, body: String) -> Commit {
        let (reply, answer) = oneshot::channel();
        let _ = self.queue.send(Command::SaveOutput { id, body, reply });
        Commit(answer)
    }

    /// Waits until every write queued before this call is done (the queue is served in order).
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        self.ask(|reply| Command::Flush { reply }).await
    }

    /// Runs `work` on the store's thread, after everything queued before it, and returns its
    /// answer.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Command::Run(Box::new(move |store| {
                let _ = reply.send(work(store));
            })))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn ask<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(command(reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// Most records written in one transaction when they queue up.
const MAX_BATCH: usize = 256;
/// After a record arrives, how long the thread waits for more before writing them together.
/// Busy gateways then write one transaction per burst instead of one per execution, and the
/// thread wakes (and takes a CPU from the executions) far less often.
const COALESCE: std::time::Duration = std::time::Duration::from_millis(5);

fn serve(mut store: Store, commands: mpsc::Receiver<Command>) {
    let mut pending: Vec<ExecutionRecord> = Vec::new();
    while let Ok(first) = commands.recv() {
        if matches!(first, Command::Record(_)) {
            std::thread::sleep(COALESCE);
        }
        // Records that queued up together are written in one transaction; anything else
        // first flushes them, so every command still sees the writes sent before it.
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Record(record) => pending.push(*record),
                other => {
                    flush(&mut store, &mut pending);
                    execute(&mut store, other);
                }
            }
            if pending.len() < MAX_BATCH {
                next = commands.try_recv().ok();
            }
        }
        flush(&mut store, &mut pending);
    }
}

fn flush(store: &mut Store, pending: &mut Vec<ExecutionRecord>) {
    if pending.is_empty() {
        return;
    }
    if let Err(e) = store.record_all(pending) {
        tracing::warn!(records = pending.len(), "could not record executions: {e}");
    }
    pending.clear();
}

fn execute(store: &mut Store, command: Command) {
    match command {
        Command::Record(record) => {
            if let Err(e) = store.record(&record) {
                tracing::warn!(execution = %record.id, "could not record the execution: {e}");
            }
        }
        Command::SaveOutput { id, body, reply } => {
            let _ = reply.send(store.save_output(&id, &body));
        }
        Command::Run(work) => work(store),
        Command::Flush { reply } => {
            let _ = reply.send(Ok(()));
        }
    }
}
