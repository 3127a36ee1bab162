//! The per-core poll loop, in the shape of DPDK's l3fwd: receive a burst, run the pipeline
//! on each packet, buffer per egress port, send, publish counters. One worker owns its rx
//! queues and one tx queue on every port; nothing is shared but read-only tables and the
//! worker's own cache-padded counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use control::config::{IdleMode, MAX_PORTS};

use crate::dpdk::{Burst, RxQueue, TxQueue};
use crate::pipeline::{Forwarder, LocalCounters, SharedCounters, Verdict};

/// Times a tx call is retried for one burst before the rest is dropped.
const TX_RETRIES: u32 = 16;
/// Packets ahead of the current one whose data is prefetched.
const PREFETCH_AHEAD: usize = 3;
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
}

#[inline(always)]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: EAL is initialised before workers start.
    unsafe {
        dpdk_sys::rte_rdtsc()
    }
}

#[inline(always)]
fn prefetch(m: *mut dpdk_sys::rte_mbuf) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults; the mbuf header is valid (just received).
    unsafe {
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
    /// Polls until `stop` is set, publishing totals to `shared` after every burst.
    pub fn run(mut self, fwd: &Forwarder, shared: &SharedCounters, stop: &AtomicBool) -> LocalCounters {
        let mut c = LocalCounters::default();
        let mut rx_burst: Burst = Burst::new();
        let mut dropped: Burst = Burst::new();
        let mut out: [Burst; MAX_PORTS] = core::array::from_fn(|_| Burst::new());
        let mut idle_polls = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let mut got = 0;
            for (port, rxq) in self.rx.iter_mut() {
                let n = rxq.rx(&mut rx_burst);
                if n == 0 {
                    continue;
                }
                got += n;
                let start = tsc();
                let mut used: u32 = 0;
                let mut it = rx_burst.drain();
                for i in 0..n.min(PREFETCH_AHEAD) {
                    if let Some(p) = it.peek_ahead(i) {
                        prefetch(p);
                    }
                }
                while let Some(mut m) = it.next() {
                    if let Some(p) = it.peek_ahead(PREFETCH_AHEAD - 1) {
                        prefetch(p);
                    }
                    let len = m.pkt_len();
                    c.rx_bytes += len as u64;
                    match fwd.process(*port, m.data_mut(), len) {
                        Verdict::Forward(egress) => {
                            let e = usize::from(egress);
                            c.tx_bytes += len as u64;
                            if out[e].is_full() {
                                flush(&mut self.tx[e], &mut out[e], &mut c);
                            }
                            let _ = out[e].push(m);
                            used |= 1 << e;
                        }
                        Verdict::Drop(reason) => {
                            c.drops[reason as usize] += 1;
                            if dropped.is_full() {
                                dropped.clear();
                            }
                            let _ = dropped.push(m);
                        }
                    }
                }
                drop(it);
                c.rx_packets += n as u64;
                dropped.clear();
                while used != 0 {
                    let e = used.trailing_zeros() as usize;
                    used &= used - 1;
                    flush(&mut self.tx[e], &mut out[e], &mut c);
                }
                c.busy_cycles += tsc() - start;
                c.busy_polls += 1;
                shared.publish(&c);
            }
            if got == 0 {
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
