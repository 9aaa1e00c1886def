//! The tool cache file: the last tool list each backend reported, so the gateway can answer
//! `search_tools` and `tool_info` at once on start-up, before slow backends have connected.
//! Writes are atomic (write a temporary file, then rename), so a crash never leaves a torn file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sandgate_catalog::ToolSpec;
use serde::{Deserialize, Serialize};

/// Format version; a file with another version is ignored, never misread.
const CACHE_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    backends: BTreeMap<String, Vec<ToolSpec>>,
}

/// Reads and writes the tool cache at one path.
#[derive(Debug, Clone)]
pub struct ToolCache {
    path: PathBuf,
}

impl ToolCache {
    /// A cache at `path` (the file need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ToolCache { path: path.into() }
    }

    /// Where the cache lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cached tools per backend. A missing, unreadable or outdated file gives an empty map:
    /// the cache is an optimization, never a source of failure.
    pub fn load(&self) -> BTreeMap<String, Vec<ToolSpec>> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return BTreeMap::new();
        };
        match serde_json::from_slice::<CacheFile>(&bytes) {
            Ok(file) if file.version == CACHE_VERSION => file.backends,
            Ok(_) => BTreeMap::new(),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring unreadable tool cache: {e}");
                BTreeMap::new()
            }
        }
    }

    /// Replaces the cache atomically.
    pub fn store(&self, backends: &BTreeMap<String, Vec<ToolSpec>>) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let body = serde_json::to_vec_pretty(
            &serde_json::json!({"version": CACHE_VERSION, "backends": backends}),
        )
        .map_err(std::io::Error::other)?;
        // A name of its own for every write: writers in one process (backends that connect at
        // once) used to share one, and one writer's rename then failed.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .path
            .with_extension(format!("tmp.{}.{write}", std::process::id()));
        std::fs::write(&tmp, body)?;
        std::fs::rename(&tmp, &self.path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ToolCache::new(dir.path().join("sub/tools.json"));
        assert!(cache.load().is_empty(), "missing file is empty");
        let mut backends = BTreeMap::new();
        backends.insert(
            "a".to_string(),
            vec![ToolSpec {
                backend: "a".into(),
                name: "t".into(),
                description: None,
                input_schema: serde_json::json!({}),
                output_schema: None,
                annotations: None,
            }],
        );
        cache.store(&backends).expect("store");
        assert_eq!(cache.load(), backends);
        std::fs::write(cache.path(), b"{not json").expect("write");
        assert!(cache.load().is_empty(), "garbage is ignored");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .expect("dir")
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary files left behind");
    }

    #[test]
    fn writers_at_once_in_one_process_all_succeed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = std::sync::Arc::new(ToolCache::new(dir.path().join("tools.json")));
        let writers: Vec<_> = (0..16)
            .map(|i| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let mut backends = BTreeMap::new();
                    backends.insert(format!("b{i}"), vec![]);
                    (0..20).all(|_| cache.store(&backends).is_ok())
                })
            })
            .collect();
        for writer in writers {
            assert!(writer.join().expect("joined"), "a write failed");
        }
        assert_eq!(
            cache.load().len(),
            1,
            "the last whole write is what is there"
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
    }
}
