//! Ingest: one thread per switch connection decodes its frames (strictly: a bad frame closes
//! that connection with the reason logged and counted, other switches go on), learns its
//! plans, and hands digests to the decode threads by flow hash and flowsets to the epoch
//! assembler, through bounded queues: what does not fit is dropped and counted, memory never
//! grows without bound.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use telemetry::flowradar::filter::Block;
use telemetry::flowradar::flowset::Cell;
use telemetry::protocol::{
    DigestOrder, FlowRuns, Frame, FrameType, Hello, PlanText, ProtocolError, Session, WireProbe,
};
use telemetry::wire::shim::digest_bytes;

use crate::epochs::{FlowSetIn, Held, HeldTotals};
use crate::registry::{FlowsetLag, HelloRefused, Registry, SwitchEntry, unix_ms};
use crate::shard::{DigestBuffers, Shard, ShardMsg, shard_of};
use crate::transport::{FrameSource, Next, SourceError, Transport};

/// What every connection thread shares.
#[derive(Clone)]
pub struct Ingest {
    /// Switches and plans.
    pub registry: Arc<Registry>,
    /// Decode threads.
    pub shards: Vec<Shard>,
    /// The epoch assembler's queue.
    pub flowsets: Sender<FlowSetIn>,
    /// The flowsets held (queued or waiting for their epoch: [`Held`]).
    pub flowsets_held: Arc<HeldTotals>,
    /// Most bytes of flowsets held.
    pub flowset_memory_bytes: usize,
    /// Largest flowset a switch may declare, bytes.
    pub max_flowset_bytes: usize,
    /// Most connections open at once.
    pub max_connections: usize,
    /// The network's topology (`--topology`), where given: a switch not in it is said.
    pub topology: Option<Arc<telemetry::topology::Topology>>,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
}

impl Ingest {
    /// Switch `id`'s name in the topology, where one is given and holds it.
    fn switch_name(&self, id: u32) -> Option<String> {
        let t = self.topology.as_ref()?;
        t.node(id).map(|n| t.display_name(n))
    }
}

/// Accepts sources from `transport` until stopped; each gets a thread.
pub fn serve<T: Transport>(mut transport: T, ingest: Ingest) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("ingest".into())
        .spawn(move || {
            let mut threads: Vec<JoinHandle<()>> = Vec::new();
            let mut refused = 0u64;
            let mut accept_failed = 0u64;
            while !ingest.stop.load(Relaxed) {
                match transport.accept() {
                    Ok(Some(src)) => {
                        accept_failed = 0;
                        let i = ingest.clone();
                        threads.retain(|t| !t.is_finished());
                        if threads.len() >= ingest.max_connections {
                            // Closed at once (dropped): a peer opening connections without
                            // end would take a thread and its memory each.
                            refused += 1;
                            if refused.is_power_of_two() {
                                tracing::warn!(
                                    "{} connections open, the most --max-connections allows: a new one closed ({refused} so far)",
                                    threads.len()
                                );
                            }
                            ingest.registry.note_anonymous_reject("too_many_connections");
                            drop(src);
                            continue;
                        }
                        match std::thread::Builder::new()
                            .name("switch".into())
                            .spawn(move || connection(src, i))
                        {
                            Ok(t) => threads.push(t),
                            Err(e) => tracing::error!("cannot start a connection thread: {e}"),
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // Out of file descriptors, typically, with the connection left
                        // waiting in the backlog: said at 1, 2, 4, ... failures, not every
                        // 100 ms while it lasts.
                        accept_failed += 1;
                        if accept_failed.is_power_of_two() {
                            tracing::warn!(
                                "accept: {e} ({accept_failed} failures in a row; connections wait until it works again{})",
                                if e.raw_os_error() == Some(libc::EMFILE) {
                                    ": raise the limit on open files (ulimit -n)"
                                } else {
                                    ""
                                }
                            );
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                }
            }
            for t in threads {
                let _ = t.join();
            }
        })
        .expect("ingest thread")
}

/// Why a connection was closed by the sink.
#[derive(Debug, thiserror::Error)]
enum Close {
    #[error("{0}")]
    Source(#[from] SourceError),
    #[error("bad frame: {0}")]
    Frame(#[from] ProtocolError),
    #[error("{0}")]
    Refused(String),
    /// Its switch ID is held by another process's live connection.
    #[error("{0}")]
    Duplicate(String),
    /// A new switch, and the sink remembers as many as it may, all connected.
    #[error("{0}")]
    TooManySwitches(String),
    #[error("no hello within {0:?}")]
    NoHello(Duration),
    /// No frame for a long while: the switch is gone without the connection closing.
    #[error("no frame for {0:?}")]
    Silent(Duration),
    /// A frame still arriving after the time one may take (a peer sending it a few bytes
    /// at a time).
    #[error("a frame took over {0:?} to arrive")]
    SlowFrame(Duration),
}

/// How long a connection may take to say hello.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// How long one frame may take to arrive (64 MiB, the largest, at under 5 Mbit/s).
const FRAME_WITHIN: Duration = Duration::from_secs(120);

/// How long a switch may send nothing before its connection is taken for dead: it sends a
/// flowset per worker every epoch.
fn silent_after(epoch_ns: u64) -> Duration {
    Duration::from_nanos(epoch_ns.saturating_mul(3)).max(Duration::from_secs(30))
}

impl Close {
    /// A bounded label for the counters.
    fn reason(&self) -> &'static str {
        match self {
            Close::Source(SourceError::Io(_)) => "io",
            Close::Source(SourceError::Framing(_)) => "framing",
            Close::Frame(e) => match e {
                ProtocolError::Truncated => "truncated",
                ProtocolError::BadLength(_) => "bad_length",
                ProtocolError::UnknownType(_) => "unknown_type",
                ProtocolError::UnsupportedVersion(_) => "unsupported_version",
                ProtocolError::HelloOrder => "hello_order",
                ProtocolError::BadSequence { .. } => "bad_sequence",
                ProtocolError::BadField(_) | ProtocolError::NotUtf8(_) => "bad_field",
                ProtocolError::OverLimit(_) => "over_limit",
                ProtocolError::UnknownPlan(_) => "unknown_plan",
                ProtocolError::FlowSet(_) => "bad_flowset",
                ProtocolError::TrailingBytes => "trailing_bytes",
                // Never closes a connection (see `passed_over`).
                ProtocolError::FlowSetNoMemory(_) => "no_memory",
            },
            Close::Refused(_) => "refused",
            Close::Duplicate(_) => "duplicate_switch_id",
            Close::TooManySwitches(_) => "too_many_switches",
            Close::NoHello(_) => "no_hello",
            Close::Silent(_) => "silent",
            Close::SlowFrame(_) => "slow_frame",
        }
    }
}

/// Serves one connection until it closes, fails or the sink stops.
fn connection<S: FrameSource>(mut src: S, ing: Ingest) {
    let peer = src.peer();
    // Digests grouped by flow: a decode thread then finds each flow once per batch.
    let mut session = Session::new(DigestOrder::ByFlow);
    let mut entry: Option<Arc<SwitchEntry>> = None;
    // The connection's generation at its switch (None until its hello is taken).
    let mut generation: Option<u64> = None;
    // The switch process's session (its hello's): a restarted switch has another.
    let mut process = 0;
    let opened = Instant::now();
    let mut last_frame = Instant::now();
    let mut silent_limit = silent_after(0);
    // What one of its flowsets takes in memory, from its hello.
    let mut flowset_bytes = 0usize;
    let mut gaps = 0u64;
    // Whether this connection has been warned of a clock far from the sink's.
    let mut clock_warned = false;
    // Whether this connection has been warned of a flowset dropped for want of memory.
    let mut no_memory_warned = false;
    let mut batches: Vec<DigestBuffers> = vec![Default::default(); ing.shards.len()];
    let mut scratch = Vec::new();
    let result: Result<(), Close> = loop {
        if ing.stop.load(Relaxed) {
            break Ok(());
        }
        // A buffer the decode threads are done with, for the next digest frame.
        if !session.has_spare()
            && let Some((digests, by_flow)) = ing.shards[0].buffers.take()
        {
            session.recycle(digests, by_flow);
        }
        if let (Some(e), Some(g)) = (&entry, generation)
            && e.counters.generation.load(Relaxed) != g
        {
            tracing::info!(peer = %peer, switch = e.info_id(), "connection superseded by the switch's new one");
            break Ok(());
        }
        let bytes = match src.next_frame() {
            Ok(Next::Frame(b)) => b,
            Ok(Next::Idle) => {
                if entry.is_none() && opened.elapsed() >= HELLO_WITHIN {
                    break Err(Close::NoHello(HELLO_WITHIN));
                }
                // Silent: no byte for the limit (a large frame arriving slowly is not);
                // too slow: a frame still arriving after the time one may take.
                let heard = src.last_read().map_or(last_frame, |r| r.max(last_frame));
                if entry.is_some() && heard.elapsed() >= silent_limit {
                    break Err(Close::Silent(silent_limit));
                }
                if src
                    .frame_since()
                    .is_some_and(|t| t.elapsed() >= FRAME_WITHIN)
                {
                    break Err(Close::SlowFrame(FRAME_WITHIN));
                }
                continue;
            }
            Ok(Next::Closed) => break Ok(()),
            Err(e) => break Err(e.into()),
        };
        last_frame = Instant::now();
        if let Some(e) = &entry {
            e.counters.last_frame_ms.store(unix_ms(), Relaxed);
        }
        let len = bytes.len() as u64;
        // A flowset's memory is reserved before it is decoded (decoding allocates its whole
        // table, however few bytes it came in); one with no room is dropped undecoded.
        let is_flowset = Session::peek_type(bytes) == Some(FrameType::FlowSet);
        let reserved = is_flowset
            .then(|| Held::reserve(&ing.flowsets_held, flowset_bytes, ing.flowset_memory_bytes))
            .flatten();
        if let Some(e) = &entry
            && is_flowset
            && reserved.is_none()
        {
            if let Err(err) = session.skip(bytes) {
                break Err(err.into());
            }
            e.counters.frames.fetch_add(1, Relaxed);
            e.counters.bytes.fetch_add(len, Relaxed);
            // Dropped first: a reader that sees the flowset counted sees its drop too.
            e.counters.flowsets_dropped.fetch_add(1, Relaxed);
            e.counters.flowsets.fetch_add(1, Release);
            e.note_lost();
            continue;
        }
        let frame = match session.decode(bytes) {
            Ok(f) => f,
            // A flowset there was no memory to decode (past the process's limits, within
            // the --flowset-memory-mb budget): dropped undecoded as one with no room is.
            Err(err) if err.passed_over() => {
                if let Some(e) = &entry {
                    e.counters.frames.fetch_add(1, Relaxed);
                    e.counters.bytes.fetch_add(len, Relaxed);
                    e.counters.flowsets_dropped.fetch_add(1, Relaxed);
                    e.counters.flowsets.fetch_add(1, Release);
                    e.note_lost();
                }
                if !no_memory_warned {
                    no_memory_warned = true;
                    tracing::warn!(
                        peer = %peer,
                        switch = entry.as_ref().map(|e| e.info_id()),
                        "{err} (the process's memory limit is below --flowset-memory-mb: lower --flowset-memory-mb to what the limit holds); every flowset dropped is counted in pint_sink_flowsets_dropped_total",
                    );
                }
                continue;
            }
            Err(e) => break Err(e.into()),
        };
        if session.gaps > gaps
            && let Some(e) = &entry
        {
            e.counters
                .sequence_gaps
                .fetch_add(session.gaps - gaps, Relaxed);
            e.note_lost();
            gaps = session.gaps;
        }
        if let Frame::Hello(h) = &frame {
            match hello(&ing, h, &peer) {
                Ok((e, g, bytes)) => {
                    entry = Some(e);
                    generation = Some(g);
                    process = h.session;
                    flowset_bytes = bytes;
                    silent_limit = silent_after(h.epoch_ns);
                    // Past its hello, frames may be as large as the protocol allows.
                    src.set_max_frame(telemetry::protocol::MAX_FRAME);
                }
                Err((held_by, e)) => {
                    // Counted at the switch that holds the ID.
                    entry = held_by;
                    break Err(e);
                }
            }
        }
        let e = entry
            .as_ref()
            .expect("a hello came first (the session checks)");
        e.counters.frames.fetch_add(1, Relaxed);
        e.counters.bytes.fetch_add(len, Relaxed);
        match frame {
            Frame::Hello(_) => {}
            Frame::Plan(p) => {
                if let Err(c) = declared_plan(&ing, e.info_id(), &p) {
                    break Err(c);
                }
                // The last plan frame is in force: after a reconnection the switch sends its
                // older plans, oldest first, then the hello's again.
                e.info.lock().expect("switch lock").plan = Some(p.version);
            }
            Frame::Digests(b) => {
                e.counters
                    .digests
                    .fetch_add(b.digests.len() as u64, Relaxed);
                if b.unknown_flow > 0 {
                    e.counters
                        .digests_unknown_flow
                        .fetch_add(u64::from(b.unknown_flow), Relaxed);
                }
                if b.digests.is_empty() {
                    // Every digest of the batch was of an unknown flow slot.
                    session.recycle(b.digests, b.by_flow);
                } else if let Some((digests, by_flow)) =
                    route_digests(&ing, e, (b.digests, b.by_flow), &mut batches, &mut scratch)
                {
                    session.recycle(digests, by_flow);
                }
            }
            Frame::FlowSet(f) => {
                let epoch_ns = e.info.lock().expect("switch lock").epoch_ns;
                let end_epoch = f.flowset.epoch.saturating_add(u64::from(f.epochs.max(1)));
                let end_ns = end_epoch.saturating_mul(epoch_ns);
                let lag = e.counters.flowset_lag.note(end_epoch, end_ns, unix_ms());
                if lag.abs() > FlowsetLag::WARN_MS && !clock_warned {
                    clock_warned = true;
                    let why = if lag < 0 {
                        "its clock runs ahead of the sink's"
                    } else {
                        "its clock lags the sink's, or its frames are held on the way"
                    };
                    tracing::warn!(
                        switch = e.info_id(),
                        lag_ms = lag,
                        "flowset of epoch {} arrived {} ms {} its end: {why}; epochs are matched across switches by number, so its flowsets are late or its epochs finished without it",
                        f.flowset.epoch,
                        lag.unsigned_abs(),
                        if lag < 0 { "before" } else { "after" },
                    );
                }
                // Reserved before decoding (a flowset frame only decodes after a hello).
                let Some(held) = reserved else {
                    // Dropped before counted, as the others (a reader of the count sees
                    // the drop).
                    e.counters.flowsets_dropped.fetch_add(1, Relaxed);
                    e.counters.flowsets.fetch_add(1, Release);
                    e.note_lost();
                    continue;
                };
                let item = FlowSetIn {
                    switch: f.flowset.switch_id,
                    epoch_ns,
                    worker: f.worker,
                    session: process,
                    epoch: f.flowset.epoch,
                    epochs: f.epochs,
                    flowset: f.flowset.flowset,
                    held,
                };
                let full = matches!(ing.flowsets.try_send(item), Err(TrySendError::Full(_)));
                if full {
                    e.counters.flowsets_dropped.fetch_add(1, Relaxed);
                    e.note_lost();
                }
                // Counted after the lag is noted and a drop counted (Release), so that a
                // reader of the count (Acquire) sees both.
                e.counters.flowsets.fetch_add(1, Release);
            }
            Frame::Stats(s) => {
                // Merged by name: a switch may send a few counters alone (a flowset it
                // dropped, at once).
                let mut info = e.info.lock().expect("switch lock");
                for (name, v) in s.counters {
                    let at = info.stats.iter().position(|(n, _)| *n == name);
                    let old = at.map_or(0, |i| info.stats[i].1);
                    if name == telemetry::protocol::FLOWSETS_DROPPED && v > old {
                        e.note_lost();
                    }
                    // Known in this connection (a hello starts its stats afresh: it is a
                    // break of its own).
                    if name == telemetry::protocol::PROBES_DROPPED && at.is_some() && v > old {
                        e.counters.probe_breaks.fetch_add(1, Relaxed);
                    }
                    match at {
                        Some(i) => info.stats[i].1 = v,
                        None if info.stats.len() < telemetry::protocol::MAX_STATS => {
                            info.stats.push((name, v));
                        }
                        None => {}
                    }
                }
            }
            Frame::Probes(b) => {
                e.counters.probes.fetch_add(b.probes.len() as u64, Relaxed);
                route_probes(&ing, e, b.probes);
            }
        }
    };
    let error = match result {
        Ok(()) => None,
        Err(c) => {
            let reason = c.reason();
            // A connection that breaks, or goes silent, is not the switch's fault; anything
            // else is a frame the sink refused.
            if !matches!(c, Close::Source(SourceError::Io(_)) | Close::Silent(_)) {
                match &entry {
                    Some(e) => {
                        e.counters.rejected.fetch_add(1, Relaxed);
                        *e.reject_reasons
                            .lock()
                            .expect("switch lock")
                            .entry(reason)
                            .or_default() += 1;
                    }
                    None => ing.registry.note_anonymous_reject(reason),
                }
            }
            // A second process under a switch's ID retries every few seconds: said once a
            // minute (every refusal counted, as `duplicate_switch_id`).
            let said_lately = matches!(c, Close::Duplicate(_))
                && entry.as_ref().is_some_and(|e| {
                    let now = crate::registry::unix_ms();
                    let said = e.duplicate_said_ms.load(Relaxed);
                    now < said.saturating_add(60_000)
                        || e.duplicate_said_ms
                            .compare_exchange(said, now, Relaxed, Relaxed)
                            .is_err()
                });
            if !said_lately {
                tracing::warn!(
                    peer = %peer,
                    switch = entry.as_ref().map(|e| e.info_id()),
                    "connection closed: {c}{}",
                    if matches!(c, Close::Duplicate(_)) {
                        " (said once a minute at most while it goes on; each refusal is counted as duplicate_switch_id)"
                    } else {
                        ""
                    }
                );
            }
            Some(c.to_string())
        }
    };
    if let (Some(e), Some(g)) = (&entry, generation) {
        ing.registry.disconnect(e, g, error);
        let id = e.info_id();
        match ing.switch_name(id) {
            Some(name) => {
                tracing::info!(peer = %peer, switch = id, name = %name, "switch disconnected");
            }
            None => tracing::info!(peer = %peer, switch = id, "switch disconnected"),
        }
    }
}

impl SwitchEntry {
    fn info_id(&self) -> u32 {
        self.info.lock().expect("switch lock").id
    }
}

/// Registers a switch's hello, refusing a flowset shape beyond the sink's limit and a switch
/// ID another process holds; returns its entry, the connection's generation and what one
/// of its flowsets takes in memory. A refusal comes with the switch it is counted at, if
/// any.
type Refusal = (Option<Arc<SwitchEntry>>, Close);

fn hello(ing: &Ingest, h: &Hello, peer: &str) -> Result<(Arc<SwitchEntry>, u64, usize), Refusal> {
    let s = h.shape;
    let bytes = s.cells_per_table as usize * usize::from(s.hashes) * std::mem::size_of::<Cell>()
        + s.filter_blocks as usize * std::mem::size_of::<Block>();
    if bytes > ing.max_flowset_bytes {
        return Err((
            ing.registry.switch(h.switch_id),
            Close::Refused(format!(
                "switch {} declares flowsets of {} MiB, above --max-flowset-mb {}",
                h.switch_id,
                bytes >> 20,
                ing.max_flowset_bytes >> 20
            )),
        ));
    }
    let (e, generation) = ing.registry.connect(h, peer, bytes).map_err(|r| match r {
        HelloRefused::Duplicate { entry, why } => (Some(entry), Close::Duplicate(why)),
        HelloRefused::TooManySwitches(why) => (None, Close::TooManySwitches(why)),
    })?;
    // After the connection is this switch's: a refusal is counted at it, not at another
    // process holding the ID.
    if let Some(p) = &h.plan
        && let Err(c) = declared_plan(ing, h.switch_id, p)
    {
        ing.registry.disconnect(&e, generation, Some(c.to_string()));
        return Err((Some(e), c));
    }
    let workers = h.table_seeds.len();
    match ing.switch_name(h.switch_id) {
        Some(name) => {
            tracing::info!(peer = %peer, switch = h.switch_id, name = %name, workers, "switch connected");
        }
        None => tracing::info!(peer = %peer, switch = h.switch_id, workers, "switch connected"),
    }
    // Paths are decoded over the topology's switches: one not there has its digests
    // counted and none decoded, which nothing else would say.
    if let Some(t) = &ing.topology
        && t.node(h.switch_id).is_none()
    {
        tracing::warn!(
            peer = %peer,
            switch = h.switch_id,
            "switch {} is not in the --topology given ({}, switch IDs {}): no path through it can be decoded, and its links are not drawn; give the sink the topology these switches run",
            h.switch_id,
            t.name,
            id_ranges(&t.switch_ids())
        );
    }
    let others = ing
        .registry
        .other_shim_ethertypes(h.switch_id, h.shim_ethertype);
    if !others.is_empty() {
        let listed: Vec<String> = others
            .iter()
            .map(|(id, t)| format!("switch {id} {t:#06x}"))
            .collect();
        tracing::warn!(
            switch = h.switch_id,
            "shim EtherType {:#06x}, where {} (every switch of a fabric needs the same: packets between them cross without telemetry or are dropped as other_ethertype)",
            h.shim_ethertype,
            listed.join(", ")
        );
    }
    Ok((e, generation, bytes))
}

/// Compiles a plan switch `switch` declared (a hello's or a plan frame's). A plan the sink
/// cannot compile is only logged (its digests are counted as of an unknown plan); one whose
/// digests the switch says are of another length than the plan's closes the connection
/// (its digests would be cut at that length and misread).
fn declared_plan(ing: &Ingest, switch: u32, p: &PlanText) -> Result<(), Close> {
    match ing.registry.add_plan(p.version, &p.text) {
        Ok(plan) if digest_bytes(plan.plan.global_bits) != usize::from(p.digest_bytes) => {
            Err(Close::Refused(format!(
                "switch {switch} declares {}-byte digests for plan {:08x}, whose digests are {} bytes",
                p.digest_bytes,
                p.version,
                digest_bytes(plan.plan.global_bits)
            )))
        }
        Ok(_) => Ok(()),
        Err(why) => {
            // The reason quotes the peer's text: escaped, so that it stays one log line.
            let why = why.to_string();
            tracing::warn!(
                switch,
                "plan {:08x} not usable: {}",
                p.version,
                why.escape_debug()
            );
            Ok(())
        }
    }
}

/// Splits a batch by decode thread and queues the parts (each grouped by flow as the batch
/// is); a full queue drops its part. Returns the batch's buffers when it was split (the
/// parts went in buffers of their own).
fn route_digests(
    ing: &Ingest,
    e: &SwitchEntry,
    (digests, by_flow): DigestBuffers,
    batches: &mut [DigestBuffers],
    scratch: &mut Vec<u32>,
) -> Option<DigestBuffers> {
    let n = ing.shards.len();
    let switch = e.info_id();
    if n == 1 {
        send(ing, e, 0, switch, (digests, by_flow));
        return None;
    }
    // Grouped by flow, a run of digests goes to one thread: hash the flow once per run, and
    // the thread's part keeps the run.
    by_flow.for_each_run(&digests, scratch, |run| {
        let Some(first) = run.first().and_then(|&j| digests.get(j as usize)) else {
            return;
        };
        let (part, runs) = &mut batches[shard_of(&first.key, n)];
        part.extend(run.iter().filter_map(|&j| digests.get(j as usize)));
        runs.ends.push(part.len() as u32);
    });
    for (i, b) in batches.iter_mut().enumerate() {
        if !b.0.is_empty() {
            let next = ing.shards[i]
                .buffers
                .take()
                .unwrap_or_else(|| (Vec::with_capacity(b.0.capacity()), FlowRuns::default()));
            let part = std::mem::replace(b, next);
            send(ing, e, i, switch, part);
        }
    }
    Some((digests, by_flow))
}

/// Splits probe arrivals by decode thread (their flows' owners) and queues them; a full
/// queue drops them, counted, and keeps them (up to [`crate::shard::MAX_UNSEEN`]) for the
/// thread to note as arrived (no sample, no loss): a probe's report dropped is no lost
/// probe.
fn route_probes(ing: &Ingest, e: &SwitchEntry, probes: Vec<WireProbe>) {
    let reporter = (e.info_id(), e.counters.probe_breaks.load(Relaxed));
    let n = ing.shards.len();
    let mut parts: Vec<Vec<WireProbe>> = vec![Vec::new(); n];
    for p in probes {
        parts[shard_of(&p.key, n)].push(p);
    }
    for (i, probes) in parts.into_iter().enumerate() {
        if probes.is_empty() {
            continue;
        }
        let k = probes.len() as u64;
        if let Err(TrySendError::Full(ShardMsg::Probes { probes, .. })) =
            ing.shards[i].try_send(ShardMsg::Probes { reporter, probes })
        {
            e.counters.probes_dropped.fetch_add(k, Relaxed);
            ing.shards[i].unseen.keep(probes);
        }
    }
}

fn send(ing: &Ingest, e: &SwitchEntry, shard: usize, switch: u32, batch: DigestBuffers) {
    let (digests, by_flow) = batch;
    let n = digests.len() as u64;
    let msg = ShardMsg::Digests {
        switch,
        digests,
        by_flow,
    };
    if let Err(TrySendError::Full(_)) = ing.shards[shard].try_send(msg) {
        e.counters.digests_dropped.fetch_add(n, Relaxed);
    }
}

/// Switch IDs as ranges (`1-3, 7`), sorted; the first 20 ranges, then how many more.
fn id_ranges(ids: &[u32]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for id in ids {
        match ranges.last_mut() {
            Some((_, hi)) if Some(id) == hi.checked_add(1) => *hi = id,
            _ => ranges.push((id, id)),
        }
    }
    let mut out: Vec<String> = ranges
        .iter()
        .take(20)
        .map(|&(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect();
    if ranges.len() > 20 {
        out.push(format!("and {} more", ranges.len() - 20));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn switch_ids_read_as_ranges() {
        assert_eq!(super::id_ranges(&[3, 1, 2, 7, 9, 8, 2]), "1-3, 7-9");
        assert_eq!(super::id_ranges(&[u32::MAX, 5]), "5, 4294967295");
        let many: Vec<u32> = (0..30).map(|i| i * 2).collect();
        assert!(super::id_ranges(&many).ends_with(", and 10 more"));
    }
}
