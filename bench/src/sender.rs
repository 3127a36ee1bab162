//! `pint-gen` on a DPDK port: sends a [`Traffic`] (paced by its clock, or as fast as the
//! port takes it) and/or receives, counting packets, bytes, probes (loss, reordering,
//! one-way latency) and flow tags (loss and reordering per flow); or searches for the
//! highest rate that a device under test forwards back without loss (RFC 2544 style). One
//! core, one rx and one tx queue; bursts of 32 mbufs allocated in bulk and built in place.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use dataplane::dpdk::{Burst, Eal, Mempool, Port, PortSetup, RxQueue, TxQueue};
use serde::Serialize;
use telemetry::wire::MacAddr;

use crate::generator::frame::{FlowTuple, PacketFields};
use crate::generator::probe::{PROBE_LEN, ProbePayload, ProbeReceiver, ProbeReport};
use crate::generator::tag::{FlowLossCounter, FlowLossReport, FlowTag, TagPatch, Transport};
use crate::generator::traffic::{GenPacket, PROBE_PORT};
use crate::generator::{Rate, Traffic, emit_frame};

/// What to do on the port.
#[derive(Debug, Clone)]
pub struct PortRun {
    /// Send the traffic.
    pub send: bool,
    /// Receive and count.
    pub receive: bool,
    /// Stop sending after this many packets.
    pub count: Option<u64>,
    /// Stop sending after this many seconds.
    pub duration: Option<f64>,
    /// After sending (or, receiving only, after the first packet), stop once nothing has
    /// arrived for this long.
    pub until_idle: Duration,
    /// Destination and source MAC of sent frames.
    pub macs: (MacAddr, MacAddr),
    /// IPv4 TTL of sent frames.
    pub ttl: u8,
    /// Print a progress line every second.
    pub progress: bool,
    /// After sending, keep the port open (not polling) until the peer leaves or this long:
    /// a memif client's rings live in its own memory, and DPDK 22.11's memif driver unmaps
    /// a departed peer's rings under a thread that is still polling them, so the side that
    /// is done leaves the closing to the other.
    pub linger: Duration,
    /// Receiving: write every received frame to this capture.
    pub capture: Option<std::path::PathBuf>,
    /// Sleep this long after a loop that neither sent nor received (None: spin), so that
    /// generators share cores with the switches of a lab.
    pub idle_sleep: Option<Duration>,
    /// Once the port is up, wait for this wall-clock time before sending (generators of a
    /// lab start together, once every one of them is connected).
    pub start_at: Option<std::time::SystemTime>,
    /// When the link goes down mid-run (the peer restarts), wait this long at most for it to
    /// come back and go on, the run's clock standing still meanwhile (None: the run stops
    /// there, cut short).
    pub reconnect: Option<Duration>,
}

/// Send-side totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SendReport {
    /// Packets the port took.
    pub packets: u64,
    /// Their frame bytes (no FCS).
    pub bytes: u64,
    /// Probes among them.
    pub probes: u64,
    /// Seconds from the first packet to the last.
    pub seconds: f64,
    /// Packets per second.
    pub pps: f64,
    /// Why sending stopped before the count or time asked for (the port's peer went away
    /// or stopped reading), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    /// Whether a signal (Ctrl-C, SIGTERM) stopped it before it had sent what was asked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Paced by the traffic's clock (a `--rate` or `--flow-sizes`): how far behind its
    /// time the last packet went, seconds. More than a few hundredths of the run means this
    /// core or port could not send at the pace asked for, and the run took that much
    /// longer (see [`SendReport::fell_behind`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind_s: Option<f64>,
}

impl SendReport {
    /// Whether sending fell behind its pace (more than 0.1 s and 5% of the run): the rate
    /// asked for was more than this core and port could send.
    pub fn fell_behind(&self) -> bool {
        self.behind_s
            .is_some_and(|b| b > 0.1 && b > 0.05 * self.seconds)
    }
}

/// Receive-side totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiveReport {
    /// IPv4 UDP and TCP packets received (what a generator sends).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Other frames received (ARP, LLDP, IPv6, ...): not counted above.
    pub other: u64,
    /// Seconds from the first packet to the last.
    pub seconds: f64,
    /// Packets per second over that time.
    pub pps: f64,
    /// Probe loss, reordering and latency (latency meaningful when sender and receiver share
    /// a clock: the same machine).
    pub probes: Option<ProbeReport>,
    /// Loss and reordering per flow, from the flow tags of data packets.
    pub flows: Option<FlowLossReport>,
    /// Whether a signal (Ctrl-C, SIGTERM) stopped it before its quiet time (`--until-idle`)
    /// had passed: it may have missed packets still on their way.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PortReportOut {
    /// Sending.
    pub sent: Option<SendReport>,
    /// Receiving.
    pub received: Option<ReceiveReport>,
    /// Sent but not received (sending and receiving on the same port: what the device under
    /// test lost).
    pub lost: Option<u64>,
    /// The link's outages that the run waited through (`reconnect`).
    #[serde(skip_serializing_if = "Outages::none")]
    pub outages: Outages,
}

/// The link's outages that a run waited through: its peer restarted, or a cable was out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Outages {
    /// Times the link went down and came back.
    pub count: u32,
    /// Seconds it was down in all; the run's clock stood still meanwhile, so the run's
    /// seconds and rates leave them out.
    pub seconds: f64,
    /// Whether the run ended on a link that did not come back in the time allowed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gave_up: bool,
}

impl Outages {
    /// Notes an outage waited through, `down` long.
    fn note(&mut self, down: Duration) {
        self.count += 1;
        self.seconds += down.as_secs_f64();
    }

    /// Whether there were none.
    pub fn none(&self) -> bool {
        self.count == 0 && !self.gave_up
    }
}

/// What became of a wait for a link that went down.
enum Rejoin {
    /// It came back after this long.
    Back(Duration),
    /// It did not come back in the time allowed (a memif client's port may be stopped).
    GaveUp,
    /// A signal asked to stop meanwhile.
    Stopped,
}

/// How long a memif client's started port may take to connect before it is started again
/// (a handshake can be slow); one whose start failed is tried again each second.
const CONNECT_FOR: Duration = Duration::from_secs(5);

/// The zero-loss rate search.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Seconds each trial sends.
    pub trial_seconds: f64,
    /// Stop when the bracket around the zero-loss rate is narrower than this share of its
    /// upper end.
    pub precision: f64,
    /// Share of packets a trial may lose and still pass (RFC 2544: 0).
    pub loss_tolerance: f64,
    /// Most trials.
    pub max_trials: u32,
    /// After a trial's last packet, wait this long with nothing arriving before counting.
    pub drain: Duration,
}

/// One trial of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// Offered rate, packets per second (None: as fast as the port takes them).
    pub offered_pps: Option<f64>,
    /// Packets sent.
    pub sent: u64,
    /// Packets received back.
    pub received: u64,
    /// Sent and not received.
    pub lost: u64,
    /// The rate the sender reached, packets per second.
    pub sent_pps: f64,
    /// Passed: loss within the tolerance.
    pub passed: bool,
}

/// The search's result.
#[derive(Debug, Clone, Serialize)]
pub struct SearchReport {
    /// The highest rate that passed, packets per second, as sent (0: none passed).
    pub zero_loss_pps: f64,
    /// The same in bits per second on the wire (frames plus 24 bytes each).
    pub zero_loss_wire_bps: f64,
    /// The sender could not go faster: the rate that passed was as fast as it sends, so the
    /// device's zero-loss rate is at least this.
    pub sender_limited: bool,
    /// Mean frame bytes of the traffic.
    pub mean_frame_bytes: f64,
    /// Where the search stopped before its bracket was within `--precision` (at
    /// `--max-trials`, or a signal): the bracket it halves, packets per second: the rate of
    /// the highest trial that passed (0: none) and of the lowest that failed (the first
    /// trial's as it was sent, the others' as offered). The zero-loss rate is between.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsettled_pps: Option<[f64; 2]>,
    /// Every trial, in order.
    pub trials: Vec<Trial>,
    /// What the receiver saw over all trials.
    pub received: ReceiveReport,
}

/// Reads one `--json` report of pint-gen from its output: pretty-printed JSON, ending with a
/// line that holds only the closing brace. pint-gen prints it before it lingers, so a
/// caller can act (stop the peer) while pint-gen still runs.
pub fn read_json_report(output: impl std::io::BufRead) -> String {
    let mut report = String::new();
    for line in output.lines().map_while(Result::ok) {
        report.push_str(&line);
        report.push('\n');
        if line == "}" {
            break;
        }
    }
    report
}

/// Nanoseconds since the Unix epoch, the clock probes carry (sender and receiver processes
/// on one machine share it).
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Runs `traffic` on the port described by `devargs` (a `--vdev` or PCI device), with EAL
/// arguments `eal_args`.
pub fn run(
    eal_args: &[String],
    devargs: &str,
    traffic: Traffic,
    opts: &PortRun,
    stop: &AtomicBool,
    report: impl FnOnce(&PortReportOut) -> anyhow::Result<()>,
) -> anyhow::Result<PortReportOut> {
    let room = tx_room(&traffic);
    // The capture is made before the port: a path it cannot have is said at once, not once
    // the link is up (up to half a minute on memif).
    let mut rx = Receiver::new(opts.capture.as_deref())?;
    with_port(eal_args, devargs, opts.macs.1, room, stop, |io| {
        let mut sender = if opts.send {
            Some(Sender::new(traffic, opts, false)?)
        } else {
            None
        };
        if let Some(at) = opts.start_at {
            while std::time::SystemTime::now() < at && !stop.load(Ordering::Relaxed) {
                if opts.receive {
                    rx.poll(io);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let phase = Phase {
            count: opts.count,
            duration_ns: opts.duration.map(|d| (d * 1e9) as u64),
            pace: Pace::Max,
            receive: opts.receive,
            until_idle: opts.until_idle,
            progress: opts.progress,
            idle_sleep: opts.idle_sleep,
            reconnect: opts.reconnect,
        };
        let mut outages = Outages::default();
        let sent = run_phase(io, sender.as_mut(), &mut rx, &phase, stop, &mut outages)?;
        // A capture that could not be written fails the run, once its report is out.
        let captured = rx.finish_capture();
        let received = opts.receive.then(|| ReceiveReport {
            interrupted: stop.load(Ordering::Relaxed),
            ..rx.report()
        });
        let out = PortReportOut {
            lost: (opts.send && opts.receive).then(|| {
                sent.packets
                    .saturating_sub(received.as_ref().map_or(0, |r| r.packets))
            }),
            sent: opts.send.then_some(sent),
            received,
            outages,
        };
        report(&out)?;
        // Sending or only receiving, the port stays until its peer leaves (a memif peer
        // that leaves first can take a polling switch down).
        io.linger(opts.linger, stop);
        captured?;
        Ok(out)
    })
}

/// Searches for the highest rate at which what is sent on the port all comes back (a device
/// under test forwarding it back to this port): a first trial as fast as the port takes
/// packets (or at `traffic`'s rate, if it has one) sets the upper end, then the rate is
/// halved between the highest that passed and the lowest that failed.
pub fn search_zero_loss(
    eal_args: &[String],
    devargs: &str,
    traffic: Traffic,
    opts: &PortRun,
    search: &SearchOptions,
    stop: &AtomicBool,
    report: impl FnOnce(&SearchReport) -> anyhow::Result<()>,
) -> anyhow::Result<SearchReport> {
    if traffic.spec().flow_sizes.is_some() {
        anyhow::bail!(
            "the zero-loss search varies the packet rate: leave out --flow-sizes (and --load)"
        );
    }
    let top = traffic.spec().rate;
    let room = tx_room(&traffic);
    with_port(eal_args, devargs, opts.macs.1, room, stop, |io| {
        let mut sender = Sender::new(traffic, opts, true)?;
        let mean_frame = sender.mean_frame_bytes();
        let mut rx = Receiver::default();
        let mut trials: Vec<Trial> = Vec::new();
        let first = match top {
            Rate::Max => Pace::Max,
            Rate::Pps(r) => Pace::Pps(r),
            Rate::Bps(b) => Pace::Pps(b / 8.0 / (mean_frame + 24.0)),
        };
        let top = trial(io, &mut sender, &mut rx, first, search, stop)?;
        // Passing at the top rate leaves nothing above to search.
        let sender_limited = top.passed && top.offered_pps.is_none_or(|r| top.sent_pps < 0.99 * r);
        let (mut lo, mut hi) = (0.0f64, top.sent_pps);
        let mut best = top.passed.then(|| top.clone());
        trials.push(top);
        if best.is_none() {
            while hi - lo > search.precision * hi
                && hi > 1.0
                && (trials.len() as u32) < search.max_trials
                && !stop.load(Ordering::Relaxed)
            {
                let mid = (lo + hi) / 2.0;
                let t = trial(io, &mut sender, &mut rx, Pace::Pps(mid), search, stop)?;
                if t.passed {
                    lo = mid;
                    best = Some(t.clone());
                } else {
                    hi = mid;
                }
                trials.push(t);
            }
        }
        let zero_loss_pps = best.as_ref().map_or(0.0, |b| b.sent_pps);
        // The loop's conditions but the trials' number and a stop: the bracket is as narrow
        // as asked (or the top rate passed, and there was none).
        let settled = trials.first().is_some_and(|t| t.passed)
            || hi - lo <= search.precision * hi
            || hi <= 1.0;
        let out = SearchReport {
            zero_loss_pps,
            zero_loss_wire_bps: zero_loss_pps * (mean_frame + 24.0) * 8.0,
            sender_limited,
            mean_frame_bytes: mean_frame,
            unsettled_pps: (!settled).then_some([lo, hi]),
            trials,
            received: rx.report(),
        };
        report(&out)?;
        io.linger(opts.linger, stop);
        Ok(out)
    })
}

/// One trial: `search.trial_seconds` at `pace`, then the drain; loss against the tolerance.
fn trial(
    io: &mut Io<'_>,
    sender: &mut Sender,
    rx: &mut Receiver,
    pace: Pace,
    search: &SearchOptions,
    stop: &AtomicBool,
) -> anyhow::Result<Trial> {
    let before = rx.packets;
    let phase = Phase {
        count: None,
        duration_ns: Some((search.trial_seconds * 1e9) as u64),
        pace,
        receive: true,
        until_idle: search.drain,
        progress: false,
        idle_sleep: None,
        reconnect: None,
    };
    let s = run_phase(io, Some(sender), rx, &phase, stop, &mut Outages::default())?;
    let received = rx.packets - before;
    let lost = s.packets.saturating_sub(received);
    Ok(Trial {
        offered_pps: match pace {
            Pace::Max => None,
            Pace::Pps(r) => Some(r),
        },
        sent: s.packets,
        received,
        lost,
        sent_pps: s.pps,
        passed: s.packets > 0 && lost as f64 <= search.loss_tolerance * s.packets as f64,
    })
}

/// Data room of the mbufs packets are built in: the traffic's largest frame (or probe), in
/// whole copy chunks. Small mbufs keep the buffers a sender cycles through in cache.
fn tx_room(traffic: &Traffic) -> u16 {
    let largest = usize::from(traffic.spec().packet_sizes.max()).max(PROBE_FRAME);
    (largest.div_ceil(CHUNK) * CHUNK) as u16
}

/// Bytes of a probe frame.
const PROBE_FRAME: usize = 42 + PROBE_LEN;

/// The port's queues and bursts, for the phases run on it.
struct Io<'a> {
    port: &'a Port<'a>,
    /// The port's device arguments.
    devargs: String,
    /// Mbufs that sent packets are built in.
    pool: &'a Mempool<'a>,
    rxq: RxQueue<'a>,
    txq: TxQueue<'a>,
    tx: Burst,
    rx: Burst,
    clock: TscClock,
}

impl Io<'_> {
    /// Waits for the link of a port whose link went down to come back, at most `limit`. A
    /// memif client's port is started again meanwhile (DPDK's memif client connects only
    /// when its port starts): a second after the link went down, then each second while a
    /// start fails, or [`CONNECT_FOR`] after one that did not connect; any other port's link
    /// comes back by itself. The clock stands still over the outage. Once it has given up
    /// on a memif client, its port may be stopped: no queue may be called again.
    #[cold]
    fn rejoin(&mut self, limit: Duration, stop: &AtomicBool) -> Rejoin {
        let t0 = std::time::Instant::now();
        let tsc0 = dataplane::dpdk::tsc();
        let client = dataplane::dpdk::port::is_memif_client(&self.devargs);
        // When the next start is due.
        let mut next_start = t0 + Duration::from_secs(1);
        let fate = loop {
            if stop.load(Ordering::Relaxed) {
                break Rejoin::Stopped;
            }
            if self.port.link().up {
                break Rejoin::Back(t0.elapsed());
            }
            if t0.elapsed() > limit {
                break Rejoin::GaveUp;
            }
            if client && std::time::Instant::now() >= next_start {
                // SAFETY: this thread is the only one that calls the port's queues (a
                // generator polls its port on one thread), and it is here, in no call.
                let started =
                    dataplane::dpdk::port::with_memif_log_quiet(|| unsafe { self.port.restart() });
                next_start = std::time::Instant::now()
                    + if started.is_ok() {
                        CONNECT_FOR
                    } else {
                        // The server is not back: the port stays stopped until the next try.
                        Duration::from_secs(1)
                    };
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.clock.t0 = self
            .clock
            .t0
            .wrapping_add(dataplane::dpdk::tsc().wrapping_sub(tsc0));
        if matches!(fate, Rejoin::Back(_)) {
            // Probes built before the outage carry its start as their send time.
            let now = wall_ns();
            for i in 0..self.tx.len() {
                if let Some(m) = self.tx.get_mut(i) {
                    crate::generator::frame::restamp_probe(m.data_mut(), now);
                }
            }
        }
        fate
    }

    /// Waits, not polling, until the peer takes the link down, `limit` passes or `stop`.
    fn linger(&self, limit: Duration, stop: &AtomicBool) {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < limit && !stop.load(Ordering::Relaxed) && self.port.link().up {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Brings up EAL, a pool and the port (waiting for its link), runs `f` on it, then takes
/// everything down in order.
fn with_port<T>(
    eal_args: &[String],
    devargs: &str,
    mac: MacAddr,
    tx_room: u16,
    stop: &AtomicBool,
    f: impl FnOnce(&mut Io<'_>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    // What the device needs from the system (a writable capture, a socket's directory,
    // privileges), said before DPDK reports it as a failed probe.
    dataplane::device_checks::check_device(devargs)
        .map_err(|e| anyhow::anyhow!("port {devargs}: {e}"))?;
    if let Some(why) = dataplane::device_checks::privileges_missing(devargs) {
        anyhow::bail!("port {devargs}: {why}");
    }
    let eal = Eal::init(eal_args)?;
    let socket = eal.socket_id() as i32;
    // Received frames may be as large as the MTU; sent ones are built in mbufs just large
    // enough for them.
    let rx_pool = Mempool::new(&eal, "pint_gen_rx", 4095, 256, 2048, socket)
        .context("creating the receive mbuf pool")?;
    let pool = Mempool::new(&eal, "pint_gen_tx", 8191, 256, tx_room, socket)
        .context("creating the send mbuf pool")?;
    let name = dataplane::dpdk::port::device_name(devargs);
    if let Some(said) = dataplane::dpdk::port::remove_stale_memif_socket(devargs) {
        eprintln!("pint-gen: {said}");
    }
    let mut port = Port::probe(&eal, &name, devargs).with_context(|| format!("port {devargs}"))?;
    port.configure(
        &PortSetup {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            mtu: 1500,
            mac: mac.0,
            promiscuous: true,
        },
        &rx_pool,
    )
    .with_context(|| format!("configuring {devargs}"))?;
    // A virtual link (memif) comes up when the peer connects. A memif client whose server
    // is not there or not ready yet is refused (start fails, or the link stays down) and
    // does not try again by itself: restart the port until it connects.
    let t0 = std::time::Instant::now();
    let mut started = port.start();
    let mut tried = std::time::Instant::now();
    let mut said_waiting = false;
    loop {
        let connected = started.is_ok() && port.link().up;
        if connected || stop.load(Ordering::Relaxed) {
            break;
        }
        // A wait longer than a peer's start takes is said, so that a silent terminal is not
        // taken for a hung program.
        if !said_waiting && t0.elapsed() > Duration::from_secs(2) {
            let peer = if dataplane::dpdk::port::is_memif_client(devargs) {
                "its memif server (the switch)"
            } else {
                "its peer"
            };
            eprintln!("pint-gen: waiting up to 30 s for the link of {devargs}: is {peer} running?");
            said_waiting = true;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            // A memif client's start fails while its server is away: say why it may be.
            let why = if dataplane::dpdk::port::is_memif_client(devargs) {
                format!(": {}", dataplane::dpdk::port::memif_client_trouble(devargs))
            } else {
                " (is the peer running?)".to_owned()
            };
            started.with_context(|| format!("port {devargs}: no link after 30 s{why}"))?;
            anyhow::bail!("link of {devargs} still down after 30 s{why}");
        }
        if tried.elapsed() > Duration::from_secs(1) {
            port.stop();
            // The driver's own line for a failed connection was said at the first start.
            started = dataplane::dpdk::port::with_memif_log_quiet(|| port.start());
            tried = std::time::Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = {
        let mut io = Io {
            port: &port,
            devargs: devargs.to_owned(),
            pool: &pool,
            rxq: port.rx_queue(0)?,
            txq: port.tx_queue(0)?,
            tx: Burst::new(),
            rx: Burst::new(),
            clock: TscClock::new(eal.tsc_hz()),
        };
        f(&mut io)
        // Held mbufs go back to the pool before the port, the pool and EAL go.
    };
    drop(port);
    drop(pool);
    drop(rx_pool);
    drop(eal);
    out
}

/// How fast a phase sends replayed traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pace {
    /// As fast as the port takes packets.
    Max,
    /// Packets per second.
    Pps(f64),
}

/// One stretch of sending and/or receiving.
struct Phase {
    count: Option<u64>,
    duration_ns: Option<u64>,
    pace: Pace,
    receive: bool,
    until_idle: Duration,
    progress: bool,
    idle_sleep: Option<Duration>,
    reconnect: Option<Duration>,
}

/// Sends (if `sender`) and receives (if the phase says so) until the phase is over: sending
/// done and, receiving, nothing arrived for `until_idle`. Returns what was sent.
fn run_phase(
    io: &mut Io<'_>,
    mut sender: Option<&mut Sender>,
    rx: &mut Receiver,
    phase: &Phase,
    stop: &AtomicBool,
    outages: &mut Outages,
) -> anyhow::Result<SendReport> {
    let mut sent = SendReport::default();
    let mut sending = sender.is_some();
    let start_ns = io.clock.ns();
    let idle_ns = phase.until_idle.as_nanos() as u64;
    let mut tx_done_ns: Option<u64> = None;
    let mut last_progress = start_ns;
    let rx_before = rx.last_ns;
    let mut watch = PortWatch::new(start_ns);
    loop {
        if stop.load(Ordering::Relaxed) {
            sent.interrupted = sender.is_some() && sending;
            break;
        }
        if outages.gave_up {
            // Its port may be stopped: no more calls on it.
            break;
        }
        let mut worked = false;
        if let Some(s) = sender.as_deref_mut()
            && sending
        {
            if io.tx.is_empty() {
                let now_ns = io.clock.ns();
                let elapsed = now_ns - start_ns;
                let mut budget = io.tx.alloc_fill(io.pool);
                if let Some(c) = phase.count {
                    budget = budget.min(c.saturating_sub(sent.packets) as usize);
                }
                // Replayed traffic runs for the phase's time; live traffic until its own
                // clock passes it (see `Sender::done`).
                let over = phase.count.is_some_and(|c| sent.packets >= c)
                    || (s.replays() && phase.duration_ns.is_some_and(|d| elapsed >= d));
                let built = if over {
                    sending = false;
                    0
                } else {
                    if let Pace::Pps(r) = phase.pace {
                        let due = (r * elapsed as f64 / 1e9) as u64 + 1;
                        budget = budget.min(due.saturating_sub(sent.packets) as usize);
                    }
                    s.fill(&mut io.tx, budget, now_ns, elapsed, phase, &mut sent)?
                };
                if s.done() {
                    sending = false;
                }
                // Unused mbufs go back to the pool.
                while io.tx.len() > built {
                    drop(io.tx.pop());
                }
                sent.packets += built as u64;
                worked |= built > 0;
            }
            let took = io.txq.tx(&mut io.tx);
            let now = io.clock.ns();
            if io.tx.is_empty() {
                watch.nothing_waiting(now);
            } else if watch.gone(io, took, now)
                && !rejoined(io, &mut watch, outages, phase.reconnect, stop)
            {
                // Its peer went away, or stopped reading: whatever the count or time left.
                sending = false;
                sent.cut_short = Some(why_gone(io, phase.reconnect, outages.gave_up));
            }
            if !sending {
                // Flush what was built, while the port takes it (or may again: its link
                // is up, and it took something not long ago).
                while !io.tx.is_empty() && !stop.load(Ordering::Relaxed) && !outages.gave_up {
                    let took = io.txq.tx(&mut io.tx);
                    if watch.gone(io, took, io.clock.ns())
                        && !rejoined(io, &mut watch, outages, phase.reconnect, stop)
                    {
                        break;
                    }
                    // Not after a stop during a wait for the link: its port may be stopped.
                    if phase.receive && !outages.gave_up && !stop.load(Ordering::Relaxed) {
                        rx.poll(io);
                    }
                }
                // Sent up to the last time the port took something (not through a stall).
                let end = if take_back_unsent(io, &mut sent) {
                    if !stop.load(Ordering::Relaxed) && sent.cut_short.is_none() {
                        sent.cut_short = Some(why_gone(io, phase.reconnect, outages.gave_up));
                    }
                    watch.taken_ns
                } else {
                    io.clock.ns()
                };
                sent.seconds = seconds(end - start_ns);
                tx_done_ns = Some(io.clock.ns());
            }
        }
        if phase.receive && !outages.gave_up && !stop.load(Ordering::Relaxed) {
            let before = rx.packets;
            rx.poll(io);
            worked |= rx.packets != before;
            // Receiving only, a link gone down is waited for as long as the quiet time
            // left allows (at most `reconnect`): a peer that does not come back ends the
            // receiving as it would have without the flag, as a peer leaving at the end of
            // its run does.
            if let (false, false, Some(limit)) = (sending, worked, phase.reconnect) {
                let now = io.clock.ns();
                if now - watch.link_checked_ns >= LINK_CHECK_NS {
                    watch.link_checked_ns = now;
                    if !io.port.link().up {
                        let quiet = quiet_since(sender.is_some(), tx_done_ns, rx, rx_before);
                        let left = quiet.map_or(limit, |q| {
                            Duration::from_nanos(idle_ns.saturating_sub(now.saturating_sub(q)))
                                .min(limit)
                        });
                        match io.rejoin(left, stop) {
                            Rejoin::Back(down) => outages.note(down),
                            // Its port may be stopped: no more calls on it.
                            Rejoin::GaveUp => break,
                            Rejoin::Stopped => {}
                        }
                    }
                }
            }
        }
        if let Some(d) = phase.idle_sleep
            && !worked
        {
            std::thread::sleep(d);
        }
        if phase.progress {
            let now = io.clock.ns();
            if now - last_progress >= 1_000_000_000 {
                last_progress = now;
                let secs = seconds(now - start_ns);
                eprint!(
                    "\rpint-gen: {secs:.1} s  sent {} ({:.2} Mpps)  received {}   ",
                    sent.packets,
                    sent.packets as f64 / secs / 1e6,
                    rx.packets
                );
            }
        }
        if !sending {
            if !phase.receive {
                break;
            }
            let quiet = quiet_since(sender.is_some(), tx_done_ns, rx, rx_before);
            if quiet.is_some_and(|q| io.clock.ns().saturating_sub(q) >= idle_ns) {
                break;
            }
        }
    }
    if phase.progress {
        eprintln!();
    }
    // Stopped with a burst under way: what the port did not take was not sent.
    take_back_unsent(io, &mut sent);
    if let Some(s) = sender.as_deref()
        && !s.replays()
    {
        sent.behind_s = Some(seconds(s.behind_ns));
    }
    if sender.is_some() {
        if tx_done_ns.is_none() {
            sent.seconds = seconds(io.clock.ns() - start_ns);
        }
        sent.pps = per_second(sent.packets, sent.seconds);
    }
    Ok(sent)
}

/// The rate of `n` packets whose first and last are `seconds` apart: the `n - 1` gaps
/// between them over that time (0 for fewer than two packets). `n / seconds` would make
/// two packets a second apart 2 packets per second.
pub fn per_second(n: u64, seconds: f64) -> f64 {
    if n >= 2 && seconds > 0.0 {
        (n - 1) as f64 / seconds
    } else {
        0.0
    }
}

/// How long a sender waits for a port that takes nothing before it gives up on the
/// packets it built (a peer that stopped reading); a port whose link goes down is given up
/// on at once (a peer that went away).
const STALL_NS: u64 = 10_000_000_000;
/// How often a port that takes nothing has its link checked.
const LINK_CHECK_NS: u64 = 100_000_000;

/// Whether a port still takes what is sent: when it last took something, and its link,
/// checked now and then while it takes nothing.
struct PortWatch {
    taken_ns: u64,
    link_checked_ns: u64,
}

impl PortWatch {
    fn new(now_ns: u64) -> PortWatch {
        PortWatch {
            taken_ns: now_ns,
            link_checked_ns: now_ns,
        }
    }

    /// Notes that nothing waits for the port at `now_ns` (a stall counts from when
    /// something does).
    fn nothing_waiting(&mut self, now_ns: u64) {
        self.taken_ns = now_ns;
    }

    /// Notes that the port took `took` packets at `now_ns` with more waiting; whether it is
    /// to be given up on: nothing taken for [`STALL_NS`], or its link down.
    fn gone(&mut self, io: &Io<'_>, took: usize, now_ns: u64) -> bool {
        if took > 0 {
            self.taken_ns = now_ns;
            return false;
        }
        if now_ns - self.taken_ns >= STALL_NS {
            return true;
        }
        if now_ns - self.link_checked_ns >= LINK_CHECK_NS {
            self.link_checked_ns = now_ns;
            return !io.port.link().up;
        }
        false
    }
}

/// When a phase went quiet: the later of the last packet sent (`tx_done_ns`) and the last
/// received in this phase (receiving only: since the first packet arrived; None before).
fn quiet_since(
    sends: bool,
    tx_done_ns: Option<u64>,
    rx: &Receiver,
    rx_before: Option<u64>,
) -> Option<u64> {
    let last_rx = rx.last_ns.filter(|_| rx.last_ns != rx_before);
    match (sends, tx_done_ns, last_rx) {
        (true, Some(t), Some(r)) => Some(t.max(r)),
        (true, t, None) => t,
        (true, None, r) | (false, _, r) => r,
    }
}

/// Waits for a link gone down (with `reconnect`): whether to go on (it came back, or a
/// signal came, which the caller's loop acts on); not when the port stalled with its link
/// up, or was given up on (`outages.gave_up`).
#[cold]
fn rejoined(
    io: &mut Io<'_>,
    watch: &mut PortWatch,
    outages: &mut Outages,
    reconnect: Option<Duration>,
    stop: &AtomicBool,
) -> bool {
    let Some(limit) = reconnect else {
        return false;
    };
    if io.port.link().up {
        return false;
    }
    match io.rejoin(limit, stop) {
        Rejoin::Back(down) => {
            outages.note(down);
            *watch = PortWatch::new(io.clock.ns());
            true
        }
        Rejoin::Stopped => true,
        Rejoin::GaveUp => {
            outages.gave_up = true;
            false
        }
    }
}

/// Why a port that stopped taking packets was given up on (`gave_up`: its link did not come
/// back within `reconnect`).
#[cold]
fn why_gone(io: &Io<'_>, reconnect: Option<Duration>, gave_up: bool) -> String {
    if let (true, Some(limit)) = (gave_up, reconnect) {
        return format!(
            "the port's link went down and did not come back within {} s",
            limit.as_secs_f64()
        );
    }
    if io.port.link().up {
        format!(
            "the port took nothing for {} s (its peer stopped reading)",
            STALL_NS / 1_000_000_000
        )
    } else {
        "the port's link went down (its peer went away)".into()
    }
}

/// Frees the packets built in `io.tx` that the port never took, and takes them (and the
/// probes among them) back from `sent`; whether there were any.
fn take_back_unsent(io: &mut Io<'_>, sent: &mut SendReport) -> bool {
    let any = !io.tx.is_empty();
    while let Some(m) = io.tx.pop() {
        sent.packets -= 1;
        sent.bytes -= m.pkt_len() as u64;
        sent.probes -= u64::from(is_probe(m.data()));
    }
    any
}

/// Whether a frame is one of the generator's probes.
fn is_probe(frame: &[u8]) -> bool {
    Transport::parse(frame).is_some_and(|t| probe_of(&t, frame).is_some())
}

/// The probe a frame with transport `t` carries, if it is one.
fn probe_of(t: &Transport, frame: &[u8]) -> Option<ProbePayload> {
    if t.tcp || t.dport != PROBE_PORT {
        return None;
    }
    ProbePayload::decode(&frame[t.payload_at..])
}

/// Counts what arrives.
#[derive(Default)]
struct Receiver {
    packets: u64,
    bytes: u64,
    other: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    probes: ProbeReceiver,
    flows: FlowLossCounter,
    capture: Option<pcap_file::pcap::PcapWriter<std::io::BufWriter<std::fs::File>>>,
    /// The capture's path.
    capture_path: std::path::PathBuf,
    /// Why writing the capture failed mid-run, if it did (the run then fails, once its
    /// report is out).
    capture_failed: Option<String>,
}

impl Receiver {
    /// A receiver that also writes what arrives to `capture`.
    fn new(capture: Option<&std::path::Path>) -> anyhow::Result<Receiver> {
        let capture_path = capture.map(Into::into).unwrap_or_default();
        let capture = match capture {
            None => None,
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("creating capture {}", p.display()))?;
                // Nanosecond stamps, as `--write-pcap` writes them.
                let header = pcap_file::pcap::PcapHeader {
                    ts_resolution: pcap_file::TsResolution::NanoSecond,
                    ..pcap_file::pcap::PcapHeader::default()
                };
                Some(
                    pcap_file::pcap::PcapWriter::with_header(std::io::BufWriter::new(f), header)
                        .map_err(|e| dataplane::capture::pcap_error(p, e))?,
                )
            }
        };
        Ok(Receiver {
            capture,
            capture_path,
            ..Receiver::default()
        })
    }

    /// Writes out what the capture holds; an error if any write failed (a full disk), so
    /// that a capture cut short is a failed run, not a success.
    fn finish_capture(&mut self) -> anyhow::Result<()> {
        if let Some(w) = self.capture.take() {
            dataplane::capture::flush(&self.capture_path, w.into_writer())?;
        }
        match &self.capture_failed {
            Some(why) => Err(anyhow::anyhow!(
                "the capture holds only what arrived before: {why}"
            )),
            None => Ok(()),
        }
    }

    /// Receives one burst, if any, and counts it.
    #[inline]
    fn poll(&mut self, io: &mut Io<'_>) {
        let n = io.rxq.rx(&mut io.rx);
        if n == 0 {
            return;
        }
        let now = io.clock.ns();
        let counted_before = self.packets;
        // The wall clock, read once per burst and only for a burst holding a probe (or
        // when capturing: the capture's stamps are Unix time).
        let mut wall = self.capture.as_ref().map(|_| wall_ns());
        for i in 0..n {
            let m = io.rx.get(i).expect("received");
            let data = m.data();
            if let (Some(w), Some(stamp)) = (&mut self.capture, wall) {
                let t = std::time::Duration::from_nanos(stamp);
                // A frame in several segments (a jumbo frame on a scattering port) is kept
                // as its first segment, with its whole length on the wire: readers see it
                // was cut, not a shorter frame.
                let written = w.write_packet(&pcap_file::pcap::PcapPacket::new(
                    t,
                    m.pkt_len().max(data.len()) as u32,
                    data,
                ));
                if let Err(e) = written {
                    // Said once; receiving goes on without the capture, and the run fails.
                    let why = dataplane::capture::pcap_error(&self.capture_path, e).to_string();
                    eprintln!(
                        "pint-gen: {why}: the capture stops here; receiving goes on (the run will fail)"
                    );
                    self.capture = None;
                    self.capture_failed = Some(why);
                }
            }
            let Some(t) = Transport::parse(data) else {
                // ARP, LLDP, IPv6...: not traffic a generator sends, kept out of the count
                // (a search trial would take it for packets that came back).
                self.other += 1;
                continue;
            };
            self.packets += 1;
            self.bytes += m.pkt_len() as u64;
            if let Some(p) = probe_of(&t, data) {
                self.probes
                    .record(t.src, &p, *wall.get_or_insert_with(wall_ns));
            } else if let Some(tag) = FlowTag::decode(&data[t.payload_at..]) {
                self.flows.record(t.src, tag);
            }
        }
        io.rx.clear();
        // Other frames (LLDP now and then) neither stretch the time received over nor
        // keep a receiver from going idle.
        if self.packets != counted_before {
            self.first_ns.get_or_insert(now);
            self.last_ns = Some(now);
        }
    }

    fn report(&self) -> ReceiveReport {
        let seconds = match (self.first_ns, self.last_ns) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e9,
            _ => 0.0,
        };
        let probes = self.probes.report();
        let flows = self.flows.report();
        ReceiveReport {
            packets: self.packets,
            bytes: self.bytes,
            other: self.other,
            seconds,
            pps: per_second(self.packets, seconds),
            probes: (probes.received + probes.duplicates + probes.foreign > 0).then_some(probes),
            flows: (flows.tagged + flows.foreign > 0).then_some(flows),
            interrupted: false,
        }
    }
}

/// Where sent packets come from.
enum Source {
    /// As fast as possible (or at a phase's pace): the traffic's first packets, built once.
    Replay(Cycle),
    /// Paced by the traffic's own clock: every packet built as it is due.
    Live {
        traffic: Box<Traffic>,
        pending: Option<GenPacket>,
        /// The traffic's clock passed the phase's duration.
        ended: bool,
    },
}

/// Builds the packets to send.
struct Sender {
    source: Source,
    tuples: Vec<FlowTuple>,
    macs: (MacAddr, MacAddr),
    ttl: u8,
    ident: u16,
    /// Replay: tagged packets sent so far per pool flow.
    tag_seq: Vec<u32>,
    probes: ProbeClock,
    /// Live: how far behind its time (ns) the latest packet went.
    behind_ns: u64,
}

impl Sender {
    /// `always_replay`: replay whatever the traffic's rate (the search paces it itself).
    fn new(traffic: Traffic, opts: &PortRun, always_replay: bool) -> anyhow::Result<Sender> {
        let tuples = traffic.tuples().to_vec();
        let spec = traffic.spec();
        let live = !always_replay && (spec.flow_sizes.is_some() || spec.rate != Rate::Max);
        let probes = if live {
            ProbeClock::new(0, 1.0)
        } else {
            ProbeClock::new(spec.probe_streams, spec.probe_hz)
        };
        let flows = spec.flows as usize;
        let source = if live {
            Source::Live {
                traffic: Box::new(traffic),
                pending: None,
                ended: false,
            }
        } else {
            Source::Replay(Cycle::build(&traffic, &tuples, opts)?)
        };
        Ok(Sender {
            source,
            tuples,
            macs: opts.macs,
            ttl: opts.ttl,
            ident: 0,
            tag_seq: vec![0; flows],
            probes,
            behind_ns: 0,
        })
    }

    /// Mean frame bytes of what is replayed (or of the traffic's packet sizes).
    fn mean_frame_bytes(&self) -> f64 {
        match &self.source {
            Source::Replay(c) => {
                c.frames.iter().map(|f| f64::from(f.len)).sum::<f64>() / c.frames.len() as f64
            }
            Source::Live { traffic, .. } => traffic.spec().packet_sizes.mean(),
        }
    }

    /// Sends replayed traffic.
    fn replays(&self) -> bool {
        matches!(self.source, Source::Replay(_))
    }

    /// Sending is over by the traffic's own clock.
    fn done(&self) -> bool {
        matches!(self.source, Source::Live { ended: true, .. })
    }

    /// Builds up to `budget` packets into the burst's first slots; returns how many.
    #[inline]
    fn fill(
        &mut self,
        tx: &mut Burst,
        budget: usize,
        now_ns: u64,
        elapsed_ns: u64,
        phase: &Phase,
        sent: &mut SendReport,
    ) -> anyhow::Result<usize> {
        let mut slot = 0;
        // At most one probe per burst (probe rates are low), on the wall clock.
        if budget > 0
            && let Some((stream, seq)) = self.probes.due(now_ns)
        {
            let payload = ProbePayload {
                stream,
                seq,
                sent_ns: wall_ns(),
            }
            .encode();
            let len = 60.max(PROBE_FRAME);
            let m = tx.get_mut(0).expect("allocated");
            m.set_len(len);
            let fields = PacketFields {
                dst_mac: self.macs.0,
                src_mac: self.macs.1,
                frame_len: len,
                ttl: self.ttl,
                // Each probe another packet to the switches' packet ID.
                ident: seq as u16,
                tcp_seq: 0,
                payload: &payload,
            };
            let tuple = self.tuples.len() - self.probes.streams() + stream as usize;
            emit_frame(m.data_mut(), &self.tuples[tuple], &fields).context("probe frame")?;
            sent.probes += 1;
            sent.bytes += len as u64;
            slot = 1;
        }
        match &mut self.source {
            Source::Replay(c) => {
                for i in slot..budget {
                    let (chunks, meta) = c.next_frame();
                    let len = usize::from(meta.len);
                    let m = tx.get_mut(i).expect("allocated");
                    let room = m.room_mut();
                    if room.len() < chunks.len() * CHUNK {
                        anyhow::bail!("a {len}-byte frame does not fit an mbuf");
                    }
                    // Whole 64-byte chunks: fixed-size copies the compiler inlines.
                    for (to, from) in room.chunks_exact_mut(CHUNK).zip(chunks) {
                        to.copy_from_slice(from);
                    }
                    if let Some(patch) = &meta.tag {
                        let seq = &mut self.tag_seq[meta.flow as usize];
                        patch.apply(room, *seq);
                        *seq = seq.wrapping_add(1);
                    }
                    m.set_len(len);
                    sent.bytes += len as u64;
                }
                Ok(budget.max(slot))
            }
            Source::Live {
                traffic,
                pending,
                ended,
            } => {
                let mut built = slot;
                while built < budget {
                    let p = match pending.take() {
                        Some(p) => p,
                        None => traffic.next_packet(),
                    };
                    if phase.duration_ns.is_some_and(|d| p.time_ns >= d) {
                        *ended = true;
                        break;
                    }
                    if p.time_ns > elapsed_ns {
                        *pending = Some(p);
                        break;
                    }
                    self.behind_ns = elapsed_ns - p.time_ns;
                    let payload = p.payload(wall_ns());
                    let m = tx.get_mut(built).expect("allocated");
                    let len = usize::from(p.frame_len);
                    if !m.set_len(len) {
                        anyhow::bail!("a {len}-byte frame does not fit an mbuf");
                    }
                    let fields = PacketFields {
                        dst_mac: self.macs.0,
                        src_mac: self.macs.1,
                        frame_len: len,
                        ttl: self.ttl,
                        ident: self.ident,
                        tcp_seq: p.tcp_seq,
                        payload: payload.as_slice(),
                    };
                    emit_frame(m.data_mut(), &self.tuples[p.tuple as usize], &fields)
                        .context("frame does not fit its headers")?;
                    self.ident = self.ident.wrapping_add(1);
                    sent.probes += u64::from(p.probe.is_some());
                    sent.bytes += len as u64;
                    built += 1;
                }
                Ok(built)
            }
        }
    }
}

/// Nanoseconds since it was made, from the time-stamp counter (a few cycles to read, once
/// per burst).
struct TscClock {
    /// The counter at nanosecond 0 (moved on over a link's outage: see [`Io::rejoin`]).
    t0: u64,
    ns_per_cycle: f64,
}

impl TscClock {
    fn new(hz: u64) -> TscClock {
        TscClock {
            t0: dataplane::dpdk::tsc(),
            ns_per_cycle: 1e9 / hz.max(1) as f64,
        }
    }

    #[inline(always)]
    fn ns(&self) -> u64 {
        (dataplane::dpdk::tsc().wrapping_sub(self.t0) as f64 * self.ns_per_cycle) as u64
    }
}

/// Nanoseconds as seconds.
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Most packets, and most bytes, in a replay cycle.
const CYCLE_PACKETS: usize = 1 << 16;
const CYCLE_BYTES: usize = 16 << 20;

/// Bytes per copy chunk of a replayed frame.
const CHUNK: usize = 64;

/// Where a replayed frame is and what is patched in it.
#[derive(Debug, Clone, Copy)]
struct FrameMeta {
    /// First chunk in the arena.
    chunk: u32,
    /// Frame bytes.
    len: u16,
    /// Pool flow.
    flow: u32,
    /// Its flow tag's sequence number, set as it is sent.
    tag: Option<TagPatch>,
}

/// The first packets of a traffic (probes left out), built once, replayed in a loop with
/// each flow tag's sequence number set as it is sent. Frames start on chunk boundaries and
/// are padded to whole chunks, so that each is copied into its mbuf in fixed-size chunks.
struct Cycle {
    arena: Vec<[u8; CHUNK]>,
    frames: Vec<FrameMeta>,
    next: usize,
}

impl Cycle {
    fn build(traffic: &Traffic, tuples: &[FlowTuple], opts: &PortRun) -> anyhow::Result<Cycle> {
        let mut spec = traffic.spec().clone();
        spec.probe_streams = 0;
        let mut data = Traffic::new(spec).map_err(anyhow::Error::msg)?;
        let mut arena: Vec<[u8; CHUNK]> = Vec::new();
        let mut frames = Vec::new();
        let limit = opts
            .count
            .map_or(CYCLE_PACKETS, |c| (c as usize).min(CYCLE_PACKETS));
        let mut buf = [0u8; 2048];
        while frames.len() < limit.max(1) && arena.len() * CHUNK < CYCLE_BYTES {
            let mut p = data.next_packet();
            // Tags are built with sequence number zero and set as they are sent.
            p.flow_seq = p.flow_seq.map(|_| 0);
            let payload = p.payload(0);
            let fields = PacketFields {
                dst_mac: opts.macs.0,
                src_mac: opts.macs.1,
                frame_len: usize::from(p.frame_len),
                ttl: opts.ttl,
                // A tagged frame's identification is set as it is sent (`TagPatch`).
                ident: if p.flow_seq.is_some() {
                    0
                } else {
                    frames.len() as u16
                },
                tcp_seq: p.tcp_seq,
                payload: payload.as_slice(),
            };
            let n = emit_frame(&mut buf, &tuples[p.tuple as usize], &fields)
                .context("frame does not fit its headers")?;
            let tag = match p.flow_seq {
                Some(_) => {
                    let t =
                        Transport::parse(&buf[..n]).context("a generated frame does not parse")?;
                    Some(TagPatch::new(&buf[..n], t.payload_at).context("a generated tag")?)
                }
                None => None,
            };
            frames.push(FrameMeta {
                chunk: arena.len() as u32,
                len: n as u16,
                flow: p.tuple,
                tag,
            });
            for chunk in buf[..n.div_ceil(CHUNK) * CHUNK].chunks_exact(CHUNK) {
                arena.push(chunk.try_into().expect("whole chunk"));
            }
        }
        // A cycle cut short of the packets to send repeats them: flows whose first packet
        // comes later are never sent.
        let repeats = frames.len() < opts.count.map_or(usize::MAX, |c| c as usize);
        let flows: std::collections::HashSet<u32> = frames.iter().map(|f| f.flow).collect();
        if repeats && flows.len() < traffic.spec().flows as usize {
            eprintln!(
                "pint-gen: warning: at --rate max the first {} packets are replayed in a loop, \
                 and they come from {} of the {} flows (--flows): the others are not sent \
                 (smaller frames, fewer flows, or a paced --rate send them all)",
                frames.len(),
                flows.len(),
                traffic.spec().flows
            );
        }
        Ok(Cycle {
            arena,
            frames,
            next: 0,
        })
    }

    /// The next frame: its chunks and where it is.
    #[inline(always)]
    fn next_frame(&mut self) -> (&[[u8; CHUNK]], FrameMeta) {
        let meta = self.frames[self.next];
        self.next += 1;
        if self.next == self.frames.len() {
            self.next = 0;
        }
        let at = meta.chunk as usize;
        (
            &self.arena[at..at + usize::from(meta.len).div_ceil(CHUNK)],
            meta,
        )
    }
}

/// Probe streams on the wall clock: each stream every `1 / hz` seconds, streams spread
/// over one period.
struct ProbeClock {
    /// Each stream's next probe, ns after `origin`.
    next_ns: Vec<u64>,
    seq: Vec<u64>,
    period_ns: u64,
    /// The clock's time at the first question: the streams start there (the clock runs
    /// from before the traffic was built and the link came up).
    origin: Option<u64>,
}

impl ProbeClock {
    fn new(streams: u32, hz: f64) -> ProbeClock {
        let period_ns = if streams > 0 {
            (1e9 / hz) as u64
        } else {
            u64::MAX
        };
        ProbeClock {
            next_ns: (0..u64::from(streams))
                .map(|s| period_ns / u64::from(streams.max(1)) * s)
                .collect(),
            seq: vec![0; streams as usize],
            period_ns: period_ns.max(1),
            origin: None,
        }
    }

    /// Streams.
    fn streams(&self) -> usize {
        self.seq.len()
    }

    /// The probe due at `now_ns`, if any: (stream, sequence number).
    #[inline(always)]
    fn due(&mut self, now_ns: u64) -> Option<(u32, u64)> {
        let origin = *self.origin.get_or_insert(now_ns);
        let now = now_ns.saturating_sub(origin);
        let (s, &t) = self.next_ns.iter().enumerate().min_by_key(|x| *x.1)?;
        if t > now {
            return None;
        }
        // A probe a period or more late (sending stalled, or paused between a search's
        // trials) goes now, and the periods missed are skipped: a burst of the probes
        // missed would not be the stream's rate, and each stream keeps its place in the
        // period (the streams stay spread over it).
        self.next_ns[s] = t + ((now - t) / self.period_ns + 1) * self.period_ns;
        let seq = self.seq[s];
        self.seq[s] += 1;
        Some((s as u32, seq))
    }
}

#[cfg(test)]
mod tests {
    use super::ProbeClock;

    /// Probes due between `from` and `to` ns on the clock, asked every `step` ns: (stream,
    /// sequence number, time).
    fn probes(c: &mut ProbeClock, from: u64, to: u64, step: u64) -> Vec<(u32, u64, u64)> {
        (from..to)
            .step_by(step as usize)
            .filter_map(|t| c.due(t).map(|(s, q)| (s, q, t)))
            .collect()
    }

    /// Whether every probe of `p` after the first `skip` comes about half a period (0.5 ms)
    /// after the one before: the two streams spread over the period.
    fn spread(p: &[(u32, u64, u64)], skip: usize) -> bool {
        p[skip..]
            .windows(2)
            .all(|w| (450_000..=550_000).contains(&(w[1].2 - w[0].2)) && w[0].0 != w[1].0)
    }

    /// The streams start when first asked, however late the clock is by then, and a stall
    /// gives one late probe per stream, not a burst of the ones missed.
    #[test]
    fn probe_streams_keep_their_rate_from_their_start() {
        // Two streams at 1000 Hz: a probe every 0.5 ms between them.
        let mut c = ProbeClock::new(2, 1000.0);
        let start = 50_000_000; // the clock ran 50 ms before the first packet
        let first = probes(&mut c, start, start + 10_000_000, 10_000);
        assert_eq!(first.len(), 20, "{first:?}");
        assert_eq!(
            first[..3].iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(),
            [(0, 0), (1, 0), (0, 1)]
        );
        assert!(spread(&first, 0), "{first:?}");
        // 100.25 ms without a question: the next asks give a probe of each stream, then
        // the streams again half a period apart.
        let after = start + 110_250_000;
        let again = probes(&mut c, after, after + 10_000_000, 10_000);
        assert!((20..=22).contains(&again.len()), "{}", again.len());
        assert_eq!((again[0].0, again[0].1), (0, 10), "sequence numbers go on");
        assert!(spread(&again, 2), "{again:?}");
    }
}
