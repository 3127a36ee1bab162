//! FlowRadar epochs on a worker: the worker counts every packet into its active
//! [`EpochCounts`] (a flow cache of exact counts, and the flowset they are folded into); at an
//! epoch boundary (Unix time, `unix_ns / epoch_ns`) it hands them to the control thread and
//! takes clean ones the control thread handed back. The control thread folds the cache into
//! the flowset ([`EpochCollector::try_recv`]), so the worker never pays for encoding. Counts
//! travel as boxes over two bounded channels, so none is ever shared and nothing is allocated
//! per epoch.
//!
//! If no clean buffer is waiting at a boundary (the control thread fell behind by more than
//! the spare buffers), the worker keeps counting into the one it has, which then covers more
//! than one epoch; the control thread exports it with its span, and the event is counted.

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use telemetry::flowradar::{EpochCounts, FlowCache, FlowSet, FlowSetConfig};

use crate::clock::Clock;

/// A flowset the worker finished, complete (its flow cache folded in).
#[derive(Debug)]
pub struct ClosedFlowset {
    /// The worker that counted it.
    pub worker: u16,
    /// The first epoch it covers.
    pub epoch: u64,
    /// How many epochs it covers (1 unless the worker had no clean flowset in time).
    pub epochs: u32,
    /// The flowset.
    pub flowset: Box<FlowSet>,
    /// The emptied cache, to go back with the flowset.
    cache: FlowCache,
}

/// Counts a worker finished, before the control thread folded them.
struct Closed {
    worker: u16,
    epoch: u64,
    epochs: u32,
    counts: Box<EpochCounts>,
}

/// The control thread's end of one worker's epochs.
pub struct EpochCollector {
    closed: Receiver<Closed>,
    free: Sender<Box<EpochCounts>>,
}

impl EpochCollector {
    /// The next finished flowset, if one is waiting: the worker's flow cache folded into its
    /// flowset here, on the control thread.
    pub fn try_recv(&self) -> Option<ClosedFlowset> {
        let Closed {
            worker,
            epoch,
            epochs,
            counts,
        } = self.closed.try_recv().ok()?;
        let EpochCounts { mut flowset, cache } = *counts;
        let mut cache = cache;
        cache.drain_into(&mut flowset);
        Some(ClosedFlowset {
            worker,
            epoch,
            epochs,
            flowset: Box::new(flowset),
            cache,
        })
    }

    /// Clears a finished flowset and hands it back to the worker.
    pub fn give_back(&self, closed: ClosedFlowset) {
        let ClosedFlowset {
            flowset, mut cache, ..
        } = closed;
        let mut flowset = *flowset;
        flowset.clear();
        cache.clear();
        let _ = self.free.try_send(Box::new(EpochCounts { flowset, cache }));
    }
}

impl ClosedFlowset {
    /// A copy of the flowset and its span, without the buffers that go back to the worker
    /// (for callers that keep flowsets, such as the emulator).
    pub fn detached(&self) -> ClosedFlowset {
        ClosedFlowset {
            worker: self.worker,
            epoch: self.epoch,
            epochs: self.epochs,
            flowset: self.flowset.clone(),
            cache: FlowCache::default(),
        }
    }
}

/// The worker's end.
pub struct WorkerEpochs {
    worker: u16,
    epoch_ns: u64,
    active: Box<EpochCounts>,
    epoch: u64,
    epochs: u32,
    /// Counter value at which the active epoch ends.
    boundary_tsc: u64,
    closed: Sender<Closed>,
    free: Receiver<Box<EpochCounts>>,
}

/// What happened at a boundary check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochStep {
    /// The epoch goes on.
    Same,
    /// The flowset went to the control thread; a clean one is active.
    Closed,
    /// No clean flowset was free: counting goes on in the old one.
    Late,
}

/// Sets up one worker's epochs: `buffers` sets of counts (at least 2) sized by `cfg`, the first
/// active from the epoch that holds counter value `now_tsc`.
pub fn worker_epochs(
    worker: u16,
    cfg: &FlowSetConfig,
    buffers: usize,
    epoch_ns: u64,
    clock: &Clock,
    now_tsc: u64,
) -> (WorkerEpochs, EpochCollector) {
    let buffers = buffers.max(2);
    let (closed_tx, closed_rx) = crossbeam_channel::bounded(buffers);
    let (free_tx, free_rx) = crossbeam_channel::bounded(buffers);
    for _ in 1..buffers {
        free_tx
            .send(Box::new(EpochCounts::new(cfg)))
            .expect("the channel holds every buffer");
    }
    let epoch = clock.unix_ns(now_tsc) / epoch_ns;
    let w = WorkerEpochs {
        worker,
        epoch_ns,
        active: Box::new(EpochCounts::new(cfg)),
        epoch,
        epochs: 1,
        boundary_tsc: clock.tsc_at((epoch + 1) * epoch_ns),
        closed: closed_tx,
        free: free_rx,
    };
    (
        w,
        EpochCollector {
            closed: closed_rx,
            free: free_tx,
        },
    )
}

impl WorkerEpochs {
    /// The counts packets go to now.
    #[inline(always)]
    pub fn active(&mut self) -> &mut EpochCounts {
        &mut self.active
    }

    /// The counts packets go to now (shared).
    #[inline(always)]
    pub fn active_ref(&self) -> &EpochCounts {
        &self.active
    }

    /// The first epoch the active flowset covers.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether counter value `now_tsc` is past the active epoch's end (one compare; call
    /// [`WorkerEpochs::advance`] when it is).
    #[inline(always)]
    pub fn due(&self, now_tsc: u64) -> bool {
        now_tsc >= self.boundary_tsc
    }

    /// Hands the active buffer over as it is, its epoch not over: the worker is stopping,
    /// and what it counted since the last boundary still goes to the sink.
    #[cold]
    pub fn close_at_stop(self) {
        let _ = self.closed.try_send(Closed {
            worker: self.worker,
            epoch: self.epoch,
            epochs: self.epochs,
            counts: self.active,
        });
    }

    /// Ends the active epoch at counter value `now_tsc` (with the current `clock`): hands the
    /// flowset over if a clean one is free.
    #[cold]
    pub fn advance(&mut self, now_tsc: u64, clock: &Clock) -> EpochStep {
        let now_epoch = clock.unix_ns(now_tsc) / self.epoch_ns;
        self.boundary_tsc = clock.tsc_at((now_epoch + 1) * self.epoch_ns);
        if now_epoch < self.epoch + u64::from(self.epochs) {
            // A recalibrated clock moved the boundary later; the epoch goes on.
            return EpochStep::Same;
        }
        match self.free.try_recv() {
            Ok(fresh) => {
                let done = std::mem::replace(&mut self.active, fresh);
                // The closed channel has room for every buffer, so this never fails while
                // the control thread holds its end; if it went away, the flowset is dropped.
                // The buffer holds its epochs' packets only, however long the worker did not
                // look (a long idle sleep, a preempted thread): a burst received after the
                // boundary closes it before it is counted.
                let _ = self.closed.try_send(Closed {
                    worker: self.worker,
                    epoch: self.epoch,
                    epochs: self.epochs,
                    counts: done,
                });
                self.epoch = now_epoch;
                self.epochs = 1;
                EpochStep::Closed
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
                // A flowset covers at most the protocol's most epochs: past them it keeps
                // its end (now) and its start moves up (the sink refuses a longer span).
                let most = u64::from(telemetry::protocol::MAX_EPOCHS);
                let span = now_epoch + 1 - self.epoch;
                if span > most {
                    self.epoch = now_epoch + 1 - most;
                }
                self.epochs = span.min(most) as u32;
                EpochStep::Late
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::flowradar::FlowKey;

    fn count(w: &mut WorkerEpochs, i: u32) {
        let [w0, w1] = key(i).words();
        w.active()
            .count(telemetry::hash::key_hash(w0, w1), w0, w1, 100);
    }

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src: i,
            dst: 2,
            src_port: 3,
            dst_port: 4,
            protocol: 17,
        }
    }

    #[test]
    fn flowsets_cycle_between_worker_and_control() {
        let clock = Clock::nanoseconds(1_000_000_000);
        let cfg = FlowSetConfig::for_flows(100, 1);
        let epoch_ns = 10_000_000;
        let (mut w, c) = worker_epochs(0, &cfg, 2, epoch_ns, &clock, 0);
        assert_eq!(w.epoch(), 100);
        count(&mut w, 1);
        count(&mut w, 1);
        assert!(!w.due(9_999_999));
        assert!(w.due(10_000_000));
        assert_eq!(w.advance(10_000_000, &clock), EpochStep::Closed);
        let got = c.try_recv().unwrap();
        // The flow cache's counts are in the flowset the control thread receives.
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (100, 1, 2));
        assert_eq!(got.flowset.flows(), 1);
        // The control thread has not returned the buffer: the next boundary is late.
        count(&mut w, 2);
        assert_eq!(w.advance(20_000_000, &clock), EpochStep::Late);
        count(&mut w, 3);
        c.give_back(got);
        assert_eq!(w.advance(30_000_000, &clock), EpochStep::Closed);
        let got = c.try_recv().unwrap();
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (101, 2, 2));
        assert_eq!(got.flowset.flows(), 2);
        assert_eq!(w.epoch(), 103);
        assert_eq!(w.active_ref().flowset.packets(), 0);
        assert!(w.active_ref().cache.is_empty(), "given back cleared");
        // A worker that looks again only 4 epochs later: its buffer holds the packets of its
        // own epoch (a burst after the boundary closes it first), so it says one epoch.
        c.give_back(got);
        count(&mut w, 4);
        assert_eq!(w.advance(70_000_000, &clock), EpochStep::Closed);
        let got = c.try_recv().unwrap();
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (103, 1, 1));
        assert_eq!(w.epoch(), 107);
        // Stopping part-way through epoch 107: what it counted so far is handed over.
        count(&mut w, 5);
        count(&mut w, 5);
        w.close_at_stop();
        let got = c.try_recv().unwrap();
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (107, 1, 2));
    }

    /// A flowset whose buffer the control thread keeps for longer than the protocol's most
    /// epochs covers the last of them, ending now (a wrapping or longer span was a frame
    /// the sink refused, closing the connection).
    #[test]
    fn a_flowset_never_covers_more_epochs_than_the_protocol_takes() {
        let clock = Clock::nanoseconds(1_000_000_000);
        let cfg = FlowSetConfig::for_flows(100, 1);
        let epoch_ns = 1_000_000;
        let (mut w, c) = worker_epochs(0, &cfg, 1, epoch_ns, &clock, 0);
        assert_eq!(w.epoch(), 1000);
        assert_eq!(w.advance(1_000_000_000, &clock), EpochStep::Closed);
        let got = c.try_recv().unwrap();
        let most = u64::from(telemetry::protocol::MAX_EPOCHS);
        count(&mut w, 1);
        let now = (2 * most + 5_000) * epoch_ns;
        assert_eq!(w.advance(now, &clock), EpochStep::Late);
        c.give_back(got);
        assert_eq!(w.advance(now + epoch_ns, &clock), EpochStep::Closed);
        let got = c.try_recv().unwrap();
        // The clock reads a second at counter value 0.
        let end = (now + 1_000_000_000) / epoch_ns + 1;
        assert_eq!(got.epochs, telemetry::protocol::MAX_EPOCHS);
        assert_eq!((got.epoch, got.flowset.packets()), (end - most, 1));
    }
}
