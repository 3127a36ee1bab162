//! A file of JSON lines the sink appends to (flow records, events). A line counts as
//! written once the file took all of its bytes, and as lost when a write failed (a full
//! disk) before it did; failures are logged, once a minute at most. A line the file took
//! only part of is ended before the next one, so that no two lines ever run together. The
//! file is opened again, at its path, after the sink's SIGHUP: log rotation moves a file
//! away, and lines went on into the moved one. The path `-` is the sink's standard output.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How often a failing file is said in the log.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Buffered bytes past which a line is written out before the next flush.
const BUFFER_BYTES: usize = 64 * 1024;

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
    /// Lines the file took whole.
    pub written: AtomicU64,
    /// Lines lost to a failed write (or that could not be serialised).
    pub lost: AtomicU64,
}

/// Buffered whole lines and what became of those written out.
#[derive(Debug, Default)]
struct Lines {
    /// Whole lines, each ending in a newline.
    buf: Vec<u8>,
    /// Whether the file's last line is one it took only part of.
    torn: bool,
}

/// What one write-out did.
#[derive(Debug, PartialEq)]
struct WriteOut {
    written: u64,
    lost: u64,
    error: Option<String>,
}

impl Lines {
    /// Writes the buffered lines to `out` (after a newline that ends a torn line), then
    /// empties the buffer; lines the file took whole count as written, the others as lost.
    fn write_to(&mut self, out: &mut impl Write) -> WriteOut {
        let lines = self.buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let mut error = None;
        let mut done = 0;
        if self.torn && !self.buf.is_empty() {
            match out.write_all(b"\n") {
                Ok(()) => self.torn = false,
                Err(e) => error = Some(e.to_string()),
            }
        }
        while error.is_none() && done < self.buf.len() {
            match out.write(&self.buf[done..]) {
                Ok(0) => error = Some(ErrorKind::WriteZero.to_string()),
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => error = Some(e.to_string()),
            }
        }
        let written = self.buf[..done].iter().filter(|&&b| b == b'\n').count() as u64;
        if done > 0 && self.buf[done - 1] != b'\n' {
            self.torn = true;
        }
        self.buf.clear();
        WriteOut {
            written,
            lost: lines - written,
            error,
        }
    }
}

/// One file of JSON lines, appended to.
#[derive(Debug)]
pub struct LineFile {
    what: &'static str,
    path: PathBuf,
    file: File,
    lines: Lines,
    reopen: Reopen,
    seen: u64,
    counts: Arc<LineCounts>,
    warned: Option<Instant>,
}

/// Whether two handles open the same file (device and inode).
fn same_file(a: &File, b: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (a.metadata(), b.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    // Appended to: a restart keeps what was written, and tools that follow the file see
    // it grow, never shrink.
    File::options().create(true).append(true).open(path)
}

/// The path that names the sink's standard output (`--json-lines -`).
pub const STDOUT: &str = "-";

/// Whether `path` names standard output rather than a file.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == STDOUT
}

/// Standard output as a file of its own (a duplicate of descriptor 1).
fn stdout_file() -> std::io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(std::io::stdout().as_fd().try_clone_to_owned()?))
}

impl LineFile {
    /// Opens `path`, or standard output for `-` (`what`: the flag that named it, for
    /// messages).
    pub fn open(what: &'static str, path: &Path, reopen: Reopen) -> anyhow::Result<LineFile> {
        let file = if is_stdout(path) {
            stdout_file()
        } else {
            open_append(path)
        }
        .map_err(|e| anyhow::anyhow!("{what} {}: {e}", path.display()))?;
        Ok(LineFile {
            what,
            path: path.to_owned(),
            file,
            lines: Lines::default(),
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
        let start = self.lines.buf.len();
        if serde_json::to_writer(&mut self.lines.buf, value).is_err() {
            self.lines.buf.truncate(start);
            self.counts.lost.fetch_add(1, Relaxed);
            self.warn("a line could not be serialised");
            return;
        }
        self.lines.buf.push(b'\n');
        if self.lines.buf.len() >= BUFFER_BYTES {
            self.write_out();
        }
    }

    /// Writes the buffered lines out; then opens the path again if asked to (standard
    /// output stays as it is).
    pub fn flush(&mut self) {
        self.write_out();
        let generation = self.reopen.generation();
        if generation != self.seen && !is_stdout(&self.path) {
            self.seen = generation;
            match open_append(&self.path) {
                Ok(f) => {
                    // A new file has no torn line to end; the same one (not moved) has.
                    if !same_file(&self.file, &f) {
                        self.lines.torn = false;
                    }
                    self.file = f;
                }
                Err(e) => self.warn(&format!("cannot open it again: {e}")),
            }
        }
    }

    fn write_out(&mut self) {
        let out = self.lines.write_to(&mut self.file);
        self.counts.written.fetch_add(out.written, Relaxed);
        self.counts.lost.fetch_add(out.lost, Relaxed);
        if let Some(why) = out.error {
            self.warn(&format!("{} lines lost: {why}", out.lost));
        }
    }

    fn warn(&mut self, what: &str) {
        if self.warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            self.warned = Some(Instant::now());
            tracing::warn!(
                "{} {}: {what} (said at most once a minute; pint_sink_export_errors_total and the stop line count every line lost)",
                self.what,
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that takes `room` bytes more, then reports a full disk.
    struct Filling {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Filling {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(ErrorKind::StorageFull));
            }
            let n = b.len().min(self.room).min(3);
            self.got.extend_from_slice(&b[..n]);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A disk that fills mid-line: the lines it took whole count as written, the rest as
    /// lost; once it has room again the torn line is ended first, so every later line
    /// stands on its own.
    #[test]
    fn a_line_the_file_took_part_of_never_joins_the_next() {
        let mut lines = Lines::default();
        let mut file = Filling {
            got: Vec::new(),
            room: 12,
        };
        for v in ["first", "second", "third"] {
            serde_json::to_writer(&mut lines.buf, v).unwrap();
            lines.buf.push(b'\n');
        }
        let out = lines.write_to(&mut file);
        assert_eq!((out.written, out.lost), (1, 2));
        assert!(out.error.is_some());
        assert_eq!(file.got, b"\"first\"\n\"sec");
        // Nothing to write: the torn line waits.
        assert_eq!(lines.write_to(&mut file).written, 0);
        assert_eq!(file.got.len(), 12);
        file.room = 100;
        serde_json::to_writer(&mut lines.buf, "fourth").unwrap();
        lines.buf.push(b'\n');
        let out = lines.write_to(&mut file);
        assert_eq!((out.written, out.lost, out.error), (1, 0, None));
        let text = String::from_utf8(file.got.clone()).unwrap();
        assert_eq!(text, "\"first\"\n\"sec\n\"fourth\"\n");
        let whole: Vec<_> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<String>(l).ok())
            .collect();
        assert_eq!(whole, ["first", "fourth"]);
    }

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
        // A reopen of the file where it is (not moved) is the same file: a torn line there
        // is still to be ended; the rotated one is another.
        let again = open_append(&path).unwrap();
        assert!(same_file(&f.file, &again));
        assert!(!same_file(&open_append(&rotated).unwrap(), &again));
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
