//! `pint-bench sink`, its sweep part: what a decode thread's once-a-second sweep costs
//! (under its flow table's lock) for a table of N flows, when every flow is looked at (the
//! first sweep), when a tenth of them have new counts due, and when nothing is due.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sink::detect::Params;
use sink::events::EventLog;
use sink::flows::{FlowTable, ShardContext};
use sink::registry::Registry;
use telemetry::flowradar::FlowKey;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;
use telemetry::protocol::{FlowRuns, WireDigest};

const PAPER: &str = include_str!("../../configs/queries/paper.toml");

/// One sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// What was due.
    pub case: &'static str,
    /// Flows in the table.
    pub flows: usize,
    /// Flows the sweep looked at.
    pub looked_at: u64,
    /// Records it sent.
    pub records: u64,
    /// Its time, ms.
    pub millis: f64,
}

fn key(f: u32) -> FlowKey {
    FlowKey {
        src: 0x0a00_0000 | (f >> 16),
        dst: 0x0b00_0001,
        src_port: f as u16,
        dst_port: 443,
        protocol: 6,
    }
}

/// A table of `flows` flows (a digest each, counts at two switches), swept as a decode
/// thread sweeps it (idle timeout 60 s, active timeout 0: new counts are due at once).
pub fn sweeps(flows: u32) -> anyhow::Result<Vec<SweepRow>> {
    let registry = Arc::new(Registry::default());
    let file = QueryFile::from_toml(PAPER).map_err(|e| anyhow::anyhow!("the paper's plan: {e}"))?;
    let version = Plan::compile(&file)
        .map_err(|e| anyhow::anyhow!("the paper's plan: {e}"))?
        .version;
    registry
        .add_plan(version, PAPER)
        .map_err(|e| anyhow::anyhow!("the paper's plan: {e}"))?;
    let cx = ShardContext {
        registry,
        topology: None,
        events: Arc::new(EventLog::default()),
        detection: Params::default(),
        unfit_said_ms: Arc::default(),
    };
    let mut table = FlowTable::new(flows as usize);
    let chunk = 10_000u32;
    for first in (0..flows).step_by(chunk as usize) {
        let digests: Vec<WireDigest> = (first..(first + chunk).min(flows))
            .map(|f| WireDigest {
                key: key(f),
                ingress_port: 1,
                egress_port: 0,
                pid: f.wrapping_mul(0x9e37_79b9),
                hops: 3,
                plan_version: version,
                digest: u64::from(f & 0xff),
                time_ns: 1_700_000_000_000_000_000,
            })
            .collect();
        table.add_digests(&cx, 9, &digests, &FlowRuns::default());
    }
    let counts = |every: u32| -> Vec<(FlowKey, u32, u64, u64)> {
        (0..flows)
            .step_by(every as usize)
            .flat_map(|f| [(key(f), 1, 5, 500), (key(f), 9, 5, 500)])
            .collect()
    };
    table.add_counts(&cx, 1, (1_700_000_000_000, 10), &counts(1), &[], &[]);
    let mut rows = Vec::new();
    let mut sweep = |table: &mut FlowTable, case: &'static str| {
        let before = table.stats.flows_swept;
        let mut records = 0u64;
        let t = Instant::now();
        table.sweep(Duration::from_secs(60), Duration::ZERO, Some(&cx), |_| {
            records += 1;
            true
        });
        rows.push(SweepRow {
            case,
            flows: table.len(),
            looked_at: table.stats.flows_swept - before,
            records,
            millis: t.elapsed().as_secs_f64() * 1e3,
        });
    };
    sweep(&mut table, "every flow (the first sweep)");
    table.add_counts(&cx, 2, (1_700_000_000_010, 10), &counts(10), &[], &[]);
    sweep(&mut table, "a tenth with new counts");
    sweep(&mut table, "nothing due");
    Ok(rows)
}

/// Prints the rows.
pub fn print_table(rows: &[SweepRow]) {
    println!("a decode thread's sweep (under its table's lock):");
    println!(
        "{:>30} {:>9} {:>10} {:>9} {:>9} {:>14}",
        "due", "flows", "looked at", "records", "ms", "ns per flow"
    );
    for r in rows {
        println!(
            "{:>30} {:>9} {:>10} {:>9} {:>9.2} {:>14.1}",
            r.case,
            r.flows,
            r.looked_at,
            r.records,
            r.millis,
            r.millis * 1e6 / r.flows.max(1) as f64
        );
    }
}
