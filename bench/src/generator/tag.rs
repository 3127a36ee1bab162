//! Flow tags: every data packet with room for one carries its flow's number and a per-flow
//! sequence number at the start of its transport payload, so that a receiver can count loss
//! per flow from sequence gaps and see reordering within a flow, whatever the switches in
//! between did to the headers.
//!
//! Tag layout (big-endian): magic `PGT1` (4 bytes), flow (4), sequence number (4): 12 bytes,
//! at an even offset of the segment, so that changing the sequence number changes whole
//! 16-bit words of the transport checksum (patched incrementally, RFC 1624).

use std::net::Ipv4Addr;

use serde::Serialize;

use super::senders::PerSender;

/// Bytes of a flow tag.
pub const TAG_LEN: usize = 12;
const MAGIC: [u8; 4] = *b"PGT1";

/// Most flows a receiver tracks (higher flow numbers are counted as foreign).
pub const MAX_TRACKED_FLOWS: u32 = 1 << 22;

/// A data packet's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTag {
    /// The flow's number in the sender's pool.
    pub flow: u32,
    /// The packet's number in its flow (tagged packets only), from 0.
    pub seq: u32,
}

impl FlowTag {
    /// The tag's bytes.
    pub fn encode(&self) -> [u8; TAG_LEN] {
        let mut b = [0u8; TAG_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..12].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The tag `payload` starts with, if any.
    pub fn decode(payload: &[u8]) -> Option<FlowTag> {
        let b = payload.get(..TAG_LEN)?;
        if b[0..4] != MAGIC {
            return None;
        }
        Some(FlowTag {
            flow: u32::from_be_bytes(b[4..8].try_into().ok()?),
            seq: u32::from_be_bytes(b[8..12].try_into().ok()?),
        })
    }
}

/// Where a frame's transport payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    /// The IPv4 source address (tells senders apart).
    pub src: u32,
    /// TCP (else UDP).
    pub tcp: bool,
    /// Destination port.
    pub dport: u16,
    /// Offset of the transport header in the frame.
    pub l4_at: usize,
    /// Offset of the payload in the frame.
    pub payload_at: usize,
}

impl Transport {
    /// The transport layer of an Ethernet II / IPv4 frame carrying UDP or TCP (the first
    /// fragment or an unfragmented packet), behind up to two VLAN tags (802.1Q, 802.1ad: a
    /// receiver on a tagging trunk), if it is one and its headers are whole.
    pub fn parse(f: &[u8]) -> Option<Transport> {
        let mut ip = 14;
        for _ in 0..2 {
            match f.get(ip - 2..ip)? {
                [0x81, 0x00] | [0x88, 0xa8] => ip += 4,
                _ => break,
            }
        }
        if f.get(ip - 2..ip)? != [0x08, 0x00] || f.get(ip)? >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(f[ip] & 0x0f) * 4;
        let frag_offset = u16::from_be_bytes([*f.get(ip + 6)?, *f.get(ip + 7)?]) & 0x1fff;
        if ihl < 20 || frag_offset != 0 {
            return None;
        }
        let l4_at = ip + ihl;
        let tcp = match f.get(ip + 9)? {
            6 => true,
            17 => false,
            _ => return None,
        };
        let header = if tcp {
            usize::from(f.get(l4_at + 12)? >> 4) * 4
        } else {
            8
        };
        if header < 8 || f.len() < l4_at + header {
            return None;
        }
        Some(Transport {
            src: u32::from_be_bytes([f[ip + 12], f[ip + 13], f[ip + 14], f[ip + 15]]),
            tcp,
            dport: u16::from_be_bytes([f[l4_at + 2], f[l4_at + 3]]),
            l4_at,
            payload_at: l4_at + header,
        })
    }

    /// Offset of the transport checksum.
    pub fn checksum_at(&self) -> usize {
        self.l4_at + if self.tcp { 16 } else { 6 }
    }
}

/// One's-complement addition of 16-bit words.
#[inline(always)]
fn add16(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// A tag whose sequence number is set as its frame is sent: where it is, and the frame's
/// transport checksum with the sequence number at zero (the frame is built that way). The
/// IPv4 identification is set from the sequence number too, so that a frame sent again
/// (a replayed cycle) is another packet to the switches' packet ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagPatch {
    /// Offset of the tag's sequence number.
    pub seq_at: u16,
    /// Offset of the transport checksum.
    pub checksum_at: u16,
    /// One's-complement sum the checksum stands for, sequence number zero (the checksum
    /// inverted).
    pub sum_at_zero: u16,
    /// One's-complement sum of the IPv4 header with its identification at zero.
    pub ip_sum_at_zero: u16,
}

/// Offset of the IPv4 header in the frames pint-gen builds (untagged Ethernet).
const L3: usize = 14;

impl TagPatch {
    /// The patch for `frame`, built with the tag at `tag_at` and sequence number zero; None
    /// when the frame is not UDP or TCP, or its UDP checksum is off (zero).
    pub fn new(frame: &[u8], tag_at: usize) -> Option<TagPatch> {
        let t = Transport::parse(frame)?;
        let c = u16::from_be_bytes([
            *frame.get(t.checksum_at())?,
            *frame.get(t.checksum_at() + 1)?,
        ]);
        let seq = frame.get(tag_at + 8..tag_at + 12)?;
        let ip = frame.get(L3..L3 + 20)?;
        if (!t.tcp && c == 0)
            || seq != [0; 4]
            || tag_at % 2 != t.l4_at % 2
            || t.l4_at != L3 + 20
            || ip[4..6] != [0, 0]
        {
            return None;
        }
        Some(TagPatch {
            seq_at: (tag_at + 8) as u16,
            checksum_at: t.checksum_at() as u16,
            sum_at_zero: !c,
            ip_sum_at_zero: !u16::from_be_bytes([ip[10], ip[11]]),
        })
    }

    /// Writes `seq` and the checksum that goes with it (RFC 1624: adding the new words to the
    /// sum; a result of zero is sent as 0xffff, which UDP needs and TCP accepts as the same
    /// value). No byte of the frame is read.
    #[inline(always)]
    pub fn apply(&self, frame: &mut [u8], seq: u32) {
        let sum = add16(add16(self.sum_at_zero, (seq >> 16) as u16), seq as u16);
        let mut c = !sum;
        if c == 0 {
            c = 0xffff;
        }
        let at = usize::from(self.seq_at);
        frame[at..at + 4].copy_from_slice(&seq.to_be_bytes());
        let at = usize::from(self.checksum_at);
        frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
        // The identification: the sequence number's low 16 bits (the transport checksum
        // does not cover it); the header checksum as above.
        let ident = seq as u16;
        frame[L3 + 4..L3 + 6].copy_from_slice(&ident.to_be_bytes());
        let ip = !add16(self.ip_sum_at_zero, ident);
        frame[L3 + 10..L3 + 12].copy_from_slice(&ip.to_be_bytes());
    }
}

/// Receive state of one flow.
#[derive(Debug, Clone, Copy, Default)]
struct FlowRx {
    /// Highest sequence number seen, plus one.
    next: u32,
    /// The 64 sequence numbers below `next`: bit `i` set while `next - 1 - i` is missing.
    missing: u64,
    received: u64,
    /// Sequence numbers skipped over (lost, or late).
    skipped: u64,
    /// Packets that came after a higher sequence number of their flow, filling a gap.
    late: u64,
    /// Packets whose sequence number had already arrived.
    duplicates: u64,
    /// Packets more than 64 numbers behind the highest: late or duplicates, not told
    /// apart.
    too_old: u64,
}

impl FlowRx {
    /// Packets missing: skipped over and never seen late.
    fn lost(&self) -> u64 {
        self.skipped.saturating_sub(self.late)
    }

    /// Counts sequence number `seq`: ahead of the flow (a gap of those skipped), a missing
    /// one arriving late, or one already seen. Serial-number arithmetic: the flow's numbers
    /// may wrap. The flow's first packet is ahead of 0, whatever its number.
    fn take(&mut self, seq: u32) {
        let first = self.received == 0;
        self.received += 1;
        let ahead = seq.wrapping_sub(self.next) as i32;
        if first || ahead >= 0 {
            let gap = seq.wrapping_sub(self.next);
            self.skipped += u64::from(gap);
            // Shift in `seq` itself (received) and the `gap` numbers before it (missing).
            let gap_bits = if gap >= 63 {
                !1
            } else {
                ((1u64 << gap) - 1) << 1
            };
            self.missing = self.missing.checked_shl(gap.saturating_add(1)).unwrap_or(0) | gap_bits;
            self.next = seq.wrapping_add(1);
            return;
        }
        let back = (-(i64::from(ahead)) - 1) as u32;
        if back >= 64 {
            // Too far back to tell late from a duplicate: taken as neither, so that
            // duplicates hide no loss (its gap stays counted).
            self.too_old += 1;
            return;
        }
        if self.missing & (1 << back) == 0 {
            self.duplicates += 1;
            return;
        }
        // Missing: late, filling its gap.
        self.missing &= !(1 << back);
        self.late += 1;
    }
}

/// Counts tagged packets per flow as they arrive. A flow is its sender's flow number and
/// the sender's IPv4 source address ([`PerSender`]): a receiver that hears several
/// generators keeps their flows apart. Loss is counted from sequence gaps (a packet lost
/// after a flow's last received packet is not seen here: the sender's totals show it); a
/// packet that arrives after a higher sequence number of its flow is late (reordered), and
/// fills the gap it was counted in. Sequence numbers start at 0 when the sender starts, so a
/// receiver should start first.
#[derive(Debug, Clone, Default)]
pub struct FlowLossCounter {
    flows: PerSender<FlowRx>,
    tagged: u64,
    foreign: u64,
}

/// Per-flow loss and reordering of tagged packets.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FlowLossReport {
    /// Tagged packets received.
    pub tagged: u64,
    /// Tags with a flow number above what a receiver tracks (or from more senders than it
    /// keeps apart).
    pub foreign: u64,
    /// Flows (sender and flow number) that sent at least one tagged packet here.
    pub flows: u64,
    /// Packets missing from sequence gaps, all flows.
    pub lost: u64,
    /// Packets that arrived after a later one of their flow.
    pub late: u64,
    /// Packets whose flow and sequence number had already arrived (a network that
    /// duplicates): neither late nor filling a gap.
    pub duplicates: u64,
    /// Packets that arrived more than 64 numbers after their place in their flow: late or
    /// duplicates, not told apart; their numbers stay counted lost (so `lost` may count
    /// as many too many when they were late).
    pub too_old: u64,
    /// Flows with at least one packet missing.
    pub flows_with_loss: u64,
    /// The flows that lost most, most first, at most 10.
    pub worst: Vec<FlowLoss>,
}

/// One flow's loss, as [`FlowLossReport::worst`] lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowLoss {
    /// The IPv4 source address of the flow's packets (which sender it came from).
    pub sender: Ipv4Addr,
    /// The flow's number at its sender.
    pub flow: u32,
    /// Its packets missing from sequence gaps.
    pub lost: u64,
    /// Its packets received.
    pub received: u64,
}

impl FlowLossCounter {
    /// Counts one tagged packet from the sender with IPv4 source address `sender`.
    #[inline]
    pub fn record(&mut self, sender: u32, tag: FlowTag) {
        let tracked = (tag.flow < MAX_TRACKED_FLOWS)
            .then(|| self.flows.get_mut(sender, tag.flow))
            .flatten();
        let Some(f) = tracked else {
            self.foreign += 1;
            return;
        };
        self.tagged += 1;
        f.take(tag.seq);
    }

    /// The counts so far.
    pub fn report(&self) -> FlowLossReport {
        let mut r = FlowLossReport {
            tagged: self.tagged,
            foreign: self.foreign,
            ..FlowLossReport::default()
        };
        let mut worst = Vec::new();
        for ((sender, flow), f) in self.flows.iter() {
            if f.received == 0 {
                continue;
            }
            r.flows += 1;
            r.lost += f.lost();
            r.late += f.late;
            r.duplicates += f.duplicates;
            r.too_old += f.too_old;
            if f.lost() > 0 {
                r.flows_with_loss += 1;
                worst.push(FlowLoss {
                    sender: Ipv4Addr::from(sender),
                    flow,
                    lost: f.lost(),
                    received: f.received,
                });
            }
        }
        worst.sort_by(|a, b| (b.lost, a.sender, a.flow).cmp(&(a.lost, b.sender, b.flow)));
        worst.truncate(10);
        r.worst = worst;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::frame::{FlowTuple, PacketFields, emit_frame};
    use telemetry::wire::MacAddr;

    fn frame(tcp: bool, len: usize, tag: FlowTag) -> Vec<u8> {
        let mut buf = vec![0u8; 2048];
        let flow = FlowTuple {
            src: Ipv4Addr::new(10, 0, 0, 7),
            dst: Ipv4Addr::new(10, 1, 0, 9),
            sport: 1234,
            dport: 80,
            tcp,
        };
        let f = PacketFields {
            dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            frame_len: len,
            ttl: 64,
            // As a replayed frame carries it: the tag's number's low bits.
            ident: tag.seq as u16,
            tcp_seq: 77,
            payload: &tag.encode(),
        };
        let n = emit_frame(&mut buf, &flow, &f).expect("fits");
        buf.truncate(n);
        buf
    }

    /// The transport checksum of `f` verifies (the sum over the pseudo-header and segment
    /// is all ones).
    fn checksum_ok(f: &[u8]) -> bool {
        use telemetry::wire::checksum::{fold, ones_complement_sum};
        let t = Transport::parse(f).unwrap();
        let mut sum = u64::from(ones_complement_sum(&f[t.l4_at..]));
        sum += u64::from(ones_complement_sum(&f[26..34]));
        sum += u64::from(f[23]) + (f.len() - t.l4_at) as u64;
        fold(sum) == 0xffff
    }

    #[test]
    fn patched_sequence_numbers_keep_the_checksum_right() {
        for tcp in [false, true] {
            for len in [60usize, 66, 61, 1514] {
                if len < if tcp { 54 } else { 42 } + TAG_LEN {
                    continue;
                }
                let mut f = frame(tcp, len, FlowTag { flow: 3, seq: 0 });
                let t = Transport::parse(&f).expect("parses");
                assert_eq!((t.tcp, t.dport), (tcp, 80));
                let patch = TagPatch::new(&f, t.payload_at).expect("patchable");
                for seq in [1u32, 0xffff, 0x1_0000, 0xdead_beef, u32::MAX, 0, 42] {
                    patch.apply(&mut f, seq);
                    let fresh = frame(tcp, len, FlowTag { flow: 3, seq });
                    // The same bytes as a frame built with that number, but for the two
                    // spellings of a zero sum.
                    let at = t.checksum_at();
                    assert_eq!(f[..at], fresh[..at], "seq {seq}");
                    assert_eq!(f[at + 2..], fresh[at + 2..], "seq {seq}");
                    assert!(checksum_ok(&f), "seq {seq}");
                    let header = telemetry::wire::checksum::ones_complement_sum(&f[14..34]);
                    assert_eq!(header, 0xffff, "seq {seq}: IPv4 header checksum");
                    assert_eq!(u16::from_be_bytes([f[18], f[19]]), seq as u16, "seq {seq}");
                    let tag = FlowTag::decode(&f[t.payload_at..]).expect("tag");
                    assert_eq!(tag, FlowTag { flow: 3, seq });
                }
            }
        }
        // Not built at zero: refused.
        let f = frame(false, 60, FlowTag { flow: 3, seq: 9 });
        assert!(TagPatch::new(&f, 42).is_none());
    }

    #[test]
    fn parse_refuses_other_frames() {
        let f = frame(false, 60, FlowTag { flow: 1, seq: 1 });
        assert!(Transport::parse(&f[..40]).is_none());
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(Transport::parse(&arp).is_none());
        let mut frag = f.clone();
        frag[21] = 1;
        assert!(Transport::parse(&frag).is_none());
        let mut icmp = f;
        icmp[23] = 1;
        assert!(Transport::parse(&icmp).is_none());
        assert!(FlowTag::decode(&[0u8; 12]).is_none());
        assert!(FlowTag::decode(b"PGT1").is_none());
    }

    /// A frame behind one or two VLAN tags (a receiver on a tagging trunk) parses as the
    /// untagged one does, its offsets past the tags.
    #[test]
    fn tagged_frames_parse_past_their_tags() {
        let f = frame(true, 80, FlowTag { flow: 3, seq: 9 });
        let plain = Transport::parse(&f).unwrap();
        // Each tag: its TPID and a TCI (VLAN 5 or 7), between the addresses and the
        // EtherType.
        for tags in [
            &[0x81u8, 0x00, 0, 5][..],
            &[0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 5],
        ] {
            let t = [&f[..12], tags, &f[12..]].concat();
            let shift = t.len() - f.len();
            let got = Transport::parse(&t).unwrap();
            assert_eq!(
                (got.src, got.tcp, got.dport, got.l4_at, got.payload_at),
                (
                    plain.src,
                    plain.tcp,
                    plain.dport,
                    plain.l4_at + shift,
                    plain.payload_at + shift
                )
            );
            assert_eq!(
                FlowTag::decode(&t[got.payload_at..]),
                FlowTag::decode(&f[plain.payload_at..])
            );
        }
    }

    #[test]
    fn loss_and_lateness_per_flow() {
        let mut c = FlowLossCounter::default();
        let tag = |flow, seq| FlowTag { flow, seq };
        let a = u32::from(Ipv4Addr::new(10, 0, 0, 1));
        // Flow 0: 0 1 2 3 4, nothing missing.
        for s in 0..5 {
            c.record(a, tag(0, s));
        }
        // Flow 5: 0 2 3 5 (1 and 4 lost).
        for s in [0, 2, 3, 5] {
            c.record(a, tag(5, s));
        }
        // Flow 9: 0 2 1 3 (1 late, nothing lost).
        for s in [0, 2, 1, 3] {
            c.record(a, tag(9, s));
        }
        // Flow 11: 0 1 3 1 3 (2 lost; 1 and 3 duplicated, which hides nothing).
        for s in [0, 1, 3, 1, 3] {
            c.record(a, tag(11, s));
        }
        c.record(a, tag(MAX_TRACKED_FLOWS, 0));
        let r = c.report();
        let flow = |flow, lost, received| FlowLoss {
            sender: Ipv4Addr::new(10, 0, 0, 1),
            flow,
            lost,
            received,
        };
        assert_eq!(
            r,
            FlowLossReport {
                tagged: 18,
                foreign: 1,
                flows: 4,
                lost: 3,
                late: 1,
                duplicates: 2,
                too_old: 0,
                flows_with_loss: 2,
                worst: vec![flow(5, 2, 4), flow(11, 1, 5)],
            }
        );
    }

    /// Duplicates arriving too far behind to tell from late packets hide no loss: they are
    /// counted apart (they were taken as late, and took their number off the loss).
    #[test]
    fn old_duplicates_hide_no_loss() {
        let mut c = FlowLossCounter::default();
        let a = u32::from(Ipv4Addr::new(10, 0, 0, 1));
        let tag = |seq| FlowTag { flow: 0, seq };
        for s in (0..1000).filter(|s| !(200..300).contains(s)) {
            c.record(a, tag(s));
        }
        for s in 0..100 {
            c.record(a, tag(s));
        }
        let r = c.report();
        assert_eq!((r.lost, r.late, r.duplicates, r.too_old), (100, 0, 0, 100));
    }

    /// Sequence numbers wrap: a gap across the wrap is counted as a gap (even when the
    /// number before the wrap is lost), a late one from before it as late.
    #[test]
    fn sequence_numbers_wrap() {
        let mut c = FlowLossCounter::default();
        let a = u32::from(Ipv4Addr::new(10, 0, 0, 1));
        let tag = |seq| FlowTag { flow: 0, seq };
        // Start near the top: u32::MAX - 2 (the first, as if the earlier ones were lost),
        // then u32::MAX lost, 0, 1, and u32::MAX - 1 late.
        for s in [u32::MAX - 3, u32::MAX - 2, 0, 1, u32::MAX - 1] {
            c.record(a, tag(s));
        }
        let r = c.report();
        let skipped_from_zero = u64::from(u32::MAX - 3);
        assert_eq!((r.late, r.duplicates), (1, 0));
        assert_eq!(
            r.lost,
            skipped_from_zero + 1,
            "u32::MAX lost, nothing else after the start"
        );
    }

    /// A flow whose first tag carries the highest number (a receiver started late) is
    /// counted, not an overflow (it panicked in a debug build).
    #[test]
    fn a_first_tag_at_the_highest_number_is_counted() {
        let mut c = FlowLossCounter::default();
        let a = u32::from(Ipv4Addr::new(10, 0, 0, 1));
        for seq in [u32::MAX, 0, 1] {
            c.record(a, FlowTag { flow: 0, seq });
        }
        let r = c.report();
        assert_eq!((r.tagged, r.late, r.duplicates), (3, 0, 0));
        assert_eq!(r.lost, u64::from(u32::MAX));
    }

    #[test]
    fn senders_with_the_same_flow_numbers_are_counted_apart() {
        // Two generators, each numbering its flows from 0, interleaved at one receiver:
        // neither loses or reorders anything, so nothing may be counted lost or late.
        let (a, b) = (
            u32::from(Ipv4Addr::new(10, 0, 1, 1)),
            u32::from(Ipv4Addr::new(10, 0, 2, 1)),
        );
        let mut c = FlowLossCounter::default();
        for s in 0..100 {
            c.record(a, FlowTag { flow: 0, seq: s });
            if s % 2 == 0 {
                c.record(
                    b,
                    FlowTag {
                        flow: 0,
                        seq: s / 2,
                    },
                );
            }
        }
        // b's flow 0 then loses two packets.
        c.record(b, FlowTag { flow: 0, seq: 52 });
        let r = c.report();
        assert_eq!((r.tagged, r.flows, r.late, r.lost), (151, 2, 0, 2));
        assert_eq!(
            r.worst,
            vec![FlowLoss {
                sender: Ipv4Addr::new(10, 0, 2, 1),
                flow: 0,
                lost: 2,
                received: 51
            }]
        );
    }

    #[test]
    fn the_sender_is_the_source_address() {
        let f = frame(false, 60, FlowTag { flow: 1, seq: 1 });
        let t = Transport::parse(&f).expect("a UDP frame");
        assert_eq!(Ipv4Addr::from(t.src), Ipv4Addr::new(10, 0, 0, 7));
    }
}
