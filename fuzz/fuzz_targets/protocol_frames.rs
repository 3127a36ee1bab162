//! The switch-to-sink frame decoder on arbitrary byte streams: a connection's frames one
//! after another, optionally after a valid hello (so that digest, plan and flowset frames
//! are reached), with digests as recorded or also grouped by flow. It must return errors,
//! never panic, and allocate only what the hello and the caps allow; a batch's grouping
//! lists every digest once.

#![no_main]

use libfuzzer_sys::fuzz_target;
use telemetry::flowradar::flowset::FILTER_SEED;
use telemetry::flowradar::wire::Shape;
use telemetry::flowradar::{FlowSet, FlowSetConfig};
use telemetry::protocol::{
    DigestOrder, Frame, FrameType, Hello, PlanText, PortInfo, Session, encode_frame, frame_len,
};

fn hello() -> Vec<u8> {
    let fs = FlowSet::new(&FlowSetConfig::for_flows(64, 5));
    let h = Hello {
        switch_id: 5,
        session: 1,
        epoch_ns: 10_000_000,
        shim_ethertype: 0x88b5,
        shape: Shape::of(&fs),
        filter_seed: FILTER_SEED,
        table_seeds: vec![fs.table_seed(), fs.table_seed() ^ 1],
        max_digests: 4096,
        // A port, so that flow definitions (which name ports) can be valid.
        ports: vec![PortInfo {
            name: "p0".into(),
            edge: true,
            capacity_bps: 10_000_000_000,
            mac: telemetry::wire::MacAddr([2, 0, 0, 0, 0, 1]),
        }],
        plan: Some(PlanText {
            version: 0x1234_5678,
            digest_bytes: 2,
            text: "global_bits = 16".into(),
        }),
    };
    encode_frame(FrameType::Hello, 0, &h.payload())
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let mut stream = if first & 1 == 1 { hello() } else { Vec::new() };
    stream.extend_from_slice(rest);
    let mut session = Session::new(if first & 2 == 2 {
        DigestOrder::ByFlow
    } else {
        DigestOrder::Recorded
    });
    let mut at = &stream[..];
    while let Ok(Some(len)) = frame_len(at) {
        if len > at.len() {
            break;
        }
        match session.decode(&at[..len]) {
            // A connection ends at its first bad frame.
            Err(_) => break,
            Ok(Frame::Digests(b)) if !b.by_flow.is_empty() => {
                let n = b.digests.len() as u32;
                if !b.by_flow.order.is_empty() {
                    let mut seen = b.by_flow.order.clone();
                    seen.sort_unstable();
                    assert!(seen.iter().copied().eq(0..n));
                }
                // Runs cover every digest, none empty, each of one flow.
                let ends = &b.by_flow.ends;
                assert!(ends.windows(2).all(|w| w[0] < w[1]));
                assert!(ends.first().is_some_and(|&e| e > 0) && ends.last() == Some(&n));
                let at = |i: u32| match b.by_flow.order.get(i as usize) {
                    Some(&j) => &b.digests[j as usize],
                    None => &b.digests[i as usize],
                };
                let mut start = 0;
                for &end in ends {
                    assert!((start..end).all(|i| at(i).key == at(start).key));
                    start = end;
                }
            }
            Ok(_) => {}
        }
        at = &at[len..];
    }
});
