//! One worker's pipeline: runs a received burst through forwarding (and, when on, the
//! telemetry stages), leaving each packet's verdict for the poll loop to act on. It owns the
//! worker's mutable state and counters; the tables it reads are shared read-only.

use std::sync::Arc;

use crate::counters::{DropReason, LocalCounters};
use crate::forward::{Forwarder, Verdict};
use crate::frame::PacketBuf;
use crate::inband::{Inband, Received};

/// Whether a packet of `len` bytes is longer than its first buffer `frame`: a chain, which a
/// device that scatters (memif, vhost, pcap) makes of a frame longer than the mbufs, which
/// hold the largest port MTU's frames. Such a frame is over every MTU (its IPv4 packet, or
/// its trailer, is): dropped as `mtu_exceeded`, since the pipeline reads only the first
/// buffer and a NIC's tx path without the multi-segment offload sends only that and leaks
/// the rest. A packet shorter than its first buffer is as far over every MTU: DPDK's pcap
/// device cuts the length of a record of 64 KiB or more to 16 bits (a capture's
/// GRO-coalesced frames), and read as it stands it would make the parse's lengths wrap.
#[inline(always)]
pub(crate) fn chained(len: usize, frame: &[u8]) -> bool {
    len != frame.len()
}

/// Largest burst the pipeline takes at once.
pub const MAX_BURST: usize = 64;

/// Marks a dropped packet's verdict; the low bits hold the [`crate::DropReason`].
pub const DROPPED: u16 = 0x8000;

/// Packets ahead of the current one whose data is prefetched (when prefetching is on).
const PREFETCH_AHEAD: usize = 3;

/// The verdicts of one burst, one per packet: an egress port index, or [`DROPPED`] with the
/// reason.
#[derive(Debug, Clone, Copy)]
pub struct BurstVerdicts {
    /// Per packet, in burst order.
    pub verdicts: [u16; MAX_BURST],
    /// Whether every packet got the same verdict.
    pub all_same: bool,
}

impl Default for BurstVerdicts {
    fn default() -> Self {
        BurstVerdicts {
            verdicts: [0; MAX_BURST],
            all_same: true,
        }
    }
}

impl LocalCounters {
    /// Counts a drop and returns the packet's verdict.
    #[inline(always)]
    pub(crate) fn dropped_verdict(&mut self, r: crate::DropReason) -> u16 {
        self.drop_one(r);
        DROPPED | r as u16
    }

    /// Counts a burst of `n` packets received on `rx_port` (`rx_bytes`), of which
    /// `tx_packets` were forwarded (`tx_bytes`; per-port tx counts are kept as packets go).
    #[inline(always)]
    pub(crate) fn count_burst(
        &mut self,
        rx_port: usize,
        n: u64,
        rx_bytes: u64,
        tx_packets: u64,
        tx_bytes: u64,
    ) {
        self.rx_packets += n;
        self.rx_bytes += rx_bytes;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        let pc = &mut self.ports[rx_port];
        pc.rx_packets += n;
        pc.rx_bytes += rx_bytes;
    }
}

/// A worker's pipeline.
pub struct Pipeline {
    fwd: Arc<Forwarder>,
    prefetch: bool,
    inband: Option<Inband>,
    /// The worker's running totals.
    pub counters: LocalCounters,
}

impl Pipeline {
    /// A pipeline over shared tables; `prefetch` reads packet data a few packets ahead.
    pub fn new(fwd: Arc<Forwarder>, prefetch: bool) -> Pipeline {
        Pipeline {
            fwd,
            prefetch,
            inband: None,
            counters: LocalCounters::default(),
        }
    }

    /// The same pipeline with the telemetry stages on.
    pub fn with_inband(mut self, inband: Inband) -> Pipeline {
        self.inband = Some(inband);
        self
    }

    /// The forwarding tables.
    pub fn forwarder(&self) -> &Forwarder {
        &self.fwd
    }

    /// The telemetry state, when on.
    pub fn inband(&self) -> Option<&Inband> {
        self.inband.as_ref()
    }

    /// The telemetry state, when on, writable.
    pub fn inband_mut(&mut self) -> Option<&mut Inband> {
        self.inband.as_mut()
    }

    /// The worker stops: the telemetry's epoch under way is handed over as far as it got.
    #[cold]
    pub fn finish(self) {
        if let Some(t) = self.inband {
            t.finish();
        }
    }

    /// Work between bursts and on idle polls, at counter value `now_tsc`: plan changes and
    /// FlowRadar epoch ends.
    #[inline(always)]
    pub fn tick(&mut self, now_tsc: u64) {
        if let Some(t) = &mut self.inband {
            t.tick(now_tsc, &mut self.counters);
        }
    }

    /// Runs a burst received on `rx_port` at counter value `rx_tsc` (at most [`MAX_BURST`]
    /// packets): every packet is rewritten in place or left unchanged for dropping, its
    /// verdict in `out`. `tx_tsc` reads the counter when the burst is about to leave (the
    /// telemetry's hop latency ends there).
    #[inline]
    pub fn process_burst<B: PacketBuf>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        rx_tsc: u64,
        tx_tsc: impl FnOnce() -> u64,
        out: &mut BurstVerdicts,
    ) {
        if let Some(t) = &mut self.inband {
            if self.prefetch {
                for p in pkts.iter() {
                    p.prefetch();
                }
            }
            let rx = Received {
                port: rx_port,
                pkts,
                tsc: rx_tsc,
            };
            t.process_burst(&self.fwd, rx, tx_tsc, out, &mut self.counters);
            return;
        }
        let _ = (rx_tsc, tx_tsc);
        let n = pkts.len().min(MAX_BURST);
        let c = &mut self.counters;
        let (mut rx_bytes, mut tx_bytes, mut tx_packets) = (0u64, 0u64, 0u64);
        if self.prefetch {
            for p in pkts.iter().take(PREFETCH_AHEAD) {
                p.prefetch();
            }
        }
        let mut all_same = true;
        for i in 0..n {
            if self.prefetch
                && let Some(p) = pkts.get(i + PREFETCH_AHEAD)
            {
                p.prefetch();
            }
            let m = &mut pkts[i];
            let len = m.pkt_len();
            rx_bytes += len as u64;
            let frame = m.data_mut();
            // A frame longer than its first buffer: see `chained`.
            let verdict = if chained(len, frame) {
                Verdict::Drop(DropReason::MtuExceeded)
            } else {
                self.fwd.process(rx_port, frame, len)
            };
            let v = match verdict {
                Verdict::Forward(egress) => {
                    tx_bytes += len as u64;
                    tx_packets += 1;
                    let pc = &mut c.ports[usize::from(egress)];
                    pc.tx_packets += 1;
                    pc.tx_bytes += len as u64;
                    egress
                }
                Verdict::Drop(reason) => c.dropped_verdict(reason),
            };
            out.verdicts[i] = v;
            all_same &= v == out.verdicts[0];
        }
        out.all_same = all_same;
        c.count_burst(rx_port, n as u64, rx_bytes, tx_packets, tx_bytes);
    }
}
