//! `env.get(name)`: one granted variable of the gateway's environment.

use sandgate_policy::{Authorized, EnvRead};

/// The value of the granted variable, or `None` when it is not set (or not UTF-8).
pub fn read_env(proof: &Authorized<EnvRead>) -> Option<String> {
    std::env::var(&proof.get().name).ok()
}
