//! The per-core poll loop, in the shape of DPDK's l3fwd: receive a burst, run the pipeline
//! on it, hand each packet to its egress port's buffer, send, publish counters. One worker
//! owns its rx queues and one tx queue on every port; nothing is shared but read-only tables
//! and the worker's own cache-padded counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use control::config::{IdleMode, MAX_PORTS};
use pipeline::impair::{Fate, Impairer};
use pipeline::{BurstVerdicts, DROPPED, DropReason, LocalCounters, Pipeline, SharedCounters};

use crate::dpdk::{Burst, Mbuf, RxQueue, TxQueue};
use crate::gate::GateSlot;

/// Tx calls for one burst before the rest is dropped (the first and its retries). To a port
/// whose link is down they stop after the first when it sends nothing: such a port takes
/// nothing however often asked (a memif server's client away, a cable out), and the
/// retries cost the worker's other ports about 5 ns per packet; one whose link came up
/// since the control thread looked (up to a second) is retried as any other once its first
/// call takes something.
const TX_CALLS: u32 = 16;
/// Bursts between counter publications (counters are also published whenever the worker
/// goes idle, now and then while it stays idle ([`IDLE_PUBLISH_EVERY`]), and when it
/// stops).
const PUBLISH_EVERY: u32 = 8;
/// Empty polls between counter publications while a worker in `poll` mode stays idle (in
/// `sleep` mode, before every sleep): the epochs it closes meanwhile are counted as they
/// close, not when traffic comes again.
const IDLE_PUBLISH_EVERY: u32 = 256;
/// Empty polls in a row before a worker in `sleep` idle mode sleeps.
const IDLE_POLLS_BEFORE_SLEEP: u32 = 64;
/// How long a worker in `sleep` mode sleeps its shortest sleep before it backs off: traffic
/// with gaps shorter than this never waits longer than `idle_sleep`.
const BACKOFF_AFTER: Duration = Duration::from_millis(10);

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
    /// The longest sleep it backs off to when idle for long (doubling from `idle_sleep`), so
    /// that many idle switches on few cores cost little.
    pub idle_sleep_max: Duration,
    /// Its impairment of each port, indexed by port (None: the port sends as is).
    pub impair: Vec<Option<Impairer<Mbuf>>>,
    /// Bit `p` set when port `p` has an impairment (one test per flush when none has).
    pub impaired: u32,
}

/// Sends a port's buffered packets in at most [`TX_CALLS`] tx calls, or, when its link is
/// down (`link_down`), in one if that one sends nothing; what still does not fit is dropped and
/// counted (and taken off the port's and the worker's tx totals, which the pipeline counted
/// when it forwarded the packets).
#[inline(always)]
fn flush<const N: usize>(
    port: usize,
    txq: &mut TxQueue<'_>,
    buf: &mut Burst<N>,
    c: &mut LocalCounters,
    link_down: bool,
) {
    let mut calls = 0;
    loop {
        let sent = txq.tx(buf);
        calls += 1;
        if buf.is_empty() {
            return;
        }
        if calls >= TX_CALLS || (link_down && calls == 1 && sent == 0) {
            drop_unsent(port, buf, c);
            return;
        }
        c.tx_retries += 1;
    }
}

/// Takes one of a port's packets off the pipeline's tx counters (it counted the packet when
/// it forwarded it).
#[inline]
fn untx(port: usize, bytes: u64, c: &mut LocalCounters) {
    c.tx_bytes -= bytes;
    c.tx_packets -= 1;
    c.ports[port].tx_bytes -= bytes;
    c.ports[port].tx_packets -= 1;
}

/// Counts `out`'s packets as transmitted on `port`, then sends them ([`flush`] takes off
/// again what does not fit).
#[inline]
fn send_counted<const N: usize>(
    port: usize,
    txq: &mut TxQueue<'_>,
    out: &mut Burst<N>,
    c: &mut LocalCounters,
    link_down: bool,
) {
    if out.is_empty() {
        return;
    }
    let bytes: u64 = out.as_slice().iter().map(|m| m.pkt_len() as u64).sum();
    let n = out.len() as u64;
    c.tx_bytes += bytes;
    c.tx_packets += n;
    c.ports[port].tx_bytes += bytes;
    c.ports[port].tx_packets += n;
    flush(port, txq, out, c, link_down);
}

/// Sends a port's buffered packets through its impairment: first what the delay line
/// releases now, then the buffer's packets that are neither lost, delayed nor held back.
/// `buf` may be empty (a release tick). A packet counts as transmitted when it goes to the
/// device, not when the pipeline forwarded it: one the delay line holds, and then cannot
/// send at a full queue, was counted as sent meanwhile and then as dropped, and the
/// published tx counters went down.
#[inline(never)]
fn flush_impaired(
    port: usize,
    txq: &mut TxQueue<'_>,
    buf: &mut Burst,
    c: &mut LocalCounters,
    imp: &mut Impairer<Mbuf>,
    now: u64,
    link_down: bool,
) {
    let mut out: Burst<{ 2 * crate::dpdk::BURST_SIZE }> = Burst::new();
    while let Some(m) = imp.pop_due(now) {
        if out.is_full() {
            send_counted(port, txq, &mut out, c, link_down);
        }
        let _ = out.push(m);
    }
    send_counted(port, txq, &mut out, c, link_down);
    for m in buf.drain() {
        untx(port, m.pkt_len() as u64, c);
        let mut lost = None;
        // At most two packets go out per packet admitted (it and one held back), so `out`
        // (twice a burst, empty at the start) cannot fill.
        let fate = imp.admit(
            now,
            m,
            &mut |m| {
                let _ = out.push(m);
            },
            &mut |m| lost = Some(m),
        );
        match fate {
            Fate::Sent => {}
            Fate::Lost => {
                c.drop_one(DropReason::ImpairLoss);
                c.ports[port].impair_lost += 1;
            }
            Fate::Overflow => {
                c.drop_one(DropReason::ImpairOverflow);
                c.ports[port].impair_overflow += 1;
            }
            Fate::Delayed => c.impair_delayed += 1,
            Fate::Reordered => c.impair_reordered += 1,
        }
        drop(lost);
    }
    send_counted(port, txq, &mut out, c, link_down);
}

/// Sends port `e`'s buffered packets: straight to its tx queue, or, when the port is
/// impaired, closed or down (bit `e` of `special`: one test per burst), through its
/// impairment, nowhere, or giving up when the first tx call takes nothing.
#[inline(always)]
fn send(
    e: usize,
    special: Special,
    txq: &mut TxQueue<'_>,
    imp: &mut Option<Impairer<Mbuf>>,
    buf: &mut Burst,
    c: &mut LocalCounters,
) {
    if special.any & (1 << e) != 0 {
        send_special(e, special, txq, imp, buf, c);
    } else {
        flush(e, txq, buf, c, false);
    }
}

/// [`send`] to a port that is closed (its packets are dropped as a full queue's would be),
/// impaired or down.
#[inline(never)]
fn send_special(
    e: usize,
    special: Special,
    txq: &mut TxQueue<'_>,
    imp: &mut Option<Impairer<Mbuf>>,
    buf: &mut Burst,
    c: &mut LocalCounters,
) {
    let link_down = special.down & (1 << e) != 0;
    if special.closed & (1 << e) != 0 {
        drop_unsent(e, buf, c);
    } else if let Some(imp) = imp {
        flush_impaired(e, txq, buf, c, imp, crate::dpdk::tsc(), link_down);
    } else {
        flush(e, txq, buf, c, link_down);
    }
}

/// Drops a port's buffered packets that cannot be sent, counted as a full tx queue's (and
/// taken off the tx totals the pipeline counted them in).
#[cold]
fn drop_unsent<const N: usize>(port: usize, buf: &mut Burst<N>, c: &mut LocalCounters) {
    let bytes: u64 = buf.as_slice().iter().map(|m| m.pkt_len() as u64).sum();
    let n = buf.len() as u64;
    c.tx_bytes -= bytes;
    c.tx_packets -= n;
    c.ports[port].tx_bytes -= bytes;
    c.ports[port].tx_packets -= n;
    c.ports[port].tx_full_drops += n;
    c.tx_full_drops += n;
    buf.clear();
}

/// The ports a burst cannot simply be sent to, as bits: those with an impairment, those
/// closed while the control thread restarts them, and those whose link is down.
#[derive(Debug, Clone, Copy)]
struct Special {
    /// Impaired, closed or down.
    any: u32,
    /// Closed.
    closed: u32,
    /// Down.
    down: u32,
}

/// A poll loop's busy time: one TSC read per loop, the time since the previous read
/// counting as busy when the loop received packets (its rx, pipeline and tx work). A nap
/// restarts the clock, so that with `idle = "sleep"` the sleep before a poll that finds
/// packets is not counted as work.
#[derive(Debug, Clone, Copy)]
struct BusyClock {
    /// The TSC at the end of the last loop or nap.
    since: u64,
}

impl BusyClock {
    fn starting(now: u64) -> BusyClock {
        BusyClock { since: now }
    }

    /// Ends a loop at `now`: the cycles it was busy (0 when it received nothing).
    #[inline(always)]
    fn lap(&mut self, now: u64, received: bool) -> u64 {
        let busy = if received {
            now.saturating_sub(self.since)
        } else {
            0
        };
        self.since = now;
        busy
    }

    /// The worker woke from a nap at `now`.
    fn woke(&mut self, now: u64) {
        self.since = now;
    }
}

impl Worker<'_> {
    /// Polls until `stop` is set, publishing totals to `shared` every few bursts and when idle,
    /// and leaving alone the ports `gate` closes.
    pub fn run(
        mut self,
        pipeline: &mut Pipeline,
        shared: &SharedCounters,
        stop: &AtomicBool,
        mut gate: GateSlot<'_>,
    ) -> LocalCounters {
        let mut rx_burst: Burst = Burst::new();
        let mut dropped: Burst = Burst::new();
        let mut out: [Burst; MAX_PORTS] = core::array::from_fn(|_| Burst::new());
        let mut verdicts = BurstVerdicts::default();
        let mut idle_polls = 0u32;
        let mut nap = self.idle_sleep;
        let mut napped = Duration::ZERO;
        let mut busy = BusyClock::starting(crate::dpdk::tsc());
        let mut bursts = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let closed = gate.pass();
            let down = gate.down();
            let special = Special {
                any: self.impaired | closed | down,
                closed,
                down,
            };
            let mut got = 0;
            for (port, rxq) in self.rx.iter_mut() {
                if closed & (1 << *port) != 0 {
                    continue;
                }
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
                    let (txq, imp) = (&mut self.tx[e], &mut self.impair[e]);
                    send(e, special, txq, imp, &mut rx_burst, c);
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
                            let (txq, imp) = (&mut self.tx[e], &mut self.impair[e]);
                            send(e, special, txq, imp, &mut out[e], c);
                        }
                        let _ = out[e].push(m);
                        used |= 1 << e;
                    }
                    dropped.clear();
                    while used != 0 {
                        let e = used.trailing_zeros() as usize;
                        used &= used - 1;
                        let (txq, imp) = (&mut self.tx[e], &mut self.impair[e]);
                        send(e, special, txq, imp, &mut out[e], c);
                    }
                }
                c.busy_polls += 1;
                bursts = bursts.wrapping_add(1);
                if bursts.is_multiple_of(PUBLISH_EVERY) {
                    shared.publish(c);
                }
            }
            let now = crate::dpdk::tsc();
            pipeline.counters.busy_cycles += busy.lap(now, got > 0);
            if self.impaired != 0 {
                self.release_impaired(now, special, &mut pipeline.counters);
            }
            pipeline.tick(now);
            if got == 0 {
                let first = idle_polls == 0;
                // Wraps after 2^32 empty polls (the next 63 do not sleep): publishing every
                // IDLE_PUBLISH_EVERY polls goes on however long the worker stays idle.
                idle_polls = idle_polls.wrapping_add(1);
                let sleeps = self.idle == IdleMode::Sleep && idle_polls >= IDLE_POLLS_BEFORE_SLEEP;
                if first || sleeps || idle_polls.is_multiple_of(IDLE_PUBLISH_EVERY) {
                    shared.publish(&pipeline.counters);
                }
                if sleeps {
                    std::thread::sleep(nap);
                    busy.woke(crate::dpdk::tsc());
                    napped += nap;
                    // Packets in a delay line leave on time: no backing off while one holds any.
                    if napped >= BACKOFF_AFTER && !self.holding(closed) {
                        nap = (nap * 2).min(self.idle_sleep_max);
                    }
                }
            } else {
                idle_polls = 0;
                nap = self.idle_sleep;
                napped = Duration::ZERO;
            }
        }
        let closed = gate.pass();
        self.drain_impaired(closed, gate.down(), &mut pipeline.counters);
        gate.leave();
        shared.publish(&pipeline.counters);
        if let Some(stages) = pipeline::stages::report() {
            control::say_err!("worker stage cycles per packet: {stages}");
        }
        pipeline.counters
    }

    /// Whether an open impaired port's delay line holds packets (a closed port's wait).
    fn holding(&self, closed: u32) -> bool {
        self.impaired & !closed != 0
            && (self.impair.iter().enumerate())
                .any(|(e, i)| closed & (1 << e) == 0 && i.as_ref().is_some_and(|i| i.holding() > 0))
    }

    /// Sends what the impaired ports' delay lines release by `now` (a closed port's packets
    /// wait until it opens).
    #[inline(never)]
    fn release_impaired(&mut self, now: u64, special: Special, c: &mut LocalCounters) {
        let mut none = Burst::new();
        for (e, imp) in self.impair.iter_mut().enumerate() {
            if let Some(imp) = imp
                && special.closed & (1 << e) == 0
                && imp.next_due().is_some_and(|t| t <= now)
            {
                let link_down = special.down & (1 << e) != 0;
                flush_impaired(e, &mut self.tx[e], &mut none, c, imp, now, link_down);
            }
        }
    }

    /// Sends everything the impaired ports still hold (the worker is stopping); what a
    /// closed port's delay line holds is dropped, as a full queue's.
    #[cold]
    fn drain_impaired(&mut self, closed: u32, down: u32, c: &mut LocalCounters) {
        let mut none = Burst::new();
        for (e, imp) in self.impair.iter_mut().enumerate() {
            if let Some(imp) = imp {
                if closed & (1 << e) != 0 {
                    // Held packets are not in the tx totals until they leave.
                    while let Some(m) = imp.pop_due(u64::MAX) {
                        drop(m);
                        c.ports[e].tx_full_drops += 1;
                        c.tx_full_drops += 1;
                    }
                    continue;
                }
                let link_down = down & (1 << e) != 0;
                flush_impaired(e, &mut self.tx[e], &mut none, c, imp, u64::MAX, link_down);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BusyClock;

    #[test]
    fn busy_time_leaves_out_idle_polls_and_naps() {
        let mut b = BusyClock::starting(1000);
        assert_eq!(b.lap(1100, true), 100, "a loop with packets");
        assert_eq!(b.lap(1150, false), 0, "an idle poll");
        assert_eq!(b.lap(1180, true), 30, "counted from the idle poll's end");
        // Idle, then a nap of a million cycles, then a poll that finds packets.
        assert_eq!(b.lap(1200, false), 0);
        b.woke(1_001_200);
        assert_eq!(b.lap(1_001_250, true), 50, "the nap is not work");
    }
}
