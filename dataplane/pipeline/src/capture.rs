//! Synthetic traffic as packet bytes and pcap files: the demo's mixed capture, the
//! benchmark's 64-byte UDP capture, and the builders tests use.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use etherparse::{
    IpFragOffset, IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header, Ipv4Options, PacketBuilder,
};
use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use telemetry::wire::{EtherType, MacAddr};

/// The transport part of a synthetic packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// UDP with these ports.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// TCP with these ports and sequence number.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Sequence number.
        seq: u32,
    },
    /// ICMP echo request.
    Icmp {
        /// Identifier.
        id: u16,
        /// Sequence number.
        seq: u16,
    },
}

/// A synthetic IPv4 packet in an Ethernet frame.
#[derive(Debug, Clone)]
pub struct PacketSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// VLAN ids, outermost first (0 to 2; an outer tag of two uses TPID 0x88a8).
    pub vlans: Vec<u16>,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TTL.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
    /// Transport.
    pub l4: L4,
    /// Payload bytes after the transport header.
    pub payload_len: usize,
    /// IPv4 options (a multiple of 4 bytes, at most 40).
    pub ip_options: Vec<u8>,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
}

impl PacketSpec {
    /// A UDP packet with defaults for everything else.
    pub fn udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> PacketSpec {
        PacketSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0xaa, 0x01]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            vlans: Vec::new(),
            src,
            dst,
            ttl: 64,
            ident: 1,
            l4: L4::Udp { sport, dport },
            payload_len: 18,
            ip_options: Vec::new(),
            more_frags: false,
            frag_offset: 0,
        }
    }

    /// Serialises the frame (no FCS).
    pub fn build(&self) -> Vec<u8> {
        let proto = match self.l4 {
            L4::Udp { .. } => IpNumber::UDP,
            L4::Tcp { .. } => IpNumber::TCP,
            L4::Icmp { .. } => IpNumber::ICMP,
        };
        let mut ip = Ipv4Header::new(0, self.ttl, proto, self.src.octets(), self.dst.octets())
            .expect("valid header");
        ip.identification = self.ident;
        ip.more_fragments = self.more_frags;
        ip.fragment_offset = IpFragOffset::try_new(self.frag_offset).expect("offset fits 13 bits");
        ip.options = Ipv4Options::try_from(self.ip_options.as_slice())
            .expect("options: multiple of 4, at most 40 bytes");
        let step = PacketBuilder::ip(IpHeaders::Ipv4(ip, Ipv4Extensions::default()));
        let payload: Vec<u8> = (0..self.payload_len).map(|i| i as u8).collect();
        let mut l3 = Vec::with_capacity(64 + self.payload_len);
        match self.l4 {
            L4::Udp { sport, dport } => step.udp(sport, dport).write(&mut l3, &payload),
            L4::Tcp { sport, dport, seq } => {
                step.tcp(sport, dport, seq, 65535).write(&mut l3, &payload)
            }
            L4::Icmp { id, seq } => step.icmpv4_echo_request(id, seq).write(&mut l3, &payload),
        }
        .expect("serialise packet");
        frame(
            self.dst_mac,
            self.src_mac,
            &self.vlans,
            EtherType::IPV4,
            &l3,
        )
    }
}

/// An Ethernet frame around `payload`, with VLAN tags (outermost first) before `ethertype`.
pub fn frame(dst: MacAddr, src: MacAddr, vlans: &[u16], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(22 + payload.len());
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    for (i, vid) in vlans.iter().enumerate() {
        let tpid = if vlans.len() == 2 && i == 0 {
            EtherType::QINQ
        } else {
            EtherType::VLAN
        };
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Writes frames to a pcap file (Ethernet link type, microsecond timestamps 1 µs apart).
pub fn write_pcap<'a>(
    path: &Path,
    frames: impl IntoIterator<Item = &'a [u8]>,
) -> anyhow::Result<u64> {
    let fail = |e| pcap_error(path, e);
    let mut w = PcapWriter::new(create(path)?).map_err(fail)?;
    let n = write_each(frames, |at, f| {
        w.write_packet(&PcapPacket::new(at, f.len() as u32, f))
            .map(drop)
    })
    .map_err(fail)?;
    flush(path, w.into_writer())?;
    Ok(n)
}

/// Writes frames to a pcapng file (one Ethernet interface, an enhanced packet block per
/// frame, 1 µs apart), as capture tools other than tcpdump save them by default.
pub fn write_pcapng<'a>(
    path: &Path,
    frames: impl IntoIterator<Item = &'a [u8]>,
) -> anyhow::Result<u64> {
    use pcap_file::DataLink;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    let fail = |e| pcap_error(path, e);
    let mut w = PcapNgWriter::new(create(path)?).map_err(fail)?;
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0xffff))
        .map_err(fail)?;
    let n = write_each(frames, |timestamp, f| {
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp,
            original_len: f.len() as u32,
            data: f.into(),
            options: Vec::new(),
        };
        w.write_pcapng_block(block).map(drop)
    })
    .map_err(fail)?;
    flush(path, w.into_inner())?;
    Ok(n)
}

/// An error writing the capture at `path`, naming it and the cause (a full disk...):
/// pcap_file's own words for any I/O error are "Error reading bytes".
pub fn pcap_error(path: &Path, e: pcap_file::PcapError) -> anyhow::Error {
    match e {
        pcap_file::PcapError::IoError(io) => anyhow::anyhow!("writing {}: {io}", path.display()),
        other => anyhow::anyhow!("writing {}: {other}", path.display()),
    }
}

/// Writes out what `w` buffers for the capture at `path`: dropped, a buffer swallows the
/// error of its last write (a full disk), leaving a capture cut short without a word.
pub fn flush(path: &Path, mut w: BufWriter<File>) -> anyhow::Result<()> {
    use std::io::Write;
    w.flush()
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// A new file at `path`, buffered.
fn create(path: &Path) -> anyhow::Result<BufWriter<File>> {
    let file =
        File::create(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    Ok(BufWriter::new(file))
}

/// Puts each frame with its timestamp (1 µs apart from 0); returns how many.
fn write_each<'a>(
    frames: impl IntoIterator<Item = &'a [u8]>,
    mut put: impl FnMut(Duration, &'a [u8]) -> Result<(), pcap_file::PcapError>,
) -> Result<u64, pcap_file::PcapError> {
    let mut n = 0u64;
    for f in frames {
        put(Duration::from_micros(n), f)?;
        n += 1;
    }
    Ok(n)
}

/// Reads every frame of a capture file (pcap or pcapng).
pub fn read_pcap(path: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    if for_each_frame(path, |f| out.push(f.to_vec()))? == Ending::CutShort {
        anyhow::bail!("{} ends in a record cut short", path.display());
    }
    Ok(out)
}

/// `path` opened for reading, or an error that names it.
fn open(path: &Path) -> anyhow::Result<File> {
    File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))
}

/// Whether `path` starts as a pcapng file does.
fn is_pcapng(path: &Path) -> anyhow::Result<bool> {
    let mut magic = [0u8; 4];
    let got = std::io::Read::read(&mut open(path)?, &mut magic)?;
    Ok(got == 4 && magic == PCAPNG_MAGIC)
}

/// The first four bytes of a pcapng file (its section header block's type).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// How a capture file's frames ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// At the end of the file.
    Complete,
    /// In a record the file holds only the start of.
    CutShort,
}

/// Whether a read error is the file ending inside a record.
fn is_cut_short(e: &pcap_file::PcapError) -> bool {
    matches!(e, pcap_file::PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof)
}

/// Calls `f` with each frame of a pcap or pcapng file, in order (in pcapng, the enhanced,
/// simple and obsolete packet blocks; other blocks hold no frame), up to a last record the
/// file holds only part of. A malformed header or record is an error.
fn for_each_frame(path: &Path, mut f: impl FnMut(&[u8])) -> anyhow::Result<Ending> {
    use pcap_file::pcapng::{Block, PcapNgReader};
    if is_pcapng(path)? {
        let mut r = PcapNgReader::new(BufReader::new(open(path)?))?;
        while let Some(b) = r.next_block() {
            match b {
                Ok(Block::EnhancedPacket(p)) => f(&p.data),
                Ok(Block::SimplePacket(p)) => f(&p.data),
                Ok(Block::Packet(p)) => f(&p.data),
                Ok(_) => {}
                Err(e) if is_cut_short(&e) => return Ok(Ending::CutShort),
                Err(e) => return Err(e.into()),
            }
        }
    } else {
        let mut r = PcapReader::new(BufReader::new(open(path)?))?;
        while let Some(p) = r.next_packet() {
            match p {
                Ok(p) => f(&p.data),
                Err(e) if is_cut_short(&e) => return Ok(Ending::CutShort),
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(Ending::Complete)
}

/// `frame` (as it leaves a first hop, its TTL one less than it arrived with) with a
/// telemetry shim inserted after its Ethernet header and VLAN tags, as that hop inserts it:
/// shim EtherType `ethertype`, the first hop's TTL, plan `tag`, and a `digest_len`-byte
/// `digest` (`docs/protocol.md`, "The shim").
pub fn with_shim(
    frame: &[u8],
    ethertype: u16,
    tag: u16,
    digest_len: usize,
    digest: u64,
) -> Vec<u8> {
    let mut at = 12;
    while at + 2 <= frame.len()
        && EtherType::is_vlan(u16::from_be_bytes([frame[at], frame[at + 1]]))
    {
        at += 4;
    }
    let ttl = match frame.get(at..at + 11) {
        Some(h) if u16::from_be_bytes([h[0], h[1]]) == EtherType::IPV4 => h[10],
        _ => 0,
    };
    let mut out = Vec::with_capacity(frame.len() + 6 + digest_len);
    out.extend_from_slice(&frame[..at]);
    out.extend_from_slice(&ethertype.to_be_bytes());
    out.push(0x10 | digest_len as u8);
    out.push(telemetry::wire::shim::first_flags(ttl.wrapping_add(1)));
    out.extend_from_slice(&tag.to_be_bytes());
    out.extend_from_slice(&digest.to_be_bytes()[8 - digest_len..]);
    out.extend_from_slice(&frame[at..]);
    out
}

/// The benchmark's traffic: `flows` UDP flows of minimum-size frames (60 bytes without FCS,
/// 64 on the wire) from 10.0.0.0/16 to 10.1.0.0/16, one packet per flow, addressed to
/// `dst_mac`.
pub fn bench_udp(flows: u32, dst_mac: MacAddr) -> Vec<Vec<u8>> {
    (0..flows)
        .map(|i| {
            let mut p = PacketSpec::udp(
                Ipv4Addr::from(0x0a00_0000 | (i & 0xffff)),
                Ipv4Addr::from(0x0a01_0000 | (i.wrapping_mul(2_654_435_761) >> 16)),
                1024 + (i % 50_000) as u16,
                4791,
            );
            p.dst_mac = dst_mac;
            p.ident = i as u16;
            p.build()
        })
        .collect()
}

/// The demo's traffic: `flows` flows (UDP, TCP and ICMP) towards three destination
/// prefixes, one of them behind an ECMP pair, plus a few packets of each kind the switch
/// drops (TTL 1, no route, multicast (mDNS), bad checksum, ARP, IPv6, truncated).
pub fn demo_mix(flows: u32, dst_mac: MacAddr) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(flows as usize + 64);
    for i in 0..flows {
        let dst_net = [0x0a01_0000u32, 0x0a02_0000, 0x0a03_0000][(i % 3) as usize];
        let src = Ipv4Addr::from(0x0a00_0000 | (i & 0xffff));
        let dst = Ipv4Addr::from(dst_net | (i.wrapping_mul(40_503) & 0xffff));
        let mut p = PacketSpec::udp(src, dst, 1024 + (i % 60_000) as u16, 80);
        p.dst_mac = dst_mac;
        p.l4 = match i % 10 {
            0..=5 => L4::Udp {
                sport: 1024 + (i % 60_000) as u16,
                dport: 53,
            },
            6..=8 => L4::Tcp {
                sport: 1024 + (i % 60_000) as u16,
                dport: 443,
                seq: i,
            },
            _ => L4::Icmp {
                id: i as u16,
                seq: 1,
            },
        };
        p.payload_len = [18, 200, 1000][(i % 3) as usize];
        out.push(p.build());
    }
    let base = PacketSpec {
        dst_mac,
        ..PacketSpec::udp(
            Ipv4Addr::new(10, 0, 0, 9),
            Ipv4Addr::new(10, 1, 0, 9),
            5000,
            5001,
        )
    };
    for i in 0..(flows / 100).max(1) {
        let mut ttl1 = base.clone();
        ttl1.ttl = 1;
        ttl1.ident = i as u16;
        out.push(ttl1.build());
        let mut unrouted = base.clone();
        unrouted.dst = Ipv4Addr::new(192, 0, 2, (i % 250) as u8 + 1);
        out.push(unrouted.build());
        let mut mdns = base.clone();
        mdns.dst = Ipv4Addr::new(224, 0, 0, 251);
        mdns.dst_mac = MacAddr([0x01, 0x00, 0x5e, 0, 0, 0xfb]);
        mdns.ttl = 255;
        mdns.l4 = L4::Udp {
            sport: 5353,
            dport: 5353,
        };
        out.push(mdns.build());
        let mut bad_sum = base.build();
        bad_sum[24] ^= 0x5a;
        out.push(bad_sum);
        out.push(frame(
            MacAddr::BROADCAST,
            base.src_mac,
            &[],
            EtherType::ARP,
            &[0u8; 28],
        ));
        out.push(frame(
            dst_mac,
            base.src_mac,
            &[],
            EtherType::IPV6,
            &[0x60; 40],
        ));
        out.push(base.build()[..30].to_vec());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture the disk has no room for is an error naming the file and the cause, also
    /// when it is small enough to sit in the write buffer until the end (it was a success,
    /// the file empty).
    #[test]
    fn a_capture_the_disk_cannot_hold_is_an_error() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let frames = bench_udp(3, MacAddr([2, 0, 0, 0, 0, 1]));
        for e in [
            write_pcap(full, frames.iter().map(|f| f.as_slice())).unwrap_err(),
            write_pcapng(full, frames.iter().map(|f| f.as_slice())).unwrap_err(),
        ] {
            let e = e.to_string();
            assert!(
                e.contains("writing /dev/full") && e.contains("No space left"),
                "{e}"
            );
        }
    }

    #[test]
    fn captures_read_back_as_pcap_and_as_pcapng() {
        use pcap_file::DataLink;
        use pcap_file::pcapng::PcapNgWriter;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
        let mut frames = bench_udp(5, MacAddr([2, 0, 0, 0, 0, 1]));
        frames[2].extend([0u8; 100]);
        let dir = std::env::temp_dir().join(format!("pint-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("f.pcap");
        write_pcap(&pcap, frames.iter().map(|f| f.as_slice())).unwrap();
        assert_eq!(read_pcap(&pcap).unwrap(), frames);
        let ng = dir.join("f.pcapng");
        write_pcapng(&ng, frames.iter().map(|f| f.as_slice())).unwrap();
        assert_eq!(read_pcap(&ng).unwrap(), frames);
        // pcapng with a simple packet block after the enhanced ones.
        let mut w = PcapNgWriter::new(BufWriter::new(File::create(&ng).unwrap())).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0xffff))
            .unwrap();
        w.write_pcapng_block(SimplePacketBlock {
            original_len: frames[4].len() as u32,
            data: frames[4].as_slice().into(),
        })
        .unwrap();
        drop(w);
        assert_eq!(read_pcap(&ng).unwrap(), vec![frames[4].clone()]);
        // Cut short in the last record (a capture stopped mid-write): reading it whole is
        // an error.
        let full_ng = dir.join("full.pcapng");
        write_pcapng(&full_ng, frames.iter().map(|f| f.as_slice())).unwrap();
        for whole in [&pcap, &full_ng] {
            let cut = dir.join("cut");
            let bytes = std::fs::read(whole).unwrap();
            std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
            assert!(read_pcap(&cut).is_err(), "{}", whole.display());
        }
        // Neither format: an error.
        let junk = dir.join("junk");
        std::fs::write(&junk, b"not a capture at all").unwrap();
        assert!(read_pcap(&junk).is_err());
        assert!(read_pcap(&dir.join("absent")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn built_packets_parse_with_etherparse() {
        let mut p = PacketSpec::udp(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 1, 0, 1), 1, 2);
        p.vlans = vec![100, 200];
        p.ip_options = vec![1, 1, 1, 0];
        let f = p.build();
        assert_eq!(&f[12..14], &EtherType::QINQ.to_be_bytes());
        assert_eq!(&f[16..18], &EtherType::VLAN.to_be_bytes());
        let parsed = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = parsed.net else {
            panic!("not ipv4")
        };
        assert_eq!(ip.header().ihl(), 6);
        assert_eq!(ip.header().ttl(), 64);
        assert_eq!(bench_udp(3, MacAddr::BROADCAST)[0].len(), 60);
    }
}
