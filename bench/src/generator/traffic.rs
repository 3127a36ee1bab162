//! The traffic model: a pool of flows, chosen by popularity, sending on one link.
//!
//! Two modes. With flow sizes and a load, flows arrive as a Poisson process whose rate makes
//! the offered payload bytes the given share of the link; each arriving flow takes a 5-tuple
//! from the pool by popularity and sends its bytes in packets, the active flows taking turns
//! on the link (serialised at the link rate). Without flow sizes every packet picks its flow
//! by popularity and packets follow each other at the requested rate. Probe streams, if
//! asked for, send one packet per stream at a fixed rate in either mode.
//!
//! Times are nominal (the model's clock, in nanoseconds from 0): a capture gets them as
//! timestamps; a DPDK sender paces by them, or ignores them to send as fast as it can.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use telemetry::sim_rng::SimRng;

use super::dist::{FlowPicker, FlowSizes, PacketSizes, Popularity};
use super::frame::{FlowTuple, UDP_LEN};
use super::probe::{MAX_PROBE_STREAMS, PROBE_LEN, ProbePayload};
use super::tag::{FlowTag, MAX_TRACKED_FLOWS, TAG_LEN};

/// Bytes a frame occupies on the wire beyond its length without FCS: FCS 4, preamble and
/// start delimiter 8, inter-frame gap 12.
pub const WIRE_OVERHEAD: u64 = 24;

/// A probe's frame length, bytes.
const PROBE_FRAME_LEN: u64 = {
    let l = 34 + UDP_LEN as u64 + PROBE_LEN as u64;
    if l < 60 { 60 } else { l }
};

/// Source ports flows take (from 1024), per source address.
const SOURCE_PORTS: u32 = 60_000;

/// The longest mean time between flow arrivals a spec may ask for, s.
const MAX_ARRIVAL_MEAN_S: f64 = 86_400.0;

/// Sending rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// As fast as possible (nominal times at the link rate).
    Max,
    /// Packets per second.
    Pps(f64),
    /// Bits per second on the wire (frames plus [`WIRE_OVERHEAD`]).
    Bps(f64),
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct TrafficSpec {
    /// Distinct flows (5-tuples) in the pool.
    pub flows: u32,
    /// Which flow a new flow (or packet) takes.
    pub popularity: Popularity,
    /// Flow sizes in payload bytes; None: packets pick flows directly.
    pub flow_sizes: Option<FlowSizes>,
    /// Offered load as a share of the link (with flow sizes), in the flows' payload bytes
    /// (their headers and the wire's overhead come on top: refused when they do not fit).
    pub load: f64,
    /// Link rate in bits per second.
    pub link_bps: f64,
    /// Frame sizes.
    pub packet_sizes: PacketSizes,
    /// Rate (without flow sizes).
    pub rate: Rate,
    /// Share of flows that are TCP (the rest UDP).
    pub tcp_share: f64,
    /// IPv4 TTL of every packet.
    pub ttl: u8,
    /// Probe streams (each its own UDP flow).
    pub probe_streams: u32,
    /// Probes per second per stream.
    pub probe_hz: f64,
    /// Seed: the same spec and seed give the same packets.
    pub seed: u64,
    /// Source addresses of flows and probes (address, prefix length).
    pub src_net: (u32, u8),
    /// Destination networks: flow (and probe stream) `i` goes to network `i mod n`; empty:
    /// flows to 10.1.0.0/16 (from `src_net`, by default 10.0.0.0/16) and probes from
    /// 10.2.0.0/16 to 10.3.0.0/16.
    pub dst_nets: Vec<(u32, u8)>,
}

impl Default for TrafficSpec {
    fn default() -> Self {
        TrafficSpec {
            flows: 1024,
            popularity: Popularity::Uniform,
            flow_sizes: None,
            load: 0.5,
            link_bps: 10e9,
            packet_sizes: PacketSizes::Fixed(60),
            rate: Rate::Max,
            tcp_share: 0.0,
            ttl: 64,
            probe_streams: 0,
            probe_hz: 10.0,
            seed: 1,
            src_net: (0x0a00_0000, 16),
            dst_nets: Vec::new(),
        }
    }
}

impl TrafficSpec {
    /// Checks the spec; the error names the setting (as pint-gen's flag) and why.
    pub fn validate(&self) -> Result<(), String> {
        if self.flows == 0 || self.flows > MAX_TRACKED_FLOWS {
            return Err(format!(
                "--flows {}: must be from 1 to {MAX_TRACKED_FLOWS} (what a receiver tracks per flow)",
                self.flows
            ));
        }
        if self.probe_streams > MAX_PROBE_STREAMS {
            return Err(format!(
                "--probes {}: at most {MAX_PROBE_STREAMS} streams",
                self.probe_streams
            ));
        }
        if !(self.link_bps.is_finite() && self.link_bps > 0.0) {
            return Err(format!(
                "--link-rate {}: must be a finite number of bits per second above 0",
                self.link_bps
            ));
        }
        if self.flow_sizes.is_some() && !(self.load > 0.0 && self.load <= 1.0) {
            return Err(format!(
                "--load {}: must be above 0 and at most 1",
                self.load
            ));
        }
        if let Some(sizes) = self.flow_sizes {
            // The load counts the flows' payload; their packets' headers and the wire's
            // overhead come on top, and must still fit the link.
            let per_payload = self.wire_per_payload(sizes);
            let on_wire = self.load * per_payload;
            if on_wire > 1.0 {
                return Err(format!(
                    "--load {}: the flows' packets of this size take {per_payload:.2} bytes on \
                     the wire per payload byte (headers, the short last packet of each flow), \
                     so the link would have to carry {on_wire:.2} times its rate: at most \
                     load {:.3}, or larger packets",
                    self.load,
                    1.0 / per_payload
                ));
            }
        }
        match self.rate {
            Rate::Pps(r) | Rate::Bps(r) if !(r.is_finite() && r > 0.0) => {
                return Err(format!("--rate {r}: must be a finite number above 0"));
            }
            _ => {}
        }
        if let Some(sizes) = self.flow_sizes {
            // Flows start this far apart on average: beyond a day the run would wait for
            // ever (an infinite mean made the generator queue flows without end).
            let mean_s = 8.0 * sizes.mean() / (self.load * self.link_bps);
            if !(mean_s.is_finite() && mean_s <= MAX_ARRIVAL_MEAN_S) {
                return Err(format!(
                    "--load {} of a {} bit/s link: flows would start {mean_s:.3e} s apart on \
                     average, more than a day: a higher load or link rate",
                    self.load, self.link_bps
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.tcp_share) {
            return Err(format!(
                "--tcp-share {}: must be from 0 to 1",
                self.tcp_share
            ));
        }
        // A period of more than 11.6 days (1e15 ns) is refused: far below it, 1e9 / rate
        // is no longer a time (infinite), and every packet would be a probe.
        if self.probe_streams > 0 && !(self.probe_hz.is_finite() && self.probe_hz >= 1e-6) {
            return Err(format!(
                "--probe-hz {:?}: must be 0.000001 Hz (one probe in 11.6 days) or more",
                self.probe_hz
            ));
        }
        if self.probe_streams > 0 {
            // Probes take their places among the packets (the rate counts them): at the
            // rate or above it no data would go, and the probes would go at the data's
            // pace, not theirs.
            let probe_pps = f64::from(self.probe_streams) * self.probe_hz;
            let probe_bps = probe_pps * (PROBE_FRAME_LEN + WIRE_OVERHEAD) as f64 * 8.0;
            let (share, of) = match (self.flow_sizes, self.rate) {
                (None, Rate::Pps(r)) => (probe_pps / r, format!("the rate ({r} packets/s)")),
                (None, Rate::Bps(b)) => (probe_bps / b, format!("the rate ({b} bit/s)")),
                (None, _) => (
                    probe_bps / self.link_bps,
                    format!("the link ({} bit/s)", self.link_bps),
                ),
                (Some(sizes), _) => (
                    probe_bps / self.link_bps + self.load * self.wire_per_payload(sizes),
                    format!("the link ({} bit/s) with the flows' load", self.link_bps),
                ),
            };
            if share >= 1.0 {
                return Err(format!(
                    "--probes {} at --probe-hz {} ({probe_pps} packets/s) fill {of}: no room \
                     for data (probes are counted in the rate); fewer probes, a lower probe \
                     rate or a higher rate",
                    self.probe_streams, self.probe_hz
                ));
            }
        }
        if self.ttl == 0 {
            return Err("--ttl 0: must be at least 1".into());
        }
        for (net, flag) in std::iter::once((&self.src_net, "--src-net"))
            .chain(self.dst_nets.iter().map(|n| (n, "--dst-net")))
        {
            if !(8..=30).contains(&net.1) {
                return Err(format!(
                    "{flag} /{}: the prefix length must be 8 to 30",
                    net.1
                ));
            }
        }
        // Flows differ by source address and port (see `tuples`): a small source network
        // holds fewer distinct ones (flows beyond them were the same 5-tuple as others).
        let distinct = u64::from(hosts_in(self.src_net.1)) * u64::from(SOURCE_PORTS);
        if u64::from(self.flows) > distinct {
            return Err(format!(
                "--flows {}: a /{} source network (--src-net) holds at most {distinct} distinct flows \
                 ({} host addresses x {SOURCE_PORTS} source ports): fewer flows or a larger network",
                self.flows,
                self.src_net.1,
                hosts_in(self.src_net.1)
            ));
        }
        Ok(())
    }

    /// Bytes on the wire per payload byte of flows of `sizes`, in the packets this spec
    /// cuts them into (full packets of the mean payload, a last one with the rest, padded to
    /// the minimum frame; each with its headers and the wire's overhead), over the
    /// distribution's quantiles.
    fn wire_per_payload(&self, sizes: FlowSizes) -> f64 {
        let header = 42.0 + 12.0 * self.tcp_share;
        let full = self.packet_sizes.mean_payload(header);
        let per_packet = header + WIRE_OVERHEAD as f64;
        let wire = |s: f64| {
            let n = (s / full).ceil().max(1.0);
            let last = s - (n - 1.0) * full;
            s + n * per_packet + (60.0 - header - last).max(0.0)
        };
        const STEPS: u32 = 1000;
        let (mut payload, mut on_wire) = (0.0, 0.0);
        for i in 0..STEPS {
            let s = sizes.quantile((f64::from(i) + 0.5) / f64::from(STEPS)) as f64;
            payload += s;
            on_wire += wire(s);
        }
        on_wire / payload
    }

    /// The pool's 5-tuples (flows from `src_net` to the destination networks, by default
    /// from 10.0.0.0/16 to 10.1.0.0/16), then one UDP tuple per probe stream (by default
    /// from 10.2.0.0/16 to 10.3.0.0/16; with destination networks, from `src_net` to them),
    /// destination port [`PROBE_PORT`]. Addresses are the networks' host addresses (never
    /// a network's own or its broadcast address).
    pub fn tuples(&self) -> Vec<FlowTuple> {
        let mut rng = SimRng::new(self.seed ^ 0x7475_706c_6573);
        let (src, src_len) = self.src_net;
        let dsts: &[(u32, u8)] = if self.dst_nets.is_empty() {
            &[(0x0a01_0000, 16)]
        } else {
            &self.dst_nets
        };
        let mut out: Vec<FlowTuple> = (0..self.flows)
            .map(|i| {
                let tcp = rng.unit() < self.tcp_share;
                let (dst, dst_len) = dsts[i as usize % dsts.len()];
                FlowTuple {
                    src: Ipv4Addr::from(host(src, src_len, i)),
                    dst: Ipv4Addr::from(host(dst, dst_len, i.wrapping_mul(2_654_435_761) >> 16)),
                    // Distinct for up to (host addresses) x SOURCE_PORTS flows.
                    sport: 1024 + ((i / hosts_in(src_len)) % SOURCE_PORTS) as u16,
                    dport: if tcp { 443 } else { 9000 },
                    tcp,
                }
            })
            .collect();
        out.extend((0..self.probe_streams).map(|s| {
            let (src, dst) = if self.dst_nets.is_empty() {
                (host(0x0a02_0000, 16, s), host(0x0a03_0000, 16, s))
            } else {
                let (dst, dst_len) = dsts[s as usize % dsts.len()];
                (host(src, src_len, s), host(dst, dst_len, s))
            };
            FlowTuple {
                src: Ipv4Addr::from(src),
                dst: Ipv4Addr::from(dst),
                sport: 10_000 + (s % 50_000) as u16,
                dport: PROBE_PORT,
                tcp: false,
            }
        }));
        out
    }
}

/// Host addresses in a network of prefix length `len` (8 to 30): all but the network's own
/// address and its broadcast address, which hosts and routers do not take as a host's.
fn hosts_in(len: u8) -> u32 {
    (1u32 << (32 - u32::from(len))) - 2
}

/// The `n`-th host address (modulo their number) of network `net`/`len`: `net + 1` first.
fn host(net: u32, len: u8, n: u32) -> u32 {
    net | (n % hosts_in(len) + 1)
}

/// UDP destination port of probe streams.
pub const PROBE_PORT: u16 = 0x5054;

/// One generated packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenPacket {
    /// Nominal send time, ns.
    pub time_ns: u64,
    /// Index into [`TrafficSpec::tuples`].
    pub tuple: u32,
    /// Frame length without FCS.
    pub frame_len: u16,
    /// TCP sequence number (the flow's bytes sent before this packet).
    pub tcp_seq: u32,
    /// For a probe: stream and sequence number.
    pub probe: Option<(u32, u64)>,
    /// For a data packet with room for a flow tag: its number in its flow.
    pub flow_seq: Option<u32>,
}

impl GenPacket {
    /// The first bytes of the packet's transport payload (the rest is zeros): a probe's
    /// fields, sent at `probe_sent_ns`, or the flow tag.
    pub fn payload(&self, probe_sent_ns: u64) -> Payload {
        let mut p = Payload {
            bytes: [0; PROBE_LEN],
            len: 0,
        };
        if let Some((stream, seq)) = self.probe {
            p.bytes = ProbePayload {
                stream,
                seq,
                sent_ns: probe_sent_ns,
            }
            .encode();
            p.len = PROBE_LEN;
        } else if let Some(seq) = self.flow_seq {
            let tag = FlowTag {
                flow: self.tuple,
                seq,
            };
            p.bytes[..TAG_LEN].copy_from_slice(&tag.encode());
            p.len = TAG_LEN;
        }
        p
    }
}

/// A packet's payload bytes (see [`GenPacket::payload`]).
#[derive(Debug, Clone, Copy)]
pub struct Payload {
    bytes: [u8; PROBE_LEN],
    len: usize,
}

impl Payload {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// An active flow in flow-size mode.
#[derive(Debug, Clone, Copy)]
struct Active {
    tuple: u32,
    left: u64,
    sent: u64,
}

/// Generates the packets of a spec, in time order.
#[derive(Debug, Clone)]
pub struct Traffic {
    spec: TrafficSpec,
    tuples: Vec<FlowTuple>,
    rng: SimRng,
    picker: FlowPicker,
    clock_ns: f64,
    next_arrival_ns: f64,
    arrival_mean_ns: f64,
    active: VecDeque<Active>,
    /// Per pool flow, bytes sent so far (TCP sequence numbers).
    sent: Vec<u32>,
    /// Per pool flow, tagged packets sent so far.
    tagged: Vec<u32>,
    next_probe_ns: Vec<f64>,
    probe_seq: Vec<u64>,
}

impl Traffic {
    /// The generator of a valid spec.
    pub fn new(spec: TrafficSpec) -> Result<Traffic, String> {
        spec.validate()?;
        let tuples = spec.tuples();
        let picker = FlowPicker::new(spec.flows, &spec.popularity);
        let arrival_mean_ns = match spec.flow_sizes {
            Some(sizes) => 1e9 * 8.0 * sizes.mean() / (spec.load * spec.link_bps),
            None => 0.0,
        };
        let mut rng = SimRng::new(spec.seed);
        let next_arrival_ns = if spec.flow_sizes.is_some() {
            rng.exponential(arrival_mean_ns)
        } else {
            0.0
        };
        // Probe streams start spread over one period.
        let period = 1e9 / spec.probe_hz.max(f64::MIN_POSITIVE);
        let streams = spec.probe_streams as usize;
        let next_probe_ns = (0..streams)
            .map(|s| period * s as f64 / streams as f64)
            .collect();
        Ok(Traffic {
            sent: vec![0; spec.flows as usize],
            tagged: vec![0; spec.flows as usize],
            tuples,
            picker,
            rng,
            clock_ns: 0.0,
            next_arrival_ns,
            arrival_mean_ns,
            active: VecDeque::new(),
            next_probe_ns,
            probe_seq: vec![0; streams],
            spec,
        })
    }

    /// The 5-tuples packets refer to.
    pub fn tuples(&self) -> &[FlowTuple] {
        &self.tuples
    }

    /// The spec.
    pub fn spec(&self) -> &TrafficSpec {
        &self.spec
    }

    fn wire_ns(&self, frame_len: u16, bps: f64) -> f64 {
        (u64::from(frame_len) + WIRE_OVERHEAD) as f64 * 8.0 * 1e9 / bps
    }

    /// Advances the clock past a packet of `frame_len` bytes.
    fn advance(&mut self, frame_len: u16) {
        self.clock_ns += match (self.spec.flow_sizes, self.spec.rate) {
            (None, Rate::Pps(r)) => 1e9 / r,
            (None, Rate::Bps(b)) => self.wire_ns(frame_len, b),
            _ => self.wire_ns(frame_len, self.spec.link_bps),
        };
    }

    /// The probe due now, if any.
    fn due_probe(&mut self, until_ns: f64) -> Option<GenPacket> {
        let (s, &t) = self
            .next_probe_ns
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))?;
        if t > until_ns {
            return None;
        }
        self.clock_ns = self.clock_ns.max(t);
        let seq = self.probe_seq[s];
        self.probe_seq[s] += 1;
        self.next_probe_ns[s] = t + 1e9 / self.spec.probe_hz;
        let frame_len = PROBE_FRAME_LEN as u16;
        let p = GenPacket {
            time_ns: self.clock_ns.round() as u64,
            tuple: self.spec.flows + s as u32,
            frame_len,
            tcp_seq: 0,
            probe: Some((s as u32, seq)),
            flow_seq: None,
        };
        self.advance(frame_len);
        Some(p)
    }

    /// A data packet of pool flow `tuple` carrying at most `left` payload bytes.
    fn data_packet(&mut self, tuple: u32, left: Option<u64>) -> (GenPacket, u64) {
        let t = self.tuples[tuple as usize];
        let header = t.header_len() as u64;
        let mut frame_len = u64::from(self.spec.packet_sizes.sample(&mut self.rng));
        let mut payload = frame_len.saturating_sub(header);
        if let Some(left) = left {
            payload = payload.min(left).max(1);
            frame_len = (header + payload).max(60);
        }
        let sent = &mut self.sent[tuple as usize];
        let flow_seq = (frame_len >= header + TAG_LEN as u64).then(|| {
            let n = &mut self.tagged[tuple as usize];
            *n = n.wrapping_add(1);
            n.wrapping_sub(1)
        });
        let p = GenPacket {
            time_ns: self.clock_ns.round() as u64,
            tuple,
            frame_len: frame_len as u16,
            tcp_seq: *sent,
            probe: None,
            flow_seq,
        };
        // The sequence moves by what the segment carries: a short last segment padded to
        // the minimum frame carries its padding as payload (the IPv4 length counts it).
        *sent = sent.wrapping_add(frame_len.saturating_sub(header) as u32);
        self.advance(p.frame_len);
        (p, payload)
    }

    /// The next packet (the sequence is endless).
    pub fn next_packet(&mut self) -> GenPacket {
        if self.spec.flow_sizes.is_none() {
            if let Some(p) = self.due_probe(self.clock_ns) {
                return p;
            }
            let tuple = self.picker.pick(&mut self.rng);
            return self.data_packet(tuple, None).0;
        }
        loop {
            // Flows that have arrived join the round.
            while self.next_arrival_ns <= self.clock_ns {
                let sizes = self.spec.flow_sizes.expect("flow-size mode");
                let left = sizes.sample(&mut self.rng);
                let tuple = self.picker.pick(&mut self.rng);
                self.active.push_back(Active {
                    tuple,
                    left,
                    sent: 0,
                });
                self.next_arrival_ns += self.rng.exponential(self.arrival_mean_ns);
            }
            if let Some(p) = self.due_probe(self.clock_ns) {
                return p;
            }
            let Some(mut a) = self.active.pop_front() else {
                // Idle link: jump to the next arrival or probe.
                let probe = self
                    .next_probe_ns
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                self.clock_ns = self.next_arrival_ns.min(probe).max(self.clock_ns);
                continue;
            };
            let (p, payload) = self.data_packet(a.tuple, Some(a.left));
            a.left -= payload.min(a.left);
            a.sent += payload;
            if a.left > 0 {
                self.active.push_back(a);
            }
            return p;
        }
    }

    /// Flows in progress (flow-size mode).
    pub fn active_flows(&self) -> usize {
        self.active.len()
    }
}

impl Iterator for Traffic {
    type Item = GenPacket;
    fn next(&mut self) -> Option<GenPacket> {
        Some(self.next_packet())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_and_probes_stay_in_their_networks_and_are_distinct() {
        let spec = TrafficSpec {
            flows: 3000,
            probe_streams: 4,
            src_net: (0x0a00_0300, 24),
            dst_nets: vec![(0x0a00_0400, 24), (0x0a00_0500, 24)],
            ..TrafficSpec::default()
        };
        let tuples = spec.tuples();
        assert_eq!(tuples.len(), 3004);
        let net = |a: Ipv4Addr| u32::from(a) & 0xffff_ff00;
        assert!(tuples.iter().all(|t| net(t.src) == 0x0a00_0300));
        for (i, t) in tuples.iter().enumerate() {
            let want = if i % 2 == 0 { 0x0a00_0400 } else { 0x0a00_0500 };
            assert_eq!(net(t.dst), want, "tuple {i}");
        }
        let distinct: std::collections::HashSet<_> = tuples
            .iter()
            .map(|t| (t.src, t.dst, t.sport, t.dport, t.tcp))
            .collect();
        assert_eq!(distinct.len(), tuples.len());
        assert!(tuples[3000..].iter().all(|t| t.dport == PROBE_PORT));
        // The default: flow i from host i + 1 of 10.0.0.0/16 (no network address).
        let d = TrafficSpec::default().tuples();
        assert_eq!(d[0].src, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(d[5].src, Ipv4Addr::new(10, 0, 0, 6));
        assert_eq!(net(d[5].dst) >> 16, 0x0a01);
        assert!(
            TrafficSpec {
                src_net: (0, 31),
                ..TrafficSpec::default()
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn packet_mode_paces_at_the_rate() {
        let mut t = Traffic::new(TrafficSpec {
            rate: Rate::Pps(1e6),
            flows: 10,
            ..TrafficSpec::default()
        })
        .unwrap();
        let ps: Vec<GenPacket> = t.by_ref().take(1001).collect();
        assert_eq!(ps[1000].time_ns, 1_000_000);
        assert!(ps.iter().all(|p| p.tuple < 10 && p.frame_len == 60));
    }

    /// A rate whose gap is no whole number of ns sends exactly rate x duration packets in
    /// a duration (the clock sums the gaps in floating point: truncated, the 30,000th
    /// packet's time fell a fraction of a ns before 10 s and a 30,001st was sent).
    #[test]
    fn a_duration_holds_exactly_rate_times_duration_packets() {
        for (pps, seconds) in [(3000.0, 10u64), (7.0, 30), (1e6 / 3.0, 3)] {
            let mut t = Traffic::new(TrafficSpec {
                rate: Rate::Pps(pps),
                flows: 4,
                ..TrafficSpec::default()
            })
            .unwrap();
            let n = t
                .by_ref()
                .take_while(|p| p.time_ns < seconds * 1_000_000_000)
                .count();
            assert_eq!(
                n as f64,
                (pps * seconds as f64).round(),
                "{pps} pps for {seconds} s"
            );
        }
    }

    #[test]
    fn flow_mode_offers_the_load() {
        let spec = TrafficSpec {
            flow_sizes: Some(FlowSizes::Hadoop),
            load: 0.3,
            link_bps: 10e9,
            packet_sizes: PacketSizes::Fixed(1514),
            flows: 5000,
            seed: 4,
            ..TrafficSpec::default()
        };
        let mut t = Traffic::new(spec).unwrap();
        let mut payload = 0u64;
        let mut last = 0;
        for p in t.by_ref().take(400_000) {
            payload += u64::from(p.frame_len) - 42; // UDP pool
            last = p.time_ns;
        }
        let offered = payload as f64 * 8.0 / (last as f64 / 1e9) / 10e9;
        assert!((offered - 0.3).abs() < 0.06, "offered load {offered}");
    }

    /// A load that the packets' headers would push past the link is refused, not offered
    /// as a link run back to back.
    #[test]
    fn a_load_the_headers_push_past_the_link_is_refused() {
        let spec = |load, size| TrafficSpec {
            flow_sizes: Some(FlowSizes::Hadoop),
            load,
            packet_sizes: PacketSizes::Fixed(size),
            ..TrafficSpec::default()
        };
        // 18 payload bytes in 84 on the wire: at most a load of about 0.21.
        let err = Traffic::new(spec(0.5, 60)).unwrap_err();
        assert!(
            err.contains("load 0.5") && err.contains("at most load 0.21"),
            "{err}"
        );
        assert!(Traffic::new(spec(0.2, 60)).is_ok());
        assert!(Traffic::new(spec(0.9, 1514)).is_ok());
        // Flows of 100 bytes in one packet each: 166 bytes on the wire (42 of headers, 24
        // of the wire's) per 100 of payload, however large the packets may be.
        let small = |load| TrafficSpec {
            flow_sizes: Some(FlowSizes::Fixed(100)),
            ..spec(load, 1514)
        };
        let err = Traffic::new(small(0.9)).unwrap_err();
        assert!(err.contains("1.66 bytes on the wire"), "{err}");
        assert!(Traffic::new(small(0.6)).is_ok());
    }

    /// Probes that would take every packet's place (they went at the data's pace, and no
    /// data went) and flows that would never start (the generator queued them without end)
    /// are refused, saying why.
    #[test]
    fn probes_filling_the_rate_and_flows_that_never_start_are_refused() {
        let probes = |rate, streams, hz| TrafficSpec {
            rate,
            probe_streams: streams,
            probe_hz: hz,
            ..TrafficSpec::default()
        };
        let err = Traffic::new(probes(Rate::Pps(1.0), 1, 10.0)).unwrap_err();
        assert!(err.contains("no room for data"), "{err}");
        assert!(Traffic::new(probes(Rate::Pps(100.0), 4, 50.0)).is_err());
        assert!(Traffic::new(probes(Rate::Pps(1000.0), 4, 50.0)).is_ok());
        // 1000 probes a second of 84 bytes on the wire: 672 kbit/s.
        assert!(Traffic::new(probes(Rate::Bps(600e3), 10, 100.0)).is_err());
        assert!(Traffic::new(probes(Rate::Bps(1e6), 10, 100.0)).is_ok());
        // A rate whose period is no time (1e9 / 1e-300 is infinite) would make every packet
        // a probe.
        for hz in [1e-300, 1e-7, 0.0, f64::NAN] {
            let err = Traffic::new(probes(Rate::Pps(1e6), 1, hz)).unwrap_err();
            assert!(err.contains("0.000001 Hz"), "{hz}: {err}");
        }
        assert!(Traffic::new(probes(Rate::Pps(1e6), 1, 1e-6)).is_ok());
        let flows = |load, link_bps| TrafficSpec {
            flow_sizes: Some(FlowSizes::Hadoop),
            load,
            link_bps,
            packet_sizes: PacketSizes::Fixed(1514),
            ..TrafficSpec::default()
        };
        let err = Traffic::new(flows(1e-310, 10e9)).unwrap_err();
        assert!(err.contains("more than a day"), "{err}");
        assert!(Traffic::new(flows(0.5, 10e9)).is_ok());
        let err = Traffic::new(TrafficSpec {
            probe_streams: 1000,
            probe_hz: 10_000.0,
            ..flows(0.5, 1e9)
        })
        .unwrap_err();
        assert!(err.contains("with the flows' load"), "{err}");
        let err = Traffic::new(probes(Rate::Pps(f64::INFINITY), 0, 10.0)).unwrap_err();
        assert!(err.contains("finite"), "{err}");
        // More flows than a small source network holds apart.
        let small = |flows| TrafficSpec {
            flows,
            src_net: (0x0a00_0000, 30),
            ..TrafficSpec::default()
        };
        assert!(Traffic::new(small(120_000)).is_ok());
        let err = Traffic::new(small(120_001)).unwrap_err();
        assert!(err.contains("at most 120000 distinct flows"), "{err}");
        // Every one of them distinct, and none from or to a network's own or broadcast
        // address.
        let t = Traffic::new(TrafficSpec {
            dst_nets: vec![(0x0b00_0000, 30)],
            probe_streams: 3,
            ..small(120_000)
        })
        .unwrap();
        let tuples = t.tuples();
        let keys: std::collections::HashSet<_> = tuples
            .iter()
            .map(|t| (t.src, t.dst, t.sport, t.dport))
            .collect();
        assert_eq!(keys.len(), tuples.len());
        for t in tuples {
            for a in [u32::from(t.src), u32::from(t.dst)] {
                assert!(matches!(a & 3, 1 | 2), "{t:?}");
            }
        }
    }

    /// Each TCP segment of a flow starts where the one before ended, a short last segment
    /// padded to the minimum frame included (the sequence skipped its padding: overlaps).
    #[test]
    fn tcp_segments_follow_each_other() {
        let mut t = Traffic::new(TrafficSpec {
            flow_sizes: Some(FlowSizes::Fixed(1463)),
            packet_sizes: PacketSizes::Fixed(1514),
            tcp_share: 1.0,
            flows: 50,
            ..TrafficSpec::default()
        })
        .unwrap();
        let mut next: std::collections::HashMap<u32, u32> = Default::default();
        let mut short = 0;
        for p in t.by_ref().take(2000) {
            let carried = u32::from(p.frame_len) - 54;
            if let Some(&want) = next.get(&p.tuple) {
                assert_eq!(p.tcp_seq, want, "flow {} at {}", p.tuple, p.time_ns);
            }
            short += usize::from(p.frame_len == 60);
            next.insert(p.tuple, p.tcp_seq.wrapping_add(carried));
        }
        assert!(short > 100, "{short} short last segments");
    }

    #[test]
    fn probes_come_at_their_rate_with_sequence_numbers() {
        let mut t = Traffic::new(TrafficSpec {
            rate: Rate::Pps(1e5),
            probe_streams: 2,
            probe_hz: 1000.0,
            ..TrafficSpec::default()
        })
        .unwrap();
        let probes: Vec<GenPacket> = t
            .by_ref()
            .take_while(|p| p.time_ns < 100_000_000)
            .filter(|p| p.probe.is_some())
            .collect();
        // 100 ms at 1 kHz, two streams.
        assert!((199..=201).contains(&probes.len()), "{}", probes.len());
        let s0: Vec<u64> = probes
            .iter()
            .filter_map(|p| p.probe.filter(|x| x.0 == 0).map(|x| x.1))
            .collect();
        assert_eq!(s0, (0..s0.len() as u64).collect::<Vec<_>>());
        assert!(probes.iter().all(|p| p.tuple >= 1024));
    }

    #[test]
    fn bad_specs_name_the_setting() {
        let e = Traffic::new(TrafficSpec {
            flows: 0,
            ..TrafficSpec::default()
        })
        .unwrap_err();
        assert!(e.contains("flows"));
        let e = Traffic::new(TrafficSpec {
            flow_sizes: Some(FlowSizes::WebSearch),
            load: 1.5,
            ..TrafficSpec::default()
        })
        .unwrap_err();
        assert!(e.contains("load"));
    }
}
