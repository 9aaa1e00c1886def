//! The gateway's side of the store: a thread that owns the connection and a queue in front of
//! it. Records are sent and forgotten, so recording never slows an execution; an output comes
//! back as a [`Commit`] to wait for, so a response names it only once it is written; reads
//! wait for their answer and, coming through the same queue, see every earlier write. Every
//! operation the gateway needs is a typed method here, so it never reaches into an engine.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::tools::Changer;
use crate::{ExecutionRecord, OutputSlice, RecordFilter, Stats, Store, StoreError, StoredTool};

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    Record(Box<ExecutionRecord>),
    SaveOutput {
        id: String,
        body: String,
        reply: Reply<()>,
    },
    OutputAnyOwner {
        id: String,
        reply: Reply<String>,
    },
    Output {
        id: String,
        reply: Reply<String>,
    },
    Range {
        id: String,
        offset: usize,
        length: Option<usize>,
        reply: Reply<OutputSlice>,
    },
    List {
        limit: usize,
        reply: Reply<Vec<ExecutionRecord>>,
    },
    Get {
        id: String,
        reply: Reply<ExecutionRecord>,
    },
    Stats {
        profile: Option<String>,
        reply: Reply<Stats>,
    },
    Flush {
        reply: Reply<()>,
    },
    /// Any work on the store, run on its thread in queue order (stored tools use it).
    Run(Box<dyn FnOnce(&mut Store) + Send>),
}

/// A cheap, cloneable handle to the store's thread.
#[derive(Debug, Clone)]
pub struct StoreHandle {
    queue: mpsc::Sender<Command>,
}

impl StoreHandle {
    /// Moves `store` to its own thread and returns the handle to it.
    pub fn spawn(store: Store) -> Result<StoreHandle, StoreError> {
        let (queue, commands) = mpsc::channel::<Command>();
        std::thread::Builder::new()
            .name("sandgate-store".into())
            .spawn(move || serve(store, commands))
            .map_err(|e| StoreError::Open {
                path: "<thread>".into(),
                message: e.to_string(),
            })?;
        Ok(StoreHandle { queue })
    }

    /// Records an execution, without waiting.
    pub fn record(&self, record: ExecutionRecord) {
        let _ = self.queue.send(Command::Record(Box::new(record)));
    }

    /// Keeps a full output. A read sent afterwards sees it; the [`Commit`] says when it is
    /// written (a response names the output only then).
    pub fn save_output(&self, id: String, body: String) -> Commit {
        let (reply, answer) = oneshot::channel();
        let _ = self.queue.send(Command::SaveOutput { id, body, reply });
        Commit(answer)
    }

    /// Every stored tool a name points at, by name.
    pub async fn tools(&self) -> Result<Vec<StoredTool>, StoreError> {
        self.run(|s| s.tools()).await
    }

    /// Adds a new version of stored tool `name` for profile `owner` and points the name at
    /// it; refused when the name points at another profile's tool. Returns the version.
    pub async fn put_tool(
        &self,
        name: &str,
        code: &str,
        meta: &str,
        owner: &str,
    ) -> Result<u32, StoreError> {
        let (name, code, meta, owner) = (
            name.to_string(),
            code.to_string(),
            meta.to_string(),
            owner.to_string(),
        );
        self.run(move |s| {
            s.put_tool_by(
                &name,
                &code,
                &meta,
                &owner,
                Changer::Profile {
                    name: &owner,
                    admin: false,
                },
            )
        })
        .await
    }

    /// Removes stored tool `name` (its versions stay), for `profile`: refused when another
    /// profile registered it, unless `admin`.
    pub async fn remove_tool(
        &self,
        name: &str,
        profile: &str,
        admin: bool,
    ) -> Result<(), StoreError> {
        let (name, profile) = (name.to_string(), profile.to_string());
        self.run(move |s| {
            s.remove_tool_by(
                &name,
                Changer::Profile {
                    name: &profile,
                    admin,
                },
            )
        })
        .await
    }

    /// A number that changes when another process commits to the store: read it, and read
    /// the stored tools again only when it moved.
    pub async fn change_mark(&self) -> Result<i64, StoreError> {
        self.run(|s| s.data_version()).await
    }

    /// The most recent executions that match `filter`.
    pub async fn list_matching(
        &self,
        filter: RecordFilter,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.run(move |s| s.list_matching(&filter, limit)).await
    }

    /// The whole stored output of an execution.
    pub async fn output(&self, id: &str) -> Result<String, StoreError> {
        self.ask(|reply| Command::Output {
            id: id.to_string(),
            reply,
        })
        .await
    }

    /// The whole stored output `id`, whoever's it is (see [`Store::output_for_operator`]): for
    /// the operator and admin profiles.
    pub async fn output_any_owner(&self, id: &str) -> Result<String, StoreError> {
        self.ask(|reply| Command::OutputAnyOwner {
            id: id.to_string(),
            reply,
        })
        .await
    }

    /// A byte range of a stored output (see [`Store::output_range`]).
    pub async fn output_range(
        &self,
        id: &str,
        offset: usize,
        length: Option<usize>,
    ) -> Result<OutputSlice, StoreError> {
        self.ask(|reply| Command::Range {
            id: id.to_string(),
            offset,
            length,
            reply,
        })
        .await
    }

    /// The most recent executions.
    pub async fn list(&self, limit: usize) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.ask(|reply| Command::List { limit, reply }).await
    }

    /// One execution with its calls.
    pub async fn get(&self, id: &str) -> Result<ExecutionRecord, StoreError> {
        self.ask(|reply| Command::Get {
            id: id.to_string(),
            reply,
        })
        .await
    }

    /// Execution statistics: of every profile (`None`), or of one.
    pub async fn stats(&self, profile: Option<&str>) -> Result<Stats, StoreError> {
        let profile = profile.map(str::to_string);
        self.ask(|reply| Command::Stats { profile, reply }).await
    }

    /// Waits until every write queued before this call is done (the queue is served in order).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.ask(|reply| Command::Flush { reply }).await
    }

    /// Runs `work` on the store's thread, after everything queued before it, and returns its
    /// answer.
    async fn run<T: Send + 'static>(
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

/// An output on its way to the store.
#[derive(Debug)]
#[must_use = "a response names an output only once it is committed"]
pub struct Commit(oneshot::Receiver<Result<(), StoreError>>);

impl Commit {
    /// Waits until the write is done, and says whether it succeeded.
    pub async fn committed(self) -> Result<(), StoreError> {
        self.0.await.map_err(|_| StoreError::Closed)?
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
        Command::OutputAnyOwner { id, reply } => {
            let _ = reply.send(store.output_for_operator(&id));
        }
        Command::Output { id, reply } => {
            let _ = reply.send(store.output(&id));
        }
        Command::Range {
            id,
            offset,
            length,
            reply,
        } => {
            let _ = reply.send(store.output_range(&id, offset, length));
        }
        Command::List { limit, reply } => {
            let _ = reply.send(store.list(limit));
        }
        Command::Get { id, reply } => {
            let _ = reply.send(store.get(&id));
        }
        Command::Stats { profile, reply } => {
            let _ = reply.send(store.stats(profile.as_deref()));
        }
        Command::Run(work) => work(store),
        Command::Flush { reply } => {
            let _ = reply.send(Ok(()));
        }
    }
}
