//! The flowset wire decoder on arbitrary bytes, and SingleDecode on whatever it accepts:
//! errors, never a panic, a hang or an allocation beyond the limit for an undeclared shape.

#![no_main]

use libfuzzer_sys::fuzz_target;
use telemetry::flowradar::single_decode;
use telemetry::flowradar::wire::decode;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = decode(data) {
        // Decoding cost follows the table's size; keep the fuzzer's inputs fast.
        if e.flowset.cells().len() <= 1 << 16 {
            let _ = single_decode(&e.flowset);
        }
    }
});
