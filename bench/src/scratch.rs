//! Scratch directories for benchmarks and tests: created empty, removed on drop.

use std::path::{Path, PathBuf};

/// A scratch directory under the system's temporary directory, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// An empty directory named after `tag` and this process.
    pub fn new(tag: &str) -> std::io::Result<Scratch> {
        let d = std::env::temp_dir().join(format!("pint-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d)?;
        Ok(Scratch(d))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// A path inside it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
