//! The one way a stored tool is registered, used by MCP's `register_tool` and the CLI's
//! `sandgate tools add`/`update`: the whole file checked (`register::check`), then written as
//! the tool's next version, nothing written if any check fails. The two differ only in who
//! registers: a caller owns what it registers and may not take a name another owner holds; the
//! operator at the machine registers for a profile and may.

use sandgate_catalog::Catalog;
use sandgate_policy::Access;
use sandgate_store::StoreHandle;

use crate::caller::Caller;
use crate::error::GatewayError;
use crate::stored::owner::owner_of;
use crate::stored::register::check;

/// Who registers a stored tool.
#[derive(Debug, Clone, Copy)]
pub enum Registrant<'a> {
    /// A caller over MCP: the tool is its own (see `owner_of`), and a name another owner
    /// holds is refused.
    Caller(&'a Caller),
    /// The operator at the machine, for a profile: never refused for who registered the name
    /// before.
    Operator {
        /// The profile that owns the tool.
        profile: &'a str,
    },
}

/// A stored tool registered.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The version it is at now.
    pub version: u32,
    /// What is allowed but likely a mistake, to tell whoever registered it.
    pub warnings: Vec<String>,
}

/// Checks `code` as tool `name` under `access` (declared tools read by `catalog`), then writes
/// it to `store` as `registrant`'s. A check that fails is [`GatewayError::NotRegistered`] with
/// every problem, and nothing is written.
pub async fn register(
    store: &StoreHandle,
    registrant: Registrant<'_>,
    name: &str,
    code: &str,
    access: &Access,
    catalog: &Catalog,
) -> Result<Registered, GatewayError> {
    let registration =
        check(name, code, access, catalog).map_err(|problems| GatewayError::NotRegistered {
            name: name.to_string(),
            problems,
        })?;
    let written = match registrant {
        Registrant::Caller(caller) => {
            store
                .put_tool(
                    &registration.name,
                    &registration.code,
                    &registration.meta_json,
                    &owner_of(caller),
                )
                .await
        }
        Registrant::Operator { profile } => {
            store
                .put_tool_as_operator(
                    &registration.name,
                    &registration.code,
                    &registration.meta_json,
                    profile,
                )
                .await
        }
    };
    let version = written.map_err(|e| GatewayError::StoredTools(e.to_string()))?;
    Ok(Registered {
        version,
        warnings: registration.warnings,
    })
}
