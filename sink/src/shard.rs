//! Decode threads: each owns the flows whose hash falls to it, takes digests and epoch
//! counters from a bounded queue, and once a second exports what is due and forgets idle
//! flows. The API reads a thread's flows under its lock, briefly.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
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
    /// Probe arrivals dropped at its full queue, to be noted as arrived.
    pub unseen: Arc<Unseen>,
}

/// Probe arrivals whose reports a full queue dropped, kept (at most [`MAX_UNSEEN`]) to be
/// noted as arrived (no sample, no loss) in their place among the messages queued: after
/// those queued before them, so that a stream's windows are not closed ahead of its
/// probes still queued.
#[derive(Debug, Default)]
pub struct Unseen {
    /// (messages queued before them, the probes), oldest first.
    waiting: Mutex<VecDeque<(u64, Vec<telemetry::protocol::WireProbe>)>>,
    /// Probes waiting.
    held: AtomicUsize,
    /// Messages queued so far.
    queued: AtomicU64,
}

/// Most dropped probe arrivals kept to be noted: beyond, they are dropped unnoted (their
/// numbers then read as lost).
pub const MAX_UNSEEN: usize = 1 << 16;

impl Unseen {
    /// Keeps `probes` to be noted once the messages queued so far are applied; false (and
    /// nothing kept) beyond [`MAX_UNSEEN`].
    pub fn keep(&self, probes: Vec<telemetry::protocol::WireProbe>) -> bool {
        if self.held.load(Relaxed) + probes.len() > MAX_UNSEEN {
            return false;
        }
        let mut w = self.waiting.lock().expect("unseen probes lock");
        self.held.fetch_add(probes.len(), Relaxed);
        w.push_back((self.queued.load(Relaxed), probes));
        true
    }

    /// The probes kept behind at most `applied` messages (all of them: None), oldest first.
    fn take(&self, applied: Option<u64>) -> Vec<Vec<telemetry::protocol::WireProbe>> {
        if self.held.load(Relaxed) == 0 {
            return Vec::new();
        }
        let mut w = self.waiting.lock().expect("unseen probes lock");
        let mut out = Vec::new();
        while w
            .front()
            .is_some_and(|(at, _)| applied.is_none_or(|a| *at <= a))
        {
            let (_, probes) = w.pop_front().expect("a front");
            self.held.fetch_sub(probes.len(), Relaxed);
            out.push(probes);
        }
        out
    }
}

impl Shard {
    /// Queues `msg` if there is room.
    pub fn try_send(&self, msg: ShardMsg) -> Result<(), TrySendError<ShardMsg>> {
        self.pending.fetch_add(1, Relaxed);
        self.tx
            .try_send(msg)
            .inspect(|()| {
                self.unseen.queued.fetch_add(1, Relaxed);
            })
            .inspect_err(|_| {
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
        self.tx
            .send_timeout(msg, timeout)
            .inspect(|()| {
                self.unseen.queued.fetch_add(1, Relaxed);
            })
            .inspect_err(|_| {
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
/// when it is full). Each message applied is taken off `pending`; the probe arrivals
/// `unseen` keeps are noted once the messages queued before them are applied.
#[allow(clippy::too_many_arguments)]
pub fn run(
    rx: Receiver<ShardMsg>,
    pending: Arc<AtomicUsize>,
    unseen: Arc<Unseen>,
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
    let mut applied = 0u64;
    let note_unseen = |t: &mut FlowTable, applied: Option<u64>| {
        for probes in unseen.take(applied) {
            t.add_unseen_probes(&cx, &probes);
        }
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(msg) => {
                let mut t = table.lock().expect("flow table lock");
                applied += 1;
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
                    ShardMsg::Stop => {
                        note_unseen(&mut t, None);
                        break;
                    }
                }
                note_unseen(&mut t, Some(applied));
                pending.fetch_sub(1, Relaxed);
            }
            // Nothing queued: every message queued before them is applied.
            Err(RecvTimeoutError::Timeout) => {
                note_unseen(&mut table.lock().expect("flow table lock"), None);
            }
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

#[cfg(test)]
mod unseen_tests {
    use super::*;

    fn probe(seq: u64) -> telemetry::protocol::WireProbe {
        telemetry::protocol::WireProbe {
            key: FlowKey::default(),
            stream: 0,
            seq,
            sent_ns: 1,
            recv_ns: 2,
        }
    }

    /// Dropped probe arrivals are noted after the messages queued before them, in order,
    /// and no more are kept than the bound.
    #[test]
    fn dropped_probes_wait_for_the_messages_queued_before_them() {
        let u = Unseen::default();
        assert!(u.keep(vec![probe(1)]));
        u.queued.fetch_add(2, Relaxed);
        assert!(u.keep(vec![probe(2), probe(3)]));
        let seqs = |v: Vec<Vec<telemetry::protocol::WireProbe>>| -> Vec<u64> {
            v.into_iter().flatten().map(|p| p.seq).collect()
        };
        assert_eq!(seqs(u.take(Some(0))), vec![1]);
        assert_eq!(seqs(u.take(Some(1))), Vec::<u64>::new());
        assert_eq!(seqs(u.take(Some(2))), vec![2, 3]);
        assert!(u.keep(vec![probe(4); MAX_UNSEEN]));
        assert!(!u.keep(vec![probe(5)]), "beyond the bound");
        assert_eq!(u.take(None).concat().len(), MAX_UNSEEN);
        assert!(u.keep(vec![probe(6)]), "room again");
    }
}
