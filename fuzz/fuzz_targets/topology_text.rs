//! Topology files (GraphML, GML or TOML, told apart by content) on arbitrary text: an error
//! or a well-formed topology, never a panic or a hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use telemetry::topology::Topology;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = [
        Topology::parse_text("fuzz", &text),
        Topology::parse_gml("fuzz", &text),
        Topology::parse_graphml("fuzz", &text),
    ];
    for t in parsed.iter().flatten() {
        assert_eq!(t.labels.len(), t.names.len());
        for n in 0..t.len() as u32 {
            let nb = t.neighbours(n);
            assert!(nb.windows(2).all(|w| w[0] < w[1]), "sorted, no parallel links");
            assert!(!nb.contains(&n), "no self-loop");
            assert!(nb.iter().all(|&m| t.neighbours(m).contains(&n)), "links both ways");
        }
    }
});
