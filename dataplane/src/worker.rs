//! The per-core poll loop, in the shape of DPDK's l3fwd: receive a burst, run the pipeline
//! on each packet, buffer per egress port, send, publish counters. One worker owns its rx
//! queues and one tx queue on every port; nothing is shared but read-only tables and the
//! worker's own cache-padded counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use control::config::{IdleMode, MAX_PORTS};

use crate::dpdk::{BURST_SIZE, Burst, RxQueue, TxQueue};
use crate::pipeline::{Forwarder, LocalCounters, SharedCounters, Verdict};

/// Times a tx call is retried for one burst before the rest is dropped.
const TX_RETRIES: u32 = 16;
/// Packets ahead of the current one whose data is prefetched.
const PREFETCH_AHEAD: usize = 3;
/// Marks a dropped packet's verdict (the low bits hold the reason).
const DROPPED: u16 = 0x8000;
/// Bursts between counter publications (counters are also published whenever the worker
/// goes idle and when it stops).
const PUBLISH_EVERY: u32 = 8;
/// Empty polls in a row before a worker in `sleep` idle mode sleeps.
const IDLE_POLLS_BEFORE_SLEEP: u32 = 64;

/// Everything one worker owns.
pub struct Worker<'p> {
    /// The rx queues it polls, with the index of each queue's port.
    pub rx: Vec<(usize, RxQueue<'p>)>,
    /// Its tx queue on every port, indexed by port.
    pub tx: Vec<TxQueue<'p>>,
    /// What it does when idle.
    pub idle: IdleMode,
    /// How long it sleeps in `sleep` idle mode.
    pub idle_sleep: Duration,
    /// Prefetch packet data a few packets ahead.
    pub prefetch: bool,
}

#[inline(always)]
fn prefetch(m: *mut dpdk_sys::rte_mbuf) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults; the mbuf header is valid (just received).
    unsafe {
        if m.is_null() {
            return;
        }
        let m = &*m;
        let p = (m.buf_addr as *const i8).add(usize::from(m.data_off));
        core::arch::x86_64::_mm_prefetch(p, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = m;
}

/// Sends a port's buffered packets, retrying a few times; what still does not fit is
/// dropped and counted.
#[inline(always)]
fn flush(txq: &mut TxQueue<'_>, buf: &mut Burst, c: &mut LocalCounters) {
    let mut tries = 0;
    loop {
        c.tx_packets += txq.tx(buf) as u64;
        if buf.is_empty() {
            return;
        }
        c.tx_retries += 1;
        tries += 1;
        if tries >= TX_RETRIES {
            let mut bytes = 0;
            for i in 0..buf.len() {
                bytes += buf.get(i).map_or(0, |m| m.pkt_len() as u64);
            }
            c.tx_bytes -= bytes;
            c.tx_full_drops += buf.len() as u64;
            buf.clear();
            return;
        }
    }
}

impl Worker<'_> {
    /// Polls until `stop` is set, publishing totals to `shared` every few bursts and when idle.
    pub fn run(
        mut self,
        fwd: &Forwarder,
        shared: &SharedCounters,
        stop: &AtomicBool,
    ) -> LocalCounters {
        let mut c = LocalCounters::default();
        let mut rx_burst: Burst = Burst::new();
        let mut dropped: Burst = Burst::new();
        let mut out: [Burst; MAX_PORTS] = core::array::from_fn(|_| Burst::new());
        let mut idle_polls = 0u32;
        let mut last = crate::dpdk::tsc();
        let mut bursts = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let mut got = 0;
            for (port, rxq) in self.rx.iter_mut() {
                let n = rxq.rx(&mut rx_burst);
                if n == 0 {
                    continue;
                }
                got += n;
                // Pass 1: run the pipeline on every packet in place, noting each verdict.
                let mut verdicts = [0u16; BURST_SIZE];
                let mut all_same = true;
                let (mut rx_bytes, mut tx_bytes) = (0u64, 0u64);
                if self.prefetch {
                    for i in 0..n.min(PREFETCH_AHEAD) {
                        prefetch(rx_burst.raw(i));
                    }
                }
                for i in 0..n {
                    if self.prefetch && i + PREFETCH_AHEAD < n {
                        prefetch(rx_burst.raw(i + PREFETCH_AHEAD));
                    }
                    let m = rx_burst.get_mut(i).expect("received");
                    let len = m.pkt_len();
                    rx_bytes += len as u64;
                    let v = match fwd.process(*port, m.data_mut(), len) {
                        Verdict::Forward(egress) => {
                            tx_bytes += len as u64;
                            egress
                        }
                        Verdict::Drop(reason) => {
                            c.drops[reason as usize] += 1;
                            DROPPED | reason as u16
                        }
                    };
                    verdicts[i] = v;
                    all_same &= v == verdicts[0];
                }
                c.rx_packets += n as u64;
                c.rx_bytes += rx_bytes;
                c.tx_bytes += tx_bytes;
                // Pass 2: hand the packets to their egress ports (the whole burst at once when
                // every packet goes the same way, as is common) or free them in bulk.
                let first = verdicts[0];
                if all_same && first & DROPPED == 0 && out[usize::from(first)].is_empty() {
                    flush(&mut self.tx[usize::from(first)], &mut rx_burst, &mut c);
                } else if all_same && first & DROPPED != 0 {
                    rx_burst.clear();
                } else {
                    let mut used: u32 = 0;
                    for (m, v) in rx_burst.drain().zip(verdicts) {
                        if v & DROPPED != 0 {
                            if dropped.is_full() {
                                dropped.clear();
                            }
                            let _ = dropped.push(m);
                            continue;
                        }
                        let e = usize::from(v);
                        if out[e].is_full() {
                            flush(&mut self.tx[e], &mut out[e], &mut c);
                        }
                        let _ = out[e].push(m);
                        used |= 1 << e;
                    }
                    dropped.clear();
                    while used != 0 {
                        let e = used.trailing_zeros() as usize;
                        used &= used - 1;
                        flush(&mut self.tx[e], &mut out[e], &mut c);
                    }
                }
                c.busy_polls += 1;
                bursts += 1;
                if bursts.is_multiple_of(PUBLISH_EVERY) {
                    shared.publish(&c);
                }
            }
            // One TSC read per loop: the time since the previous read counts as busy when
            // this loop received packets (so it includes the rx, pipeline and tx work).
            let now = crate::dpdk::tsc();
            if got > 0 {
                c.busy_cycles += now - last;
            }
            last = now;
            if got == 0 {
                if idle_polls == 0 {
                    shared.publish(&c);
                }
                idle_polls = idle_polls.saturating_add(1);
                if self.idle == IdleMode::Sleep && idle_polls >= IDLE_POLLS_BEFORE_SLEEP {
                    std::thread::sleep(self.idle_sleep);
                }
            } else {
                idle_polls = 0;
            }
        }
        shared.publish(&c);
        c
    }
}
