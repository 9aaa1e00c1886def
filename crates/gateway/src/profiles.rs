//! The profiles callers act under, by name, with `default` always there. A reload swaps in a
//! new set; requests already running keep the profile they started with.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use sandgate_policy::Profile;

/// The profiles, by name.
#[derive(Debug)]
pub struct Profiles {
    by_name: RwLock<Arc<BTreeMap<String, Arc<Profile>>>>,
}

impl Profiles {
    /// `profiles`, with an implicit `default` when they have none.
    pub fn new(profiles: Vec<Profile>) -> Profiles {
        Profiles {
            by_name: RwLock::new(Arc::new(by_name(profiles))),
        }
    }

    /// The profile named `name`; an unknown name gets a profile that grants nothing (token
    /// profiles are checked at load, so this is a backstop).
    pub fn get(&self, name: &str) -> Arc<Profile> {
        let profiles = self
            .by_name
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        profiles.get(name).cloned().unwrap_or_else(|| {
            Arc::new(Profile::granting_nothing(
                name,
                &format!("profiles.{name}"),
                "the config",
            ))
        })
    }

    /// Puts `profiles` in place of the current ones.
    pub fn replace(&self, profiles: Vec<Profile>) {
        let profiles = Arc::new(by_name(profiles));
        *self.by_name.write().unwrap_or_else(PoisonError::into_inner) = profiles;
    }
}

/// The profiles by name, with `default` always there.
fn by_name(profiles: Vec<Profile>) -> BTreeMap<String, Arc<Profile>> {
    let mut profiles: BTreeMap<String, Arc<Profile>> = profiles
        .into_iter()
        .map(|p| (p.name.clone(), Arc::new(p)))
        .collect();
    profiles
        .entry("default".into())
        .or_insert_with(|| Arc::new(Profile::implicit_default("the config")));
    profiles
}
