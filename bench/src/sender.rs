//! `pint-gen` on a DPDK port: sends a [`Traffic`] (paced by its clock, or as fast as the
//! port takes it) and/or receives, counting packets, bytes and probes (loss, reordering,
//! one-way latency). One core, one rx and one tx queue; bursts of 32 mbufs allocated in bulk
//! and built in place.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use dataplane::dpdk::{Burst, Eal, Mempool, Port, PortSetup};
use serde::Serialize;
use telemetry::wire::MacAddr;

use crate::generator::frame::{FlowTuple, PacketFields};
use crate::generator::probe::{ProbePayload, ProbeReceiver, ProbeReport};
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
}

/// Receive-side totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiveReport {
    /// Packets received.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Seconds from the first packet to the last.
    pub seconds: f64,
    /// Packets per second over that time.
    pub pps: f64,
    /// Probe loss, reordering and latency (latency meaningful when sender and receiver share
    /// a clock: the same machine).
    pub probes: Option<ProbeReport>,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PortReportOut {
    /// Sending.
    pub sent: Option<SendReport>,
    /// Receiving.
    pub received: Option<ReceiveReport>,
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
    mut traffic: Traffic,
    opts: &PortRun,
    stop: &AtomicBool,
) -> anyhow::Result<PortReportOut> {
    let eal = Eal::init(eal_args)?;
    let pool = Mempool::new(&eal, "pint_gen", 8191, 256, 2048, eal.socket_id() as i32)
        .context("creating the mbuf pool")?;
    let name = dataplane::dpdk::port::device_name(devargs);
    let mut port = Port::probe(&eal, &name, devargs).with_context(|| format!("port {devargs}"))?;
    port.configure(
        &PortSetup {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            mtu: 1500,
            mac: opts.macs.1.0,
            promiscuous: true,
        },
        &pool,
    )
    .with_context(|| format!("configuring {devargs}"))?;
    // A virtual link (memif) comes up when the peer connects. A memif client whose server
    // is not there or not ready yet is refused (start fails, or the link stays down) and
    // does not try again by itself: restart the port until it connects.
    let t0 = Instant::now();
    let mut started = port.start();
    let mut tried = Instant::now();
    loop {
        let connected = started.is_ok() && port.link().up;
        if connected || stop.load(Ordering::Relaxed) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            started?;
            anyhow::bail!("link of {devargs} still down after 30 s (is the peer running?)");
        }
        if tried.elapsed() > Duration::from_secs(1) {
            port.stop();
            started = port.start();
            tried = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rxq = port.rx_queue(0)?;
    let mut txq = port.tx_queue(0)?;
    let tuples: Vec<FlowTuple> = traffic.tuples().to_vec();
    let paced = traffic.spec().flow_sizes.is_some() || traffic.spec().rate != Rate::Max;
    // As fast as possible: the traffic's first packets are built once and replayed in a
    // cycle (a memcpy per packet); probes are built live on the wall clock.
    let mut cycle = if paced || !opts.send {
        None
    } else {
        Some(Cycle::build(&traffic, &tuples, opts)?)
    };
    let mut out = PortReportOut::default();
    let mut sent = SendReport::default();
    let mut recv = ReceiveReport::default();
    let mut probes = ProbeReceiver::default();
    let mut tx: Burst = Burst::new();
    let mut rx: Burst = Burst::new();
    let mut pending: Option<GenPacket> = None;
    let mut sending = opts.send;
    let start = Instant::now();
    let limit_ns = opts.duration.map(|d| (d * 1e9) as u64);
    let (mut first_rx, mut last_rx) = (None::<Instant>, None::<Instant>);
    let mut last_progress = Instant::now();
    let mut tx_done_at: Option<Instant> = None;
    let mut ident: u16 = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if sending {
            if tx.is_empty() {
                let now_ns = start.elapsed().as_nanos() as u64;
                let room = tx.alloc_fill(&pool);
                let mut built = 0;
                if let Some(c) = &mut cycle {
                    // Replay: how many this burst may still send, then copies.
                    let mut n = room;
                    if let Some(cnt) = opts.count {
                        n = n.min(cnt.saturating_sub(sent.packets) as usize);
                    }
                    if limit_ns.is_some_and(|l| now_ns >= l) {
                        n = 0;
                    }
                    if n < room {
                        sending = false;
                    }
                    let mut i = 0;
                    // At most one probe per burst (probe rates are low).
                    if n > 0
                        && let Some((stream, seq)) = c.probes.due(now_ns)
                    {
                        let payload = ProbePayload {
                            stream,
                            seq,
                            sent_ns: wall_ns(),
                        }
                        .encode();
                        let len = 60.max(42 + payload.len());
                        let m = tx.get_mut(0).expect("allocated");
                        m.set_len(len);
                        let fields = PacketFields {
                            dst_mac: opts.macs.0,
                            src_mac: opts.macs.1,
                            frame_len: len,
                            ttl: opts.ttl,
                            ident: 0,
                            tcp_seq: 0,
                            payload: &payload,
                        };
                        emit_frame(m.data_mut(), &tuples[c.probe_tuple(stream)], &fields)
                            .context("probe frame")?;
                        sent.probes += 1;
                        sent.bytes += len as u64;
                        i = 1;
                    }
                    for slot in i..n {
                        let frame = c.next_frame();
                        let m = tx.get_mut(slot).expect("allocated");
                        if !m.set_len(frame.len()) {
                            anyhow::bail!("a {}-byte frame does not fit an mbuf", frame.len());
                        }
                        m.data_mut().copy_from_slice(frame);
                        sent.bytes += frame.len() as u64;
                    }
                    built = n;
                } else {
                    for i in 0..room {
                        let p = match pending.take() {
                            Some(p) => p,
                            None => traffic.next_packet(),
                        };
                        let over = opts.count.is_some_and(|c| sent.packets + built as u64 >= c)
                            || limit_ns
                                .is_some_and(|l| if paced { p.time_ns >= l } else { now_ns >= l });
                        if over {
                            sending = false;
                            break;
                        }
                        if paced && p.time_ns > now_ns {
                            pending = Some(p);
                            break;
                        }
                        let probe_bytes;
                        let payload: &[u8] = match p.probe {
                            Some((stream, seq)) => {
                                probe_bytes = ProbePayload {
                                    stream,
                                    seq,
                                    sent_ns: wall_ns(),
                                }
                                .encode();
                                &probe_bytes
                            }
                            None => &[],
                        };
                        let m = tx.get_mut(i).expect("allocated");
                        let len = usize::from(p.frame_len);
                        if !m.set_len(len) {
                            anyhow::bail!("a {len}-byte frame does not fit an mbuf");
                        }
                        let fields = PacketFields {
                            dst_mac: opts.macs.0,
                            src_mac: opts.macs.1,
                            frame_len: len,
                            ttl: opts.ttl,
                            ident,
                            tcp_seq: p.tcp_seq,
                            payload,
                        };
                        emit_frame(m.data_mut(), &tuples[p.tuple as usize], &fields)
                            .context("frame does not fit its headers")?;
                        ident = ident.wrapping_add(1);
                        sent.probes += u64::from(p.probe.is_some());
                        sent.bytes += len as u64;
                        built += 1;
                    }
                }
                // Unused mbufs go back to the pool.
                while tx.len() > built {
                    drop(tx.pop());
                }
                sent.packets += built as u64;
            }
            txq.tx(&mut tx);
            if !sending {
                // Flush what was built.
                while !tx.is_empty() && !stop.load(Ordering::Relaxed) {
                    txq.tx(&mut tx);
                }
                sent.seconds = start.elapsed().as_secs_f64();
                tx_done_at = Some(Instant::now());
            }
        }
        if opts.receive {
            let n = rxq.rx(&mut rx);
            if n > 0 {
                let now = Instant::now();
                first_rx.get_or_insert(now);
                last_rx = Some(now);
                let now_ns = wall_ns();
                for i in 0..n {
                    let m = rx.get(i).expect("received");
                    let data = m.data();
                    recv.packets += 1;
                    recv.bytes += m.pkt_len() as u64;
                    if let Some(p) = probe_of(data) {
                        probes.record(&p, now_ns);
                    }
                }
                rx.clear();
            }
        }
        if opts.progress && last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            eprint!(
                "\rpint-gen: {:.1} s  sent {} ({:.2} Mpps)  received {}   ",
                start.elapsed().as_secs_f64(),
                sent.packets,
                sent.packets as f64 / start.elapsed().as_secs_f64() / 1e6,
                recv.packets
            );
        }
        let quiet_since = match (opts.send, tx_done_at, last_rx) {
            (true, None, _) => None,
            (true, Some(t), Some(r)) => Some(t.max(r)),
            (true, Some(t), None) => Some(t),
            (false, _, r) => r,
        };
        if !sending
            && (!opts.receive || quiet_since.is_some_and(|q| q.elapsed() >= opts.until_idle))
        {
            break;
        }
    }
    if opts.progress {
        eprintln!();
    }
    // A virtual link's rings may live in this process's memory (a memif client's do): keep
    // the port open a moment so that the peer drains what was sent before it goes.
    if opts.send && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(SEND_LINGER);
    }
    if opts.send {
        if tx_done_at.is_none() {
            sent.seconds = start.elapsed().as_secs_f64();
        }
        sent.pps = sent.packets as f64 / sent.seconds.max(1e-9);
        out.sent = Some(sent);
    }
    if opts.receive {
        if let (Some(a), Some(b)) = (first_rx, last_rx) {
            recv.seconds = (b - a).as_secs_f64();
            recv.pps = recv.packets as f64 / recv.seconds.max(1e-9);
        }
        let rep = probes.report();
        recv.probes = (rep.received + rep.duplicates > 0).then_some(rep);
        out.received = Some(recv);
    }
    // Held mbufs go back to the pool before the port, the pool and EAL go.
    drop(tx);
    drop(rx);
    drop(port);
    drop(pool);
    drop(eal);
    Ok(out)
}

/// The probe fields of an untagged IPv4/UDP frame to the probe port, if it is one.
fn probe_of(f: &[u8]) -> Option<ProbePayload> {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    let dport = u16::from_be_bytes([*f.get(udp + 2)?, *f.get(udp + 3)?]);
    if dport != PROBE_PORT {
        return None;
    }
    ProbePayload::decode(f.get(udp + 8..)?)
}

/// How long a sender keeps its port open after the last packet.
const SEND_LINGER: Duration = Duration::from_secs(1);

/// Most packets, and most bytes, in a replay cycle.
const CYCLE_PACKETS: usize = 1 << 16;
const CYCLE_BYTES: usize = 16 << 20;

/// The first packets of a traffic (probes left out), built once, replayed in a loop.
struct Cycle {
    arena: Vec<u8>,
    /// (offset, length) per frame.
    frames: Vec<(u32, u16)>,
    next: usize,
    probes: ProbeClock,
    pool_flows: u32,
}

impl Cycle {
    fn build(traffic: &Traffic, tuples: &[FlowTuple], opts: &PortRun) -> anyhow::Result<Cycle> {
        let mut spec = traffic.spec().clone();
        let (streams, hz) = (spec.probe_streams, spec.probe_hz);
        spec.probe_streams = 0;
        let mut data = Traffic::new(spec).map_err(anyhow::Error::msg)?;
        let mut arena = Vec::new();
        let mut frames = Vec::new();
        let limit = opts
            .count
            .map_or(CYCLE_PACKETS, |c| (c as usize).min(CYCLE_PACKETS));
        let mut buf = [0u8; 2048];
        while frames.len() < limit.max(1) && arena.len() < CYCLE_BYTES {
            let p = data.next_packet();
            let fields = PacketFields {
                dst_mac: opts.macs.0,
                src_mac: opts.macs.1,
                frame_len: usize::from(p.frame_len),
                ttl: opts.ttl,
                ident: frames.len() as u16,
                tcp_seq: p.tcp_seq,
                payload: &[],
            };
            let n = emit_frame(&mut buf, &tuples[p.tuple as usize], &fields)
                .context("frame does not fit its headers")?;
            frames.push((arena.len() as u32, n as u16));
            arena.extend_from_slice(&buf[..n]);
        }
        Ok(Cycle {
            arena,
            frames,
            next: 0,
            probes: ProbeClock::new(streams, hz),
            pool_flows: traffic.spec().flows,
        })
    }

    #[inline(always)]
    fn next_frame(&mut self) -> &[u8] {
        let (at, len) = self.frames[self.next];
        self.next += 1;
        if self.next == self.frames.len() {
            self.next = 0;
        }
        &self.arena[at as usize..at as usize + usize::from(len)]
    }

    fn probe_tuple(&self, stream: u32) -> usize {
        (self.pool_flows + stream) as usize
    }
}

/// Probe streams on the wall clock: each stream every `1 / hz` seconds, streams spread
/// over one period.
struct ProbeClock {
    next_ns: Vec<u64>,
    seq: Vec<u64>,
    period_ns: u64,
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
        }
    }

    /// The probe due at `now_ns`, if any: (stream, sequence number).
    #[inline(always)]
    fn due(&mut self, now_ns: u64) -> Option<(u32, u64)> {
        let (s, t) = self.next_ns.iter().enumerate().min_by_key(|x| *x.1)?;
        if *t > now_ns {
            return None;
        }
        self.next_ns[s] += self.period_ns;
        let seq = self.seq[s];
        self.seq[s] += 1;
        Some((s as u32, seq))
    }
}
