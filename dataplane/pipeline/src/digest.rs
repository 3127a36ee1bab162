//! What the last hop reports for each packet that leaves through an edge port: one digest
//! record, put on the worker's own ring for the control thread to batch and export, and,
//! when the packet is a probe, a probe record on a second, small ring. The worker gathers a
//! burst's records and writes them with one ring update ([`DigestRing::push_burst`]); a
//! full ring drops what does not fit and counts it; the worker never waits.
//!
//! On the ring a digest record is 40 bytes ([`RingDigest`]); [`DigestRecord`] is a record
//! as readers see it.

use telemetry::flowradar::FlowKey;
use telemetry::protocol::WireDigest;
use telemetry::wire::probe::ProbePayload;

/// One packet's telemetry as the last PINT hop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DigestRecord {
    /// The flow.
    pub key: FlowKey,
    /// The packet ID.
    pub pid: u32,
    /// The full version of the plan the digest was encoded with.
    pub plan_version: u32,
    /// The digest (right-aligned).
    pub digest: u64,
    /// Counter value when the packet left (the control thread converts it to Unix time).
    pub tsc: u64,
    /// Path length `k`: this hop's index.
    pub hops: u8,
    /// The port the packet arrived on at this switch.
    pub ingress_port: u8,
    /// The edge port it left by.
    pub egress_port: u8,
}

impl DigestRecord {
    /// The record as it travels to the sink, with its time converted to Unix ns.
    pub fn to_wire(&self, time_ns: u64) -> WireDigest {
        WireDigest {
            key: self.key,
            ingress_port: self.ingress_port,
            egress_port: self.egress_port,
            pid: self.pid,
            hops: self.hops,
            plan_version: self.plan_version,
            digest: self.digest,
            time_ns,
        }
    }
}

/// A digest record as the ring holds it (40 bytes): the flow key's two words, with the path
/// length (bits 40-47 of the second), the ingress port (48-55) and the egress port (56-63);
/// the digest, the time, the packet ID and the plan version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct RingDigest {
    w0: u64,
    w1: u64,
    digest: u64,
    tsc: u64,
    pid: u32,
    plan_version: u32,
}

// `RingDigest::words` relies on this layout.
const _: () = assert!(
    std::mem::size_of::<RingDigest>() == 40
        && std::mem::offset_of!(RingDigest, pid) == 32
        && std::mem::offset_of!(RingDigest, plan_version) == 36
);

impl RingDigest {
    /// A record of a packet of the flow with key words `w0`, `w1` ([`FlowKey::words`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn new(
        w0: u64,
        w1: u64,
        hops: u8,
        ingress_port: u8,
        egress_port: u8,
        pid: u32,
        plan_version: u32,
        digest: u64,
        tsc: u64,
    ) -> RingDigest {
        RingDigest {
            w0,
            w1: (w1 & 0xff_ffff_ffff)
                | (u64::from(hops) << 40)
                | (u64::from(ingress_port) << 48)
                | (u64::from(egress_port) << 56),
            digest,
            tsc,
            pid,
            plan_version,
        }
    }

    /// The record's five 8-byte words in memory order (the packet ID in the low half of
    /// the last, as a little-endian machine lays it out).
    #[inline(always)]
    fn words(&self) -> [u64; 5] {
        [
            self.w0,
            self.w1,
            self.digest,
            self.tsc,
            u64::from(self.pid) | u64::from(self.plan_version) << 32,
        ]
    }

    /// The record as readers see it.
    pub fn record(&self) -> DigestRecord {
        DigestRecord {
            key: FlowKey::from_words(self.w0, self.w1),
            pid: self.pid,
            plan_version: self.plan_version,
            digest: self.digest,
            tsc: self.tsc,
            hops: (self.w1 >> 40) as u8,
            ingress_port: (self.w1 >> 48) as u8,
            egress_port: (self.w1 >> 56) as u8,
        }
    }
}

/// A probe that left through an edge port: its flow, payload and departure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRecord {
    /// The probe's flow.
    pub key: FlowKey,
    /// What the probe carried.
    pub probe: ProbePayload,
    /// Counter value when it left.
    pub tsc: u64,
}

/// The worker's end of its rings, with room to gather a burst's records.
pub struct DigestRing {
    ring: rtrb::Producer<RingDigest>,
    probes: rtrb::Producer<ProbeRecord>,
    burst: Box<[RingDigest; crate::burst::MAX_BURST]>,
    len: usize,
}

/// What one burst's push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pushed {
    /// Records put on the ring.
    pub recorded: u64,
    /// Records dropped (the ring was full).
    pub dropped: u64,
}

impl DigestRing {
    /// Gathers one record for this burst's push.
    #[inline(always)]
    pub fn gather(&mut self, rec: RingDigest) {
        if let Some(slot) = self.burst.get_mut(self.len) {
            *slot = rec;
            self.len += 1;
        }
    }

    /// Puts a probe record on the probe ring; false when it is full (the probe is dropped).
    #[cold]
    pub fn push_probe(&mut self, p: ProbeRecord) -> bool {
        self.probes.push(p).is_ok()
    }

    /// Puts the burst's records on the ring with one update, as many as fit.
    #[inline]
    pub fn push_burst(&mut self) -> Pushed {
        let n = std::mem::take(&mut self.len);
        if n == 0 {
            return Pushed::default();
        }
        // As many as fit (the ring reads the control thread's position only when the one it
        // last saw leaves too little room).
        let chunk = match self.ring.write_chunk_uninit(n) {
            Ok(chunk) => Some(chunk),
            Err(rtrb::chunks::ChunkError::TooFewSlots(0)) => None,
            Err(rtrb::chunks::ChunkError::TooFewSlots(k)) => self.ring.write_chunk_uninit(k).ok(),
        };
        let mut room = 0;
        if let Some(mut chunk) = chunk {
            let (a, b) = chunk.as_mut_slices();
            room = a.len() + b.len();
            let (first, second) = self.burst[..room].split_at(a.len());
            stream_records(first, a);
            stream_records(second, b);
            // SAFETY: `stream_records` wrote every slot of both slices.
            unsafe { chunk.commit_all() };
        }
        Pushed {
            recorded: room as u64,
            dropped: (n - room) as u64,
        }
    }
}

/// Writes `from` into the ring slots `to` (of the same length: panics otherwise) with
/// stores that bypass the worker's caches: the control thread reads them on the other core,
/// often long after, so the worker neither reads the lines in first nor keeps them in its
/// caches. Ends with a store fence, so the records are visible before the ring's commit
/// publishes them.
#[inline]
fn stream_records(from: &[RingDigest], to: &mut [std::mem::MaybeUninit<RingDigest>]) {
    // Every slot must be written before the commit (once per call, not per record).
    assert_eq!(from.len(), to.len(), "records for every slot");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_sfence, _mm_stream_si64};
        for (r, slot) in from.iter().zip(to.iter_mut()) {
            let words = r.words();
            let at = slot.as_mut_ptr().cast::<i64>();
            for (k, &w) in words.iter().enumerate() {
                // SAFETY: `slot` is a writable `RingDigest` (40 bytes, aligned to 8) and
                // `words` is its five 8-byte words in memory order, so each store is in
                // bounds and aligned; SSE2 is part of x86-64.
                unsafe { _mm_stream_si64(at.add(k), w as i64) };
            }
        }
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_sfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (r, slot) in from.iter().zip(to.iter_mut()) {
        slot.write(*r);
    }
}

/// The control thread's end of a worker's rings.
pub struct DigestDrain {
    ring: rtrb::Consumer<RingDigest>,
    probes: rtrb::Consumer<ProbeRecord>,
}

impl DigestDrain {
    /// Records waiting.
    pub fn slots(&self) -> usize {
        self.ring.slots()
    }

    /// Takes up to `max` records, calling `each` with each; returns how many.
    pub fn drain(&mut self, max: usize, mut each: impl FnMut(&RingDigest)) -> usize {
        let n = max.min(self.ring.slots());
        let Ok(chunk) = self.ring.read_chunk(n) else {
            return 0;
        };
        for r in chunk {
            each(&r);
        }
        n
    }

    /// Takes every probe record waiting, calling `each` with each.
    pub fn drain_probes(&mut self, mut each: impl FnMut(&ProbeRecord)) {
        let n = self.probes.slots();
        if let Ok(chunk) = self.probes.read_chunk(n) {
            for p in chunk {
                each(&p);
            }
        }
    }

    /// Every record waiting, as readers see them.
    pub fn records(&mut self) -> Vec<DigestRecord> {
        let mut out = Vec::with_capacity(self.ring.slots());
        self.drain(usize::MAX, |r| out.push(r.record()));
        out
    }

    /// Every probe record waiting.
    pub fn probe_records(&mut self) -> Vec<ProbeRecord> {
        let mut out = Vec::new();
        self.drain_probes(|p| out.push(*p));
        out
    }
}

/// Probe records a worker's probe ring holds (probes are a few per second per stream).
pub const PROBE_RING: usize = 4096;

/// Rings of `capacity` digest records and [`PROBE_RING`] probe records: (worker end,
/// control end).
pub fn digest_ring(capacity: usize) -> (DigestRing, DigestDrain) {
    let (ring, drain) = rtrb::RingBuffer::new(capacity.max(1));
    let (probes, probe_drain) = rtrb::RingBuffer::new(PROBE_RING);
    (
        DigestRing {
            ring,
            probes,
            burst: Box::new([RingDigest::default(); crate::burst::MAX_BURST]),
            len: 0,
        },
        DigestDrain {
            ring: drain,
            probes: probe_drain,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src: i,
            dst: 2,
            src_port: 3,
            dst_port: 4,
            protocol: 17,
        }
    }

    fn rec(i: u32) -> RingDigest {
        let [w0, w1] = key(i).words();
        RingDigest::new(w0, w1, 3, 1, 15, i, 9, 0xabcd, 1000 + u64::from(i))
    }

    #[test]
    fn records_round_trip_and_a_full_ring_drops_the_rest_of_a_burst() {
        assert_eq!(std::mem::size_of::<RingDigest>(), 40);
        let (mut ring, mut drain) = digest_ring(3);
        ring.gather(rec(1));
        ring.gather(rec(2));
        assert_eq!(
            ring.push_burst(),
            Pushed {
                recorded: 2,
                dropped: 0
            }
        );
        let got = drain.records();
        assert_eq!(
            got[1],
            DigestRecord {
                key: key(2),
                pid: 2,
                plan_version: 9,
                digest: 0xabcd,
                tsc: 1002,
                hops: 3,
                ingress_port: 1,
                egress_port: 15,
            }
        );
        for i in 3..8 {
            ring.gather(rec(i));
        }
        assert_eq!(
            ring.push_burst(),
            Pushed {
                recorded: 3,
                dropped: 2
            }
        );
        assert_eq!(
            drain.records().iter().map(|r| r.pid).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        let probe = ProbeRecord {
            key: key(9),
            probe: ProbePayload {
                stream: 1,
                seq: 2,
                sent_ns: 3,
            },
            tsc: 4,
        };
        assert!(ring.push_probe(probe));
        assert_eq!(drain.probe_records(), vec![probe]);
        assert!(drain.probe_records().is_empty());
    }
}
