//! The switch's per-packet pipeline on arbitrary bursts of arbitrary frames, at each of the
//! roles a switch plays (edge ingress, transit, edge egress) with the paper's plan. Each
//! burst runs through two switches: one with the fast parse and the whole-burst encode on,
//! one with both off. They must give the same verdicts, bytes, counters, digest records and
//! flowsets; every packet must be either forwarded or dropped with a reason; nothing may
//! panic. The `cargo test` versions of this are `dataplane/pipeline/tests/parse_lanes.rs`
//! (single frames) and `whole_encode.rs` (bursts).
//!
//! The input: one byte choosing the switch (its position on a three-switch line), then
//! frames, each a length byte, a kind byte and that many bytes. Kind 0 takes the bytes as
//! the frame; any other kind starts from a common frame of that switch's role (UDP, TCP,
//! ICMP or a fragment, shimmed when it comes from the fabric, the shim marked incomplete
//! when the kind's bit 6 is set) and XORs the bytes into it (the first byte saying where),
//! so that most inputs reach the deep paths. Frames are grouped into bursts of up to
//! [`MAX_BURST`] (a length byte with the top bit set ends a burst).

#![no_main]

#[path = "../../dataplane/pipeline/tests/common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use pipeline::emulator::Emulator;
use pipeline::{BurstVerdicts, DROPPED, MAX_BURST, PacketBuf, VecFrame};
use telemetry::pint::encoder::SwitchPlan;

/// Runs one burst through both switches and checks they agree.
fn run(fast: &mut Emulator, slow: &mut Emulator, at: u32, port: usize, frames: &[Vec<u8>]) {
    let mut outs = Vec::new();
    for emu in [&mut *fast, &mut *slow] {
        let mut burst: Vec<VecFrame> = frames.iter().map(|f| VecFrame::new(f)).collect();
        let mut out = BurstVerdicts::default();
        let before = *emu.counters(at);
        emu.nodes[at as usize]
            .pipeline
            .process_burst(port, &mut burst, 1_000, || 3_500, &mut out);
        let after = emu.counters(at);
        let n = frames.len() as u64;
        assert_eq!(after.rx_packets - before.rx_packets, n);
        assert_eq!(
            (after.tx_packets - before.tx_packets) + (after.dropped() - before.dropped()),
            n,
            "every packet forwarded or dropped with a reason"
        );
        let forwarded = out.verdicts[..frames.len()]
            .iter()
            .filter(|&&v| v & DROPPED == 0)
            .count() as u64;
        assert_eq!(forwarded, after.tx_packets - before.tx_packets);
        if out.all_same {
            assert!(
                out.verdicts[..frames.len()]
                    .iter()
                    .all(|&v| v == out.verdicts[0])
            );
        }
        let bytes: Vec<Vec<u8>> = burst.iter().map(|b| b.data().to_vec()).collect();
        outs.push((out.verdicts[..frames.len()].to_vec(), bytes));
    }
    assert_eq!(outs[0], outs[1], "fast and general paths differ");
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let at = u32::from(first % 3);
    let tag = SwitchPlan::compile(common::PAPER, 1)
        .expect("the paper plan")
        .tag();
    let (mut fast, mut slow) = (common::line(true, true), common::line(false, false));
    let port = common::arriving(0, at, tag, false).0;
    let mut burst = Vec::new();
    while let [len, kind, tail @ ..] = rest {
        let ends = len & 0x80 != 0;
        let n = usize::from(len & 0x7f).min(tail.len());
        let (bytes, next) = tail.split_at(n);
        rest = next;
        let frame = if *kind == 0 {
            bytes.to_vec()
        } else {
            let mut f = common::arriving(*kind, at, tag, *kind & 0x40 != 0).1;
            if let Some((&cut, edits)) = bytes.split_first() {
                // The first byte's top bit asks for the frame cut at the rest of it.
                if cut & 0x80 != 0 {
                    f.truncate(usize::from(cut & 0x7f));
                }
                for (i, b) in edits.iter().enumerate() {
                    let j = (usize::from(cut & 0x7f) + 3 * i) % f.len().max(1);
                    if let Some(x) = f.get_mut(j) {
                        *x ^= b;
                    }
                }
            }
            f
        };
        burst.push(frame);
        if ends || burst.len() == MAX_BURST {
            run(&mut fast, &mut slow, at, port, &burst);
            burst.clear();
        }
    }
    if !burst.is_empty() {
        run(&mut fast, &mut slow, at, port, &burst);
    }
    let diff = common::difference(&mut fast, &mut slow, at, 1_000_000_000);
    assert!(diff.is_none(), "{}", diff.unwrap_or_default());
});
