//! Printing that survives its reader going away (see `say!`).

/// `println!` that ignores a failed write: a terminal closed (SIGHUP) or a reader gone
/// (`... | head`, a lab that was killed) must not abort a program (a panic aborts in
/// release builds) while it stops in order: a switch its ports and its last export, a lab
/// its processes and its report.
#[macro_export]
macro_rules! say {
    () => {
        $crate::say!("")
    };
    ($($t:tt)*) => {{
        $crate::output::write_lines(
            &mut std::io::stdout().lock(),
            $crate::output::stamp(),
            format_args!($($t)*),
        );
    }};
}

/// `print!` (flushed) that ignores a failed write, as `say!`.
#[macro_export]
macro_rules! say_inline {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout();
        let _ = write!(out, $($t)*);
        let _ = out.flush();
    }};
}

/// `eprintln!` that ignores a failed write, as `say!`.
#[macro_export]
macro_rules! say_err {
    () => {
        $crate::say_err!("")
    };
    ($($t:tt)*) => {{
        $crate::output::write_lines(
            &mut std::io::stderr().lock(),
            $crate::output::stamp(),
            format_args!($($t)*),
        );
    }};
}

/// Whether `say!` and `say_err!` begin each line with the time.
static STAMPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Begins every line `say!` and `say_err!` print with the wall-clock time (UTC, RFC 3339,
/// milliseconds), for output kept in a plain file, where nothing else says when a line was
/// written (journald and `docker logs -t` do).
pub fn stamp_lines(on: bool) {
    STAMPED.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The time to begin a line with, when lines are stamped.
pub fn stamp() -> Option<humantime::Rfc3339Timestamp> {
    STAMPED
        .load(std::sync::atomic::Ordering::Relaxed)
        .then(time_now)
}

/// The wall-clock time as stamped lines begin with it (UTC, RFC 3339, milliseconds).
pub fn time_now() -> humantime::Rfc3339Timestamp {
    humantime::format_rfc3339_millis(std::time::SystemTime::now())
}

/// Writes `args` and a newline to `out`, every line of it begun with `stamp` when there is
/// one (a message of several lines, such as a TOML error with its source line, is stamped
/// throughout); a failed write is ignored (see `say!`).
pub fn write_lines(
    out: &mut impl std::io::Write,
    stamp: Option<impl std::fmt::Display>,
    args: std::fmt::Arguments<'_>,
) {
    let _ = match stamp {
        None => writeln!(out, "{args}"),
        Some(t) => {
            let text = args.to_string();
            // A message ending in a newline ends in a blank line, as unstamped.
            let (text, blank) = match text.strip_suffix('\n') {
                Some(t) => (t, true),
                None => (text.as_str(), false),
            };
            text.split('\n')
                .try_for_each(|line| writeln!(out, "{t} {line}"))
                .and_then(|()| if blank { writeln!(out) } else { Ok(()) })
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_line_of_a_message_is_stamped() {
        let mut out = Vec::new();
        super::write_lines(&mut out, Some("T"), format_args!("one\ntwo {}", 2));
        assert_eq!(String::from_utf8(out).unwrap(), "T one\nT two 2\n");
        let mut out = Vec::new();
        super::write_lines(&mut out, Some("T"), format_args!("one\n"));
        assert_eq!(String::from_utf8(out).unwrap(), "T one\n\n");
        let mut out = Vec::new();
        super::write_lines(&mut out, None::<&str>, format_args!("one\ntwo"));
        assert_eq!(String::from_utf8(out).unwrap(), "one\ntwo\n");
    }

    #[test]
    fn lines_are_stamped_only_when_asked() {
        assert!(super::stamp().is_none());
        super::stamp_lines(true);
        let t = super::stamp().unwrap().to_string();
        super::stamp_lines(false);
        assert!(super::stamp().is_none());
        assert!(humantime::parse_rfc3339(&t).is_ok(), "{t}");
        assert_eq!(
            (t.len(), t.as_bytes()[19], t.ends_with('Z')),
            (24, b'.', true),
            "{t}"
        );
    }
}
