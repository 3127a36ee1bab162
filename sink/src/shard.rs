//! Decode threads: each owns the flows whose hash falls to it, takes digests and epoch
//! counters from a bounded queue, and once a second exports what is due and forgets idle
//! flows. The API reads a thread's flows under its lock, briefly.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError};
use telemetry::flowradar::FlowKey;
use telemetry::hash::key_hash;
use telemetry::protocol::{FlowRuns, WireDigest};

use crate::epochs::EpochCounts;
use crate::flows::{FlowExport, FlowTable, ShardContext};

/// Work for a decode thread.
#[derive(Debug)]
pub enum ShardMsg {
    /// Digests reported by a switch.
    Digests {
        /// The reporting switch (the flows' last hop).
        switch: u32,
        /// The digests.
        digests: Vec<WireDigest>,
        /// Their grouping by flow, if known (see
        /// [`telemetry::protocol::DigestOrder::ByFlow`]).
        by_flow: FlowRuns,
    },
    /// One epoch's decoded counters of this thread's flows (boxed: the other messages are
    /// smaller).
    Counts(Box<EpochCounts>),
    /// Probe arrivals of this thread's flows.
    Probes {
        /// The reporting switch (the flows' last hop) and its count of probe-record breaks
        /// ([`crate::registry::SwitchCounters::probe_breaks`]) as they came.
        reporter: (u32, u64),
        /// The arrivals.
        probes: Vec<telemetry::protocol::WireProbe>,
    },
    /// Export everything and end.
    Stop,
}

/// One decode thread, as the rest of the sink sees it.
#[derive(Debug, Clone)]
pub struct Shard {
    /// Its queue: send with [`Shard::try_send`] or [`Shard::send_timeout`], which keep
    /// [`Shard::pending`] right.
    pub tx: Sender<ShardMsg>,
    /// Its flows.
    pub table: Arc<Mutex<FlowTable>>,
    /// Digest buffers it is done with.
    pub buffers: Buffers,
    /// Messages sent to it and not yet applied (queued, or being applied).
    pub pending: Arc<AtomicUsize>,
}

impl Shard {
    /// Queues `msg` if there is room.
    pub fn try_send(&self, msg: ShardMsg) -> Result<(), TrySendError<ShardMsg>> {
        self.pending.fetch_add(1, Relaxed);
        self.tx.try_send(msg).inspect_err(|_| {
            self.pending.fetch_sub(1, Relaxed);
        })
    }

    /// Queues `msg`, waiting up to `timeout` for room.
    pub fn send_timeout(
        &self,
        msg: ShardMsg,
        timeout: Duration,
    ) -> Result<(), SendTimeoutError<ShardMsg>> {
        self.pending.fetch_add(1, Relaxed);
        self.tx.send_timeout(msg, timeout).inspect_err(|_| {
            self.pending.fetch_sub(1, Relaxed);
        })
    }
}

/// Digest buffers (the digests and their grouping by flow) a decode thread hands back once
/// it has recorded their digests, for the connections to decode and split the next batches
/// into: ingest then allocates nothing per batch. At most `capacity` wait; any beyond are
/// freed.
#[derive(Debug, Clone)]
pub struct Buffers {
    tx: Sender<DigestBuffers>,
    rx: Receiver<DigestBuffers>,
}

/// A batch's digests and their grouping by flow.
pub type DigestBuffers = (Vec<WireDigest>, FlowRuns);

impl Buffers {
    /// A pool of at most `capacity` buffers.
    pub fn new(capacity: usize) -> Buffers {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        Buffers { tx, rx }
    }

    /// Buffers to fill, if some are waiting.
    pub fn take(&self) -> Option<DigestBuffers> {
        self.rx.try_recv().ok()
    }

    /// Hands back buffers whose digests are used.
    pub fn give(&self, (mut digests, mut by_flow): DigestBuffers) {
        digests.clear();
        by_flow.clear();
        let _ = self.tx.try_send((digests, by_flow));
    }
}

/// The decode thread of flow `key` among `n`.
#[inline]
pub fn shard_of(key: &FlowKey, n: usize) -> usize {
    let [w0, w1] = key.words();
    ((u128::from(key_hash(w0, w1) >> 32) * n as u128) >> 32) as usize
}

/// How the threads sweep.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Idle flows are forgotten after this.
    pub idle: Duration,
    /// Long flows' counters are exported this often.
    pub active: Duration,
}

/// Runs a decode thread until its queue closes; exports go to `exports` (dropped, counted,
/// when it is full). Each message applied is taken off `pending`.
pub fn run(
    rx: Receiver<ShardMsg>,
    pending: Arc<AtomicUsize>,
    table: Arc<Mutex<FlowTable>>,
    cx: ShardContext,
    timeouts: Timeouts,
    exports: Option<Sender<FlowExport>>,
    buffers: Buffers,
) {
    let mut last_sweep = Instant::now();
    let send = |e: FlowExport| match &exports {
        Some(tx) => !matches!(tx.try_send(e), Err(TrySendError::Full(_))),
        None => true,
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(msg) => {
                let mut t = table.lock().expect("flow table lock");
                match msg {
                    ShardMsg::Digests {
                        switch,
                        digests,
                        by_flow,
                    } => {
                        t.add_digests(&cx, switch, &digests, &by_flow);
                        buffers.give((digests, by_flow));
                    }
                    ShardMsg::Counts(c) => t.add_epoch_counts(&cx, &c, &c.counts),
                    ShardMsg::Probes { reporter, probes } => {
                        t.add_reported_probes(&cx, reporter, &probes);
                    }
                    ShardMsg::Stop => break,
                }
                pending.fetch_sub(1, Relaxed);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            last_sweep = Instant::now();
            table.lock().expect("flow table lock").sweep(
                timeouts.idle,
                timeouts.active,
                Some(&cx),
                send,
            );
            cx.events.flush_lines();
        }
    }
    // At the stop every flow's record goes, more at once than the queue holds while the
    // exporter paces its messages: wait for room, unless the exporter has once made a record
    // wait 5 s (stuck: the rest are dropped, counted, and the stop goes on).
    let mut stuck = false;
    let until_room = |e: FlowExport| match &exports {
        Some(tx) if !stuck => {
            stuck = tx.send_timeout(e, Duration::from_secs(5)).is_err();
            !stuck
        }
        Some(tx) => tx.try_send(e).is_ok(),
        None => true,
    };
    table
        .lock()
        .expect("flow table lock")
        .flush(Some(&cx), until_room);
    cx.events.flush_lines();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_spread_over_threads() {
        let mut per = [0usize; 4];
        for i in 0..40_000u32 {
            let k = FlowKey {
                src: 0x0a00_0000 + (i >> 8),
                dst: 0x0a01_0001,
                src_port: i as u16,
                dst_port: 80,
                protocol: 6,
            };
            per[shard_of(&k, 4)] += 1;
        }
        for p in per {
            assert!((9_000..11_000).contains(&p), "{per:?}");
        }
    }
}
