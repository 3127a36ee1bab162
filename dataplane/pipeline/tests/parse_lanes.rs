//! The telemetry stages' fast parse (untagged IPv4 with or without the current plan's shim)
//! and their general parse give the same verdicts, bytes, counters, digest records and
//! FlowRadar counts for any frame: common frames, and the same frames with random bytes
//! changed or cut short, on every role a switch plays, with port MTUs that leave room for
//! the shim or not.

mod common;

use pipeline::emulator::Emulator;
use pipeline::{BurstVerdicts, PacketBuf, VecFrame};
use proptest::prelude::*;
use telemetry::pint::encoder::SwitchPlan;

/// Runs `frame` through switch `at`'s `port` of `emu`: (verdict, bytes after the pipeline).
fn run(emu: &mut Emulator, at: u32, port: usize, frame: &[u8]) -> (u16, Vec<u8>) {
    let mut burst = [VecFrame::new(frame)];
    let mut out = BurstVerdicts::default();
    let p = &mut emu.nodes[at as usize].pipeline;
    p.process_burst(port, &mut burst, 1_000, || 3_500, &mut out);
    (out.verdicts[0], burst[0].data().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn fast_parse_gives_what_the_general_parse_gives(
        kind in 0u8..8,
        at in 0u32..3,
        wrong_tag in any::<bool>(),
        incomplete in any::<bool>(),
        edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
        cut in proptest::option::of(0usize..80),
        // Around the frames' IPv4 lengths (46 to 81 bytes), so that some take a shim and
        // some no longer fit one, or are too long for the port at all.
        mtu in prop_oneof![Just(1500u16), 40u16..100],
    ) {
        let (mut fast, mut general) = (
            common::line_with_mtu(true, false, mtu),
            common::line_with_mtu(false, false, mtu),
        );
        let plan = SwitchPlan::compile(common::PAPER, 1).unwrap();
        let tag = if wrong_tag { plan.tag() ^ 1 } else { plan.tag() };
        let (port, mut frame) = common::arriving(kind, at, tag, incomplete);
        for (i, b) in edits {
            if let Some(x) = frame.get_mut(i) {
                *x = b;
            }
        }
        if let Some(c) = cut {
            frame.truncate(c);
        }
        // Twice, so that a packet counted in a flow that is no longer new takes part.
        for _ in 0..2 {
            prop_assert_eq!(run(&mut fast, at, port, &frame), run(&mut general, at, port, &frame));
        }
        let diff = common::difference(&mut fast, &mut general, at, 1_000_000_000);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
    }
}

/// The frames the property starts from are the common ones: each is forwarded with
/// telemetry through the fast parse (so the property compares real work, not two drops).
#[test]
fn base_frames_are_forwarded() {
    let plan = SwitchPlan::compile(common::PAPER, 1).unwrap();
    for at in 0..3u32 {
        for kind in 0..8u8 {
            let mut emu = common::line(true, false);
            let (port, frame) = common::arriving(kind, at, plan.tag(), false);
            let (v, _) = run(&mut emu, at, port, &frame);
            assert!(v & pipeline::DROPPED == 0, "kind {kind} at {at}: {v:#x}");
            let t = &emu.counters(at).telemetry;
            let recorded = t.get(pipeline::TelemetryEvent::DigestRecorded);
            assert_eq!(recorded, u64::from(at == 2), "kind {kind} at {at}: {t:?}");
            assert_eq!(
                t.total() - recorded,
                1,
                "one shim event: kind {kind} at {at}: {t:?}"
            );
        }
    }
}

/// Every common frame, on every role, at every port MTU around its length, with and without
/// its shim: the fast and the general parse agree where the shim just fits, just does not,
/// where the frame is too long for the port, and where a frame from the fabric lacks its
/// shim (the random edits of the property above rarely land on these boundaries).
#[test]
fn fast_and_general_parse_agree_at_every_mtu() {
    let plan = SwitchPlan::compile(common::PAPER, 1).unwrap();
    for mtu in 40u16..100 {
        for at in 0..3u32 {
            // The first switch takes frames from its host, which never carry a shim.
            let shims: &[_] = if at == 0 {
                &[None]
            } else {
                &[Some((plan.tag(), false)), None]
            };
            for (kind, &shim) in (0..8u8).flat_map(|k| shims.iter().map(move |s| (k, s))) {
                let (mut fast, mut general) = (
                    common::line_with_mtu(true, false, mtu),
                    common::line_with_mtu(false, false, mtu),
                );
                let (port, frame) = common::arriving_as(kind, at, shim);
                let a = run(&mut fast, at, port, &frame);
                let b = run(&mut general, at, port, &frame);
                assert_eq!(a, b, "mtu {mtu} at {at} kind {kind}");
                let diff = common::difference(&mut fast, &mut general, at, 1_000_000_000);
                assert!(
                    diff.is_none(),
                    "mtu {mtu} at {at} kind {kind}: {}",
                    diff.unwrap_or_default()
                );
            }
        }
    }
}

/// A UDP or TCP packet whose IPv4 total length ends inside its transport header, in a frame
/// padded to the minimum: the bytes after the total length are padding, not ports, so the
/// flow (FlowRadar's key, the digest's) is the same whatever the padding holds, in both
/// parses (the padding was read as the ports: a flow that did not exist, and an ECMP choice
/// by padding).
#[test]
fn padding_after_the_ip_packet_is_not_read_as_ports() {
    for kind in [0u8, 1] {
        for total in [20u16, 24, 27] {
            let frame_with = |pad: u8| {
                let (port, mut frame) = common::arriving_as(kind, 0, None);
                frame[16..18].copy_from_slice(&total.to_be_bytes());
                telemetry::wire::ipv4::Ipv4Packet::new_unchecked(&mut frame[14..]).fill_checksum();
                for b in &mut frame[14 + usize::from(total)..] {
                    *b = pad;
                }
                (port, frame)
            };
            for fast in [true, false] {
                let (mut zeros, mut ones) = (common::line(fast, false), common::line(fast, false));
                let (port, a) = frame_with(0);
                let (_, b) = frame_with(0xaa);
                let (va, _) = run(&mut zeros, 0, port, &a);
                let (vb, _) = run(&mut ones, 0, port, &b);
                assert_eq!(va, vb, "kind {kind} total {total}");
                assert!(
                    va & pipeline::DROPPED == 0,
                    "kind {kind} total {total}: {va:#x}"
                );
                let diff = common::difference(&mut zeros, &mut ones, 0, 1_000_000_000);
                assert!(
                    diff.is_none(),
                    "kind {kind} total {total} fast {fast}: {}",
                    diff.unwrap_or_default()
                );
            }
        }
    }
}

/// A frame of 64 KiB and more whose IPv4 total length is 0 (as captures of segmentation
/// offload show them): the fast parse turns it down as the general one does (malformed),
/// at the edge and in transit, and nothing is forwarded with a length of 0.
#[test]
fn a_total_length_below_the_header_is_malformed_in_a_giant_frame() {
    let plan = SwitchPlan::compile(common::PAPER, 1).unwrap();
    for at in 0..2u32 {
        let shim = (at > 0).then_some((plan.tag(), false));
        let (port, mut frame) = common::arriving_as(0, at, shim);
        let l3 = if at == 0 { 14 } else { 22 };
        frame[l3 + 2..l3 + 4].copy_from_slice(&0u16.to_be_bytes());
        telemetry::wire::ipv4::Ipv4Packet::new_unchecked(&mut frame[l3..]).fill_checksum();
        frame.resize(65_600, 0);
        let (mut fast, mut general) = (
            common::line_with_mtu(true, false, 9000),
            common::line_with_mtu(false, false, 9000),
        );
        let a = run(&mut fast, at, port, &frame);
        let b = run(&mut general, at, port, &frame);
        assert!(a == b, "at {at}: verdicts {:#x} and {:#x}", a.0, b.0);
        assert_eq!(
            a.0,
            pipeline::DROPPED | pipeline::DropReason::Malformed as u16,
            "at {at}"
        );
    }
}

/// A shim of a plan this switch does not hold is passed on in transit only where it fits the
/// egress MTU, as a known plan's is; where it does not, it is removed and counted.
#[test]
fn an_unknown_plans_shim_that_no_longer_fits_is_removed_in_transit() {
    let plan = SwitchPlan::compile(common::PAPER, 1).unwrap();
    let (port, frame) = common::arriving(0, 1, plan.tag() ^ 1, false);
    let ip_len = u16::from_be_bytes([frame[22 + 2], frame[22 + 3]]);
    for (mtu, kept) in [(ip_len + 8, true), (ip_len + 7, false)] {
        let mut emu = common::line_with_mtu(true, false, mtu);
        let (v, out) = run(&mut emu, 1, port, &frame);
        assert!(v & pipeline::DROPPED == 0, "mtu {mtu}: {v:#x}");
        let t = &emu.counters(1).telemetry;
        assert_eq!(t.get(pipeline::TelemetryEvent::UnknownPlan), 1);
        assert_eq!(
            t.get(pipeline::TelemetryEvent::NoTelemetryMtu),
            u64::from(!kept),
            "mtu {mtu}"
        );
        let ty = u16::from_be_bytes([out[12], out[13]]);
        assert_eq!(ty == 0x0800, !kept, "mtu {mtu}: EtherType {ty:#x}");
        assert_eq!(out.len(), frame.len() - if kept { 0 } else { 8 });
    }
}
