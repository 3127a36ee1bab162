use proptest::prelude::*;

use super::*;
use crate::flowradar::wire::EpochFlowSet;
use crate::flowradar::{FlowKey, FlowSet, FlowSetConfig};
use crate::wire::MacAddr;

fn flowset_config() -> FlowSetConfig {
    FlowSetConfig::for_flows(100, 9)
}

fn hello() -> Hello {
    let fs = FlowSet::new(&flowset_config());
    Hello {
        switch_id: 9,
        session: 0x1234,
        epoch_ns: 10_000_000,
        shim_ethertype: 0x88b5,
        shape: Shape::of(&fs),
        filter_seed: fs.filter().seed(),
        table_seeds: vec![fs.table_seed()],
        max_digests: 1024,
        ports: vec![
            PortInfo {
                name: "hosts".into(),
                edge: true,
                capacity_bps: 10_000_000_000,
                mac: MacAddr([2, 0, 0, 0, 0, 1]),
            },
            PortInfo {
                name: "up".into(),
                edge: false,
                capacity_bps: 100_000_000_000,
                mac: MacAddr([2, 0, 0, 0, 0, 2]),
            },
        ],
        plan: Some(PlanText {
            version: 0xabcd_0001,
            digest_bytes: 2,
            text: "global_bits = 16\n".into(),
        }),
    }
}

fn digests(n: usize, flows: u16, plan: u32) -> Vec<WireDigest> {
    (0..n)
        .map(|i| WireDigest {
            key: FlowKey {
                src: 0x0a00_0001 + u32::from(i as u16 % flows),
                dst: 0x0a01_0001,
                src_port: 1000,
                dst_port: 80,
                protocol: 6,
            },
            ingress_port: 1,
            egress_port: 0,
            pid: (i as u32).wrapping_mul(2_654_435_761),
            hops: 3,
            plan_version: plan,
            digest: (i as u64 * 77) & 0xffff,
            time_ns: 1_700_000_000_000_000_000 + i as u64 * 800,
        })
        .collect()
}

impl WireDigest {
    /// This digest as one of flow `f` (its source address tells flows apart).
    fn clone_with_flow(&self, f: u16) -> WireDigest {
        let mut d = *self;
        d.key.src = 0x0a00_0001 + u32::from(f);
        d
    }
}

/// One encoder reset before each batch of different sizes, flows and plans gives each batch
/// the bytes a fresh one gives: nothing of one batch leaks into the next.
#[test]
fn a_reset_encoder_gives_every_batch_its_own_bytes() {
    let lens = |v: u32| if v == 2 { 3 } else { 2 };
    let mut mixed = digests(40, 7, 0xabcd_0001);
    mixed.extend(digests(5, 2, 2));
    let batches = [
        digests(300, 40, 0xabcd_0001),
        digests(3, 1, 0xabcd_0001),
        mixed,
        digests(1024, 500, 2),
        digests(17, 17, 0xabcd_0001),
    ];
    let mut enc = DigestEncoder::default();
    for (i, b) in batches.iter().enumerate() {
        enc.reset();
        assert_eq!(
            enc.encode(i as u16, b, lens),
            encode_digests(i as u16, b, lens),
            "batch {i}"
        );
    }
}

fn session_after_hello() -> Session {
    let mut s = Session::default();
    let f = encode_frame(FrameType::Hello, 0, &hello().payload());
    assert_eq!(s.decode(&f).unwrap(), Frame::Hello(hello()));
    s
}

/// A digests payload byte for byte as `docs/protocol.md` lays it out: two flows, two plans
/// (so each digest names its plan), digests of 2 and 3 bytes, a time step back (a negative
/// zigzag delta) and varints of one and two bytes.
#[test]
fn a_digests_payload_is_laid_out_as_documented() {
    let flow = |src: u32, sport: u16| FlowKey {
        src,
        dst: 0x0a01_0203,
        src_port: sport,
        dst_port: 0x01bb,
        protocol: 17,
    };
    let d = |key, hops, pid, plan_version, digest, time_ns| WireDigest {
        key,
        ingress_port: 4,
        egress_port: 9,
        pid,
        hops,
        plan_version,
        digest,
        time_ns,
    };
    let base = 0x0102_0304_0506_0708u64;
    let batch = [
        d(flow(0x0a00_0001, 0x1234), 3, 0xdead_beef, 7, 0xabcd, base),
        d(
            flow(0x0a00_0002, 0x4321),
            5,
            0x0000_0001,
            8,
            0x12_3456,
            base + 200,
        ),
        d(
            flow(0x0a00_0001, 0x1234),
            3,
            0xffff_fffe,
            7,
            0x00ff,
            base + 199,
        ),
    ];
    let payload = encode_digests(6, &batch, |v| if v == 7 { 2 } else { 3 });
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x00, 0x06][..],                                   // worker 6
        &[0x00, 0x00, 0x00, 0x03],                           // 3 digests
        &[0, 0, 0, 0x02],                                    // 2 flow definitions
        &[0x02],                                             // 2 plans
        &base.to_be_bytes(),                                 // base time
        &[0, 0, 0, 7], &[0, 0, 0, 8],                        // plan versions
        &[0x00],                                             // slot 0:
        &[0x0a, 0, 0, 1, 0x0a, 1, 2, 3, 0x12, 0x34, 0x01, 0xbb, 17, 4, 9, 3],
        &[0x01],                                             // slot 1:
        &[0x0a, 0, 0, 2, 0x0a, 1, 2, 3, 0x43, 0x21, 0x01, 0xbb, 17, 4, 9, 5],
        // slot 0, plan 0, packet ID, 2 digest bytes, +0 ns
        &[0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, 0xab, 0xcd, 0x00],
        // slot 1, plan 1, packet ID, 3 digest bytes, +200 ns (zigzag 400: 0x90 0x03)
        &[0x01, 0x01, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x90, 0x03],
        // slot 0, plan 0, packet ID, 2 digest bytes, -1 ns (zigzag 1)
        &[0x00, 0x00, 0xff, 0xff, 0xff, 0xfe, 0x00, 0xff, 0x01],
    ]
    .concat();
    assert_eq!(payload, expected);
}

#[test]
fn every_frame_round_trips() {
    let mut s = session_after_hello();
    let batch = digests(500, 20, 0xabcd_0001);
    let payload = encode_digests(0, &batch, |_| 2);
    let f = encode_frame(FrameType::Digests, 1, &payload);
    assert_eq!(
        s.decode(&f).unwrap(),
        Frame::Digests(DigestBatch {
            worker: 0,
            digests: batch.clone(),
            by_flow: FlowRuns::default(),
            unknown_flow: 0,
        })
    );
    // About ten bytes per digest on the wire, frame header and flow table included.
    let per = f.len() as f64 / batch.len() as f64;
    assert!(per <= 12.0, "{per} bytes per digest");

    let plan = PlanText {
        version: 0x0000_0002,
        digest_bytes: 3,
        text: "global_bits = 24\n".into(),
    };
    let f = encode_frame(FrameType::Plan, 2, &plan.payload());
    assert_eq!(s.decode(&f).unwrap(), Frame::Plan(plan));
    // A batch mixing both plans.
    let mut mixed = digests(10, 2, 0xabcd_0001);
    mixed.extend(digests(10, 2, 2));
    let payload = encode_digests(0, &mixed, |v| if v == 2 { 3 } else { 2 });
    let Frame::Digests(b) = s
        .decode(&encode_frame(FrameType::Digests, 3, &payload))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(b.digests, mixed);

    let mut fs = FlowSet::new(&flowset_config());
    for d in &batch {
        fs.update(&d.key, 100);
    }
    let e = EpochFlowSet {
        switch_id: 9,
        epoch: 170_000_000_000,
        flowset: fs,
    };
    let f = encode_frame(
        FrameType::FlowSet,
        5,
        &encode_flowset(0, 1, 9, e.epoch, &e.flowset),
    );
    assert_eq!(
        s.decode(&f).unwrap(),
        Frame::FlowSet(FlowSetFrame {
            worker: 0,
            epochs: 1,
            flowset: e
        })
    );
    assert_eq!(s.gaps, 1, "sequence 4 was skipped");

    let st = Stats {
        counters: vec![("rx_packets".into(), 5), ("drops".into(), 0)],
    };
    let f = encode_frame(FrameType::Stats, 6, &st.payload());
    assert_eq!(s.decode(&f).unwrap(), Frame::Stats(st));

    let probes: Vec<WireProbe> = (0..30u64)
        .map(|i| WireProbe {
            key: batch[0].key,
            stream: 3,
            seq: 100 + i,
            sent_ns: 1_700_000_000_000_000_000 + i * 100_000_000,
            // One arrives out of order (an earlier arrival time).
            recv_ns: 1_700_000_000_000_200_000 + i * 100_000_000 - u64::from(i == 7) * 150_000_000,
        })
        .collect();
    let f = encode_frame(FrameType::Probes, 7, &encode_probes(0, &probes));
    assert_eq!(
        s.decode(&f).unwrap(),
        Frame::Probes(ProbeBatch { worker: 0, probes })
    );
}

/// A hello with every field at its cap (plan text, workers, ports and their names) fits
/// the frame a connection may send before its hello.
#[test]
fn the_largest_hello_fits_the_first_frame() {
    let fs = FlowSet::new(&flowset_config());
    let h = Hello {
        table_seeds: vec![fs.table_seed(); MAX_WORKERS],
        ports: (0..MAX_PORTS)
            .map(|i| PortInfo {
                name: format!("{i:0>255}"),
                edge: false,
                capacity_bps: u64::MAX,
                mac: MacAddr([2, 0, 0, 0, 0, i as u8]),
            })
            .collect(),
        plan: Some(PlanText {
            version: 1,
            digest_bytes: 8,
            text: "#".repeat(MAX_PLAN_TEXT),
        }),
        ..hello()
    };
    let f = encode_frame(FrameType::Hello, 0, &h.payload());
    assert!(f.len() <= MAX_HELLO_FRAME, "{} bytes", f.len());
    assert!(Session::default().decode(&f).is_ok());
}

/// A hello's epoch length is one a switch can have (1 ms to a minute): anything else
/// would overflow the sink's epoch arithmetic (twice it, an epoch's end).
#[test]
fn a_hello_with_an_epoch_no_switch_has_is_refused() {
    for epoch_ns in [0, 999_999, MAX_EPOCH_NS + 1, u64::MAX] {
        let h = Hello {
            epoch_ns,
            ..hello()
        };
        let f = encode_frame(FrameType::Hello, 0, &h.payload());
        assert_eq!(
            Session::default().decode(&f).unwrap_err(),
            ProtocolError::BadField("epoch length"),
            "{epoch_ns}"
        );
    }
    for epoch_ns in [1_000_000, MAX_EPOCH_NS] {
        let h = Hello {
            epoch_ns,
            ..hello()
        };
        let f = encode_frame(FrameType::Hello, 0, &h.payload());
        assert!(Session::default().decode(&f).is_ok(), "{epoch_ns}");
    }
}

#[test]
fn frames_out_of_order_or_beyond_the_hello_are_rejected() {
    let mut s = Session::default();
    let early = encode_frame(FrameType::Stats, 0, &Stats::default().payload());
    assert_eq!(s.decode(&early).unwrap_err(), ProtocolError::HelloOrder);
    let mut s = session_after_hello();
    let again = encode_frame(FrameType::Hello, 1, &hello().payload());
    assert_eq!(s.decode(&again).unwrap_err(), ProtocolError::HelloOrder);
    let f = encode_frame(FrameType::Stats, 3, &Stats::default().payload());
    s.decode(&f).unwrap();
    let back = encode_frame(FrameType::Stats, 3, &Stats::default().payload());
    assert!(matches!(
        s.decode(&back).unwrap_err(),
        ProtocolError::BadSequence { after: 3, got: 3 }
    ));
    // A plan nobody declared.
    let payload = encode_digests(0, &digests(3, 1, 77), |_| 2);
    assert_eq!(
        s.decode(&encode_frame(FrameType::Digests, 4, &payload))
            .unwrap_err(),
        ProtocolError::UnknownPlan(77)
    );
    // A worker the hello did not list.
    let payload = encode_digests(1, &digests(3, 1, 0xabcd_0001), |_| 2);
    assert_eq!(
        s.decode(&encode_frame(FrameType::Digests, 5, &payload))
            .unwrap_err(),
        ProtocolError::BadField("worker")
    );
    // More digests than the hello allows per batch.
    let payload = encode_digests(0, &digests(1025, 4, 0xabcd_0001), |_| 2);
    assert_eq!(
        s.decode(&encode_frame(FrameType::Digests, 6, &payload))
            .unwrap_err(),
        ProtocolError::OverLimit("digests in a batch")
    );
    // A flowset of another shape.
    let other = FlowSet::new(&FlowSetConfig::for_flows(5000, 9));
    let e = EpochFlowSet {
        switch_id: 9,
        epoch: 1,
        flowset: other,
    };
    assert!(matches!(
        s.decode(&encode_frame(
            FrameType::FlowSet,
            7,
            &encode_flowset(0, 1, 9, e.epoch, &e.flowset)
        ))
        .unwrap_err(),
        ProtocolError::FlowSet(_)
    ));
    // Lengths.
    assert_eq!(
        frame_len(&[0, 0, 0, 3]).unwrap_err(),
        ProtocolError::BadLength(7)
    );
    assert_eq!(
        frame_len(&[0xff, 0, 0, 0]).unwrap_err(),
        ProtocolError::BadLength(0xff00_0004)
    );
    assert_eq!(frame_len(&[0, 0]).unwrap(), None);
    let mut bad = encode_frame(FrameType::Stats, 8, &Stats::default().payload());
    bad[5] = 1;
    assert_eq!(
        s.decode(&bad).unwrap_err(),
        ProtocolError::UnsupportedVersion(1)
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut s = Session::default();
        let _ = s.decode(&bytes);
        let mut s = session_after_hello();
        let _ = s.decode(&bytes);
        let _ = frame_len(&bytes);
    }

    #[test]
    fn mutated_frames_never_panic(
        which in 0usize..5,
        flips in proptest::collection::vec((0usize..3000, any::<u8>()), 1..8),
        cut in 0usize..3000,
    ) {
        let mut frames = vec![encode_frame(FrameType::Hello, 0, &hello().payload())];
        frames.push(encode_frame(FrameType::Digests, 1, &encode_digests(0, &digests(50, 5, 0xabcd_0001), |_| 2)));
        let mut fs = FlowSet::new(&flowset_config());
        fs.update(&digests(1, 1, 1)[0].key, 60);
        frames.push(encode_frame(FrameType::FlowSet, 2, &encode_flowset(0, 1, 9, 3, &fs)));
        frames.push(encode_frame(FrameType::Stats, 3, &Stats { counters: vec![("a".into(), 1)] }.payload()));
        let probe = WireProbe { key: digests(1, 1, 1)[0].key, stream: 1, seq: 2, sent_ns: 3, recv_ns: 4 };
        frames.push(encode_frame(FrameType::Probes, 4, &encode_probes(0, &[probe, probe])));
        let mut f = frames[which].clone();
        for (at, v) in flips {
            if at < f.len() {
                f[at] ^= v;
            }
        }
        f.truncate(cut.max(1));
        for order in [DigestOrder::Recorded, DigestOrder::ByFlow] {
            let mut s = Session::new(order);
            if which > 0 {
                s.decode(&frames[0]).unwrap();
            }
            let _ = s.decode(&f);
        }
    }

    /// A flowset passed over for want of room is refused exactly when decoding it would
    /// be, for the same reason: a malformed one is never taken as a dropped good one.
    #[test]
    fn passing_over_a_flowset_refuses_what_decoding_refuses(
        flows in 0u32..40,
        flips in proptest::collection::vec((0usize..3000, any::<u8>()), 0..6),
        cut in 1usize..3000,
    ) {
        let mut fs = FlowSet::new(&flowset_config());
        for d in digests(flows as usize, 40, 1) {
            fs.update(&d.key, 60);
        }
        let mut f = encode_frame(FrameType::FlowSet, 1, &encode_flowset(0, 1, 9, 3, &fs));
        for (at, v) in flips {
            // The frame header stays: what differs is the payload.
            if at >= HEADER_LEN && at < f.len() {
                f[at] ^= v;
            }
        }
        if cut > HEADER_LEN && cut < f.len() {
            f.truncate(cut);
            let len = (f.len() - 4) as u32;
            f[..4].copy_from_slice(&len.to_be_bytes());
        }
        let decoded = session_after_hello().decode(&f).map(|_| ());
        let passed = session_after_hello().skip(&f).map(|_| ());
        prop_assert_eq!(passed, decoded);
    }

    /// Grouped by flow, a batch's digests are still the recorded ones, and `by_flow` lists
    /// each once: the flows in the order they first appear, each flow's digests in the
    /// order recorded, with each flow's run ending where its last digest is. Buffers
    /// recycled from a batch of another shape change nothing.
    #[test]
    fn digests_group_by_flow_in_first_appearance_order(
        flows in proptest::collection::vec(0u16..40, 1..300),
        hops in proptest::collection::vec(1u8..6, 40),
        before in 0usize..300,
    ) {
        let batch: Vec<WireDigest> = digests(flows.len(), 1, 0xabcd_0001)
            .iter()
            .zip(&flows)
            .map(|(d, &f)| WireDigest {
                hops: hops[usize::from(f)],
                ..d.clone_with_flow(f)
            })
            .collect();
        let mut s = Session::new(DigestOrder::ByFlow);
        s.decode(&encode_frame(FrameType::Hello, 0, &hello().payload())).unwrap();
        let old = digests(before.max(1), 7, 0xabcd_0001);
        s.recycle(
            old.clone(),
            FlowRuns {
                order: (0..old.len() as u32).rev().collect(),
                ends: vec![old.len() as u32, 1],
            },
        );
        let f = encode_frame(FrameType::Digests, 1, &encode_digests(0, &batch, |_| 2));
        let Ok(Frame::Digests(b)) = s.decode(&f) else {
            panic!("a digest frame");
        };
        prop_assert_eq!(&b.digests, &batch);
        // The expected grouping: flows (key, ports, path length) by first appearance.
        let entry = |d: &WireDigest| (d.key, d.ingress_port, d.egress_port, d.hops);
        let mut firsts = Vec::new();
        for d in &batch {
            if !firsts.contains(&entry(d)) {
                firsts.push(entry(d));
            }
        }
        let all = &batch;
        let want: Vec<u32> = firsts
            .iter()
            .flat_map(|e| (0..all.len() as u32).filter(move |&i| entry(&all[i as usize]) == *e))
            .collect();
        let mut ends = Vec::new();
        for e in &firsts {
            let n = batch.iter().filter(|d| entry(d) == *e).count() as u32;
            ends.push(ends.last().copied().unwrap_or(0) + n);
        }
        if firsts.len() == 1 {
            prop_assert!(b.by_flow.order.is_empty());
        } else {
            prop_assert_eq!(&b.by_flow.order, &want);
        }
        prop_assert_eq!(&b.by_flow.ends, &ends);
    }
}

/// A recycled buffer (still holding an old batch) decodes the next batch exactly as a new
/// one would, and its allocation is reused.
#[test]
fn digest_frames_decode_into_a_recycled_buffer() {
    let mut s = session_after_hello();
    let first = digests(300, 7, 0xabcd_0001);
    let f = encode_frame(FrameType::Digests, 1, &encode_digests(0, &first, |_| 2));
    let Ok(Frame::Digests(b)) = s.decode(&f) else {
        panic!("a digest frame");
    };
    assert_eq!(b.digests, first);
    assert!(!s.has_spare());
    let ptr = b.digests.as_ptr();
    s.recycle(b.digests, b.by_flow);
    assert!(s.has_spare());
    let second = digests(120, 3, 0xabcd_0001);
    let f = encode_frame(FrameType::Digests, 2, &encode_digests(0, &second, |_| 2));
    let Ok(Frame::Digests(b)) = s.decode(&f) else {
        panic!("a digest frame");
    };
    assert_eq!(b.digests, second);
    assert_eq!(b.digests.as_ptr(), ptr, "the recycled allocation is used");
    assert!(!s.has_spare());
}

/// Decodes one digest frame of `s`, whatever else it holds.
fn decode_batch(s: &mut Session, seq: u64, payload: &[u8]) -> DigestBatch {
    match s.decode(&encode_frame(FrameType::Digests, seq, payload)) {
        Ok(Frame::Digests(b)) => b,
        other => panic!("a digest frame, got {other:?}"),
    }
}

/// A connection's encoder defines each flow once: later batches of the same flows carry no
/// flow entries, about 9 bytes per digest with every digest of a different flow, and decode
/// to exactly the digests sent.
#[test]
fn flows_are_defined_once_per_connection() {
    let mut s = session_after_hello();
    let mut enc = DigestEncoder::default();
    let all = digests(3000, 1000, 0xabcd_0001);
    let mut sizes = Vec::new();
    for (i, b) in all.chunks(1000).enumerate() {
        let payload = enc.encode(0, b, |_| 2);
        sizes.push(payload.len() + HEADER_LEN);
        let got = decode_batch(&mut s, i as u64 + 1, &payload);
        assert_eq!(got.digests, b);
        assert_eq!(got.unknown_flow, 0);
    }
    assert_eq!(enc.slots_in_use(), 1000);
    // The first batch pays the 1000 flows' 17 bytes each; the others none.
    assert!(sizes[0] > 1000 * 17 + 1000 * 8, "{sizes:?}");
    for &size in &sizes[1..] {
        let per = size as f64 / 1000.0;
        assert!(per <= 10.0, "{per} bytes per digest");
    }
}

/// With fewer slots than flows the encoder reuses slots round the table, never one the batch
/// itself refers to, and every batch still decodes to exactly what was sent.
#[test]
fn slots_are_reused_when_all_are_in_use() {
    let mut s = session_after_hello();
    let mut enc = DigestEncoder::with_slots(8);
    let pool = digests(400, 13, 0xabcd_0001);
    for (i, b) in pool.chunks(8).enumerate() {
        let got = decode_batch(&mut s, i as u64 + 1, &enc.encode(0, b, |_| 2));
        assert_eq!(got.digests, b, "batch {i}");
        assert_eq!(got.unknown_flow, 0);
        assert!(enc.slots_in_use() <= 8);
    }
}

/// A frame lost in the sequence (a gap) empties the slots: the digests of a later batch that
/// refer to flows it does not define are left out and counted, never attributed; a batch
/// that defines them again decodes whole.
#[test]
fn a_sequence_gap_empties_the_flow_slots() {
    let mut s = session_after_hello();
    let mut enc = DigestEncoder::default();
    let b = digests(20, 4, 0xabcd_0001);
    assert_eq!(
        decode_batch(&mut s, 1, &enc.encode(0, &b, |_| 2)).digests,
        b
    );
    // Frame 2 never came.
    let got = decode_batch(&mut s, 3, &enc.encode(0, &b, |_| 2));
    assert!(got.digests.is_empty());
    assert_eq!(got.unknown_flow, 20);
    assert!(got.by_flow.is_empty());
    enc.reset();
    let got = decode_batch(&mut s, 4, &enc.encode(0, &b, |_| 2));
    assert_eq!((got.digests, got.unknown_flow), (b, 0));
}

/// A flowset passed over for want of room counts as received: the frames after it are no
/// gap, and the flow slots the connection defined stay.
#[test]
fn a_skipped_flowset_is_no_gap() {
    let mut s = session_after_hello();
    let mut enc = DigestEncoder::default();
    let b = digests(20, 4, 0xabcd_0001);
    assert_eq!(
        decode_batch(&mut s, 1, &enc.encode(0, &b, |_| 2)).digests,
        b
    );
    let fs = FlowSet::new(&flowset_config());
    let f = encode_frame(FrameType::FlowSet, 2, &encode_flowset(0, 1, 9, 3, &fs));
    assert_eq!(Session::peek_type(&f), Some(FrameType::FlowSet));
    assert_eq!(s.skip(&f), Ok(FrameType::FlowSet));
    // The next batch names the flows it defined before the flowset, without a gap.
    let got = decode_batch(&mut s, 3, &enc.encode(0, &b, |_| 2));
    assert_eq!((got.digests, got.unknown_flow), (b, 0));
    assert_eq!(s.gaps, 0);
    // Passing over checks the header like decoding: the same sequence number again, or a
    // hello, is refused.
    let again = encode_frame(FrameType::FlowSet, 3, &encode_flowset(0, 1, 9, 3, &fs));
    assert!(matches!(
        s.skip(&again),
        Err(ProtocolError::BadSequence { .. })
    ));
    let hello = encode_frame(FrameType::Hello, 4, &hello().payload());
    assert_eq!(s.skip(&hello), Err(ProtocolError::HelloOrder));
    assert_eq!(Session::peek_type(&[0, 0, 0]), None);
}

/// A batch refused for a bad digest leaves the slots as they were: its definitions do not
/// stay behind.
#[test]
fn a_refused_batch_defines_nothing() {
    let mut s = session_after_hello();
    let mut enc = DigestEncoder::default();
    let first = digests(4, 4, 0xabcd_0001);
    decode_batch(&mut s, 1, &enc.encode(0, &first, |_| 2));
    // A second encoder reuses slot 0..3 for other flows; its batch is cut short.
    let mut other = DigestEncoder::default();
    let moved: Vec<WireDigest> = first.iter().map(|d| d.clone_with_flow(9)).collect();
    let mut payload = other.encode(0, &moved, |_| 2);
    payload.pop();
    assert!(
        s.decode(&encode_frame(FrameType::Digests, 2, &payload))
            .is_err()
    );
    // The first encoder's slots still hold its flows (a refused frame takes no sequence
    // number).
    let got = decode_batch(&mut s, 2, &enc.encode(0, &first, |_| 2));
    assert_eq!((got.digests, got.unknown_flow), (first, 0));
}

proptest! {
    /// Whatever is lost on the way (batches dropped before sending, which reset the
    /// encoder; gaps; reconnections the encoder hears of some batches late), every digest
    /// the sink decodes is one that was sent, of its own flow, in order; the rest are
    /// counted as of an unknown flow. No digest is ever attributed to another flow.
    #[test]
    fn lost_batches_and_reconnections_never_misattribute_a_digest(
        steps in proptest::collection::vec((1usize..12, 0u16..30, 0u8..8), 1..60),
        slots in 12usize..24,
    ) {
        let mut enc = DigestEncoder::with_slots(slots);
        let mut s = session_after_hello();
        let mut seq = 0u64;
        let mut reset_due: Option<usize> = None;
        let mut sent = 0u64;
        // Whether the encoder and the session agree on the flow slots: from the start, and
        // from a reset on, until a batch is lost or the connection changes.
        let mut in_sync = true;
        for (i, &(len, first_flow, event)) in steps.iter().enumerate() {
            if reset_due == Some(i) {
                enc.reset();
                reset_due = None;
                in_sync = true;
            }
            let batch: Vec<WireDigest> = digests(len, 1, 0xabcd_0001)
                .iter()
                .enumerate()
                .map(|(j, d)| WireDigest {
                    pid: sent as u32 + j as u32,
                    ..d.clone_with_flow((first_flow + (j as u16 * 7) % 11) % 30)
                })
                .collect();
            sent += len as u64;
            let payload = enc.encode(0, &batch, |_| 2);
            match event {
                // Not sent: the sender knows, and resets before the next batch.
                0 => {
                    enc.reset();
                    in_sync = true;
                    continue;
                }
                // Lost with a gap in the sequence the sink sees.
                1 => {
                    seq += 1;
                    in_sync = false;
                    continue;
                }
                // A new connection: the batch goes to a new session; the encoder hears of
                // it one or two batches later.
                2 | 3 => {
                    s = session_after_hello();
                    seq = 0;
                    reset_due = reset_due.or(Some(i + usize::from(event - 1)));
                    in_sync = false;
                }
                _ => {}
            }
            seq += 1;
            let got = decode_batch(&mut s, seq, &payload);
            prop_assert_eq!(got.digests.len() + got.unknown_flow as usize, batch.len());
            if in_sync {
                prop_assert_eq!(got.unknown_flow, 0, "in step with the sink, all decode");
            }
            // A subsequence of the batch, each digest whole.
            let mut at = batch.iter();
            for d in &got.digests {
                prop_assert!(at.any(|b| b == d), "digest {:?} was not sent as such", d);
            }
        }
    }
}

/// A batch as large as the protocol allows, every digest of a new flow, defines all of
/// them and decodes whole.
#[test]
fn a_largest_batch_of_new_flows_round_trips() {
    let mut h = hello();
    h.max_digests = MAX_BATCH;
    let mut s = Session::default();
    s.decode(&encode_frame(FrameType::Hello, 0, &h.payload()))
        .unwrap();
    let batch: Vec<WireDigest> = digests(MAX_BATCH as usize, 1, 0xabcd_0001)
        .iter()
        .enumerate()
        .map(|(i, d)| WireDigest {
            key: FlowKey {
                src: i as u32,
                ..d.key
            },
            ..*d
        })
        .collect();
    let mut enc = DigestEncoder::default();
    let got = decode_batch(&mut s, 1, &enc.encode(0, &batch, |_| 2));
    assert_eq!((got.digests.len(), got.unknown_flow), (batch.len(), 0));
    assert!(got.digests == batch);
    assert_eq!(enc.slots_in_use(), FLOW_SLOTS);
}

/// A connection keeps the plans declared last: a plan declared again (a reload back to
/// it) is kept over those declared since, and the one declared longest ago goes first (a
/// plan in force was let go while its digests still came, closing the connection).
#[test]
fn a_plan_declared_again_is_kept_over_older_ones() {
    let mut s = session_after_hello();
    let mut seq = 0;
    let mut declare = |s: &mut Session, version: u32| {
        seq += 1;
        let p = PlanText {
            version,
            digest_bytes: 2,
            text: "global_bits = 16\n".into(),
        };
        let f = encode_frame(FrameType::Plan, seq, &p.payload());
        assert!(matches!(s.decode(&f), Ok(Frame::Plan(_))));
        seq
    };
    // The hello's plan, then 15 others: 16 declared.
    for v in 1..SESSION_PLANS as u32 {
        declare(&mut s, v);
    }
    declare(&mut s, 0xabcd_0001);
    let last = declare(&mut s, 100);
    let mut enc = DigestEncoder::default();
    let in_force = digests(4, 2, 0xabcd_0001);
    let got = decode_batch(&mut s, last + 1, &enc.encode(0, &in_force, |_| 2));
    assert_eq!(got.digests, in_force);
    enc.reset();
    let f = encode_frame(
        FrameType::Digests,
        last + 2,
        &enc.encode(0, &digests(4, 2, 1), |_| 2),
    );
    assert_eq!(s.decode(&f).unwrap_err(), ProtocolError::UnknownPlan(1));
}
