//! Printing that survives its reader going away (see `say!`).

/// `println!` that ignores a failed write: a terminal closed (SIGHUP) or a reader gone
/// (`... | head`, a lab that was killed) must not abort a program (a panic aborts in
/// release builds) while it stops in order: a switch its ports and its last export, a lab
/// its processes and its report.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
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
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
