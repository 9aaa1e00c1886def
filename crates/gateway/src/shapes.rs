//! Learning what tools return, off the call path.
//!
//! The door hands each successful result of a tool that declares no output schema to
//! [`Shapes::offer`], which only queues it: a full queue drops the lesson, never the call. A
//! task drains the queue every `DRAIN_EVERY` (never woken by a call, so a call pays for no
//! wake-up) and learns from each result (the value the script got from it: its structured
//! content, or its one text block, read as JSON when it is JSON), on a blocking thread when the
//! batch is large; every
//! `PERSIST_EVERY` merges what it learned into the store, in the store's transaction, so
//! replicas that learn at once each add what they saw; on a shared store each replica also reads
//! every `CATCH_UP_EVERY` what the others wrote. Declarations read [`Shapes::observed`].

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::CallToolResult;
use sandgate_catalog::{Entry, LearnedShape, Observed};
use sandgate_store::StoreHandle;
use sandgate_upstream::Backends;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Results waiting to be learned from; past it, a result teaches nothing.
const QUEUE: usize = 4096;
/// The most bytes of results waiting (as their JSON); past it, a result teaches nothing.
const MAX_QUEUED_BYTES: usize = 16 * 1024 * 1024;
/// How often the queue is drained.
const DRAIN_EVERY: Duration = Duration::from_millis(20);
/// A batch larger than this (in result bytes) is learned on a blocking thread.
const INLINE_BATCH_BYTES: usize = 256 * 1024;
/// The largest result (as JSON) a shape is learned from.
pub const MAX_LEARNED_RESULT_BYTES: usize = 1024 * 1024;
/// How often what was learned goes to the store.
const PERSIST_EVERY: Duration = Duration::from_secs(2);
/// How often a replica reads the shapes other replicas wrote (a shared store only).
const CATCH_UP_EVERY: Duration = Duration::from_secs(5);
/// How far back each catch-up reads, against clocks that differ between machines.
const CLOCK_MARGIN_MS: i64 = 30_000;
/// The most tools a process keeps shapes for (a backend that lists more tools than this is
/// learned about only for the first ones seen).
const MAX_TOOLS: usize = 20_000;

/// A tool, by its backend and its own name.
type ToolKey = (String, String);

/// One result to learn from.
struct Lesson {
    backend: String,
    tool: String,
    result: CallToolResult,
    bytes: usize,
    /// The lesson's share of [`MAX_QUEUED_BYTES`], given back when the lesson is dropped
    /// (learned from, or not).
    _counted: OwnedSemaphorePermit,
}

/// The learned shapes, and the queue to the task that learns them.
#[derive(Debug)]
pub struct Shapes {
    lessons: mpsc::Sender<Lesson>,
    /// Asks the learning task to learn what waits and write it to the store now.
    flushes: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    /// Bytes of the results waiting, as permits each lesson holds until it is dropped: the
    /// count cannot go below zero whoever runs first (an offer that added its bytes after
    /// sending once let the learner subtract them first, which wrapped the count).
    queued: Arc<Semaphore>,
    shown: Arc<RwLock<HashMap<ToolKey, Arc<Observed>>>>,
    /// Which backends are learned about now (`learn_shapes`, which a reload may turn off).
    backends: Arc<dyn Backends>,
}

impl std::fmt::Debug for Lesson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lesson({}.{})", self.backend, self.tool)
    }
}

/// What the learning task holds.
struct Learning {
    backends: Arc<dyn Backends>,
    store: Option<StoreHandle>,
    /// What the store held at the last read or write, per tool.
    known: HashMap<ToolKey, LearnedShape>,
    /// What was learned since the last write to the store.
    unsaved: HashMap<ToolKey, LearnedShape>,
    shown: Arc<RwLock<HashMap<ToolKey, Arc<Observed>>>>,
    /// When the store's shapes were last read.
    read_at_ms: i64,
}

impl Shapes {
    /// Starts learning; the shapes `store` keeps are known at once.
    pub async fn start(store: Option<StoreHandle>, backends: Arc<dyn Backends>) -> Arc<Shapes> {
        let (lessons, queue) = mpsc::channel(QUEUE);
        let (flushes, flush_asked) = mpsc::channel(4);
        let shown = Arc::new(RwLock::new(HashMap::new()));
        let queued = Arc::new(Semaphore::new(MAX_QUEUED_BYTES));
        let mut learning = Learning {
            backends: backends.clone(),
            store,
            known: HashMap::new(),
            unsaved: HashMap::new(),
            shown: shown.clone(),
            read_at_ms: 0,
        };
        learning.load().await;
        tokio::spawn(learning.run(queue, flush_asked));
        Arc::new(Shapes {
            lessons,
            flushes,
            queued,
            shown,
            backends,
        })
    }

    /// Queues `result` of `backend`'s `tool` (`bytes` of JSON) to learn from, without waiting;
    /// dropped when the queue is full.
    pub fn offer(&self, backend: String, tool: String, result: CallToolResult, bytes: usize) {
        let Ok(permits) = u32::try_from(bytes) else {
            return;
        };
        let Ok(counted) = self.queued.clone().try_acquire_many_owned(permits) else {
            return;
        };
        let lesson = Lesson {
            backend,
            tool,
            result,
            bytes,
            _counted: counted,
        };
        let _ = self.lessons.try_send(lesson);
    }

    /// Learns what waits and writes what was learned to the store, then returns: a clean stop
    /// keeps the shapes of its last calls (they used to be lost when they came within the last
    /// `PERSIST_EVERY`).
    pub async fn flush(&self) {
        let (done, finished) = tokio::sync::oneshot::channel();
        if self.flushes.send(done).await.is_ok() {
            let _ = finished.await;
        }
    }

    /// How many bytes of results wait to be learned from (at most 16 MiB).
    pub fn queued_bytes(&self) -> usize {
        MAX_QUEUED_BYTES.saturating_sub(self.queued.available_permits())
    }

    /// How many results wait to be learned from.
    pub fn waiting(&self) -> usize {
        self.lessons.max_capacity() - self.lessons.capacity()
    }

    /// The shape learned for `entry`'s results, if any was and its backend is learned about
    /// (one turned to `learn_shapes = false` shows none, whatever was learned before).
    pub fn observed(&self, entry: &Entry) -> Option<Observed> {
        if !self.backends.learns_shapes(&entry.spec.backend) {
            return None;
        }
        let shown = self.shown.read().ok()?;
        shown
            .get(&(entry.spec.backend.clone(), entry.spec.name.clone()))
            .map(|o| (**o).clone())
    }
}

impl Learning {
    /// Reads the shapes the store holds that changed since the last read (all, the first
    /// time).
    async fn load(&mut self) {
        let Some(store) = &self.store else { return };
        let started = sandgate_store::now_ms();
        let since = match self.read_at_ms {
            0 => 0,
            at => at - CLOCK_MARGIN_MS,
        };
        match store.shapes(since).await {
            Ok(stored) => {
                let mut touched = Vec::new();
                for row in stored {
                    let key = (row.backend, row.tool);
                    if !self.known.contains_key(&key) && self.known.len() >= MAX_TOOLS {
                        continue;
                    }
                    if let Some(shape) = LearnedShape::from_json(&row.shape) {
                        self.known.insert(key.clone(), shape);
                        touched.push(key);
                    }
                }
                self.show(&touched);
                self.read_at_ms = started;
            }
            Err(e) => tracing::warn!("learned shapes could not be read from the store: {e}"),
        }
    }

    async fn run(
        mut self,
        mut queue: mpsc::Receiver<Lesson>,
        mut flush_asked: mpsc::Receiver<tokio::sync::oneshot::Sender<()>>,
    ) {
        let mut drain = tokio::time::interval(DRAIN_EVERY);
        drain.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tick = tokio::time::interval(PERSIST_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let shared = self.store.as_ref().is_some_and(StoreHandle::is_shared);
        let mut catch_up = tokio::time::interval(CATCH_UP_EVERY);
        catch_up.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = drain.tick() => {
                    if self.drain(&mut queue).await {
                        break;
                    }
                }
                _ = tick.tick() => self.persist().await,
                _ = catch_up.tick(), if shared => self.load().await,
                Some(done) = flush_asked.recv() => {
                    self.drain(&mut queue).await;
                    self.persist().await;
                    let _ = done.send(());
                }
            }
        }
        self.persist().await;
    }

    /// Learns from every result waiting in `queue`; whether the queue is closed (the gateway
    /// is gone).
    async fn drain(&mut self, queue: &mut mpsc::Receiver<Lesson>) -> bool {
        let mut batch = Vec::new();
        let closed = loop {
            match queue.try_recv() {
                Ok(lesson) => batch.push(lesson),
                Err(mpsc::error::TryRecvError::Empty) => break false,
                Err(mpsc::error::TryRecvError::Disconnected) => break true,
            }
        };
        if !batch.is_empty() {
            self.learn(batch).await;
        }
        closed
    }

    /// Learns from `batch` (on a blocking thread when it is large), and shows what changed.
    async fn learn(&mut self, batch: Vec<Lesson>) {
        let bytes: usize = batch.iter().map(|l| l.bytes).sum();
        let batch: Vec<Lesson> = batch
            .into_iter()
            .filter(|l| self.backends.learns_shapes(&l.backend))
            .collect();
        if batch.is_empty() {
            return;
        }
        let now = sandgate_store::now_ms();
        let tools = self.known.len();
        // A backend that serves each user with their own credential returns that user's data:
        // its shape keeps no values, or one user's words would reach every caller.
        let batch: Vec<(Lesson, bool)> = batch
            .into_iter()
            .map(|l| {
                let values = self.backends.per_user(&l.backend).is_none();
                (l, values)
            })
            .collect();
        let touched = if bytes <= INLINE_BATCH_BYTES {
            learn_all(&mut self.unsaved, tools, batch, now)
        } else {
            let mut unsaved = std::mem::take(&mut self.unsaved);
            match tokio::task::spawn_blocking(move || {
                let touched = learn_all(&mut unsaved, tools, batch, now);
                (unsaved, touched)
            })
            .await
            {
                Ok((unsaved, touched)) => {
                    self.unsaved = unsaved;
                    touched
                }
                Err(e) => {
                    tracing::warn!("learning results' shapes failed: {e}");
                    Vec::new()
                }
            }
        };
        self.show(&touched);
    }

    /// Merges what was learned into the store's shapes, and takes theirs (other replicas').
    async fn persist(&mut self) {
        let unsaved = std::mem::take(&mut self.unsaved);
        let Some(store) = self.store.clone() else {
            // Without a store, what was learned is kept in the process alone.
            for (key, lesson) in unsaved {
                self.known.entry(key).or_default().merge(&lesson);
            }
            return;
        };
        let mut touched = Vec::with_capacity(unsaved.len());
        for ((backend, tool), lesson) in unsaved {
            let kept = lesson.clone();
            let merge = Box::new(move |stored: Option<&str>| {
                let mut shape = stored.and_then(LearnedShape::from_json).unwrap_or_default();
                shape.merge(&lesson);
                shape.to_json()
            });
            match store.merge_shape(&backend, &tool, merge).await {
                Ok(text) => {
                    if let Some(shape) = LearnedShape::from_json(&text) {
                        self.known.insert((backend.clone(), tool.clone()), shape);
                        touched.push((backend, tool));
                    }
                }
                Err(e) => {
                    // Tried again at the next write, with what is learned meanwhile.
                    tracing::warn!("the shape learned for {backend}.{tool} was not kept: {e}");
                    self.unsaved
                        .entry((backend, tool))
                        .or_default()
                        .merge(&kept);
                }
            }
        }
        self.show(&touched);
    }

    /// Makes the shapes of `keys` (what the store holds, with what this process learned since
    /// it last wrote on top) what declarations show.
    fn show(&self, keys: &[ToolKey]) {
        let Ok(mut shown) = self.shown.write() else {
            return;
        };
        for key in keys {
            let shape = match (self.known.get(key), self.unsaved.get(key)) {
                (Some(known), Some(unsaved)) => {
                    let mut both = known.clone();
                    both.merge(unsaved);
                    Some(both)
                }
                (Some(one), None) | (None, Some(one)) => Some(one.clone()),
                (None, None) => None,
            };
            if let Some(mut shape) = shape {
                // What the store kept from before a backend served each user on their own
                // connection is shown without its values too.
                if self.backends.per_user(&key.0).is_some() {
                    shape.forget_values();
                }
                let since = crate::audit::rfc3339(u64::try_from(shape.since_ms()).unwrap_or(0));
                shown.insert(
                    key.clone(),
                    Arc::new(Observed {
                        schema: shape.schema(),
                        calls: shape.calls(),
                        since: since.get(..10).unwrap_or(&since).to_string(),
                    }),
                );
            }
        }
    }
}

/// Learns each lesson of `batch` into `unsaved` (a tool past [`MAX_TOOLS`], counting the
/// `tools` known already, is not learned), each with whether its values may be kept; the tools
/// touched, once each.
fn learn_all(
    unsaved: &mut HashMap<ToolKey, LearnedShape>,
    tools: usize,
    batch: Vec<(Lesson, bool)>,
    now: i64,
) -> Vec<ToolKey> {
    let mut touched = HashSet::new();
    for (lesson, keeps_values) in batch {
        let key = (lesson.backend, lesson.tool);
        if !unsaved.contains_key(&key) && tools + unsaved.len() >= MAX_TOOLS {
            continue;
        }
        let value = seen_by_script(lesson.result);
        let shape = unsaved.entry(key.clone()).or_default();
        shape.observe(&value, now);
        if !keeps_values {
            shape.forget_values();
        }
        touched.insert(key);
    }
    touched.into_iter().collect()
}

/// The value a script gets from `result` (as the preamble's `mapResult` makes it): the
/// structured content; else the one text block, parsed when it is a JSON object or array;
/// else the content blocks.
pub fn seen_by_script(result: CallToolResult) -> Value {
    if let Some(structured) = result.structured_content.filter(|v| !v.is_null()) {
        return structured;
    }
    if let [block] = result.content.as_slice()
        && let Some(text) = block.as_text()
    {
        let text = &text.text;
        if matches!(text.trim_start().chars().next(), Some('{' | '['))
            && let Ok(value) = serde_json::from_str(text)
        {
            return value;
        }
        return Value::String(text.clone());
    }
    serde_json::to_value(&result.content).unwrap_or(Value::Null)
}
