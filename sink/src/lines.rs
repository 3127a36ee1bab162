//! A file of JSON lines the sink appends to (flow records, events). A line counts as
//! written once a flush took it, and as lost when a write or a flush failed (a full disk);
//! failures are logged, once a minute at most. The file is opened again, at its path, after
//! the sink's SIGHUP: log rotation moves a file away, and lines went on into the moved one.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How often a failing file is said in the log.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Asks every [`LineFile`] to open its path again at its next flush (the sink's SIGHUP).
#[derive(Debug, Clone, Default)]
pub struct Reopen(Arc<AtomicU64>);

impl Reopen {
    /// Asks for it (async-signal-safe: one atomic add).
    pub fn request(&self) {
        self.0.fetch_add(1, Relaxed);
    }

    fn generation(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Lines written and lost, for the metrics.
#[derive(Debug, Default)]
pub struct LineCounts {
    /// Lines a flush took.
    pub written: AtomicU64,
    /// Lines lost to a failed write or flush.
    pub lost: AtomicU64,
}

/// One file of JSON lines, appended to.
#[derive(Debug)]
pub struct LineFile {
    what: &'static str,
    path: PathBuf,
    out: BufWriter<File>,
    /// Lines in the buffer since the last flush.
    pending: u64,
    reopen: Reopen,
    seen: u64,
    counts: Arc<LineCounts>,
    warned: Option<Instant>,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    // Appended to: a restart keeps what was written, and tools that follow the file see
    // it grow, never shrink.
    File::options().create(true).append(true).open(path)
}

impl LineFile {
    /// Opens `path` (`what`: the flag that named it, for messages).
    pub fn open(what: &'static str, path: &Path, reopen: Reopen) -> anyhow::Result<LineFile> {
        let file =
            open_append(path).map_err(|e| anyhow::anyhow!("{what} {}: {e}", path.display()))?;
        Ok(LineFile {
            what,
            path: path.to_owned(),
            out: BufWriter::new(file),
            pending: 0,
            seen: reopen.generation(),
            reopen,
            counts: Arc::default(),
            warned: None,
        })
    }

    /// Its counts (shared with the metrics).
    pub fn counts(&self) -> Arc<LineCounts> {
        Arc::clone(&self.counts)
    }

    /// Appends `value` as one line (to the buffer; [`LineFile::flush`] writes it out).
    pub fn push(&mut self, value: &impl serde::Serialize) {
        let ok = serde_json::to_writer(&mut self.out, value).is_ok()
            && self.out.write_all(b"\n").is_ok();
        if ok {
            self.pending += 1;
        } else {
            // What the buffer held went with the failed write.
            self.failed(self.pending + 1, "cannot write");
        }
    }

    /// Writes the buffered lines out; then opens the path again if asked to.
    pub fn flush(&mut self) {
        match self.out.flush() {
            Ok(()) => {
                self.counts.written.fetch_add(self.pending, Relaxed);
                self.pending = 0;
            }
            Err(e) => self.failed(self.pending, &e.to_string()),
        }
        let generation = self.reopen.generation();
        if generation != self.seen {
            self.seen = generation;
            match open_append(&self.path) {
                Ok(f) => self.replace(f),
                Err(e) => self.warn(&format!("cannot open it again: {e}")),
            }
        }
    }

    /// `n` lines lost: counted, the buffer emptied (its bytes are not tried again).
    fn failed(&mut self, n: u64, why: &str) {
        self.counts.lost.fetch_add(n, Relaxed);
        self.pending = 0;
        if let Ok(f) = self.out.get_ref().try_clone() {
            self.replace(f);
        }
        self.warn(&format!("{n} lines lost: {why}"));
    }

    fn replace(&mut self, file: File) {
        let old = std::mem::replace(&mut self.out, BufWriter::new(file));
        // Its buffer is dropped unwritten (flushed before, or lost).
        let _ = old.into_parts();
    }

    fn warn(&mut self, what: &str) {
        if self.warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            self.warned = Some(Instant::now());
            tracing::warn!("{} {}: {what}", self.what, self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines count once flushed; a file that takes nothing loses them, counted; after a
    /// reopen request the lines go to a new file at the path (a rotated one is left as it
    /// was).
    #[test]
    fn lines_are_counted_when_flushed_and_go_to_the_path_after_a_reopen() {
        let dir = std::env::temp_dir().join(format!("pint-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        let reopen = Reopen::default();
        let mut f = LineFile::open("--json-lines", &path, reopen.clone()).unwrap();
        let counts = f.counts();
        f.push(&1);
        f.push(&2);
        assert_eq!(counts.written.load(Relaxed), 0, "not flushed yet");
        f.flush();
        assert_eq!(counts.written.load(Relaxed), 2);
        // Rotation: the file moved away, a reopen asked for.
        let rotated = dir.join("out.jsonl.1");
        std::fs::rename(&path, &rotated).unwrap();
        f.push(&3);
        reopen.request();
        f.flush();
        f.push(&4);
        f.flush();
        assert_eq!(std::fs::read_to_string(&rotated).unwrap(), "1\n2\n3\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4\n");
        assert_eq!(counts.written.load(Relaxed), 4);
        std::fs::remove_dir_all(&dir).unwrap();
        // A full device: every line lost, counted, none counted written.
        let mut full =
            LineFile::open("--event-lines", Path::new("/dev/full"), Reopen::default()).unwrap();
        let c = full.counts();
        for i in 0..10_000 {
            full.push(&i);
        }
        full.flush();
        assert_eq!(c.written.load(Relaxed), 0);
        assert_eq!(c.lost.load(Relaxed), 10_000);
    }
}
