//! IPFIX (RFC 7011) export of per-flow records over UDP: one observation domain per switch
//! (its ID), one template with standard information elements, data records of a flow's
//! packets and bytes at a switch since its last record (sent at the active timeout and when
//! the flow ends), templates sent before a domain's first records and again periodically.
//!
//! ```text
//! message header (16 bytes): version 10, length, export time (s), sequence number (data
//!   records sent before in this domain), observation domain ID
//! set header (4 bytes): set ID (2 = template set, 256 = our data set), length
//! template record: template ID 256, field count 11, then (element ID, length) pairs
//! ```

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use crate::flows::FlowExport;

/// IPFIX version number.
pub const VERSION: u16 = 10;
/// The data set's template ID.
pub const TEMPLATE_ID: u16 = 256;

/// The template's fields: (information element ID, length in bytes).
pub const FIELDS: [(u16, u16); 11] = [
    (8, 4),   // sourceIPv4Address
    (12, 4),  // destinationIPv4Address
    (7, 2),   // sourceTransportPort
    (11, 2),  // destinationTransportPort
    (4, 1),   // protocolIdentifier
    (1, 8),   // octetDeltaCount
    (2, 8),   // packetDeltaCount
    (152, 8), // flowStartMilliseconds
    (153, 8), // flowEndMilliseconds
    (10, 4),  // ingressInterface
    (14, 4),  // egressInterface
];

/// Bytes of one data record.
pub const RECORD_LEN: usize = 53;
/// Largest message (fits an Ethernet MTU with IP and UDP headers).
pub const MAX_MESSAGE: usize = 1400;

fn unix_secs() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

/// The template set.
pub fn template_set() -> Vec<u8> {
    let len = 4 + 4 + FIELDS.len() * 4;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
    out.extend_from_slice(&(FIELDS.len() as u16).to_be_bytes());
    for (id, l) in FIELDS {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&l.to_be_bytes());
    }
    out
}

/// Appends one data record.
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
    out.extend_from_slice(&r.ingress.to_be_bytes());
    out.extend_from_slice(&r.egress.to_be_bytes());
}

/// A message: header, then the sets.
pub fn message(domain: u32, sequence: u32, sets: &[&[u8]]) -> Vec<u8> {
    let len = 16 + sets.iter().map(|s| s.len()).sum::<usize>();
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

/// Per observation domain: records sent and when the template last went out.
struct Domain {
    sequence: u32,
    template_at: Option<Instant>,
    pending: Vec<FlowExport>,
}

/// An exporter to one collector.
pub struct IpfixExporter {
    socket: UdpSocket,
    domains: BTreeMap<u32, Domain>,
    template_interval: Duration,
    /// Messages sent.
    pub messages: u64,
    /// Records sent.
    pub records: u64,
    /// Messages the socket refused.
    pub errors: u64,
}

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
            domains: BTreeMap::new(),
            template_interval,
            messages: 0,
            records: 0,
            errors: 0,
        })
    }

    /// Queues a record (sent by [`IpfixExporter::flush`], or now when a message is full).
    pub fn add(&mut self, r: FlowExport) {
        let d = self.domains.entry(r.switch).or_insert(Domain {
            sequence: 0,
            template_at: None,
            pending: Vec::new(),
        });
        d.pending.push(r);
        if 16 + 4 + d.pending.len() * RECORD_LEN + RECORD_LEN > MAX_MESSAGE {
            self.flush();
        }
    }

    /// Sends every queued record, with templates where due.
    pub fn flush(&mut self) {
        let template = template_set();
        let per_message = (MAX_MESSAGE - 16 - template.len() - 4) / RECORD_LEN;
        let now = Instant::now();
        for (&domain, d) in &mut self.domains {
            let due = d
                .template_at
                .is_none_or(|t| now.duration_since(t) >= self.template_interval);
            if due {
                let m = message(domain, d.sequence, &[&template]);
                match self.socket.send(&m) {
                    Ok(_) => self.messages += 1,
                    Err(_) => self.errors += 1,
                }
                d.template_at = Some(now);
            }
            for chunk in d.pending.chunks(per_message) {
                let mut set = Vec::with_capacity(4 + chunk.len() * RECORD_LEN);
                set.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
                set.extend_from_slice(&((4 + chunk.len() * RECORD_LEN) as u16).to_be_bytes());
                for r in chunk {
                    put_record(&mut set, r);
                }
                let m = message(domain, d.sequence, &[&set]);
                match self.socket.send(&m) {
                    Ok(_) => {
                        self.messages += 1;
                        self.records += chunk.len() as u64;
                    }
                    Err(_) => self.errors += 1,
                }
                d.sequence = d.sequence.wrapping_add(chunk.len() as u32);
            }
            d.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::flowradar::FlowKey;

    #[test]
    fn messages_follow_rfc7011() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut ex = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60)).unwrap();
        let r = FlowExport {
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
            ingress: 1,
            egress: 2,
            ended: true,
        };
        for _ in 0..30 {
            ex.add(r);
        }
        ex.flush();
        let mut buf = [0u8; 2048];
        // Template first.
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), 10);
        assert_eq!(u16::from_be_bytes([buf[2], buf[3]]) as usize, n);
        assert_eq!(u32::from_be_bytes(buf[12..16].try_into().unwrap()), 7);
        assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), 2, "template set");
        assert_eq!(u16::from_be_bytes([buf[20], buf[21]]), TEMPLATE_ID);
        assert_eq!(u16::from_be_bytes([buf[22], buf[23]]), 11);
        let total: usize = FIELDS.iter().map(|f| usize::from(f.1)).sum();
        assert_eq!(total, RECORD_LEN);
        // Then the records, sequence numbers counting records.
        let mut records = 0;
        let mut seq = Vec::new();
        while records < 30 {
            let n = rx.recv(&mut buf).unwrap();
            assert!(n <= MAX_MESSAGE);
            seq.push(u32::from_be_bytes(buf[8..12].try_into().unwrap()));
            assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), TEMPLATE_ID);
            let set_len = u16::from_be_bytes([buf[18], buf[19]]) as usize;
            assert_eq!(set_len, n - 16);
            let k = (set_len - 4) / RECORD_LEN;
            let rec = &buf[20..20 + RECORD_LEN];
            assert_eq!(&rec[0..4], &[10, 0, 0, 1]);
            assert_eq!(u64::from_be_bytes(rec[13..21].try_into().unwrap()), 15_000);
            assert_eq!(u64::from_be_bytes(rec[21..29].try_into().unwrap()), 10);
            records += k;
        }
        assert_eq!(records, 30);
        assert_eq!(seq[0], 0);
        assert_eq!(ex.records, 30);
    }
}
