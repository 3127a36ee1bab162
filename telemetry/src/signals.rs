//! How the switch, the sink and the lab stop on a signal: the first SIGINT or SIGTERM asks
//! for an orderly stop (the caller's flag), a second one exits at once (as does one after a
//! SIGHUP the lab stops on). A second signal within [`AGAIN_AFTER`] of the first is the
//! same request delivered twice, not a person insisting: a process whose parent dies is
//! sent its parent-death signal again for each of the parent's threads it is handed to, so
//! a child of a killed `pint-lab` had two SIGTERMs a millisecond apart and exited without
//! its summary or its last export.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};

/// A second SIGINT or SIGTERM sooner than this after the first is taken as the same one.
pub const AGAIN_AFTER: Duration = Duration::from_millis(200);

/// What to do with the signals received so far: stop, exit, or nothing more.
#[derive(Debug, Default)]
pub struct SignalCount {
    /// Whether a stop was asked for.
    stopped: bool,
    /// When the first SIGINT or SIGTERM came.
    first: Option<Instant>,
}

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalAction {
    /// An orderly stop.
    Stop,
    /// Exit at once (status 130).
    Exit,
    /// Nothing more (already stopping; a repeat of the first signal).
    Ignore,
}

impl SignalCount {
    /// Counts signal `sig` received at `now`.
    pub fn note(&mut self, sig: i32, now: Instant) -> SignalAction {
        if sig == SIGINT || sig == SIGTERM {
            let again = match self.first {
                // After a stop another signal asked for (a hang-up), the first is a second.
                None => {
                    self.first = Some(now);
                    self.stopped
                }
                Some(t) => now.saturating_duration_since(t) >= AGAIN_AFTER,
            };
            if again {
                return SignalAction::Exit;
            }
        }
        if std::mem::replace(&mut self.stopped, true) {
            SignalAction::Ignore
        } else {
            SignalAction::Stop
        }
    }
}

/// Sets `stop` on each of `signals`; a second SIGINT or SIGTERM (at least [`AGAIN_AFTER`]
/// after the first) exits the process at once with status 130. Others listed (SIGHUP)
/// only stop.
pub fn stop_on(signals: &[i32], stop: Arc<AtomicBool>) -> std::io::Result<()> {
    let mut incoming = signal_hook::iterator::Signals::new(signals)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut count = SignalCount::default();
            for sig in incoming.forever() {
                match count.note(sig, Instant::now()) {
                    SignalAction::Stop => stop.store(true, Ordering::SeqCst),
                    // At once, as a second Ctrl-C asks: no exit handlers while workers run.
                    SignalAction::Exit => signal_hook::low_level::exit(130),
                    SignalAction::Ignore => {}
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::SIGHUP;

    #[test]
    fn a_second_signal_exits_unless_it_repeats_the_first() {
        let t0 = Instant::now();
        let mut c = SignalCount::default();
        assert_eq!(c.note(SIGTERM, t0), SignalAction::Stop);
        // Delivered again a millisecond later (a dying parent's threads): the same stop.
        let soon = t0 + Duration::from_millis(1);
        assert_eq!(c.note(SIGTERM, soon), SignalAction::Ignore);
        assert_eq!(c.note(SIGINT, soon), SignalAction::Ignore);
        // A person pressing Ctrl-C again.
        assert_eq!(c.note(SIGINT, t0 + AGAIN_AFTER), SignalAction::Exit);
        // A hang-up only stops.
        let mut h = SignalCount::default();
        assert_eq!(h.note(SIGHUP, t0), SignalAction::Stop);
        assert_eq!(
            h.note(SIGHUP, t0 + Duration::from_secs(5)),
            SignalAction::Ignore
        );
        // A Ctrl-C after a hang-up's stop is the second request.
        assert_eq!(
            h.note(SIGINT, t0 + Duration::from_secs(6)),
            SignalAction::Exit
        );
    }
}
