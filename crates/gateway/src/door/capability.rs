//! The host capabilities an execution may use (`fetch`, `fs.*`, `env.get`), through the door.
//!
//! An execution is given only the capabilities its profile grants: the sandbox binds a global
//! for each [`HostFunction`] in [`granted`], and none for the rest, so code finds no `fetch` to probe
//! where no host is granted. Each call is authorized (and audited) here, then performed by the
//! capabilities crate, which takes only the policy's proof.

use base64::Engine as _;
use sandgate_capabilities::{CapabilityError, FetchLimits, FetchRequest, FsLimits, Redirect};
use sandgate_policy::{Access, Authorized, Capability, NetLookup, NetTarget, PolicyError};
use sandgate_sandbox::{CallFailure, FailureKind};
use serde_json::{Value, json};

use super::{Door, Knock, denied};
use crate::audit::Subject;

/// A host function an execution may be given: each is one of the profile's capabilities
/// (`net`, `fs`, `env`), bound in the guest under its [`HostFunction::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFunction {
    /// `fetch(url, init)`.
    Fetch,
    /// `fs.readFile(path, encoding)`.
    ReadFile,
    /// `fs.writeFile(path, data, encoding)`.
    WriteFile,
    /// `fs.readdir(path)`.
    Readdir,
    /// `fs.stat(path)`.
    Stat,
    /// `env.get(name)`.
    EnvGet,
    /// `state.get(key)`.
    StateGet,
    /// `state.set(key, value, {ttl})`.
    StateSet,
    /// `state.delete(key)`.
    StateDelete,
    /// `state.keys()`.
    StateKeys,
}

impl HostFunction {
    /// Every host function, in the order the guest binds them.
    pub const ALL: [HostFunction; 10] = [
        HostFunction::Fetch,
        HostFunction::ReadFile,
        HostFunction::WriteFile,
        HostFunction::Readdir,
        HostFunction::Stat,
        HostFunction::EnvGet,
        HostFunction::StateGet,
        HostFunction::StateSet,
        HostFunction::StateDelete,
        HostFunction::StateKeys,
    ];

    /// Its name, as the guest binds it and as calls are recorded.
    pub const fn name(self) -> &'static str {
        match self {
            HostFunction::Fetch => "fetch",
            HostFunction::ReadFile => "fs.readFile",
            HostFunction::WriteFile => "fs.writeFile",
            HostFunction::Readdir => "fs.readdir",
            HostFunction::Stat => "fs.stat",
            HostFunction::EnvGet => "env.get",
            HostFunction::StateGet => "state.get",
            HostFunction::StateSet => "state.set",
            HostFunction::StateDelete => "state.delete",
            HostFunction::StateKeys => "state.keys",
        }
    }

    /// The host function named `name`, if one is.
    pub fn named(name: &str) -> Option<HostFunction> {
        HostFunction::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The capability of the profile that grants it.
    pub const fn capability(self) -> Capability {
        match self {
            HostFunction::Fetch => Capability::Net,
            HostFunction::EnvGet => Capability::Env,
            HostFunction::StateGet
            | HostFunction::StateSet
            | HostFunction::StateDelete
            | HostFunction::StateKeys => Capability::State,
            _ => Capability::Fs,
        }
    }

    /// What execution records give as the backend of a host function's call.
    pub const RECORD_BACKEND: &'static str = "(capability)";
}

/// The names of the host functions `access` grants, as the guest binds them.
pub fn granted(access: &Access) -> Vec<String> {
    HostFunction::ALL
        .into_iter()
        .filter(|f| access.grants(f.capability()))
        .map(|f| f.name().to_string())
        .collect()
}

impl Door {
    /// Runs host function `function` for `knock` with `args` (a JSON array).
    pub(crate) async fn use_host(
        &self,
        knock: &Knock,
        function: HostFunction,
        args: String,
    ) -> Result<String, CallFailure> {
        let name = function.name();
        if !knock.caller.access.grants(function.capability()) {
            return Err(CallFailure::new(
                FailureKind::Denied,
                format!("`{name}` is not a capability of this execution"),
            ));
        }
        let args: Vec<Value> =
            serde_json::from_str(&args).map_err(|_| bad(format!("{name} takes JSON arguments")))?;
        let value = match function.capability() {
            Capability::State => return self.state(knock, function, &args).await,
            _ if function == HostFunction::Fetch => self.fetch(knock, args).await?,
            _ if function == HostFunction::EnvGet => self.env_get(knock, &args)?,
            _ => self.fs(knock, function, args).await?,
        };
        Ok(value.to_string())
    }

    /// The values of the variables `knock`'s profile grants, for `process.env.NAME` and
    /// `env.NAME`: read when the execution starts, only when `code` mentions `env` at all, each
    /// read authorized and audited as an `env.get` is (`None`: granted, and not set).
    pub fn env_values(&self, knock: &Knock, code: &str) -> Vec<(String, Option<String>)> {
        let access = &knock.caller.access;
        if !access.grants(Capability::Env) || !code.contains("env") {
            return Vec::new();
        }
        access
            .profile()
            .env
            .iter()
            .filter_map(|name| {
                let decision = access.authorize_env(name);
                self.record(knock, Subject::Env, name, &decision, None);
                let proof = decision.ok()?;
                Some((name.clone(), self.host.read_env(&proof)))
            })
            .collect()
    }

    fn env_get(&self, knock: &Knock, args: &[Value]) -> Result<Value, CallFailure> {
        let name = string_arg(args, 0, "env.get(name)")?;
        let decision = knock.caller.access.authorize_env(&name);
        self.record(knock, Subject::Env, &name, &decision, None);
        let proof = decision.map_err(denied)?;
        Ok(self
            .host
            .read_env(&proof)
            .map_or(Value::Null, Value::String))
    }

    async fn fs(
        &self,
        knock: &Knock,
        function: HostFunction,
        args: Vec<Value>,
    ) -> Result<Value, CallFailure> {
        let name = function.name();
        let path = string_arg(&args, 0, &format!("{name}(path)"))?;
        let write = function == HostFunction::WriteFile;
        let decision = knock.caller.access.authorize_fs(&path, write);
        self.record(knock, Subject::Fs, &path, &decision, None);
        let proof = decision.map_err(denied)?;
        let limits = FsLimits::default();
        let encoding = |at: usize| -> Result<Encoding, CallFailure> {
            let option = match args.get(at) {
                Some(Value::String(e)) => Some(e.as_str()),
                Some(Value::Object(o)) => o.get("encoding").and_then(Value::as_str),
                _ => None,
            };
            match option {
                None | Some("utf8" | "utf-8") => Ok(Encoding::Utf8),
                Some("base64") => Ok(Encoding::Base64),
                Some(other) => Err(bad(format!(
                    "{name}: encoding `{other}` is not supported; use \"utf8\" (the default) or \"base64\""
                ))),
            }
        };
        let work = match function {
            HostFunction::ReadFile => {
                let encoding = encoding(1)?;
                Work::Read(encoding)
            }
            HostFunction::WriteFile => {
                let data = string_arg(&args, 1, "fs.writeFile(path, data)")?;
                let bytes = match encoding(2)? {
                    Encoding::Utf8 => data.into_bytes(),
                    Encoding::Base64 => base64::engine::general_purpose::STANDARD
                        .decode(data.as_bytes())
                        .map_err(|_| bad("fs.writeFile: data is not valid base64".into()))?,
                };
                Work::Write(bytes)
            }
            HostFunction::Readdir => Work::List,
            _ => Work::Stat,
        };
        let host = self.host.clone();
        let done = tokio::task::spawn_blocking(move || -> Result<Value, CapabilityError> {
            match work {
                Work::Read(encoding) => {
                    let bytes = host.read_file(&proof, &limits)?;
                    match encoding {
                        Encoding::Base64 => Ok(Value::String(
                            base64::engine::general_purpose::STANDARD.encode(bytes),
                        )),
                        Encoding::Utf8 => String::from_utf8(bytes).map(Value::String).map_err(|_| {
                            CapabilityError::BadRequest(
                                "fs.readFile: the file is not UTF-8 text; read it with { encoding: \"base64\" }".into(),
                            )
                        }),
                    }
                }
                Work::Write(bytes) => {
                    host.write_file(&proof, &bytes, &limits).map(|n| json!(n))
                }
                Work::List => host.read_dir(&proof, &limits).map(|n| json!(n)),
                Work::Stat => host.stat(&proof),
            }
        })
        .await
        .map_err(|e| CallFailure::new(FailureKind::Internal, format!("{name}: {e}")))?;
        if let Err(CapabilityError::Escape(why)) = &done {
            self.record_line(knock, Subject::Fs, &path, false, why, None);
        }
        done.map_err(failure)
    }

    async fn fetch(&self, knock: &Knock, args: Vec<Value>) -> Result<Value, CallFailure> {
        let request = fetch_request(args.into_iter().next())?;
        let audited = Audited { door: self, knock };
        let response = self
            .host
            .fetch(request, &FetchLimits::default(), &audited)
            .await
            .map_err(failure)?;
        let mut out = json!({
            "url": response.url,
            "status": response.status,
            "statusText": response.status_text,
            "redirected": response.redirected,
            "headers": response.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        });
        if let Value::Object(map) = &mut out {
            match String::from_utf8(response.body) {
                Ok(text) => map.insert("body".into(), Value::String(text)),
                Err(e) => map.insert(
                    "body_base64".into(),
                    Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
                ),
            };
        }
        Ok(out)
    }
}

/// The policy's answers for one fetch, each written to the audit log.
struct Audited<'a> {
    door: &'a Door,
    knock: &'a Knock,
}

impl sandgate_capabilities::Authorize for Audited<'_> {
    fn lookup(&self, host: &str, port: u16) -> Result<Authorized<NetLookup>, PolicyError> {
        let decision = self.knock.caller.access.authorize_lookup(host, port);
        // Only a refusal is worth a line: an allowed lookup is followed by its connection's.
        if decision.is_err() {
            let target = format!("{host}:{port} (not looked up)");
            self.door
                .record(self.knock, Subject::Net, &target, &decision, None);
        }
        decision
    }

    fn connect(
        &self,
        host: &str,
        port: u16,
        addr: std::net::IpAddr,
    ) -> Result<Authorized<NetTarget>, PolicyError> {
        let decision = self.knock.caller.access.authorize_net(host, port, addr);
        let target = format!("{host}:{port} ({addr})");
        self.door
            .record(self.knock, Subject::Net, &target, &decision, None);
        decision
    }
}

enum Encoding {
    Utf8,
    Base64,
}

enum Work {
    Read(Encoding),
    Write(Vec<u8>),
    List,
    Stat,
}

/// The guest's request object (see `fetchRequest` in web.js).
fn fetch_request(value: Option<Value>) -> Result<FetchRequest, CallFailure> {
    let Some(Value::Object(map)) = value else {
        return Err(bad("fetch(url, init) needs a URL".into()));
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
    let url = text("url").ok_or_else(|| bad("fetch(url, init) needs a URL".into()))?;
    let headers = match map.get("headers") {
        Some(Value::Array(pairs)) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
                _ => Err(bad("fetch: headers must be name: value strings".into())),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => vec![],
    };
    let body = match (text("body"), text("body_base64")) {
        (Some(body), _) => Some(body.into_bytes()),
        (None, Some(encoded)) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map_err(|_| bad("fetch: the body is not valid base64".into()))?,
        ),
        (None, None) => None,
    };
    let redirect = match text("redirect").as_deref() {
        None | Some("follow") => Redirect::Follow,
        Some("error") => Redirect::Error,
        Some("manual") => Redirect::Manual,
        Some(other) => {
            return Err(bad(format!(
                "fetch: redirect `{other}` is not one of follow, error, manual"
            )));
        }
    };
    Ok(FetchRequest {
        url,
        method: text("method").unwrap_or_else(|| "GET".into()),
        headers,
        body,
        redirect,
    })
}

pub(super) fn string_arg(args: &[Value], at: usize, usage: &str) -> Result<String, CallFailure> {
    match args.get(at) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(bad(format!(
            "{usage}: argument {} must be a string, not {}",
            at + 1,
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
                Value::String(_) => "a string",
            }
        ))),
        None => Err(bad(format!("{usage}: argument {} is missing", at + 1))),
    }
}

pub(super) fn bad(message: String) -> CallFailure {
    CallFailure::new(FailureKind::Failed, message)
}

fn failure(error: CapabilityError) -> CallFailure {
    match error {
        CapabilityError::Denied(e) => denied(e),
        CapabilityError::Escape(why) => CallFailure::new(FailureKind::Denied, why),
        other => CallFailure::new(FailureKind::Failed, other.to_string()),
    }
}
