//! Probe packets (layout in `telemetry::wire::probe`): what the receiving side counts.

pub use telemetry::wire::probe::{PROBE_LEN, ProbePayload};

use datasketches::common::SearchCriteria;
use datasketches::kll::KllSketch;

use super::senders::PerSender;

/// Sequence numbers behind a stream's highest whose arrival a receiver remembers (65 s at
/// 1 kHz): one that arrives further behind counts as received and reordered, unchecked for
/// a duplicate.
const SEEN_WINDOW: u64 = 1 << 16;

/// Per-stream receive state.
#[derive(Debug, Clone, Default)]
struct Stream {
    received: u64,
    /// The number counting starts from: 0, or the first one received when it was beyond
    /// [`MAX_PROBE_SEQ`] (a receiver started long after its sender).
    base: u64,
    /// Highest sequence number seen, plus one (0: none yet).
    next: u64,
    reordered: u64,
    duplicates: u64,
    /// Which of the numbers in `[next - SEEN_WINDOW, next)` arrived, a bit each, by the
    /// number modulo [`SEEN_WINDOW`] (allocated with the first probe).
    seen: Vec<u64>,
}

impl Stream {
    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % SEEN_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Records `seq`; false for a duplicate.
    fn record(&mut self, seq: u64) -> bool {
        if self.seen.is_empty() {
            self.seen = vec![0; (SEEN_WINDOW / 64) as usize];
            if seq >= MAX_PROBE_SEQ {
                self.base = seq;
                self.next = seq;
            }
        }
        if seq >= self.next {
            // The numbers skipped leave the window's bits clear.
            if seq - self.next >= SEEN_WINDOW {
                self.seen.fill(0);
            } else {
                for q in self.next..seq {
                    let (w, b) = Self::bit(q);
                    self.seen[w] &= !b;
                }
            }
            self.next = seq + 1;
        } else if self.next - seq <= SEEN_WINDOW {
            let (w, b) = Self::bit(seq);
            if self.seen[w] & b != 0 {
                return false;
            }
            self.reordered += 1;
        } else {
            // Too far behind to tell.
            self.reordered += 1;
            self.received += 1;
            return true;
        }
        let (w, b) = Self::bit(seq);
        self.seen[w] |= b;
        self.received += 1;
        true
    }
}

/// Counts probes as they arrive. A stream is its sender's stream number and the sender's
/// IPv4 source address ([`PerSender`]): a receiver that hears several generators keeps their
/// streams apart.
#[derive(Debug, Clone)]
pub struct ProbeReceiver {
    streams: PerSender<Stream>,
    /// One-way latencies (ns): a KLL sketch, so that a long run keeps bounded memory.
    latencies: KllSketch<u64>,
    foreign: u64,
    other_clock: u64,
}

impl Default for ProbeReceiver {
    fn default() -> Self {
        ProbeReceiver {
            streams: PerSender::default(),
            latencies: KllSketch::new(LATENCY_SKETCH_K).expect("K in range"),
            foreign: 0,
            other_clock: 0,
        }
    }
}

/// KLL parameter of the latency sketch (quantiles within about 1% of rank).
const LATENCY_SKETCH_K: u16 = 200;

/// Most probe streams a receiver tracks.
pub const MAX_PROBE_STREAMS: u32 = 1024;
/// How far ahead of its stream's highest a sequence number may jump and still be counted
/// (a jump further is not a probe of that stream); and the largest number a stream's first
/// probe may have for the numbers below it to count as lost.
const MAX_PROBE_SEQ: u64 = 1 << 24;
/// The longest one-way latency a probe may show and be counted: a probe sent further
/// before it arrived, or after, was timed by another clock (a capture written earlier and
/// replayed, a sender on another host).
const MAX_PROBE_LATENCY_NS: u64 = 10_000_000_000;

/// What the receiver measured.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeReport {
    /// Probes received.
    pub received: u64,
    /// Probes missing: sequence numbers below the highest seen that never arrived.
    pub lost: u64,
    /// Probes that arrived after a higher sequence number of their stream.
    pub reordered: u64,
    /// Probes that arrived more than once (within the last 65536 numbers of their stream).
    pub duplicates: u64,
    /// Probes with a stream number beyond what a receiver tracks, a sequence number too far
    /// ahead of their stream's, or from more senders than it keeps apart (not counted
    /// above).
    pub foreign: u64,
    /// One-way latency in nanoseconds: min, median, p99, max (None without probes; the
    /// median and p99 from a sketch, within about 1% of rank).
    pub latency_ns: Option<[u64; 4]>,
    /// Probes left out of the latency: sent after they arrived or more than 10 s before,
    /// by the receiver's clock (timed by another clock: a replayed capture's, another
    /// host's). Counted in `received`.
    pub other_clock: u64,
}

impl ProbeReceiver {
    /// Records a probe from the sender with IPv4 source address `sender`, received at
    /// `now_ns` (same clock as the sender's).
    pub fn record(&mut self, sender: u32, p: &ProbePayload, now_ns: u64) {
        // A number near the top of its range is no sender's (none counts that far), and
        // the counts past it would wrap.
        let tracked = (p.stream < MAX_PROBE_STREAMS && p.seq <= u64::MAX - MAX_PROBE_SEQ)
            .then(|| self.streams.get_mut(sender, p.stream))
            .flatten()
            .filter(|s| s.seen.is_empty() || p.seq < s.next.saturating_add(MAX_PROBE_SEQ));
        let Some(s) = tracked else {
            self.foreign += 1;
            return;
        };
        if !s.record(p.seq) {
            s.duplicates += 1;
            return;
        }
        match now_ns.checked_sub(p.sent_ns) {
            Some(l) if l <= MAX_PROBE_LATENCY_NS => self.latencies.update(l),
            _ => self.other_clock += 1,
        }
    }

    /// The totals over all streams.
    pub fn report(&self) -> ProbeReport {
        let lat = &self.latencies;
        let q = |f: f64| {
            lat.quantile(f, SearchCriteria::Inclusive)
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        ProbeReport {
            received: self.streams.iter().map(|(_, s)| s.received).sum(),
            lost: self
                .streams
                .iter()
                .map(|(_, s)| (s.next - s.base).saturating_sub(s.received))
                .sum(),
            reordered: self.streams.iter().map(|(_, s)| s.reordered).sum(),
            duplicates: self.streams.iter().map(|(_, s)| s.duplicates).sum(),
            foreign: self.foreign,
            latency_ns: match (lat.min_item(), lat.max_item()) {
                (Some(&min), Some(&max)) => Some([min, q(0.5), q(0.99), max]),
                _ => None,
            },
            other_clock: self.other_clock,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_reordering_and_latency() {
        let mut r = ProbeReceiver::default();
        let p = |stream, seq| ProbePayload {
            stream,
            seq,
            sent_ns: 1000 * seq,
        };
        // Stream 0: 0 1 3 2 5 (4 lost), 5 again. Stream 1: 0 2 (1 lost).
        for (s, q) in [
            (0, 0),
            (0, 1),
            (0, 3),
            (0, 2),
            (0, 5),
            (0, 5),
            (1, 0),
            (1, 2),
        ] {
            let pp = p(s, q);
            assert_eq!(ProbePayload::decode(&pp.encode()), Some(pp));
            r.record(1, &pp, pp.sent_ns + 100 + q);
        }
        let rep = r.report();
        assert_eq!(
            (rep.received, rep.lost, rep.reordered, rep.duplicates),
            (7, 2, 1, 1)
        );
        assert_eq!(rep.latency_ns, Some([100, 102, 105, 105]));
        // Numbers beyond what is tracked are counted apart, without growing the state.
        r.record(1, &p(MAX_PROBE_STREAMS, 0), 0);
        r.record(1, &p(0, 6 + MAX_PROBE_SEQ), 0);
        // A new stream's first number at the top of the range (it overflowed).
        let top = ProbePayload {
            stream: 7,
            seq: u64::MAX,
            sent_ns: 0,
        };
        r.record(1, &top, 0);
        assert_eq!(r.report().foreign, 3);
        assert_eq!(r.report().received, 7);
        assert!(ProbePayload::decode(&[0u8; 40]).is_none());
    }

    /// A long stream (past 2^24 numbers: 4.7 hours at 1 kHz) is counted to its end in
    /// bounded memory, and a receiver started late into one counts from what it first
    /// got; a probe far behind still counts once.
    #[test]
    fn long_streams_are_counted_in_bounded_memory() {
        let mut r = ProbeReceiver::default();
        let start = MAX_PROBE_SEQ + 5;
        for seq in (start..start + 3_000_000).filter(|q| q % 1000 != 7) {
            let pp = ProbePayload {
                stream: 0,
                seq,
                sent_ns: seq,
            };
            r.record(1, &pp, seq + 50);
        }
        // Again within the window (a duplicate), and one long gone (counted, reordered).
        for seq in [start + 2_999_990, start + 10] {
            r.record(
                1,
                &ProbePayload {
                    stream: 0,
                    seq,
                    sent_ns: seq,
                },
                seq + 50,
            );
        }
        let rep = r.report();
        assert_eq!(rep.lost, 3000 - 1);
        assert_eq!(rep.received, 3_000_000 - 3000 + 1);
        assert_eq!((rep.duplicates, rep.reordered, rep.foreign), (1, 1, 0));
        assert_eq!(rep.latency_ns, Some([50, 50, 50, 50]));
        let s = r.streams.iter().next().unwrap().1;
        assert_eq!(s.seen.len() as u64, SEEN_WINDOW / 64);
    }

    /// Probes timed by another clock (a replayed capture's send times start at 0; a sender
    /// ahead of the receiver) are counted but left out of the latency (it read 57 years).
    #[test]
    fn probes_of_another_clock_are_left_out_of_the_latency() {
        let mut r = ProbeReceiver::default();
        let now = 1_796_000_000_000_000_000u64;
        let probe = |seq, sent_ns| ProbePayload {
            stream: 0,
            seq,
            sent_ns,
        };
        r.record(1, &probe(0, now - 2_000), now);
        r.record(1, &probe(1, 1_000), now);
        r.record(1, &probe(2, now + 5_000), now);
        r.record(1, &probe(3, now - 3_000), now);
        let rep = r.report();
        assert_eq!((rep.received, rep.other_clock), (4, 2));
        assert_eq!(rep.latency_ns, Some([2_000, 2_000, 3_000, 3_000]));
    }

    #[test]
    fn senders_with_the_same_stream_numbers_are_counted_apart() {
        // Two generators' stream 0, interleaved: every probe arrives once, in order.
        let mut r = ProbeReceiver::default();
        for seq in 0..50 {
            for sender in [1, 2] {
                let pp = ProbePayload {
                    stream: 0,
                    seq,
                    sent_ns: seq,
                };
                r.record(sender, &pp, seq + 10);
            }
        }
        let rep = r.report();
        assert_eq!(
            (rep.received, rep.lost, rep.reordered, rep.duplicates),
            (100, 0, 0, 0)
        );
    }
}
