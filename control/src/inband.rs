//! The control thread's telemetry work (`docs/architecture.md`, "The control thread"):
//! it sets up every worker's telemetry state, then, on its own deadlines, drains the digest
//! rings into batches, collects each epoch's flowsets, serialises both for the sink, shares
//! the workers' utilisation estimates, keeps the clock calibrated and installs new plans
//! (SIGHUP). It never blocks a worker: rings and flowset channels are non-blocking, and all
//! network I/O happens on the exporter's thread.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use pipeline::clock::{SharedClock, tsc};
use pipeline::digest::{DigestDrain, RingDigest, digest_ring};
use pipeline::epochs::{EpochCollector, worker_epochs};
use pipeline::inband::InbandSetup;
use pipeline::load::{LoadParams, PortLoads, SharedLoad, share_loads};
use pipeline::plans::PlanCell;
use telemetry::flowradar::flowset::seed_for_switch;
use telemetry::flowradar::wire::Shape;
use telemetry::flowradar::{FlowSet, FlowSetConfig};
use telemetry::hash::mix64;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::protocol::{
    FrameType, Hello, PlanText, PortInfo, Stats, WireDigest, WireProbe, encode_flowset,
    encode_probes,
};
use telemetry::wire::shim::shim_len;

use crate::Config;
use crate::export::{Announcement, DigestSender, Exporter, Outgoing};
use crate::metrics::ControlCounts;
use crate::summary::TelemetrySummary;

/// Longest a digest waits in a batch before the batch goes out.
const BATCH_AGE: Duration = Duration::from_millis(5);
/// Plans the control thread keeps to encode digests with (the one in force and those
/// before it): a worker takes a new plan at its next burst, so digests of plans a few
/// reloads old can still be in its ring.
const PLANS_KEPT: usize = 8;
/// Plan versions the run's summary lists: a switch whose query file is reloaded by a script
/// every minute would otherwise grow its summary without bound.
pub const VERSIONS_LISTED: usize = 64;

/// Everything the switch's telemetry needs at start: one setup per worker (moved into the
/// worker threads) and the control thread's side.
pub struct TelemetryStart {
    /// Per worker, in worker order.
    pub workers: Vec<InbandSetup>,
    /// The control thread's side.
    pub control: TelemetryControl,
}

/// The control thread's end of one worker's telemetry.
struct WorkerEnd {
    digests: DigestDrain,
    epochs: EpochCollector,
    load: Arc<SharedLoad>,
    batch: Vec<WireDigest>,
    /// Probes among the batch's packets (`telemetry::wire::probe`).
    probes: Vec<WireProbe>,
    /// The plans the batch refers to.
    batch_plans: Vec<u32>,
    batch_started: Option<Instant>,
    /// Records taken off the ring, before they join batches (reused).
    staged: Vec<RingDigest>,
}

/// The control thread's telemetry state.
pub struct TelemetryControl {
    switch_id: u32,
    plans: Arc<PlanCell>,
    /// Plans in use, newest last (the current and the one before, for packets in flight).
    history: Vec<Arc<SwitchPlan>>,
    clock: Arc<SharedClock>,
    workers: Vec<WorkerEnd>,
    params: Vec<LoadParams>,
    exporter: Option<Exporter>,
    /// The sink's address (`telemetry.sink`), when one is configured.
    sink: Option<String>,
    /// Digest batches encoded against the connection's flow slots.
    digests: DigestSender,
    batch_max: usize,
    epoch_ns: u64,
    next_recalibration: Instant,
    /// The last round that counted missed deadlines: the rounds catching up after a stall
    /// are as late, less a tick each, and count nothing more.
    late_counted_at: Instant,
    /// What it counted.
    pub counts: ControlCounts,
    /// The versions installed, newest last, at most [`VERSIONS_LISTED`].
    installed: std::collections::VecDeque<String>,
}

/// The per-worker FlowRadar seed: each worker's counting table hashes on its own, so the
/// sink can decode the workers' flowsets separately and network-wide.
pub fn table_seed(switch_id: u32, worker: usize) -> u64 {
    mix64(seed_for_switch(switch_id) ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn session_id(switch_id: u32) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    mix64(now ^ (u64::from(std::process::id()) << 32) ^ u64::from(switch_id))
}

/// A frame of the switch's counters.
fn stats_frame(counters: Vec<(String, u64)>) -> Outgoing {
    Outgoing {
        ty: FrameType::Stats,
        payload: Stats { counters }.payload(),
        digests: 0,
        flowsets: 0,
        probes: 0,
    }
}

fn plan_text(p: &SwitchPlan) -> PlanText {
    PlanText {
        version: p.version(),
        digest_bytes: p.digest_bytes() as u8,
        text: p.text.clone(),
    }
}

impl TelemetryStart {
    /// Sets up the switch's telemetry from its configuration (None when telemetry is off):
    /// compiles the plan, calibrates the clock, sizes the flowsets and rings, and starts the
    /// exporter when a sink is configured.
    #[cold]
    pub fn prepare(config: &Config) -> anyhow::Result<Option<TelemetryStart>> {
        let t = &config.telemetry;
        if !t.enabled {
            return Ok(None);
        }
        let (text, plan) = t
            .load_queries()
            .map_err(|e| anyhow::anyhow!("config key `telemetry.queries`: {e}"))?;
        let plan = Arc::new(SwitchPlan::new(plan, text, config.switch_id));
        let plans = Arc::new(PlanCell::new(Some(Arc::clone(&plan))));
        let clock = SharedClock::calibrate(Duration::from_millis(20));
        let params: Vec<LoadParams> = config
            .ports
            .iter()
            .map(|p| LoadParams::new(p.capacity_bps, t.base_rtt_us * 1000))
            .collect();
        let now = tsc();
        let mut setups = Vec::with_capacity(config.workers.len());
        let mut ends = Vec::with_capacity(config.workers.len());
        let mut seeds = Vec::with_capacity(config.workers.len());
        let mut shape = None;
        let mut filter_seed = 0;
        for w in 0..config.workers.len() {
            let cfg = FlowSetConfig {
                expected_flows: t.flowradar.expected_flows,
                cells_per_flow: t.flowradar.cells_per_flow,
                hashes: t.flowradar.hashes,
                filter_bits_per_flow: t.flowradar.filter_bits_per_flow,
                seed: 0,
            };
            let seed = table_seed(config.switch_id, w);
            let cfg = FlowSetConfig { seed, ..cfg };
            let probe = FlowSet::new(&cfg);
            shape = Some(Shape::of(&probe));
            filter_seed = probe.filter().seed();
            seeds.push(probe.table_seed());
            drop(probe);
            let (worker_epochs, collector) = worker_epochs(
                w as u16,
                &cfg,
                t.flowset_buffers as usize,
                t.epoch_ns(),
                &clock.get(),
                now,
            );
            let (producer, consumer) = digest_ring(t.digest_ring as usize);
            let load = Arc::new(SharedLoad::default());
            setups.push(InbandSetup {
                switch_id: config.switch_id,
                shim_ethertype: t.shim_ethertype,
                plans: Arc::clone(&plans),
                clock: Arc::clone(&clock),
                epochs: worker_epochs,
                digests: producer,
                loads: PortLoads::new(&params),
                shared_load: Arc::clone(&load),
            });
            ends.push(WorkerEnd {
                digests: consumer,
                epochs: collector,
                load,
                batch: Vec::with_capacity(t.batch_digests as usize),
                batch_plans: Vec::new(),
                probes: Vec::new(),
                batch_started: None,
                staged: Vec::new(),
            });
        }
        let hello = Hello {
            switch_id: config.switch_id,
            session: session_id(config.switch_id),
            epoch_ns: t.epoch_ns(),
            shim_ethertype: t.shim_ethertype,
            shape: shape.expect("at least one worker"),
            filter_seed,
            table_seeds: seeds,
            max_digests: t.batch_digests,
            ports: config
                .ports
                .iter()
                .map(|p| PortInfo {
                    name: p.name.clone(),
                    edge: p.role == pipeline::PortRole::Edge,
                    capacity_bps: p.capacity_bps,
                    mac: p.mac,
                })
                .collect(),
            plan: Some(plan_text(&plan)),
        };
        let exporter = t.sink.clone().map(|sink| {
            Exporter::start(
                sink,
                Announcement {
                    hello,
                    older_plans: Vec::new(),
                },
                (t.export_queue_mb as usize) << 20,
            )
        });
        Ok(Some(TelemetryStart {
            workers: setups,
            control: TelemetryControl {
                switch_id: config.switch_id,
                installed: [format!("{:08x}", plan.version())].into(),
                history: vec![plan],
                plans,
                clock,
                workers: ends,
                params,
                exporter,
                sink: t.sink.clone(),
                digests: DigestSender::default(),
                batch_max: t.batch_digests as usize,
                epoch_ns: t.epoch_ns(),
                next_recalibration: Instant::now() + Duration::from_secs(1),
                late_counted_at: Instant::now(),
                counts: ControlCounts::default(),
            },
        }))
    }
}

impl TelemetryControl {
    /// The plan in force.
    pub fn plan(&self) -> &Arc<SwitchPlan> {
        self.history.last().expect("a plan is always installed")
    }

    /// The epoch length.
    pub fn epoch(&self) -> Duration {
        Duration::from_nanos(self.epoch_ns)
    }

    /// One round of the control thread's telemetry work at `now`; `late` is how far past its
    /// deadline the round started.
    pub fn poll(&mut self, now: Instant, late: Duration) {
        if late.as_nanos() > u128::from(self.epoch_ns) {
            // A stall counts once, by the epochs it overran; the rounds after it (their
            // deadlines fell within it) count nothing more.
            let deadline = now.checked_sub(late).unwrap_or(now);
            if deadline >= self.late_counted_at {
                self.counts.deadlines_missed +=
                    (late.as_nanos() / u128::from(self.epoch_ns)) as u64;
                self.late_counted_at = now;
            }
        }
        if now >= self.next_recalibration {
            let step = self.clock.recalibrate();
            if step.unsigned_abs() >= self.epoch_ns {
                crate::say!("{}", clock_step_line(step));
            }
            self.next_recalibration = now + Duration::from_secs(1);
        }
        let t = tsc();
        let clock = self.clock.get();
        let loads: Vec<&SharedLoad> = self.workers.iter().map(|w| &*w.load).collect();
        share_loads(&loads, &self.params, t, |ticks| clock.ns(ticks));
        for w in 0..self.workers.len() {
            self.drain(w, now, &clock);
            self.collect(w);
        }
        self.refresh_export_counts();
    }

    /// Takes worker `w`'s digest records into its batch, sending full or old batches. Takes
    /// at most what the ring held when it started, so that a worker producing faster than
    /// this thread consumes cannot keep it here (its ring fills and drops, counted).
    fn drain(&mut self, w: usize, now: Instant, clock: &pipeline::clock::Clock) {
        let end = &mut self.workers[w];
        let available = end.digests.slots();
        let mut staged = std::mem::take(&mut end.staged);
        staged.clear();
        end.digests.drain(available, |r| staged.push(*r));
        for r in &staged {
            let r = r.record();
            self.counts.digests_drained += 1;
            let end = &mut self.workers[w];
            let new_plan = !end.batch_plans.contains(&r.plan_version);
            if end.batch.len() >= self.batch_max
                || (new_plan && end.batch_plans.len() >= telemetry::protocol::MAX_PLANS_PER_BATCH)
            {
                self.flush_batch(w);
            }
            let end = &mut self.workers[w];
            if end.batch.is_empty() {
                end.batch_started = Some(now);
            }
            if !end.batch_plans.contains(&r.plan_version) {
                end.batch_plans.push(r.plan_version);
            }
            end.batch.push(r.to_wire(clock.unix_ns(r.tsc)));
        }
        let end = &mut self.workers[w];
        end.staged = staged;
        let WorkerEnd {
            digests, probes, ..
        } = end;
        let before = probes.len();
        digests.drain_probes(|p| {
            probes.push(WireProbe {
                key: p.key,
                stream: p.probe.stream,
                seq: p.probe.seq,
                sent_ns: p.probe.sent_ns,
                recv_ns: clock.unix_ns(p.tsc),
            })
        });
        self.counts.probes_drained += (probes.len() - before) as u64;
        let end = &mut self.workers[w];
        if end
            .batch_started
            .is_some_and(|s| now.duration_since(s) >= BATCH_AGE)
        {
            self.flush_batch(w);
        }
    }

    fn flush_batch(&mut self, w: usize) {
        let end = &mut self.workers[w];
        end.batch_started = None;
        end.batch_plans.clear();
        if end.batch.is_empty() && end.probes.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut end.batch);
        let probes = std::mem::take(&mut end.probes);
        if let Some(ex) = &self.exporter {
            // A digest of a plan no longer kept (reloads in quick succession, a worker that
            // slept through them) cannot be encoded at its width: dropped, counted.
            let history = &self.history;
            let known = |v: u32| history.iter().any(|p| p.version() == v);
            if !batch.iter().all(|d| known(d.plan_version)) {
                let before = batch.len();
                batch.retain(|d| known(d.plan_version));
                ex.stats
                    .digests_dropped
                    .fetch_add((before - batch.len()) as u64, Relaxed);
            }
            // At most the hello's batch size a frame: the sink refuses a larger one and
            // closes the connection.
            let mut probes_dropped = false;
            for chunk in probes.chunks(self.batch_max.max(1)) {
                probes_dropped |= !ex.send(Outgoing {
                    ty: FrameType::Probes,
                    payload: encode_probes(w as u16, chunk),
                    digests: 0,
                    flowsets: 0,
                    probes: chunk.len() as u64,
                });
            }
            if probes_dropped {
                // The sink hears at once, before the probe records after the gap, that
                // records were dropped: it takes the gap in their streams' numbers as
                // arrived, not lost.
                ex.send(stats_frame(vec![(
                    telemetry::protocol::PROBES_DROPPED.to_owned(),
                    ex.stats.probes_dropped.load(Relaxed),
                )]));
            }
            if !batch.is_empty() {
                self.digests.send(ex, w as u16, &batch, |v| {
                    history
                        .iter()
                        .find(|p| p.version() == v)
                        .map_or(8, |p| p.digest_bytes() as u8)
                });
            }
        }
        let end = &mut self.workers[w];
        end.batch = batch;
        end.batch.clear();
        end.probes = probes;
        end.probes.clear();
    }

    /// Serialises worker `w`'s finished flowsets and hands them back cleared.
    fn collect(&mut self, w: usize) {
        while let Some(closed) = self.workers[w].epochs.try_recv() {
            if let Some(ex) = &self.exporter {
                let payload = encode_flowset(
                    closed.worker,
                    closed.epochs,
                    self.switch_id,
                    closed.epoch,
                    &closed.flowset,
                );
                let queued = ex.send(Outgoing {
                    ty: FrameType::FlowSet,
                    payload,
                    digests: 0,
                    flowsets: 1,
                    probes: 0,
                });
                if !queued {
                    // The sink hears at once, in a frame small enough to fit where the
                    // flowset did not, that this one was dropped, not late: it then takes
                    // the epoch's counts here as short, not the flows' packets as lost.
                    let dropped = ex.stats.flowsets_dropped.load(Relaxed);
                    self.send_stats(vec![(
                        telemetry::protocol::FLOWSETS_DROPPED.to_owned(),
                        dropped,
                    )]);
                }
            }
            self.counts.flowsets_serialised += 1;
            self.workers[w].epochs.give_back(closed);
        }
    }

    /// Copies the exporter's counters into the control thread's.
    fn copy_export_counts(&mut self, s: &crate::export::ExportStats) {
        use std::sync::atomic::Ordering::Relaxed;
        self.counts.sink_connected = s.connected.load(Relaxed);
        self.counts.sink_connections = s.connections.load(Relaxed);
        self.counts.sink_bytes = s.bytes.load(Relaxed);
        self.counts.sink_frames = s.frames.load(Relaxed);
        self.counts.digests_dropped = s.digests_dropped.load(Relaxed);
        self.counts.flowsets_dropped = s.flowsets_dropped.load(Relaxed);
        self.counts.probes_dropped = s.probes_dropped.load(Relaxed);
        self.counts.digests_written = s.digests_sent.load(Relaxed);
        self.counts.flowsets_written = s.flowsets_sent.load(Relaxed);
    }

    fn refresh_export_counts(&mut self) {
        if let Some(stats) = self.exporter.as_ref().map(|ex| Arc::clone(&ex.stats)) {
            self.copy_export_counts(&stats);
        } else {
            // Nowhere to send: everything drained is dropped.
            self.counts.digests_dropped = self.counts.digests_drained;
            self.counts.flowsets_dropped = self.counts.flowsets_serialised;
            self.counts.probes_dropped = self.counts.probes_drained;
        }
    }

    /// Sends the switch's counters to the sink.
    pub fn send_stats(&self, counters: Vec<(String, u64)>) {
        if let Some(ex) = &self.exporter {
            ex.send(stats_frame(counters));
        }
    }

    /// Reads the query file again and installs the plan it compiles to; the workers take it
    /// at their next burst. Returns a line saying what happened. An invalid file changes
    /// nothing.
    pub fn reload(&mut self, config: &Config) -> Result<String, String> {
        let before = self.plan().version();
        let result = self.try_reload(config);
        match &result {
            // A file that compiles to the plan in force changes nothing: not a reload.
            Ok(_) if self.plan().version() == before => {}
            Ok(_) => self.counts.reloads_applied += 1,
            Err(_) => self.counts.reloads_rejected += 1,
        }
        result
    }

    fn try_reload(&mut self, config: &Config) -> Result<String, String> {
        let (text, plan) = config.telemetry.load_queries()?;
        let current = Arc::clone(self.plan());
        if plan.version == current.version() {
            return Ok(format!(
                "plan reload: unchanged (version {:08x})",
                plan.version
            ));
        }
        let new = Arc::new(SwitchPlan::new(plan, text, self.switch_id));
        // Packets of the plans before it may still be in flight (a neighbour reloaded
        // later, a worker's previous plan): a tag of one of them would read them as the
        // new plan's.
        if let Some(same) = self
            .history
            .iter()
            .rev()
            .find(|p| p.tag() == new.tag() && p.version() != new.version())
        {
            let which = if same.version() == current.version() {
                "in force"
            } else {
                "installed before it"
            };
            return Err(format!(
                "plan {:08x} has the same shim tag ({:04x}) as plan {:08x} {which}, so packets in flight could not tell them apart; change the query file slightly and reload",
                new.version(),
                new.tag(),
                same.version()
            ));
        }
        self.plans.install(Arc::clone(&new));
        self.history.push(Arc::clone(&new));
        if self.history.len() > PLANS_KEPT {
            self.history.remove(0);
        }
        if self.installed.len() >= VERSIONS_LISTED {
            self.installed.pop_front();
        }
        self.installed.push_back(format!("{:08x}", new.version()));
        if let Some(ex) = &self.exporter {
            if let Ok(mut a) = ex.announcement.lock() {
                a.hello.plan = Some(plan_text(&new));
                // Every plan kept: digests of any of them may still be on their way.
                a.older_plans = self.history[..self.history.len() - 1]
                    .iter()
                    .map(|p| plan_text(p))
                    .collect();
            }
            // Before any digest of the new plan, however full the queue (a connection made
            // from here on announces it in its hello).
            ex.send_always(Outgoing {
                ty: FrameType::Plan,
                payload: plan_text(&new).payload(),
                digests: 0,
                flowsets: 0,
                probes: 0,
            });
        }
        let mut said = format!(
            "plan reload: installed {:08x} (was {:08x})",
            new.version(),
            current.version()
        );
        for w in config.shim_room_warnings(shim_len(new.digest_bytes())) {
            said.push_str("\nplan reload: warning: ");
            said.push_str(&w);
        }
        Ok(said)
    }

    /// Final collection after the workers stopped: the last digests and flowsets go out,
    /// then the switch's final counters (`totals`, the workers' summed), then the exporter
    /// drains (for at most `linger`).
    pub fn finish(
        mut self,
        linger: Duration,
        totals: &pipeline::LocalCounters,
    ) -> TelemetrySummary {
        let now = Instant::now();
        let clock = self.clock.get();
        for w in 0..self.workers.len() {
            self.drain(w, now, &clock);
            self.flush_batch(w);
            self.collect(w);
        }
        // The sink's view of the switch ends with its final counters (it kept the last
        // interval's). Everything queued goes before them, so what is not dropped by now is
        // exported by the time they arrive.
        self.refresh_export_counts();
        let mut last = self.counts;
        last.digests_written =
            last.digests_drained - last.digests_dropped.min(last.digests_drained);
        last.flowsets_written =
            last.flowsets_serialised - last.flowsets_dropped.min(last.flowsets_serialised);
        // However full the queue: dropped, the sink would keep the counters of a second
        // before.
        if let Some(ex) = &self.exporter {
            ex.send_always(stats_frame(crate::runtime::stats_counters(totals, &last)));
        }
        if let Some(ex) = self.exporter.take() {
            let stats = Arc::clone(&ex.stats);
            ex.finish(linger);
            self.copy_export_counts(&stats);
        } else {
            self.refresh_export_counts();
        }
        let c = &self.counts;
        TelemetrySummary {
            enabled: true,
            plan_version: Some(format!("{:08x}", self.plan().version())),
            plans_installed: self.installed.iter().cloned().collect(),
            reloads_applied: c.reloads_applied,
            reloads_rejected: c.reloads_rejected,
            events: Default::default(),
            digests_exported: c.digests_sent(),
            digests_dropped: c.digests_dropped,
            flowsets_exported: c.flowsets_sent(),
            flowsets_dropped: c.flowsets_dropped,
            probes_dropped: c.probes_dropped,
            deadlines_missed: c.deadlines_missed,
            frames_sent: c.sink_frames,
            bytes_sent: c.sink_bytes,
            sink_connections: c.sink_connections,
            sink: self.sink.clone(),
        }
    }
}

/// The line that says the system clock stepped by `step` ns (later positive) and what it
/// does to the switch's epochs, which follow it.
fn clock_step_line(step: i64) -> String {
    let s = step.unsigned_abs() as f64 / 1e9;
    if step < 0 {
        format!(
            "telemetry: the system clock stepped back {s:.3} s; the epoch in progress goes on until the clock reaches its end, so its flowsets hold {s:.3} s more traffic (the sink may not decode them whole)"
        )
    } else {
        format!(
            "telemetry: the system clock stepped forward {s:.3} s; this switch has no flowsets of the epochs skipped"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::digest::RingDigest;
    use telemetry::flowradar::FlowKey;

    #[test]
    fn a_clock_step_is_said_with_its_direction() {
        let back = clock_step_line(-1_500_000_000);
        assert!(
            back.contains("stepped back 1.500 s") && back.contains("goes on"),
            "{back}"
        );
        let fwd = clock_step_line(20_000_000);
        assert!(
            fwd.contains("forward 0.020 s") && fwd.contains("skipped"),
            "{fwd}"
        );
    }

    /// The telemetry of a switch with one worker that exports to a listener (which the
    /// caller keeps; `telemetry` adds keys to `[telemetry]`).
    fn one_worker_towards_a_sink(telemetry: &str) -> (std::net::TcpListener, TelemetryStart) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = one_worker(&format!(
            "sink = \"{}\"\n{telemetry}",
            listener.local_addr().unwrap()
        ));
        (listener, TelemetryStart::prepare(&config).unwrap().unwrap())
    }

    /// A switch with one worker and telemetry on (`telemetry` adds keys to the table).
    fn one_worker(telemetry: &str) -> Config {
        Config::from_toml(&format!(
            "switch_id = 3\n\
             [[ports]]\nname = \"p\"\ndevice = \"net_null0\"\nrole = \"edge\"\nmac = \"02:00:00:00:00:01\"\n\
             [[workers]]\nlcore = 0\nrx = [\"p\"]\n\
             [telemetry]\n{telemetry}"
        ))
        .unwrap()
    }

    /// A digest of a plan the control thread no longer keeps (as after reloads in quick
    /// succession) is dropped and counted, never encoded at a guessed width; the batch's
    /// other digests go.
    #[test]
    fn digests_of_a_plan_no_longer_kept_are_dropped_and_counted() {
        let (_listener, mut start) = one_worker_towards_a_sink("");
        let mut worker = start.workers.remove(0);
        let mut control = start.control;
        let kept = control.plan().version();
        for (i, version) in [kept, kept ^ 0x5a5a, kept].into_iter().enumerate() {
            let [w0, w1] = FlowKey {
                src: 0x0a00_0001,
                dst: 0x0a00_0002,
                src_port: 1000 + i as u16,
                dst_port: 80,
                protocol: 17,
            }
            .words();
            worker.digests.gather(RingDigest::new(
                w0,
                w1,
                2,
                0,
                0,
                i as u32,
                version,
                7,
                tsc(),
            ));
        }
        worker.digests.push_burst();
        control.poll(Instant::now(), Duration::ZERO);
        std::thread::sleep(BATCH_AGE * 2);
        control.poll(Instant::now(), Duration::ZERO);
        assert_eq!(control.counts.digests_drained, 3);
        let ex = control.exporter.as_ref().unwrap();
        assert_eq!(
            ex.stats.digests_dropped.load(Relaxed),
            1,
            "the unknown plan's"
        );
        assert!(
            ex.queued_bytes() > 0 || ex.stats.frames.load(Relaxed) > 0,
            "the rest went"
        );
    }

    /// A plan whose shim tag is that of a plan before it, in force or not, is refused: packets
    /// of the older plan still in flight would be read as the new one's.
    #[test]
    fn a_plan_with_the_tag_of_a_recent_one_is_refused() {
        let text = |name: &str| {
            format!(
                "global_bits = 16\n[[queries]]\nname = \"{name}\"\nvalue = \"hop_latency\"\naggregation = \"dynamic_per_flow\"\nbits = 8\nspace_budget = 1000\n"
            )
        };
        let version = |name: &str| {
            let q = telemetry::pint::query::QueryFile::from_toml(&text(name)).unwrap();
            telemetry::pint::plan::Plan::compile(&q).unwrap().version
        };
        let first = version("q0");
        // A plan of another tag, then one of the first plan's tag (one name in 65536).
        let other = (1..)
            .map(|i| format!("q{i}"))
            .find(|n| version(n) as u16 != first as u16)
            .unwrap();
        let same = (1..4_000_000)
            .map(|i| format!("q{i}"))
            .find(|n| version(n) as u16 == first as u16 && version(n) != first)
            .expect("a name whose plan has the first plan's tag");
        let dir = std::env::temp_dir().join(format!("pint-tags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("q.toml");
        std::fs::write(&file, text("q0")).unwrap();
        let config = one_worker(&format!("queries = \"{}\"\n", file.display()));
        let mut start = TelemetryStart::prepare(&config).unwrap().unwrap();
        let _workers = std::mem::take(&mut start.workers);
        let mut control = start.control;
        std::fs::write(&file, text(&other)).unwrap();
        control.reload(&config).unwrap();
        std::fs::write(&file, text(&same)).unwrap();
        let e = control.reload(&config).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains(&format!("same shim tag ({:04x})", first as u16)),
            "{e}"
        );
        assert!(
            e.contains(&format!("{first:08x} installed before it")),
            "{e}"
        );
        assert_eq!(control.plan().version(), version(&other), "nothing changed");
        assert_eq!(control.counts.reloads_rejected, 1);
    }

    /// A switch whose query file is reloaded again and again (by a script) lists the most
    /// recent plans in its summary, not every one, and counts them all.
    #[test]
    fn the_summary_lists_the_latest_plans_of_many_reloads() {
        let dir = std::env::temp_dir().join(format!("pint-reloads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("q.toml");
        let write = |budget: u32| {
            std::fs::write(
                &file,
                format!(
                    "global_bits = 16\n[[queries]]\nname = \"latency\"\nvalue = \"hop_latency\"\naggregation = \"dynamic_per_flow\"\nbits = 8\nspace_budget = {budget}\n"
                ),
            )
            .unwrap();
        };
        write(1000);
        let config = one_worker(&format!("queries = \"{}\"\n", file.display()));
        let mut start = TelemetryStart::prepare(&config).unwrap().unwrap();
        let _workers = std::mem::take(&mut start.workers);
        let mut control = start.control;
        let reloads = VERSIONS_LISTED + 6;
        let mut versions = vec![format!("{:08x}", control.plan().version())];
        for i in 1..=reloads {
            write(1000 + i as u32);
            control.reload(&config).unwrap();
            versions.push(format!("{:08x}", control.plan().version()));
        }
        let t = control.finish(Duration::ZERO, &Default::default());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.reloads_applied, reloads as u64);
        assert_eq!(t.plans_installed.len(), VERSIONS_LISTED);
        assert_eq!(
            t.plans_installed,
            versions[versions.len() - VERSIONS_LISTED..]
        );
        assert_eq!(t.plan_version.as_ref(), versions.last());
    }

    /// The sink's end of `start`'s connection to `listener` once the exporter is connected,
    /// with the worker's and the control thread's ends.
    fn connected(
        listener: &std::net::TcpListener,
        mut start: TelemetryStart,
    ) -> (std::net::TcpStream, InbandSetup, TelemetryControl) {
        let worker = start.workers.remove(0);
        let control = start.control;
        let (sink, _) = listener.accept().unwrap();
        let t0 = Instant::now();
        while !control
            .exporter
            .as_ref()
            .unwrap()
            .stats
            .connected
            .load(Relaxed)
        {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the exporter connects"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        (sink, worker, control)
    }

    /// Probe records go in frames of at most the hello's batch size (the sink refuses a
    /// larger one and closes the connection), every one of them.
    #[test]
    fn probes_go_in_frames_the_sink_takes() {
        use std::io::Read;
        use telemetry::protocol::{Frame, Session, frame_len};
        let (listener, start) = one_worker_towards_a_sink("batch_digests = 4\n");
        let (mut sink, mut worker, mut control) = connected(&listener, start);
        let key = FlowKey {
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            src_port: 1000,
            dst_port: 80,
            protocol: 17,
        };
        let [w0, w1] = key.words();
        let version = control.plan().version();
        worker
            .digests
            .gather(RingDigest::new(w0, w1, 2, 0, 0, 1, version, 7, tsc()));
        worker.digests.push_burst();
        for seq in 0..10 {
            assert!(worker.digests.push_probe(pipeline::digest::ProbeRecord {
                key,
                probe: telemetry::wire::probe::ProbePayload {
                    stream: 1,
                    seq,
                    sent_ns: 1_700_000_000_000_000_000 + seq,
                },
                tsc: tsc(),
            }));
        }
        control.poll(Instant::now(), Duration::ZERO);
        std::thread::sleep(BATCH_AGE * 2);
        control.poll(Instant::now(), Duration::ZERO);
        // The sink's decoder holds each frame to the hello's limits.
        sink.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let (mut session, mut buf, mut chunk) = (Session::default(), Vec::new(), [0u8; 4096]);
        let mut seqs = Vec::new();
        let mut frames = Vec::new();
        while seqs.len() < 10 {
            while let Ok(Some(len)) = frame_len(&buf) {
                if buf.len() < len {
                    break;
                }
                if let Frame::Probes(b) = session.decode(&buf[..len]).unwrap() {
                    frames.push(b.probes.len());
                    seqs.extend(b.probes.iter().map(|p| p.seq));
                }
                buf.drain(..len);
            }
            if seqs.len() >= 10 {
                break;
            }
            let got = sink.read(&mut chunk).unwrap();
            assert!(got > 0, "the switch closed the connection");
            buf.extend_from_slice(&chunk[..got]);
        }
        assert_eq!(seqs, (0..10).collect::<Vec<u64>>());
        assert_eq!(frames, [4, 4, 2]);
        let ex = control.exporter.as_ref().unwrap();
        assert_eq!(ex.stats.probes_dropped.load(Relaxed), 0);
    }

    /// At the stop the sink hears the switch's final counters, after everything else, with
    /// what was exported counted in full.
    #[test]
    fn the_sink_hears_the_final_counters_last() {
        use std::io::Read;
        use telemetry::protocol::{Frame, Session, frame_len};
        let (listener, start) = one_worker_towards_a_sink("");
        let (mut sink, mut worker, mut control) = connected(&listener, start);
        let [w0, w1] = FlowKey {
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            src_port: 1000,
            dst_port: 80,
            protocol: 17,
        }
        .words();
        let version = control.plan().version();
        for i in 0..3 {
            worker
                .digests
                .gather(RingDigest::new(w0, w1, 2, 0, 0, i, version, 7, tsc()));
        }
        worker.digests.push_burst();
        control.poll(Instant::now(), Duration::ZERO);
        let totals = pipeline::LocalCounters {
            rx_packets: 123,
            tx_packets: 120,
            ..Default::default()
        };
        let summary = control.finish(Duration::from_secs(5), &totals);
        assert_eq!(summary.digests_exported, 3);
        sink.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut bytes = Vec::new();
        sink.read_to_end(&mut bytes).unwrap();
        let mut session = Session::default();
        let mut frames = Vec::new();
        let mut at = 0;
        while let Ok(Some(len)) = frame_len(&bytes[at..]) {
            frames.push(session.decode(&bytes[at..at + len]).unwrap());
            at += len;
        }
        let Some(Frame::Stats(last)) = frames.last() else {
            panic!(
                "the last frame is not the counters: {} frames",
                frames.len()
            );
        };
        let get = |n: &str| last.counters.iter().find(|c| c.0 == n).map(|c| c.1);
        assert_eq!(get("rx_packets"), Some(123));
        assert_eq!(get("tx_packets"), Some(120));
        assert_eq!(get("digests_exported"), Some(3));
        assert_eq!(get("digests_dropped"), Some(0));
    }

    /// Probes with nowhere to go (no sink) are counted dropped, those that came without a
    /// digest in their batch too.
    #[test]
    fn probes_without_a_sink_are_counted_dropped() {
        let config = one_worker("");
        let mut start = TelemetryStart::prepare(&config).unwrap().unwrap();
        let mut worker = start.workers.remove(0);
        let mut control = start.control;
        for seq in 0..3 {
            assert!(worker.digests.push_probe(pipeline::digest::ProbeRecord {
                key: FlowKey {
                    src: 1,
                    dst: 2,
                    src_port: 3,
                    dst_port: 4,
                    protocol: 17,
                },
                probe: telemetry::wire::probe::ProbePayload {
                    stream: 0,
                    seq,
                    sent_ns: 1,
                },
                tsc: tsc(),
            }));
        }
        control.poll(Instant::now(), Duration::ZERO);
        let summary = control.finish(Duration::ZERO, &pipeline::LocalCounters::default());
        assert_eq!(summary.probes_dropped, 3);
    }

    /// A stall of the control thread counts the epochs it overran, once, however many
    /// rounds then catch up (each counted: a 30 ms stall made 6 against a 50 ms one's 1).
    #[test]
    fn a_stall_counts_the_epochs_it_overran_once() {
        let config = one_worker("");
        let mut control = TelemetryStart::prepare(&config).unwrap().unwrap().control;
        assert_eq!(control.epoch(), Duration::from_millis(10));
        let tick = Duration::from_millis(1);
        let mut missed = Vec::new();
        for stall_ms in [30u64, 50, 5] {
            let before = control.counts.deadlines_missed;
            let stall = Duration::from_millis(stall_ms);
            // The round after the stall, then the rounds catching up at once, each a tick
            // less late.
            let now = Instant::now() + stall;
            let mut late = stall;
            while late > tick {
                control.poll(now, late);
                late -= tick;
            }
            missed.push(control.counts.deadlines_missed - before);
            std::thread::sleep(stall);
        }
        assert_eq!(missed, [3, 5, 0]);
    }
}
