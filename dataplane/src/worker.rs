//! The per-core poll loop, in the shape of DPDK's l3fwd: receive a burst, run the pipeline
//! on it, hand each packet to its egress port's buffer, send, publish counters. One worker
//! owns its rx queues and one tx queue on every port; nothing is shared but read-only tables
//! and the worker's own cache-padded counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use control::config::{IdleMode, MAX_PORTS};
use pipeline::{BurstVerdicts, DROPPED, LocalCounters, Pipeline, SharedCounters};

use crate::dpdk::{Burst, RxQueue, TxQueue};

/// Times a tx call is retried for one burst before the rest is dropped.
const TX_RETRIES: u32 = 16;
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
}

/// Sends a port's buffered packets, retrying a few times; what still does not fit is
/// dropped and counted (and taken off the port's and the worker's tx totals, which the
/// pipeline counted when it forwarded the packets).
#[inline(always)]
fn flush(port: usize, txq: &mut TxQueue<'_>, buf: &mut Burst, c: &mut LocalCounters) {
    let mut tries = 0;
    loop {
        txq.tx(buf);
        if buf.is_empty() {
            return;
        }
        c.tx_retries += 1;
        tries += 1;
        if tries >= TX_RETRIES {
            let bytes: u64 = buf.as_slice().iter().map(|m| m.pkt_len() as u64).sum();
            let n = buf.len() as u64;
            c.tx_bytes -= bytes;
            c.tx_packets -= n;
            c.ports[port].tx_bytes -= bytes;
            c.ports[port].tx_packets -= n;
            c.tx_full_drops += n;
            buf.clear();
            return;
        }
    }
}

impl Worker<'_> {
    /// Polls until `stop` is set, publishing totals to `shared` every few bursts and when idle.
    pub fn run(
        mut self,
        pipeline: &mut Pipeline,
        shared: &SharedCounters,
        stop: &AtomicBool,
    ) -> LocalCounters {
        let mut rx_burst: Burst = Burst::new();
        let mut dropped: Burst = Burst::new();
        let mut out: [Burst; MAX_PORTS] = core::array::from_fn(|_| Burst::new());
        let mut verdicts = BurstVerdicts::default();
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
                let rx_tsc = crate::dpdk::tsc();
                pipeline.process_burst(
                    *port,
                    rx_burst.as_mut_slice(),
                    rx_tsc,
                    crate::dpdk::tsc,
                    &mut verdicts,
                );
                let c = &mut pipeline.counters;
                // Hand the packets to their egress ports (the whole burst at once when every
                // packet goes the same way, as is common) or free them in bulk.
                let first = verdicts.verdicts[0];
                if verdicts.all_same && first & DROPPED == 0 && out[usize::from(first)].is_empty() {
                    let e = usize::from(first);
                    flush(e, &mut self.tx[e], &mut rx_burst, c);
                } else if verdicts.all_same && first & DROPPED != 0 {
                    rx_burst.clear();
                } else {
                    let mut used: u32 = 0;
                    for (m, v) in rx_burst.drain().zip(verdicts.verdicts) {
                        if v & DROPPED != 0 {
                            if dropped.is_full() {
                                dropped.clear();
                            }
                            let _ = dropped.push(m);
                            continue;
                        }
                        let e = usize::from(v);
                        if out[e].is_full() {
                            flush(e, &mut self.tx[e], &mut out[e], c);
                        }
                        let _ = out[e].push(m);
                        used |= 1 << e;
                    }
                    dropped.clear();
                    while used != 0 {
                        let e = used.trailing_zeros() as usize;
                        used &= used - 1;
                        flush(e, &mut self.tx[e], &mut out[e], c);
                    }
                }
                c.busy_polls += 1;
                bursts += 1;
                if bursts.is_multiple_of(PUBLISH_EVERY) {
                    shared.publish(c);
                }
            }
            // One TSC read per loop: the time since the previous read counts as busy when
            // this loop received packets (so it includes the rx, pipeline and tx work).
            let now = crate::dpdk::tsc();
            if got > 0 {
                pipeline.counters.busy_cycles += now - last;
            }
            last = now;
            pipeline.tick(now);
            if got == 0 {
                if idle_polls == 0 {
                    shared.publish(&pipeline.counters);
                }
                idle_polls = idle_polls.saturating_add(1);
                if self.idle == IdleMode::Sleep && idle_polls >= IDLE_POLLS_BEFORE_SLEEP {
                    std::thread::sleep(self.idle_sleep);
                }
            } else {
                idle_polls = 0;
            }
        }
        shared.publish(&pipeline.counters);
        pipeline.counters
    }
}
