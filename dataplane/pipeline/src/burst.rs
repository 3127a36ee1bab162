//! One worker's pipeline: runs a received burst through forwarding (and, when on, the
//! telemetry stages), leaving each packet's verdict for the poll loop to act on. It owns the
//! worker's mutable state and counters; the tables it reads are shared read-only.

use crate::counters::LocalCounters;
use crate::forward::{Forwarder, Verdict};
use crate::frame::PacketBuf;

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

/// A worker's pipeline.
pub struct Pipeline<'t> {
    fwd: &'t Forwarder,
    prefetch: bool,
    /// The worker's running totals.
    pub counters: LocalCounters,
}

impl<'t> Pipeline<'t> {
    /// A pipeline over shared tables; `prefetch` reads packet data a few packets ahead.
    pub fn new(fwd: &'t Forwarder, prefetch: bool) -> Pipeline<'t> {
        Pipeline {
            fwd,
            prefetch,
            counters: LocalCounters::default(),
        }
    }

    /// The forwarding tables.
    pub fn forwarder(&self) -> &Forwarder {
        self.fwd
    }

    /// Runs a burst received on `rx_port` (at most [`MAX_BURST`] packets): every packet is
    /// rewritten in place or left unchanged for dropping, its verdict in `out`.
    #[inline]
    pub fn process_burst<B: PacketBuf>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        out: &mut BurstVerdicts,
    ) {
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
            let v = match self.fwd.process(rx_port, m.data_mut(), len) {
                Verdict::Forward(egress) => {
                    tx_bytes += len as u64;
                    tx_packets += 1;
                    let pc = &mut c.ports[usize::from(egress)];
                    pc.tx_packets += 1;
                    pc.tx_bytes += len as u64;
                    egress
                }
                Verdict::Drop(reason) => {
                    c.drop_one(reason);
                    DROPPED | reason as u16
                }
            };
            out.verdicts[i] = v;
            all_same &= v == out.verdicts[0];
        }
        out.all_same = all_same;
        c.rx_packets += n as u64;
        c.rx_bytes += rx_bytes;
        c.tx_packets += tx_packets;
        c.tx_bytes += tx_bytes;
        let pc = &mut c.ports[rx_port];
        pc.rx_packets += n as u64;
        pc.rx_bytes += rx_bytes;
    }
}
