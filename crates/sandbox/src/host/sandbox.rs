//! The sandbox's front door: one [`Execution`] in, one [`ExecutionResult`] out. It checks the
//! code's size, strips its TypeScript, hands it to the worker pool, and turns what the worker
//! reports into results and errors a model can act on.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use super::{hints, pool::Pool, python, stacks, tool_file, transpile};
use crate::wire;
use crate::{Bridge, CallRecord, wire::protocol::ErrorKind, host::result::ExecError, ExecStats, host::result::ExecutionResult, wire::limits::Limits, PoolConfig, Protections, RunMode, error::SandboxError, ToolBinding, WorkerInfo};

/// One execution to run.
#[derive(Debug, Clone)]
pub struct Execution {
    /// The user's TypeScript (or JavaScript).
    pub code: String,
    /// Tools the code may call.
    pub tools: Arc<Vec<ToolBinding>>,
    /// Names of host functions exposed as globals (e.g. `addNumbers`).
    pub host_functions: Arc<Vec<String>>,
    /// The environment variables the caller may read, with their values (`None`: not set),
    /// loaded when the execution starts (`process.env.NAME`, `env.NAME`); empty binds neither.
    pub env: Arc<Vec<(String, Option<String>)>>,
    /// Optional JSON exposed as the global `context`.
    pub context: Option<serde_json::Value>,
    /// Limits for this execution.
    pub limits: Limits,
    /// A script (the default), or a stored tool's module (see [`tool_file`]).
    pub mode: RunMode,
    /// The engine that runs it: QuickJS (the default), V8 when the sandbox has it, or Monty,
    /// which runs the code as Python.
    pub engine: Engine,
}

/// Which engine runs an execution (and so which language its code is: Monty's is Python).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// QuickJS in sandgate's own workers: starts in microseconds; interprets.
    #[default]
    Quickjs,
    /// V8, in Deno workers (see `worker::v8`): compiles, for heavy code.
    V8,
    /// Monty, for Python, in sandgate's own workers (see `worker::python`).
    Monty,
}

impl Engine {
    /// The engine's name in the config and in `call_tool_chain` (`quickjs`, `v8`, `monty`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Quickjs => "quickjs",
            Engine::V8 => "v8",
            Engine::Monty => "monty",
        }
    }

    /// The language of the code it runs (`typescript`, `python`), as records show it.
    pub fn language(self) -> &'static str {
        match self {
            Engine::Quickjs | Engine::V8 => "typescript",
            Engine::Monty => "python",
        }
    }
}

/// The sandbox: a worker pool plus the host-side steps (TypeScript, hints).
#[derive(Debug, Clone)]
pub struct Sandbox {
    pool: Arc<Pool>,
    /// The V8 engine's pool, when the embedder started one ([`Sandbox::with_v8`]).
    v8: Option<Arc<Pool>>,
    /// The Python engine's pool, when the embedder started one ([`Sandbox::with_python`]).
    python: Option<Arc<Pool>>,
    /// Tools the embedder's model calls outside code (sandgate's meta-tools): code that names
    /// one is told it is not callable from code. Handed over by the embedder, so no copy of
    /// the names can drift from the real list.
    outside_tools: Arc<[String]>,
}

impl Sandbox {
    /// Starts a sandbox with a warm pool.
    pub async fn start(config: PoolConfig) -> Result<Sandbox, SandboxError> {
        Ok(Sandbox {
            pool: Pool::start(config).await?,
            v8: None,
            python: None,
            outside_tools: Arc::from(Vec::new()),
        })
    }

    /// The same sandbox with the V8 engine too: a pool of workers started with `config` (whose
    /// arguments select V8, `--v8 DENO`), for executions that ask for [`Engine::V8`].
    pub async fn with_v8(mut self, config: PoolConfig) -> Result<Sandbox, SandboxError> {
        self.v8 = Some(Pool::start(config).await?);
        Ok(self)
    }

    /// The same sandbox with the Python engine too: a pool of workers started with `config`
    /// (whose arguments select Python, [`crate::PYTHON_ARG`]), for executions on
    /// [`Engine::Monty`].
    pub async fn with_python(mut self, config: PoolConfig) -> Result<Sandbox, SandboxError> {
        self.python = Some(Pool::start(config).await?);
        Ok(self)
    }

    /// Whether executions can run on `engine`.
    pub fn has(&self, engine: Engine) -> bool {
        match engine {
            Engine::Quickjs => true,
            Engine::V8 => self.v8.is_some(),
            Engine::Monty => self.python.is_some(),
        }
    }

    /// The pools of every engine that runs.
    fn pools(&self) -> impl Iterator<Item = &Arc<Pool>> {
        std::iter::once(&self.pool).chain(&self.v8).chain(&self.python)
    }

    /// Which protections the V8 engine's workers run with, when it runs.
    pub fn v8_protections(&self) -> Option<&Protections> {
        self.v8.as_deref().map(Pool::protections)
    }

    /// The same sandbox, told which tools its embedder's model calls outside code (their
    /// hints say so when code reaches for one).
    pub fn with_outside_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Sandbox {
        self.outside_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Which protections the workers run with.
    pub fn protections(&self) -> &Protections {
        self.pool.protections()
    }

    /// Kills the idle workers and takes no more executions: for shutting down.
    pub async fn shutdown(&self) {
        for pool in self.pools() {
            pool.shutdown().await;
        }
    }

    /// Size of the template image each execution's fresh runtime is copied from, or `None`
    /// if the workers build a runtime per execution (see `engine::snapshot::Snapshot`).
    pub fn template_bytes(&self) -> Option<u64> {
        self.pool.template_bytes()
    }

    /// How many workers were killed by the deadline backstop (see [`Pool::backstop_kills`]).
    pub fn backstop_kills(&self) -> usize {
        self.pools().map(|pool| pool.backstop_kills()).sum()
    }

    /// The live worker processes (of every engine) and the executions on each.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.pools().flat_map(|pool| pool.workers()).collect()
    }

    /// Runs one execution. Failures of the code are in the result, never an `Err`.
    pub async fn run(&self, execution: Execution, bridge: Arc<dyn Bridge>) -> ExecutionResult {
        self.run_until(execution, bridge, std::future::pending())
            .await
    }

    /// Runs one execution until it ends or `cancelled` completes, whichever is first. A
    /// cancelled execution is stopped as the deadline stops one: its worker is killed (no
    /// further call leaves it), its calls still in flight are dropped (an MCP backend is sent
    /// `notifications/cancelled`), and the result says `cancelled`, with the calls that
    /// completed.
    pub async fn run_until(
        &self,
        execution: Execution,
        bridge: Arc<dyn Bridge>,
        cancelled: impl Future<Output = ()> + Send,
    ) -> ExecutionResult {
        let started = Instant::now();
        if execution.code.len() > execution.limits.max_code_bytes {
            return ExecutionResult::failed(transpile::code_too_large(
                execution.code.len(),
                execution.limits.max_code_bytes,
            ));
        }
        if execution.engine == Engine::Monty {
            let Some(pool) = &self.python else {
                return python::not_running();
            };
            let (code, lines_before) = python::strip_fence(&execution.code);
            let raw = pool
                .run(code.to_string(), &Default::default(), &execution, bridge, cancelled)
                .await;
            return python::result(raw, lines_before, started, &execution.code, &execution.host_functions);
        }
        let transpiled = match execution.mode {
            RunMode::Script => transpile::transpile(&execution.code),
            RunMode::Tool => tool_file::transpile(&execution.code),
        };
        let transpiled = match transpiled {
            Ok(t) => t,
            Err(problem) => {
                // Python sent as TypeScript: say how to send it.
                let hint = if super::python_hints::looks_like_python(&execution.code) {
                    Some("This looks like Python: send it with `language: \"python\"` (or fence it as ```python).".into())
                } else {
                    problem.hint
                };
                return ExecutionResult::failed(ExecError {
                    kind: ErrorKind::Syntax,
                    message: problem.message,
                    line: Some(problem.line),
                    column: Some(problem.column),
                    hint,
                    fault: None,
                });
            }
        };
        let pool = match (execution.engine, &self.v8) {
            (Engine::Quickjs | Engine::Monty, _) => &self.pool,
            (Engine::V8, Some(v8)) => v8,
            (Engine::V8, None) => {
                return ExecutionResult::failed(ExecError {
                    kind: ErrorKind::Internal,
                    message: "the V8 engine is not running in this sandbox".into(),
                    line: None,
                    column: None,
                    hint: Some("Run the code without `engine: \"v8\"`; the operator starts V8 with [sandbox] engine or a profile's engine (docs/config.md).".into()),
                    fault: None,
                });
            }
        };
        let raw = pool
            .run(transpiled.js, &transpiled.positions, &execution, bridge, cancelled)
            .await;
        let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        let raw = match raw {
            Ok(raw) => raw,
            Err(error) => {
                let mut result = ExecutionResult::failed(error);
                result.stats.wall_ms = wall_ms;
                return result;
            }
        };
        // Errors the code logged name positions in the wrapped script; point them at the
        // user's own lines.
        let logs = raw
            .logs
            .into_iter()
            .map(|mut log| {
                if let Cow::Owned(readable) =
                    stacks::in_user_terms(&log.message, &transpiled.positions)
                {
                    log.message = readable;
                }
                log
            })
            .collect();
        let calls = raw.trace.len() as u32;
        let stats = ExecStats {
            wall_ms,
            memory_bytes: raw.stats.memory_bytes,
            calls: raw.stats.calls.max(calls),
        };
        match raw.outcome {
            Ok(json) => match serde_json::from_str(&json) {
                Ok(value) => ExecutionResult {
                    value: Some(value),
                    logs,
                    trace: raw.trace,
                    stats,
                    error: None,
                },
                // The worker's JSON is valid and well-formed, so what fails here is depth: the
                // host reads at most 128 levels, never recursing further on untrusted data.
                Err(e) => ExecutionResult {
                    value: None,
                    logs,
                    trace: raw.trace,
                    stats,
                    error: Some(ExecError {
                        kind: ErrorKind::OutputLimit,
                        message: format!("the result cannot be read back ({e}); a result may nest at most 128 levels deep"),
                        line: None,
                        column: None,
                        hint: Some("Return a flatter value: for example a list of paths and values, or the deep part as a JSON string.".into()),
                        fault: None,
                    }),
                },
            },
            Err(guest) => {
                let cx = hints::HintContext {
                    source: &execution.code,
                    tools: &execution.tools,
                    host_functions: &execution.host_functions,
                    positions: &transpiled.positions,
                    failed_tool: only_failed_tool(&raw.trace, &execution.tools),
                    failed_condition: raw.trace.iter().rev().find(|c| !c.ok).and_then(|c| c.condition),
                    outside_tools: &self.outside_tools,
                };
                let mut error = hints::explain(&guest, &cx);
                if guest.message.starts_with(wire::errors::PROMISE_IN_RESULT) {
                    error.hint = Some(promise_hint(&raw.trace));
                }
                // QuickJS's interrupt says only "interrupted": say which limit, as the other
                // timeouts do.
                if error.kind == ErrorKind::Timeout && guest.message.contains("interrupted") {
                    error.message = format!(
                        "the execution ran out of time ({} ms) {}",
                        execution.limits.wall_ms,
                        wire::errors::TIMED_OUT_COMPUTING
                    );
                }
                ExecutionResult {
                    value: None,
                    logs,
                    trace: raw.trace,
                    stats,
                    error: Some(error),
                }
            }
        }
    }
}

/// The fix for a result that holds a Promise, naming the calls that were still running.
fn promise_hint(trace: &[CallRecord]) -> String {
    let mut running: Vec<&str> = trace
        .iter()
        .filter(|call| call.duration_ms.is_none())
        .map(|call| call.name.as_str())
        .collect();
    running.dedup();
    let which = if running.is_empty() {
        String::new()
    } else {
        format!(
            " (still running when the script returned: {})",
            running.join(", ")
        )
    };
    format!(
        "`await` the call before returning its value{which}; for a list of calls, `return await Promise.all(list)`."
    )
}

/// The tool whose calls failed, if exactly one did (then its failure is what ended the run).
fn only_failed_tool<'t>(trace: &[CallRecord], tools: &'t [ToolBinding]) -> Option<&'t ToolBinding> {
    let mut failed = trace
        .iter()
        .filter(|call| !call.ok)
        .map(|call| call.name.as_str());
    let name = failed.next()?;
    if failed.any(|other| other != name) {
        return None;
    }
    tools.iter().find(|tool| {
        name.strip_prefix(tool.backend.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            == Some(tool.name.as_str())
    })
}
