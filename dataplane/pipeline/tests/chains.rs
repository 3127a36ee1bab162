//! A packet longer than its first buffer (a chain, as a device that scatters makes of a
//! frame longer than the mbufs) is dropped as `mtu_exceeded`, with telemetry on and off:
//! the pipeline reads only the first buffer, and a NIC's tx path without the multi-segment
//! offload would send only that and leak the rest.

mod common;

use pipeline::{BurstVerdicts, DROPPED, DropReason, PacketBuf, VecFrame};

/// A frame whose first buffer holds `first` and whose later buffers hold `more` bytes (or
/// whose packet length is `-more` short of its buffer: a length that wrapped).
struct Chain {
    first: VecFrame,
    more: isize,
}

impl PacketBuf for Chain {
    fn data(&self) -> &[u8] {
        self.first.data()
    }
    fn data_mut(&mut self) -> &mut [u8] {
        self.first.data_mut()
    }
    fn pkt_len(&self) -> usize {
        self.first.pkt_len().wrapping_add_signed(self.more)
    }
    fn headroom(&self) -> usize {
        self.first.headroom()
    }
    fn prepend(&mut self, n: usize) -> bool {
        self.first.prepend(n)
    }
    fn adj(&mut self, n: usize) -> bool {
        self.first.adj(n)
    }
}

#[test]
fn a_chained_frame_is_dropped_as_over_the_mtu() {
    for telemetry in [true, false] {
        let mut emu = common::line(true, false);
        if !telemetry {
            emu = pipeline::emulator::Emulator::new(
                telemetry::topology::Topology::line(3),
                pipeline::emulator::EmulatorConfig {
                    plan: None,
                    ..Default::default()
                },
            )
            .unwrap();
        }
        // A host's frame at the first switch, whole and then with 3000 bytes more in a
        // second buffer (its IPv4 packet fits the first: the rest is a trailer).
        let (port, frame) = common::arriving_as(0, 0, None);
        let p = &mut emu.nodes[0].pipeline;
        let mut out = BurstVerdicts::default();
        let mut whole = [Chain {
            first: VecFrame::new(&frame),
            more: 0,
        }];
        p.process_burst(port, &mut whole, 1_000, || 3_500, &mut out);
        assert_eq!(out.verdicts[0] & DROPPED, 0, "telemetry {telemetry}");
        // A chain (3000 bytes more in a second buffer), then a 65549-byte frame whose
        // length the pcap device cut to 16 bits (13), its first buffer full: each dropped
        // and left as it came, neither parsed (the wrapped one's lengths would wrap).
        for (n, more) in [(1, 3000), (2, 13 - frame.len() as isize)] {
            let mut odd = [Chain {
                first: VecFrame::new(&frame),
                more,
            }];
            p.process_burst(port, &mut odd, 1_000, || 3_500, &mut out);
            assert_eq!(
                out.verdicts[0],
                DROPPED | DropReason::MtuExceeded as u16,
                "telemetry {telemetry}, {more} bytes more"
            );
            assert_eq!(p.counters.drops.get(DropReason::MtuExceeded), n);
            assert_eq!(odd[0].first.data(), &frame[..], "left as it came");
        }
    }
}
