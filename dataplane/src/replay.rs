//! What a capture file named by a `net_pcap` device's `rx_pcap=` holds, read with libpcap
//! as the driver reads it: the same formats (pcap of either resolution and byte order,
//! pcapng), the same tolerance of real-world files (snap lengths, option lists), and the
//! same place to stop when a record is bad.

use std::path::Path;

/// libpcap's link type of Ethernet frames (`DLT_EN10MB`).
const LINKTYPE_ETHERNET: i32 = 1;

/// What a capture file holds, as far as the switch's start-up needs to know.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureScan {
    /// Frames libpcap reads before its first fault (all an `infinite_rx` device replays).
    pub frames: u64,
    /// Bytes of the longest frame, as captured.
    pub largest: usize,
    /// Frames captured shorter than they were on the wire (a snap length): the switch
    /// drops those whose IPv4 packet was cut as `truncated`.
    pub cut_frames: u64,
    /// The link type when it is not Ethernet, as `NAME (number)`.
    pub foreign_link: Option<String>,
    /// Why libpcap stopped before the end of the file (a record cut short by a capture
    /// stopped mid-write, a corrupt record header, an interface of another link type): an
    /// `infinite_rx` device replays the frames before it and none after; another reads on.
    pub stopped: Option<String>,
}

/// Reads the capture at `path` through: an error when libpcap cannot open it (not a
/// capture, a format it does not know, an empty file), with libpcap's reason.
pub fn scan(path: &Path) -> anyhow::Result<CaptureScan> {
    let mut cap = pcap::Capture::from_file(path).map_err(|e| anyhow::anyhow!("{}", reason(e)))?;
    let link = cap.get_datalink();
    let mut out = CaptureScan {
        foreign_link: (link.0 != LINKTYPE_ETHERNET).then(|| {
            let name = link.get_name().unwrap_or_else(|_| "unknown".into());
            format!("{name} ({})", link.0)
        }),
        ..CaptureScan::default()
    };
    loop {
        match cap.next_packet() {
            Ok(p) => {
                out.frames += 1;
                out.largest = out.largest.max(p.data.len());
                out.cut_frames += u64::from(p.header.caplen < p.header.len);
            }
            Err(pcap::Error::NoMorePackets) => break,
            Err(e) => {
                out.stopped = Some(reason(e));
                break;
            }
        }
    }
    Ok(out)
}

/// libpcap's words for an error, without the crate's prefix.
fn reason(e: pcap::Error) -> String {
    match e {
        pcap::Error::PcapError(s) if !s.is_empty() => s,
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{bench_udp, write_pcap, write_pcapng};
    use telemetry::wire::MacAddr;

    /// A pcap file header (microsecond magic, little-endian) with `snaplen` and `link`,
    /// then records of (captured bytes, length on the wire).
    fn pcap_bytes(snaplen: u32, link: u32, records: &[(&[u8], u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0xa1b2_c3d4u32.to_le_bytes());
        b.extend(2u16.to_le_bytes());
        b.extend(4u16.to_le_bytes());
        b.extend([0u8; 8]);
        b.extend(snaplen.to_le_bytes());
        b.extend(link.to_le_bytes());
        for (i, (data, len)) in records.iter().enumerate() {
            b.extend((1_700_000_000u32 + i as u32).to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend((data.len() as u32).to_le_bytes());
            b.extend(len.to_le_bytes());
            b.extend(*data);
        }
        b
    }

    #[test]
    fn captures_are_read_as_libpcap_reads_them() {
        let mut frames = bench_udp(5, MacAddr([2, 0, 0, 0, 0, 1]));
        frames[2].extend([0u8; 100]);
        let dir = std::env::temp_dir().join(format!("pint-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let whole = |frames: u64| CaptureScan {
            frames,
            largest: 160,
            ..CaptureScan::default()
        };
        let pcap = dir.join("f.pcap");
        write_pcap(&pcap, frames.iter().map(|f| f.as_slice())).unwrap();
        assert_eq!(scan(&pcap).unwrap(), whole(5));
        let ng = dir.join("f.pcapng");
        write_pcapng(&ng, frames.iter().map(|f| f.as_slice())).unwrap();
        assert_eq!(scan(&ng).unwrap(), whole(5));

        // A snap length (`tcpdump -s 96`): read, its frames counted as cut.
        let short = &frames[0][..40];
        let snapped = dir.join("snapped.pcap");
        std::fs::write(&snapped, pcap_bytes(40, 1, &[(short, 60), (short, 1060)])).unwrap();
        let s = scan(&snapped).unwrap();
        assert_eq!((s.frames, s.cut_frames, s.largest), (2, 2, 40));
        assert_eq!(s.stopped, None);
        // A header snap length of 0, or below the records' lengths, as real files have.
        for snaplen in [0, 20] {
            std::fs::write(&snapped, pcap_bytes(snaplen, 1, &[(&frames[0], 60)])).unwrap();
            assert_eq!(scan(&snapped).unwrap().frames, 1, "snaplen {snaplen}");
        }

        // Other link types are named.
        let cooked = dir.join("cooked.pcap");
        std::fs::write(&cooked, pcap_bytes(65535, 113, &[(short, 40)])).unwrap();
        assert_eq!(
            scan(&cooked).unwrap().foreign_link.as_deref(),
            Some("LINUX_SLL (113)")
        );

        // Cut short in the last record (a capture stopped mid-write): the frames before it
        // count, and why libpcap stopped is said.
        for whole in [&pcap, &ng] {
            let cut = dir.join("cut");
            let bytes = std::fs::read(whole).unwrap();
            std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
            let s = scan(&cut).unwrap();
            assert_eq!(s.frames, 4, "{}", whole.display());
            assert!(s.stopped.is_some(), "{}: {s:?}", whole.display());
        }

        // Neither format, empty, absent: an error with libpcap's reason.
        let junk = dir.join("junk");
        std::fs::write(&junk, b"not a capture at all").unwrap();
        let e = scan(&junk).unwrap_err().to_string();
        assert!(e.contains("format"), "{e}");
        std::fs::write(&junk, b"").unwrap();
        assert!(scan(&junk).is_err());
        assert!(scan(&dir.join("absent")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
