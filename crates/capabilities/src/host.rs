//! The host's capabilities as one value. Every way guest code reaches the network, files or
//! the environment is a method of [`Host`], and each takes the policy's proof; the functions
//! behind them are private to this crate. The gateway's door holds its one `Host` in a private
//! field, so code outside the door has no capability to call.

use std::sync::Arc;

use sandgate_policy::{Authorized, EnvRead, FsAccess};
use serde_json::Value;

use crate::error::CapabilityError;
use crate::fetch::{Authorize, FetchLimits, FetchRequest, FetchResponse, Fetcher};
use crate::resolve::Resolve;

/// `fetch`, `fs` and `env`, for whoever holds this value.
#[derive(Debug)]
pub struct Host {
    fetcher: Fetcher,
}

impl Host {
    /// The capabilities, looking names up with `resolver`.
    pub fn new(resolver: Arc<dyn Resolve>) -> Host {
        Host {
            fetcher: Fetcher::new(resolver),
        }
    }

    /// An HTTP request, asking `authorize` before each lookup and each connection.
    pub async fn fetch(
        &self,
        request: FetchRequest,
        limits: &FetchLimits,
        authorize: &dyn Authorize,
    ) -> Result<FetchResponse, CapabilityError> {
        self.fetcher.fetch(request, limits, authorize).await
    }

    /// The file `proof` names, beneath its root.
    #[cfg(target_os = "linux")]
    pub fn read_file(
        &self,
        proof: &Authorized<FsAccess>,
        limits: &crate::fs::FsLimits,
    ) -> Result<Vec<u8>, CapabilityError> {
        crate::fs::read_file(proof, limits)
    }

    /// Writes `bytes` to the file `proof` names, where a writable root allows it.
    #[cfg(target_os = "linux")]
    pub fn write_file(
        &self,
        proof: &Authorized<FsAccess>,
        bytes: &[u8],
        limits: &crate::fs::FsLimits,
    ) -> Result<usize, CapabilityError> {
        crate::fs::write_file(proof, bytes, limits)
    }

    /// The names in the directory `proof` names.
    #[cfg(target_os = "linux")]
    pub fn read_dir(
        &self,
        proof: &Authorized<FsAccess>,
        limits: &crate::fs::FsLimits,
    ) -> Result<Vec<String>, CapabilityError> {
        crate::fs::read_dir(proof, limits)
    }

    /// What `proof`'s path is: its kind, size and modification time.
    #[cfg(target_os = "linux")]
    pub fn stat(&self, proof: &Authorized<FsAccess>) -> Result<Value, CapabilityError> {
        crate::fs::stat(proof)
    }

    /// The variable `proof` names, if it is set.
    pub fn read_env(&self, proof: &Authorized<EnvRead>) -> Option<String> {
        crate::env::read_env(proof)
    }
}
