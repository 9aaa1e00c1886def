//! The SQLite engine as the gateway uses it: a thread that owns the connection and a queue in
//! front of it. Records are sent and forgotten, so recording never slows an execution; an
//! output comes back as a [`Commit`] to wait for; reads wait for their answer and, coming
//! through the same queue, see every earlier write.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::commit::Commit;
use crate::error::StoreError;
use crate::records::ExecutionRecord;
use crate::sqlite::Store;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    /// A record, and who waits for its write, if anyone does.
    Record(Box<ExecutionRecord>, Option<Reply<()>>),
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
        let _ = self.queue.send(Command::Record(Box::new(record), None));
    }

    /// Records an execution and answers once it is written (or could not be). The thread does
    /// not wait for more records when one is waited for.
    pub(crate) fn record_waited(&self, record: ExecutionRecord) -> Commit {
        let (reply, answer) = oneshot::channel();
        if let Err(mpsc::SendError(Command::Record(_, Some(reply)))) = self
            .queue
            .send(Command::Record(Box::new(record), Some(reply)))
        {
            let _ = reply.send(Err(StoreError::Closed));
        }
        Commit(answer)
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
    let mut pending = Pending::default();
    while let Ok(first) = commands.recv() {
        // A record nobody waits for waits a little for others to go with it; anything
        // someone waits for (a waited record, an output, a read) ends that wait.
        let mut gathered = vec![first];
        if matches!(gathered[0], Command::Record(_, None)) {
            let until = std::time::Instant::now() + COALESCE;
            while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                let Ok(command) = commands.recv_timeout(left) else {
                    break;
                };
                let urgent = !matches!(command, Command::Record(_, None));
                gathered.push(command);
                if urgent || gathered.len() >= MAX_BATCH {
                    break;
                }
            }
        }
        // Records that queued up together are written in one transaction; anything else
        // first flushes them, so every command still sees the writes sent before it.
        let mut gathered = gathered.into_iter();
        let mut next = gathered.next();
        while let Some(command) = next.take() {
            match command {
                Command::Record(record, waiter) => {
                    pending.records.push(*record);
                    pending.waiting.extend(waiter);
                }
                other => {
                    flush(&mut store, &mut pending);
                    execute(&mut store, other);
                }
            }
            next = gathered.next();
            if next.is_none() && pending.records.len() < MAX_BATCH {
                next = commands.try_recv().ok();
            }
        }
        flush(&mut store, &mut pending);
    }
}

/// Records waiting for their transaction, and who waits for it.
#[derive(Default)]
struct Pending {
    records: Vec<ExecutionRecord>,
    waiting: Vec<Reply<()>>,
}

fn flush(store: &mut Store, pending: &mut Pending) {
    if pending.records.is_empty() {
        return;
    }
    let outcome = store.record_all(&pending.records);
    if let Err(e) = &outcome {
        tracing::warn!(
            records = pending.records.len(),
            "could not record executions: {e}"
        );
    }
    for waiter in pending.waiting.drain(..) {
        let _ = waiter.send(match &outcome {
            Ok(()) => Ok(()),
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        });
    }
    pending.records.clear();
}

fn execute(store: &mut Store, command: Command) {
    match command {
        Command::Record(record, waiter) => {
            let outcome = store.record(&record);
            if let Err(e) = &outcome {
                tracing::warn!(execution = %record.id, "could not record the execution: {e}");
            }
            if let Some(waiter) = waiter {
                let _ = waiter.send(outcome);
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
