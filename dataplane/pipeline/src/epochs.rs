//! FlowRadar epochs on a worker: the worker counts every packet into its active flowset; at
//! an epoch boundary (Unix time, `unix_ns / epoch_ns`) it hands the flowset to the control
//! thread and takes a clean one the control thread handed back. Flowsets travel as boxes over
//! two bounded channels, so no flowset is ever shared and nothing is allocated per epoch.
//!
//! If no clean flowset is waiting at a boundary (the control thread fell behind by more than
//! the spare buffers), the worker keeps counting into the one it has, which then covers more
//! than one epoch; the control thread exports it with its span, and the event is counted.

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use telemetry::flowradar::{FlowSet, FlowSetConfig};

use crate::clock::Clock;

/// A flowset the worker finished.
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
}

/// The control thread's end of one worker's epochs.
pub struct EpochCollector {
    /// Finished flowsets, in order.
    pub closed: Receiver<ClosedFlowset>,
    /// Where cleared flowsets go back to the worker.
    pub free: Sender<Box<FlowSet>>,
}

/// The worker's end.
pub struct WorkerEpochs {
    worker: u16,
    epoch_ns: u64,
    active: Box<FlowSet>,
    epoch: u64,
    epochs: u32,
    /// Counter value at which the active epoch ends.
    boundary_tsc: u64,
    closed: Sender<ClosedFlowset>,
    free: Receiver<Box<FlowSet>>,
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

/// Sets up one worker's epochs: `buffers` flowsets (at least 2) sized by `cfg`, the first
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
            .send(Box::new(FlowSet::new(cfg)))
            .expect("the channel holds every buffer");
    }
    let epoch = clock.unix_ns(now_tsc) / epoch_ns;
    let w = WorkerEpochs {
        worker,
        epoch_ns,
        active: Box::new(FlowSet::new(cfg)),
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
    /// The flowset packets count into now.
    #[inline(always)]
    pub fn active(&mut self) -> &mut FlowSet {
        &mut self.active
    }

    /// The flowset packets count into now (shared).
    #[inline(always)]
    pub fn active_ref(&self) -> &FlowSet {
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
                let _ = self.closed.try_send(ClosedFlowset {
                    worker: self.worker,
                    epoch: self.epoch,
                    epochs: self.epochs,
                    flowset: done,
                });
                self.epoch = now_epoch;
                self.epochs = 1;
                EpochStep::Closed
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
                self.epochs = (now_epoch + 1 - self.epoch) as u32;
                EpochStep::Late
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::flowradar::FlowKey;

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
        w.active().update(&key(1), 100);
        assert!(!w.due(9_999_999));
        assert!(w.due(10_000_000));
        assert_eq!(w.advance(10_000_000, &clock), EpochStep::Closed);
        let got = c.closed.try_recv().unwrap();
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (100, 1, 1));
        // The control thread has not returned the buffer: the next boundary is late.
        w.active().update(&key(2), 100);
        assert_eq!(w.advance(20_000_000, &clock), EpochStep::Late);
        w.active().update(&key(3), 100);
        let mut fs = got.flowset;
        fs.clear();
        c.free.send(fs).unwrap();
        assert_eq!(w.advance(30_000_000, &clock), EpochStep::Closed);
        let got = c.closed.try_recv().unwrap();
        assert_eq!((got.epoch, got.epochs, got.flowset.packets()), (101, 2, 2));
        assert_eq!(w.epoch(), 103);
        assert_eq!(w.active_ref().packets(), 0);
    }
}
