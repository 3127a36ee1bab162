//! Scratch directories for benchmarks and tests: created empty, removed on drop.

use std::path::{Path, PathBuf};

/// A scratch directory under the system's temporary directory, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty directory named after `tag`, this user's alone.
    pub fn new(tag: &str) -> std::io::Result<Scratch> {
        dataplane::temp_dir::private_temp_dir(&format!("pint-{tag}")).map(Scratch)
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
