//! IPFIX (RFC 7011) export of per-flow records over UDP: one observation domain per switch
//! (its ID), two templates of standard information elements (with the flow's ports at the
//! switch where they are known, its last hop, and without them elsewhere), data records of a
//! flow's packets and bytes at a switch since its last record (sent at the active timeout
//! and when the flow ends), templates sent before a domain's first records and again
//! periodically.
//!
//! ```text
//! message header (16 bytes): version 10, length, export time (s), sequence number (data
//!   records sent before in this domain), observation domain ID
//! set header (4 bytes): set ID (2 = template set, 256 or 257 = a data set), length
//! template record: template ID, field count, then (element ID, length) pairs
//! ```

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use crate::flows::FlowExport;

/// IPFIX version number.
pub const VERSION: u16 = 10;
/// The template of records with the flow's ports at the switch.
pub const TEMPLATE_ID: u16 = 256;
/// The template of records without them (the switch is not the flow's last hop).
pub const TEMPLATE_NO_PORTS_ID: u16 = 257;

/// The fields of both templates: (information element ID, length in bytes).
pub const FIELDS: [(u16, u16); 10] = [
    (8, 4),   // sourceIPv4Address
    (12, 4),  // destinationIPv4Address
    (7, 2),   // sourceTransportPort
    (11, 2),  // destinationTransportPort
    (4, 1),   // protocolIdentifier
    (1, 8),   // octetDeltaCount
    (2, 8),   // packetDeltaCount
    (152, 8), // flowStartMilliseconds
    (153, 8), // flowEndMilliseconds
    (136, 1), // flowEndReason
];

/// The fields template 256 adds: (information element ID, length in bytes).
pub const PORT_FIELDS: [(u16, u16); 2] = [
    (10, 4), // ingressInterface (the switch's port ID)
    (14, 4), // egressInterface
];

/// Bytes of one data record without ports (template 257).
pub const RECORD_LEN_NO_PORTS: usize = 46;
/// Bytes of one data record with ports (template 256).
pub const RECORD_LEN: usize = RECORD_LEN_NO_PORTS + 8;
/// Largest message by default (fits an Ethernet MTU with IPv4 or IPv6 and UDP headers).
pub const MAX_MESSAGE: usize = 1400;
/// The smallest largest message an exporter takes: RFC 7011's size for a path whose MTU is
/// not known (the templates take 116 bytes, a record with its headers 74).
pub const MIN_MAX_MESSAGE: usize = 512;
/// The largest: a UDP datagram over IPv4.
pub const MAX_MAX_MESSAGE: usize = 65_507;
const HEADER_LEN: usize = 16;
const SET_HEADER_LEN: usize = 4;

const _: () = {
    let mut n = 0;
    let mut i = 0;
    while i < FIELDS.len() {
        n += FIELDS[i].1 as usize;
        i += 1;
    }
    assert!(n == RECORD_LEN_NO_PORTS);
    assert!(MAX_MAX_MESSAGE <= u16::MAX as usize);
    assert!(MIN_MAX_MESSAGE <= MAX_MESSAGE && MAX_MESSAGE <= MAX_MAX_MESSAGE);
    assert!(MIN_MAX_MESSAGE >= HEADER_LEN + SET_HEADER_LEN + 2 * 4 + 22 * 4);
};

/// Records of one template that fit a message of at most `max_message` bytes.
const fn per_message(max_message: usize, record_len: usize) -> usize {
    (max_message - HEADER_LEN - SET_HEADER_LEN) / record_len
}

fn unix_secs() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

/// The template set: both templates.
pub fn template_set() -> Vec<u8> {
    let templates = [
        (TEMPLATE_ID, FIELDS.len() + PORT_FIELDS.len()),
        (TEMPLATE_NO_PORTS_ID, FIELDS.len()),
    ];
    let len = SET_HEADER_LEN + templates.iter().map(|(_, n)| 4 + n * 4).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    for (id, n) in templates {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for (field, l) in FIELDS.iter().chain(&PORT_FIELDS).take(n) {
            out.extend_from_slice(&field.to_be_bytes());
            out.extend_from_slice(&l.to_be_bytes());
        }
    }
    out
}

/// The template a record goes out with.
pub fn template_of(r: &FlowExport) -> u16 {
    if r.ingress.is_some() || r.egress.is_some() {
        TEMPLATE_ID
    } else {
        TEMPLATE_NO_PORTS_ID
    }
}

/// Appends one data record of the template [`template_of`] gives.
pub fn put_record(out: &mut Vec<u8>, r: &FlowExport) {
    out.extend_from_slice(&r.key.src.to_be_bytes());
    out.extend_from_slice(&r.key.dst.to_be_bytes());
    out.extend_from_slice(&r.key.src_port.to_be_bytes());
    out.extend_from_slice(&r.key.dst_port.to_be_bytes());
    out.push(r.key.protocol);
    out.extend_from_slice(&r.bytes.to_be_bytes());
    out.extend_from_slice(&r.packets.to_be_bytes());
    out.extend_from_slice(&r.start_ms.to_be_bytes());
    out.extend_from_slice(&r.end_ms.to_be_bytes());
    out.push(r.end_reason as u8);
    if template_of(r) == TEMPLATE_ID {
        // Interfaces as ifIndex numbers them, from 1: the switch's port ID + 1 (collectors
        // read 0 as an unknown interface, which a port not known where the other is gets).
        let interface = |p: Option<u16>| p.map_or(0, |p| u32::from(p) + 1);
        out.extend_from_slice(&interface(r.ingress).to_be_bytes());
        out.extend_from_slice(&interface(r.egress).to_be_bytes());
    }
}

/// A message: header, then the sets.
pub fn message(domain: u32, sequence: u32, sets: &[&[u8]]) -> Vec<u8> {
    let len = HEADER_LEN + sets.iter().map(|s| s.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&unix_secs().to_be_bytes());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&domain.to_be_bytes());
    for s in sets {
        out.extend_from_slice(s);
    }
    out
}

/// Per observation domain: records sent, when the templates last went out, and the records
/// waiting, by template (256, 257).
#[derive(Default)]
struct Domain {
    sequence: u32,
    template_at: Option<Instant>,
    pending: [Vec<FlowExport>; 2],
}

/// What an exporter has sent.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    messages: u64,
    records: u64,
    errors: u64,
}

/// Messages a second an exporter sends by default: 10,000 records go out over a tenth of
/// a second, not in the 2 ms that overflows a collector's default receive buffer.
pub const DEFAULT_RATE: u32 = 5_000;

/// Messages that may go at once before the rate applies.
const BURST: f64 = 64.0;

/// Spaces messages to a rate (a token bucket).
#[derive(Debug, Clone, Copy)]
struct Pacer {
    /// Messages a second; 0: no pacing.
    rate: u32,
    tokens: f64,
    at: Option<Instant>,
}

impl Pacer {
    /// How long to wait at `now` before the next message may go (and takes its token).
    fn wait(&mut self, now: Instant) -> Duration {
        if self.rate == 0 {
            return Duration::ZERO;
        }
        let rate = f64::from(self.rate);
        let since = self
            .at
            .map_or(BURST / rate, |t| now.duration_since(t).as_secs_f64());
        self.tokens = (self.tokens + since * rate).min(BURST);
        self.at = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

/// An exporter to one collector.
pub struct IpfixExporter {
    socket: UdpSocket,
    pacer: Pacer,
    domains: BTreeMap<u32, Domain>,
    template_interval: Duration,
    /// Largest message, bytes.
    max_message: usize,
    /// Messages sent.
    pub messages: u64,
    /// Records sent.
    pub records: u64,
    /// Messages the socket refused (a collector that is not listening makes the next send
    /// fail; its records are lost, and the sequence numbers say so to the collector).
    pub errors: u64,
    /// When refused sends were last logged, and `errors` then.
    warned: Option<(Instant, u64)>,
}

/// Refused sends are logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

impl IpfixExporter {
    /// Sends to `collector`.
    pub fn new(collector: SocketAddr, template_interval: Duration) -> std::io::Result<Self> {
        let bind: SocketAddr = if collector.is_ipv4() {
            "0.0.0.0:0".parse().expect("address")
        } else {
            "[::]:0".parse().expect("address")
        };
        let socket = UdpSocket::bind(bind)?;
        socket.connect(collector)?;
        Ok(IpfixExporter {
            socket,
            pacer: Pacer {
                rate: 0,
                tokens: 0.0,
                at: None,
            },
            domains: BTreeMap::new(),
            template_interval,
            max_message: MAX_MESSAGE,
            messages: 0,
            records: 0,
            errors: 0,
            warned: None,
        })
    }

    /// Sends at most `messages` a second (0: unpaced).
    pub fn with_rate(mut self, messages: u32) -> Self {
        self.pacer.rate = messages;
        self
    }

    /// Sends messages of at most `bytes` (the path to the collector's MTU less the IP and
    /// UDP headers), within [`MIN_MAX_MESSAGE`] and [`MAX_MAX_MESSAGE`].
    pub fn with_max_message(mut self, bytes: usize) -> Self {
        self.max_message = bytes.clamp(MIN_MAX_MESSAGE, MAX_MAX_MESSAGE);
        self
    }

    /// Queues a record (sent by [`IpfixExporter::flush`], or now when its message is full).
    pub fn add(&mut self, r: FlowExport) {
        let domain = r.switch;
        let (slot, len) = if template_of(&r) == TEMPLATE_ID {
            (0, RECORD_LEN)
        } else {
            (1, RECORD_LEN_NO_PORTS)
        };
        let d = self.domains.entry(domain).or_default();
        d.pending[slot].push(r);
        if d.pending[slot].len() >= per_message(self.max_message, len) {
            self.send_domain(domain, Instant::now());
        }
    }

    /// Sends every queued record, with templates where due.
    pub fn flush(&mut self) {
        let now = Instant::now();
        let domains: Vec<u32> = self.domains.keys().copied().collect();
        for domain in domains {
            self.send_domain(domain, now);
        }
    }

    /// Sends one domain's queued records, its templates first where due.
    fn send_domain(&mut self, domain: u32, now: Instant) {
        let Some(d) = self.domains.get_mut(&domain) else {
            return;
        };
        if d.pending.iter().all(Vec::is_empty) {
            return;
        }
        let mut sent = Sent::default();
        let (socket, pacer, max_message) = (&self.socket, &mut self.pacer, self.max_message);
        let mut send = |m: &[u8], sent: &mut Sent| {
            let wait = pacer.wait(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            let ok = socket.send(m).is_ok();
            sent.messages += u64::from(ok);
            ok
        };
        let due = d
            .template_at
            .is_none_or(|t| now.duration_since(t) >= self.template_interval);
        if due {
            // A refused send is often an earlier datagram's port unreachable, reported now: the
            // templates go again at once, so a collector that has just come up gets them
            // before the records that need them. Still refused: the records go anyway (the
            // collector is down; their sequence numbers tell it what it missed).
            let m = message(domain, d.sequence, &[&template_set()]);
            if send(&m, &mut sent) || send(&m, &mut sent) {
                d.template_at = Some(now);
            } else {
                sent.errors += 1;
            }
        }
        // The templates, due and refused twice, were this call's try.
        let mut retried = due && d.template_at != Some(now);
        for (slot, (id, len)) in [
            (TEMPLATE_ID, RECORD_LEN),
            (TEMPLATE_NO_PORTS_ID, RECORD_LEN_NO_PORTS),
        ]
        .into_iter()
        .enumerate()
        {
            for chunk in d.pending[slot].chunks(per_message(max_message, len)) {
                let set_len = SET_HEADER_LEN + chunk.len() * len;
                let mut set = Vec::with_capacity(set_len);
                set.extend_from_slice(&id.to_be_bytes());
                set.extend_from_slice(&(set_len as u16).to_be_bytes());
                for r in chunk {
                    put_record(&mut set, r);
                }
                debug_assert_eq!(set.len(), set_len);
                let m = message(domain, d.sequence, &[&set]);
                // Refused: often an earlier datagram's port unreachable, reported now, from a
                // collector that may be back (without templates): templates, then the
                // records once more. Still refused, the collector is down: counted, and
                // its sequence numbers tell it what it missed.
                // Once per call: with the collector down each try is refused again, and
                // the pacer would spend three sends on every message.
                let ok = send(&m, &mut sent)
                    || (!retried && {
                        retried = true;
                        let t = message(domain, d.sequence, &[&template_set()]);
                        send(&t, &mut sent) && {
                            d.template_at = Some(now);
                            send(&m, &mut sent)
                        }
                    });
                if ok {
                    sent.records += chunk.len() as u64;
                } else {
                    sent.errors += 1;
                }
                d.sequence = d.sequence.wrapping_add(chunk.len() as u32);
            }
            d.pending[slot].clear();
        }
        if sent.errors > 0 {
            // A refused send means the collector was not listening (the port unreachable
            // of an earlier datagram): it has no templates, or has forgotten them. They go
            // again before the next records.
            d.template_at = None;
        }
        self.messages += sent.messages;
        self.records += sent.records;
        self.errors += sent.errors;
        if sent.errors > 0
            && self
                .warned
                .is_none_or(|(at, _)| now.duration_since(at) >= WARN_EVERY)
        {
            let since = self.warned.map_or(0, |(_, e)| e);
            tracing::warn!(
                collector = %self.socket.peer_addr().map_or_else(|e| e.to_string(), |a| a.to_string()),
                refused = self.errors - since,
                "IPFIX messages refused (the collector is not listening, or was not when an earlier message reached it): their records are lost; logged at most once a minute"
            );
            self.warned = Some((now, self.errors));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::EndReason;
    use telemetry::flowradar::FlowKey;

    fn record(ports: bool) -> FlowExport {
        FlowExport {
            key: FlowKey {
                src: 0x0a00_0001,
                dst: 0x0a00_0102,
                src_port: 1234,
                dst_port: 80,
                protocol: 6,
            },
            switch: 7,
            packets: 10,
            bytes: 15_000,
            start_ms: 1_700_000_000_000,
            end_ms: 1_700_000_000_010,
            ingress: ports.then_some(1),
            egress: ports.then_some(2),
            ended: true,
            end_reason: EndReason::IdleTimeout,
        }
    }

    #[test]
    fn messages_follow_rfc7011() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut ex = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60)).unwrap();
        // 30 records with ports (one full message of 25 and 5 more), 3 without.
        for i in 0..33 {
            ex.add(record(i < 30));
        }
        ex.flush();
        let mut buf = [0u8; 2048];
        // Templates first, both in one template set.
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), 10);
        assert_eq!(u16::from_be_bytes([buf[2], buf[3]]) as usize, n);
        assert_eq!(u32::from_be_bytes(buf[12..16].try_into().unwrap()), 7);
        assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), 2, "template set");
        assert_eq!(u16::from_be_bytes([buf[18], buf[19]]) as usize, n - 16);
        assert_eq!(u16::from_be_bytes([buf[20], buf[21]]), TEMPLATE_ID);
        assert_eq!(u16::from_be_bytes([buf[22], buf[23]]), 12);
        let second = 24 + 12 * 4;
        assert_eq!(
            u16::from_be_bytes([buf[second], buf[second + 1]]),
            TEMPLATE_NO_PORTS_ID
        );
        assert_eq!(u16::from_be_bytes([buf[second + 2], buf[second + 3]]), 10);
        assert_eq!(second + 4 + 10 * 4, n);
        let total: usize = FIELDS
            .iter()
            .chain(&PORT_FIELDS)
            .map(|f| usize::from(f.1))
            .sum();
        assert_eq!(total, RECORD_LEN);
        // Then the records, sequence numbers counting records.
        let mut records = [0; 2];
        let mut seq = Vec::new();
        while records[0] + records[1] < 33 {
            let n = rx.recv(&mut buf).unwrap();
            assert!(n <= MAX_MESSAGE);
            seq.push((
                u32::from_be_bytes(buf[8..12].try_into().unwrap()),
                records[0] + records[1],
            ));
            let template = u16::from_be_bytes([buf[16], buf[17]]);
            let len = if template == TEMPLATE_ID {
                RECORD_LEN
            } else {
                assert_eq!(template, TEMPLATE_NO_PORTS_ID);
                RECORD_LEN_NO_PORTS
            };
            let set_len = u16::from_be_bytes([buf[18], buf[19]]) as usize;
            assert_eq!(set_len, n - 16);
            assert_eq!((set_len - 4) % len, 0, "no padding");
            let k = (set_len - 4) / len;
            for rec in buf[20..20 + k * len].chunks(len) {
                assert_eq!(&rec[0..4], &[10, 0, 0, 1]);
                assert_eq!(u64::from_be_bytes(rec[13..21].try_into().unwrap()), 15_000);
                assert_eq!(u64::from_be_bytes(rec[21..29].try_into().unwrap()), 10);
                assert_eq!(rec[45], 1, "flowEndReason: idle timeout");
                if template == TEMPLATE_ID {
                    // Ports 1 and 2 are interfaces 2 and 3 (ifIndex counts from 1).
                    assert_eq!(u32::from_be_bytes(rec[46..50].try_into().unwrap()), 2);
                    assert_eq!(u32::from_be_bytes(rec[50..54].try_into().unwrap()), 3);
                }
            }
            records[usize::from(template == TEMPLATE_NO_PORTS_ID)] += k;
        }
        assert_eq!(records, [30, 3]);
        for (s, before) in &seq {
            assert_eq!(*s as usize, *before, "records sent before the message");
        }
        assert_eq!(ex.records, 33);
        assert_eq!(ex.messages as usize, 1 + seq.len());
    }

    /// A full message goes at once; it needs no second, nearly empty one.
    #[test]
    fn a_full_message_leaves_nothing_behind() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ex = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60)).unwrap();
        for _ in 0..per_message(MAX_MESSAGE, RECORD_LEN) {
            ex.add(record(true));
        }
        assert_eq!(ex.messages, 2, "templates and one full message");
        assert_eq!(ex.records as usize, per_message(MAX_MESSAGE, RECORD_LEN));
        ex.flush();
        assert_eq!(ex.messages, 2, "nothing left to send");
    }

    /// A smaller largest message (a path with a small MTU): every datagram within it, the
    /// records split over more messages, none lost.
    #[test]
    fn messages_keep_to_the_largest_size_set() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut ex = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60))
            .unwrap()
            .with_max_message(512);
        for i in 0..40 {
            ex.add(record(i < 30));
        }
        ex.flush();
        let mut buf = [0u8; 70_000];
        let (mut records, mut data_messages) = (0, 0);
        for _ in 0..ex.messages {
            let n = rx.recv(&mut buf).unwrap();
            assert!(n <= 512, "a message of {n} bytes");
            assert_eq!(u16::from_be_bytes([buf[2], buf[3]]) as usize, n);
            let len = match u16::from_be_bytes([buf[16], buf[17]]) {
                2 => continue,
                TEMPLATE_ID => RECORD_LEN,
                _ => RECORD_LEN_NO_PORTS,
            };
            records += (n - 20) / len;
            data_messages += 1;
        }
        assert_eq!(records, 40);
        // 30 records with ports, 9 to a message; 10 without, 10 to a message.
        assert_eq!(data_messages, 4 + 1);
        // Out of range: kept within what a datagram and the templates allow.
        let big = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60))
            .unwrap()
            .with_max_message(1 << 20);
        assert_eq!(big.max_message, MAX_MAX_MESSAGE);
    }

    /// A burst of messages goes at once, then they are spaced to the rate.
    #[test]
    fn messages_are_paced_after_a_burst() {
        let mut p = Pacer {
            rate: 1000,
            tokens: 0.0,
            at: None,
        };
        let t0 = Instant::now();
        // A burst goes at once.
        for _ in 0..BURST as usize {
            assert_eq!(p.wait(t0), Duration::ZERO);
        }
        // Then one message a millisecond: the next waits 1 ms, the one after 2.
        let ms = |d: Duration| (d.as_secs_f64() * 1e3).round() as u64;
        assert_eq!(ms(p.wait(t0)), 1);
        assert_eq!(ms(p.wait(t0)), 2);
        // 10 ms later, the 2 ms of debt paid, 8 more go at once.
        let later = t0 + Duration::from_millis(10);
        for _ in 0..8 {
            assert_eq!(p.wait(later), Duration::ZERO);
        }
        assert_eq!(ms(p.wait(later)), 1);
        // Unpaced: never waits.
        let mut free = Pacer { rate: 0, ..p };
        assert!((0..1000).all(|_| free.wait(t0).is_zero()));
    }

    /// An exporter to a loopback port nobody listens on (yet), templates hourly.
    fn exporter_to_nobody() -> (SocketAddr, IpfixExporter) {
        let port = {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap().port()
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let ex = IpfixExporter::new(addr, Duration::from_secs(3600)).unwrap();
        (addr, ex)
    }

    /// After a refused send (no collector) the templates go again before the next records.
    #[test]
    fn a_refused_template_is_sent_again() {
        let (addr, mut ex) = exporter_to_nobody();
        // Nobody listens: the port-unreachable makes a later send fail.
        for _ in 0..20 {
            ex.add(record(true));
            ex.flush();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ex.errors > 0, "a send was refused");
        // The collector comes up just after a datagram it refused, whose port unreachable
        // the next send reports: the first message it gets holds the templates.
        ex.socket.send(b"refused").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        ex.domains.get_mut(&7).unwrap().template_at = None;
        let rx = UdpSocket::bind(addr).unwrap();
        let mut buf = [0u8; 2048];
        let mut sets = Vec::new();
        for _ in 0..3 {
            ex.add(record(true));
            ex.flush();
            while let Ok(_n) = {
                rx.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                rx.recv(&mut buf)
            } {
                sets.push(u16::from_be_bytes([buf[16], buf[17]]));
            }
        }
        assert_eq!(sets.first(), Some(&2), "templates first: {sets:?}");
        assert!(sets.contains(&TEMPLATE_ID), "{sets:?}");
    }

    /// Records whose send is refused for an earlier datagram's port unreachable go again,
    /// after the templates, and reach a collector that is back: they were lost.
    #[test]
    fn records_refused_for_an_earlier_datagram_go_again() {
        let (addr, mut ex) = exporter_to_nobody();
        // A datagram nobody took; its port unreachable is reported by the next send. The
        // collector comes up meanwhile; templates are not due.
        ex.socket.send(b"refused").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let rx = UdpSocket::bind(addr).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        ex.add(record(true));
        ex.domains.get_mut(&7).unwrap().template_at = Some(Instant::now());
        ex.flush();
        let mut buf = [0u8; 2048];
        let mut sets = Vec::new();
        while let Ok(_n) = rx.recv(&mut buf) {
            sets.push(u16::from_be_bytes([buf[16], buf[17]]));
            rx.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
        }
        assert_eq!(sets, [2, TEMPLATE_ID], "templates, then the record");
        assert_eq!((ex.errors, ex.records), (0, 1), "nothing lost");
    }
}
