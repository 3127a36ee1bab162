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
    DigestOrder, Frame, FrameType, Hello, PlanText, Session, encode_frame, frame_len,
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
        ports: Vec::new(),
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
                let mut seen = b.by_flow.clone();
                seen.sort_unstable();
                assert!(seen.iter().copied().eq(0..b.digests.len() as u32));
            }
            Ok(_) => {}
        }
        at = &at[len..];
    }
});
