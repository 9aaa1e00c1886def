//! Who owns a stored tool: the profile that registered it, or a user within that profile.
//! The owner decides who may update the tool and whose grants it runs within.

/// What separates a profile from a user in an owner (`builder@user:<id>`).
const USER_OWNER: &str = "@user:";

/// Who owns a stored tool `caller` registers: its profile, or, for a user an identity provider
/// proved, that user within its profile (`builder@user:<id>`). Only the owner may update it;
/// it runs within the owner's profile's grants.
pub(crate) fn owner_of(caller: &crate::caller::Caller) -> String {
    match caller.user() {
        Some(user) => format!("{}{USER_OWNER}{user}", caller.profile()),
        None => caller.profile().to_string(),
    }
}

/// The profile whose grants a tool owned by `owner` runs within.
pub(crate) fn profile_of_owner(owner: &str) -> &str {
    owner
        .split_once(USER_OWNER)
        .map_or(owner, |(profile, _)| profile)
}
