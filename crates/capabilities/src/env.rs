//! `env.get(name)`: one granted variable of the gateway's environment.

use sandgate_policy::{Authorized, EnvRead};

/// The value of the granted variable, or `None` when it is not set (or not UTF-8).
#[expect(
    clippy::disallowed_methods,
    reason = "the env capability: it reads exactly the variable the policy's proof names"
)]
pub fn read_env(proof: &Authorized<EnvRead>) -> Option<String> {
    std::env::var(&proof.get().name).ok()
}
