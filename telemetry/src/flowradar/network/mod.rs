//! Network-wide decoding across the flowsets of all switches of an epoch (FlowRadar's
//! FlowDecode and CounterDecode).
//!
//! FlowDecode (`flow_decode`) finds every switch's flow keys together: flows found at one
//! switch are removed from the others whose flow filters hold them. CounterDecode
//! (`counters`) then solves each switch whose keys are all known: by peeling, then with the
//! counters decoded at other switches as verified hints (switches are solved in rounds, each
//! round's results hinting the next), then numerically.

mod counters;
mod flow_decode;

pub use counters::counter_decode;

use std::time::{Duration, Instant};

use crate::flowradar::decode::{DecodeResult, SingleDecoder};
use crate::flowradar::flowset::FlowSet;
use crate::flowradar::key::FlowKey;
use counters::CounterSystem;
use flow_decode::flow_decode;

/// One flow's counters at one switch (None where the system could not determine them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowCounters {
    /// The flow.
    pub key: FlowKey,
    /// Packets counted at this switch.
    pub packets: Option<u64>,
    /// Bytes counted at this switch.
    pub bytes: Option<u64>,
}

/// What network-wide decoding found at one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchResult {
    /// Flows known at the switch (in the order found), with their counters.
    pub flows: Vec<FlowCounters>,
    /// Whether every flow of the switch is known for certain: its key parts decoded and every
    /// cell's counters explained by the known flows (a flow whose key the filter hid leaves
    /// counters nothing explains).
    pub keys_complete: bool,
    /// Whether every flow's counters are known.
    pub counters_complete: bool,
}

/// The result of network-wide decoding.
#[derive(Debug, Clone)]
pub struct NetworkResult {
    /// SingleDecode of each switch, for comparison.
    pub single: Vec<DecodeResult>,
    /// Network-wide results per switch.
    pub switches: Vec<SwitchResult>,
    /// Time of the SingleDecode pass.
    pub single_time: Duration,
    /// Time of FlowDecode.
    pub flow_decode_time: Duration,
    /// Time of CounterDecode.
    pub counter_decode_time: Duration,
    /// Offered flows a switch took and gave back because its flow filter gave a false
    /// positive.
    pub undone_removals: usize,
}

impl NetworkResult {
    /// (switch, flow) pairs SingleDecode found.
    pub fn single_pairs(&self) -> usize {
        self.single.iter().map(|r| r.flows.len()).sum()
    }

    /// (switch, flow) pairs network-wide decoding found.
    pub fn network_pairs(&self) -> usize {
        self.switches.iter().map(|s| s.flows.len()).sum()
    }
}

/// Hints for CounterDecode: per flow (by FlowDecode's number), the smallest and largest
/// counters decoded for it at any switch. They differ only where the flow lost packets
/// between switches: then the largest is right before the loss and the smallest after it.
/// One record per flow (a flow's hints are one cache line, not three arrays' worth).
struct Hints {
    seen: Vec<Seen>,
}

/// The counters seen for one flow: (least, most); `least.0 == u64::MAX` when none yet (no
/// flow counts that many packets).
#[derive(Debug, Clone, Copy)]
struct Seen {
    least: (u64, u64),
    most: (u64, u64),
}

const NONE_SEEN: Seen = Seen {
    least: (u64::MAX, 0),
    most: (0, 0),
};

impl Hints {
    fn new(flows: usize) -> Hints {
        Hints {
            seen: vec![NONE_SEEN; flows],
        }
    }

    fn record(&mut self, id: usize, v: (u64, u64)) {
        let Some(s) = self.seen.get_mut(id) else {
            return;
        };
        if s.least.0 == u64::MAX {
            *s = Seen { least: v, most: v };
        } else {
            s.least = s.least.min(v);
            s.most = s.most.max(v);
        }
    }

    /// Starts fetching flow `id`'s hints (they are spread over many megabytes).
    #[inline(always)]
    fn prefetch(&self, id: usize) {
        if let Some(s) = self.seen.get(id) {
            crate::flowradar::prefetch(s);
        }
    }

    fn get(&self, id: usize) -> Option<&Seen> {
        self.seen.get(id).filter(|s| s.least.0 != u64::MAX)
    }

    /// The counters seen everywhere the flow was decoded, if they agree.
    fn agreed(&self, id: usize) -> Option<(u64, u64)> {
        self.get(id).filter(|s| s.least == s.most).map(|s| s.most)
    }

    /// The largest and the smallest counters seen (one, if they agree).
    fn candidates(&self, id: usize) -> [Option<(u64, u64)>; 2] {
        let Some(s) = self.get(id) else {
            return [None, None];
        };
        let second = (s.least != s.most).then_some(s.least);
        [Some(s.most), second]
    }

    /// Whether some flow was seen with different counters (there was loss).
    fn any_disagreement(&self) -> bool {
        self.seen
            .iter()
            .any(|s| s.least.0 != u64::MAX && s.least != s.most)
    }
}

/// How many flows ahead hints are fetched.
const HINT_AHEAD: usize = 16;

/// Decodes all flowsets of one epoch together.
pub fn network_decode(flowsets: &[&FlowSet]) -> NetworkResult {
    let t0 = Instant::now();
    let single = parallel_map(flowsets, |chunk| {
        let mut d = SingleDecoder::default();
        chunk.iter().map(|fs| d.decode(fs)).collect()
    });
    let single_time = t0.elapsed();
    // An epoch without a burst: every switch decoded on its own, nothing more to do.
    if single.iter().all(|r| r.complete) {
        let switches = single.iter().map(whole).collect();
        return NetworkResult {
            single,
            switches,
            single_time,
            flow_decode_time: Duration::ZERO,
            counter_decode_time: Duration::ZERO,
            undone_removals: 0,
        };
    }

    let t1 = Instant::now();
    let fd = flow_decode(flowsets);
    let flow_decode_time = t1.elapsed();

    let t2 = Instant::now();
    let mut hints = Hints::new(fd.keys.len());
    // Switches with all keys known, each with its system peeled as far as its cells allow.
    let open: Vec<usize> = (0..flowsets.len()).filter(|&s| fd.complete[s]).collect();
    let mut located: Vec<(Vec<u32>, Vec<u16>)> = fd.located.into_iter().zip(fd.fps).collect();
    let inputs: Vec<(usize, Vec<u32>, Vec<u16>)> = open
        .iter()
        .map(|&s| {
            let (c, f) = std::mem::take(&mut located[s]);
            (s, c, f)
        })
        .collect();
    drop(located);
    let built = parallel_map_owned(inputs, |(s, cells, fps)| {
        CounterSystem::from_located(flowsets[s], cells, fps)
    });
    let mut systems: Vec<Option<CounterSystem>> = (0..flowsets.len()).map(|_| None).collect();
    for (s, sys) in open.into_iter().zip(built) {
        systems[s] = Some(sys);
    }
    let record = |hints: &mut Hints, s: usize, sys: &CounterSystem| {
        let ids = &fd.flows[s];
        for (i, (&id, v)) in ids.iter().zip(sys.values()).enumerate() {
            if let Some(&ahead) = ids.get(i + HINT_AHEAD) {
                hints.prefetch(ahead as usize);
            }
            if let Some(v) = v {
                hints.record(id as usize, v);
            }
        }
    };
    // Every counter peeling found is verified by its cell's check: a hint, solved or not.
    let mut pending: Vec<usize> = Vec::new();
    for (s, sys) in systems.iter().enumerate() {
        if let Some(sys) = sys {
            record(&mut hints, s, sys);
            if !sys.solved() {
                pending.push(s);
            }
        }
    }
    // Rounds: every pending switch tries the hints known so far; what it solves hints the
    // next round. Then, for what is left, the numerical solver.
    loop {
        let before = pending.len();
        let mut work: Vec<(usize, &mut CounterSystem, bool)> = systems
            .iter_mut()
            .enumerate()
            .filter(|(s, _)| pending.contains(s))
            .filter_map(|(s, sys)| sys.as_mut().map(|sys| (s, sys, false)))
            .collect();
        // First all agreed hints at once (cheap, and enough without loss); then, where flows
        // lost packets between switches, hints confirmed one flow at a time.
        let lossy = hints.any_disagreement();
        parallel_for_each(&mut work, |(s, sys, solved)| {
            let ids = &fd.flows[*s];
            let fs = flowsets[*s];
            // Flows are asked for in order: fetch the hints of the ones a few ahead.
            let agreed = |f: usize| {
                if let Some(&ahead) = ids.get(f + HINT_AHEAD) {
                    hints.prefetch(ahead as usize);
                }
                hints.agreed(ids[f] as usize)
            };
            *solved = sys.solve_with_hints(fs, agreed)
                || (lossy
                    && sys.solve_with_checked_hints(fs, |f| hints.candidates(ids[f] as usize)));
        });
        let solved_now: Vec<usize> = work.iter().filter(|w| w.2).map(|w| w.0).collect();
        drop(work);
        for &s in &solved_now {
            record(&mut hints, s, systems[s].as_ref().expect("solved"));
        }
        pending.retain(|s| !solved_now.contains(s));
        if pending.len() == before || pending.is_empty() {
            break;
        }
    }
    let mut work: Vec<&mut CounterSystem> = systems
        .iter_mut()
        .enumerate()
        .filter(|(s, _)| pending.contains(s))
        .filter_map(|(_, sys)| sys.as_mut())
        .collect();
    parallel_for_each(&mut work, |sys| {
        sys.solve_numerically();
    });
    let order: Vec<usize> = (0..flowsets.len()).collect();
    let switches = parallel_map(&order, |chunk| {
        chunk
            .iter()
            .map(|&s| {
                let ids = &fd.flows[s];
                let keys = ids.iter().enumerate().map(|(i, &id)| {
                    if let Some(&ahead) = ids.get(i + HINT_AHEAD) {
                        crate::flowradar::prefetch(&fd.keys[ahead as usize]);
                    }
                    fd.keys[id as usize]
                });
                match &systems[s] {
                    // FlowDecode emptied the key parts, but a flow whose first packet hit
                    // a filter false positive here left no key, only counters: the keys are
                    // known to be complete once every cell's counters are explained.
                    Some(sys) => SwitchResult {
                        flows: keys
                            .zip(sys.values())
                            .map(|(key, v)| FlowCounters {
                                key,
                                packets: v.map(|v| v.0),
                                bytes: v.map(|v| v.1),
                            })
                            .collect(),
                        keys_complete: sys.solved(),
                        counters_complete: sys.solved(),
                    },
                    None => SwitchResult {
                        flows: keys
                            .map(|key| FlowCounters {
                                key,
                                packets: None,
                                bytes: None,
                            })
                            .collect(),
                        keys_complete: false,
                        counters_complete: false,
                    },
                }
            })
            .collect()
    });
    let counter_decode_time = t2.elapsed();
    let switches = switches
        .into_iter()
        .zip(&single)
        .map(|(s, alone)| with_single(s, alone))
        .collect();
    NetworkResult {
        single,
        switches,
        single_time,
        flow_decode_time,
        counter_decode_time,
        undone_removals: fd.undone,
    }
}

/// A switch's network-wide result with what SingleDecode found there kept: the flows it
/// peeled have exact counters (each verified by its cell's check) even where FlowDecode could
/// not finish the switch's keys, and a switch SingleDecode decoded whole is complete.
fn with_single(mut s: SwitchResult, alone: &DecodeResult) -> SwitchResult {
    if alone.complete {
        return whole(alone);
    }
    if alone.flows.is_empty() {
        return s;
    }
    let peeled: rustc_hash::FxHashMap<FlowKey, (u64, u64)> = alone
        .flows
        .iter()
        .map(|f| (f.key, (f.packets, f.bytes)))
        .collect();
    let mut seen = rustc_hash::FxHashSet::default();
    for f in &mut s.flows {
        seen.insert(f.key);
        if f.packets.is_none()
            && let Some(&(p, b)) = peeled.get(&f.key)
        {
            f.packets = Some(p);
            f.bytes = Some(b);
        }
    }
    for f in alone.flows.iter().filter(|f| !seen.contains(&f.key)) {
        s.flows.push(FlowCounters {
            key: f.key,
            packets: Some(f.packets),
            bytes: Some(f.bytes),
        });
    }
    s.counters_complete = s.keys_complete && s.flows.iter().all(|f| f.packets.is_some());
    s
}

/// A switch SingleDecode decoded whole, as a network-wide result.
fn whole(alone: &DecodeResult) -> SwitchResult {
    SwitchResult {
        flows: alone
            .flows
            .iter()
            .map(|f| FlowCounters {
                key: f.key,
                packets: Some(f.packets),
                bytes: Some(f.bytes),
            })
            .collect(),
        keys_complete: true,
        counters_complete: true,
    }
}

/// Runs `f` on every item, the items split among the available cores.
fn parallel_for_each<T: Send>(items: &mut [T], f: impl Fn(&mut T) + Sync) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads <= 1 || items.len() <= 1 {
        items.iter_mut().for_each(f);
        return;
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for c in items.chunks_mut(chunk) {
            let f = &f;
            scope.spawn(move || c.iter_mut().for_each(f));
        }
    });
}

/// Maps `f` over owned items on the available cores, keeping the order.
fn parallel_map_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads <= 1 || items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut it = items.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(chunk).collect());
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|g| {
                let f = &f;
                scope.spawn(move || g.into_iter().map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("decoding thread"))
            .collect()
    })
}

/// Maps `f` over chunks of `items` on the available cores (switches decode independently),
/// keeping the order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&[T]) -> Vec<R> + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads <= 1 || items.len() <= 1 {
        return f(items);
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items.chunks(chunk).map(|c| scope.spawn(|| f(c))).collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("decoding thread"))
            .collect()
    })
}

#[cfg(test)]
mod tests;
