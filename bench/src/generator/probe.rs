//! Probe packets (layout in `telemetry::wire::probe`): what the receiving side counts.

pub use telemetry::wire::probe::{PROBE_LEN, ProbePayload};

use super::senders::PerSender;

/// Per-stream receive state.
#[derive(Debug, Clone, Default)]
struct Stream {
    received: u64,
    /// Highest sequence number seen, plus one.
    next: u64,
    reordered: u64,
    duplicates: u64,
    seen: Vec<u64>,
}

/// Counts probes as they arrive. A stream is its sender's stream number and the sender's
/// IPv4 source address ([`PerSender`]): a receiver that hears several generators keeps their
/// streams apart.
#[derive(Debug, Clone, Default)]
pub struct ProbeReceiver {
    streams: PerSender<Stream>,
    latencies: Vec<u64>,
    foreign: u64,
}

/// Most probe streams a receiver tracks.
pub const MAX_PROBE_STREAMS: u32 = 1024;
/// Sequence numbers a receiver tracks per stream (19 days at 10 Hz).
const MAX_PROBE_SEQ: u64 = 1 << 24;

/// What the receiver measured.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeReport {
    /// Probes received.
    pub received: u64,
    /// Probes missing: sequence numbers below the highest seen that never arrived.
    pub lost: u64,
    /// Probes that arrived after a higher sequence number of their stream.
    pub reordered: u64,
    /// Probes that arrived more than once.
    pub duplicates: u64,
    /// Probes with a stream or sequence number beyond what a receiver tracks, or from more
    /// senders than it keeps apart (not counted above).
    pub foreign: u64,
    /// One-way latency in nanoseconds: min, median, p99, max (None without probes).
    pub latency_ns: Option<[u64; 4]>,
}

impl ProbeReceiver {
    /// Records a probe from the sender with IPv4 source address `sender`, received at
    /// `now_ns` (same clock as the sender's).
    pub fn record(&mut self, sender: u32, p: &ProbePayload, now_ns: u64) {
        let tracked = (p.stream < MAX_PROBE_STREAMS && p.seq < MAX_PROBE_SEQ)
            .then(|| self.streams.get_mut(sender, p.stream))
            .flatten();
        let Some(s) = tracked else {
            self.foreign += 1;
            return;
        };
        let word = (p.seq / 64) as usize;
        if word >= s.seen.len() {
            s.seen.resize(word + 1, 0);
        }
        let bit = 1u64 << (p.seq % 64);
        if s.seen[word] & bit != 0 {
            s.duplicates += 1;
            return;
        }
        s.seen[word] |= bit;
        s.received += 1;
        if p.seq < s.next {
            s.reordered += 1;
        } else {
            s.next = p.seq + 1;
        }
        self.latencies.push(now_ns.saturating_sub(p.sent_ns));
    }

    /// The totals over all streams.
    pub fn report(&self) -> ProbeReport {
        let mut lat = self.latencies.clone();
        lat.sort_unstable();
        let q = |f: f64| lat[((lat.len() - 1) as f64 * f).round() as usize];
        ProbeReport {
            received: self.streams.iter().map(|(_, s)| s.received).sum(),
            lost: self.streams.iter().map(|(_, s)| s.next - s.received).sum(),
            reordered: self.streams.iter().map(|(_, s)| s.reordered).sum(),
            duplicates: self.streams.iter().map(|(_, s)| s.duplicates).sum(),
            foreign: self.foreign,
            latency_ns: (!lat.is_empty()).then(|| [lat[0], q(0.5), q(0.99), lat[lat.len() - 1]]),
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
        r.record(1, &p(0, MAX_PROBE_SEQ), 0);
        assert_eq!(r.report().foreign, 2);
        assert_eq!(r.report().received, 7);
        assert!(ProbePayload::decode(&[0u8; 40]).is_none());
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
