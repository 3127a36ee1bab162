//! Closing a port to the workers while the control thread restarts it: a memif client
//! connects to its server only when its port starts, so a client whose server left and came
//! back must be stopped and started again, and stopping a memif port unmaps the rings a
//! worker's receive or transmit call reads. The control thread closes the port, waits until
//! every worker has passed the top of its poll loop since (inside no call on any port, and
//! from then on making none on the closed one), restarts it, and opens it again.
//!
//! The same line says which ports' links are down, so that a worker gives up a burst there
//! when its first tx call takes nothing, rather than retrying what such a port will not
//! take.
//!
//! A worker pays two loads of a line that is written only when a port closes, opens or its
//! link changes, and a compare, per loop.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// What a worker's slot holds once the worker has left its loop for good.
const LEFT: u64 = u64::MAX;

/// The ports closed to the workers, and how far each worker has seen; also the ports whose
/// link is down, where a worker gives up a burst whose first tx call takes nothing.
pub struct PortGate {
    /// The words the workers read at the top of every loop, on one line.
    words: CachePadded<Words>,
    /// Per worker: the last generation it passed, or [`LEFT`].
    seen: Box<[CachePadded<AtomicU64>]>,
}

/// The gate's words, written only when a port closes, opens, or its link changes.
struct Words {
    /// The generation (bumped at each close and open) in the high 32 bits, the closed ports'
    /// bits in the low 32.
    state: AtomicU64,
    /// The ports whose link was down at the control thread's last look, as bits: advisory
    /// (a worker still calls such a port, and retries while it takes packets, so a link
    /// that came up since loses only a burst whose first call it takes nothing of), unlike
    /// a close.
    down: AtomicU32,
}

/// One worker's side of the [`PortGate`].
pub struct GateSlot<'g> {
    gate: &'g PortGate,
    worker: usize,
    /// The state this worker last passed.
    last: u64,
}

impl PortGate {
    /// A gate for `workers` workers, every port open.
    pub fn new(workers: usize) -> PortGate {
        PortGate {
            words: CachePadded::new(Words {
                state: AtomicU64::new(0),
                down: AtomicU32::new(0),
            }),
            seen: (0..workers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Worker `worker`'s side of the gate (one per worker).
    pub fn slot(&self, worker: usize) -> GateSlot<'_> {
        assert!(worker < self.seen.len(), "worker {worker} has no gate slot");
        GateSlot {
            gate: self,
            worker,
            last: 0,
        }
    }

    /// The ports closed now, as bits.
    pub fn closed(&self) -> u32 {
        self.words.state.load(Ordering::Acquire) as u32
    }

    /// Closes port `port` to the workers; the generation to wait for with [`Self::passed`]
    /// before the port may be stopped. Only the control thread closes and opens ports.
    pub fn close(&self, port: usize) -> u64 {
        self.set(self.closed() | 1 << port)
    }

    /// Opens port `port` to the workers again.
    pub fn open(&self, port: usize) {
        self.set(self.closed() & !(1 << port));
    }

    /// Generations count closes and opens: 2^32 of them (one a second for 136 years) before
    /// they would wrap.
    fn set(&self, closed: u32) -> u64 {
        let generation = (self.words.state.load(Ordering::Acquire) >> 32) + 1;
        self.words
            .state
            .store(generation << 32 | u64::from(closed), Ordering::SeqCst);
        generation
    }

    /// Says which ports' links are down (bit `p` for port `p`): the workers stop sending a
    /// burst to them when its first tx call takes nothing, which a link that is down
    /// would not take however often asked. Only the control thread sets it.
    pub fn set_down(&self, down: u32) {
        // Written only on a change: the workers read the line every loop.
        if self.words.down.load(Ordering::Relaxed) != down {
            self.words.down.store(down, Ordering::Relaxed);
        }
    }

    /// Whether every worker has passed generation `generation` (or left): none is inside a
    /// call on a port closed by then, and none will make one until it opens.
    pub fn passed(&self, generation: u64) -> bool {
        self.seen
            .iter()
            .all(|s| s.load(Ordering::Acquire) >= generation)
    }
}

impl GateSlot<'_> {
    /// At the top of the worker's loop, inside no call on any port: the ports closed to it
    /// (as bits) until its next pass.
    #[inline(always)]
    pub fn pass(&mut self) -> u32 {
        let now = self.gate.words.state.load(Ordering::Acquire);
        if now != self.last {
            self.last = now;
            self.gate.seen[self.worker].store(now >> 32, Ordering::Release);
        }
        now as u32
    }

    /// The ports whose link was down at the control thread's last look, as bits.
    #[inline(always)]
    pub fn down(&self) -> u32 {
        self.gate.words.down.load(Ordering::Relaxed)
    }

    /// The worker has left its loop and makes no call on any port from now on.
    pub fn leave(&mut self) {
        self.gate.seen[self.worker].store(LEFT, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::PortGate;

    #[test]
    fn a_closed_port_waits_for_every_worker_to_pass() {
        let gate = PortGate::new(2);
        let (mut a, mut b) = (gate.slot(0), gate.slot(1));
        assert_eq!((a.pass(), b.pass()), (0, 0));
        let g = gate.close(3);
        assert_eq!(gate.closed(), 0b1000);
        assert!(!gate.passed(g), "no worker has passed yet");
        assert_eq!(a.pass(), 0b1000);
        assert!(!gate.passed(g), "one worker may still be inside a call");
        assert_eq!(b.pass(), 0b1000);
        assert!(gate.passed(g));
        // A second port closes; a worker that left counts as passed.
        let g = gate.close(0);
        assert_eq!(a.pass(), 0b1001);
        b.leave();
        assert!(gate.passed(g));
        gate.open(3);
        assert_eq!(a.pass(), 0b0001);
        gate.open(0);
        assert_eq!((a.pass(), gate.closed()), (0, 0));
    }

    /// The down ports are what the control thread last said, apart from the closed ones.
    #[test]
    fn a_worker_sees_the_down_ports() {
        let gate = PortGate::new(1);
        let slot = gate.slot(0);
        assert_eq!(slot.down(), 0);
        gate.set_down(0b101);
        assert_eq!((slot.down(), gate.closed()), (0b101, 0));
        gate.set_down(0b100);
        assert_eq!(slot.down(), 0b100);
        gate.set_down(0);
        assert_eq!(slot.down(), 0);
    }

    /// Workers on threads see a close: once the gate says they passed, each saw the port
    /// closed, in every one of many rounds.
    #[test]
    fn workers_on_threads_see_the_port_closed_once_passed() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let gate = PortGate::new(2);
        let stop = AtomicBool::new(false);
        // Per worker: the generation at which it last used port 1 while open (a worker
        // that used it after passing a close would show a generation of that close).
        let used_at: [AtomicU64; 2] = Default::default();
        std::thread::scope(|s| {
            for (w, used) in used_at.iter().enumerate() {
                let (gate, stop) = (&gate, &stop);
                s.spawn(move || {
                    let mut slot = gate.slot(w);
                    while !stop.load(Ordering::Relaxed) {
                        let closed = slot.pass();
                        if closed & 0b10 == 0 {
                            used.store(slot.last >> 32, Ordering::Release);
                        }
                    }
                    slot.leave();
                });
            }
            for _ in 0..300 {
                let g = gate.close(1);
                while !gate.passed(g) {
                    std::thread::yield_now();
                }
                // No worker uses the port between here and the open.
                let before: Vec<u64> = used_at.iter().map(|u| u.load(Ordering::Acquire)).collect();
                std::thread::yield_now();
                let after: Vec<u64> = used_at.iter().map(|u| u.load(Ordering::Acquire)).collect();
                assert_eq!(before, after);
                assert!(after.iter().all(|&u| u < g), "{after:?} at {g}");
                gate.open(1);
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
}
