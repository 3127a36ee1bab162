//! What the equivalence tests share: comparing the state two emulators ended in.

use pipeline::emulator::Emulator;

/// The first difference between what `a` and `b` hold at switch `at`: counters, digest
/// records, and (once both are advanced to `ns`, which closes their epochs) each flowset cell
/// for cell. Takes the records and flowsets off both.
pub fn difference(a: &mut Emulator, b: &mut Emulator, at: u32, ns: u64) -> Option<String> {
    if a.counters(at) != b.counters(at) {
        return Some(format!(
            "counters at {at}: {:?} vs {:?}",
            a.counters(at),
            b.counters(at)
        ));
    }
    let (x, y) = (a.digests(at), b.digests(at));
    if x != y {
        return Some(format!("digests at {at}: {x:?} vs {y:?}"));
    }
    a.advance_to(ns);
    b.advance_to(ns);
    let (x, y) = (a.flowsets(at), b.flowsets(at));
    if x.len() != y.len() {
        return Some(format!("{} vs {} flowsets at {at}", x.len(), y.len()));
    }
    x.iter()
        .zip(&y)
        .position(|(x, y)| x.flowset.cells() != y.flowset.cells())
        .map(|i| format!("flowset {i} at {at} differs"))
}
