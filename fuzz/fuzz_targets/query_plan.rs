//! Query files on arbitrary text (the switch reads one from its config, the sink compiles
//! those its peers send): an error or a well-formed plan whose version does not depend on
//! the run, never a panic or a hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(file) = QueryFile::from_toml(&text)
        && let Ok(plan) = Plan::compile(&file)
    {
        assert_eq!(plan.well_formed(), Ok(()));
        assert_eq!(Plan::compile(&file).map(|p| p.version), Ok(plan.version));
    }
});
