//! Runs one pipeline role (`off`, `ingress`, `transit`, `egress`) over 10K frames in memory
//! for a number of rounds and prints nanoseconds per packet, and with the `stage-timing`
//! feature TSC cycles per packet of each stage, for tuning the data plane stage by stage:
//!
//! ```sh
//! cargo run --release -p bench --example pipeline_stages --features stage-timing -- transit 300
//! valgrind --tool=callgrind target/release/examples/pipeline_stages transit 20   # instructions
//! ```

use bench::pipeline_roles::{FLOWS, Role, RoleBench};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let role: Role = match args.get(1).map_or(Ok(Role::Transit), |s| s.parse()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pipeline_stages: {e}");
            std::process::exit(2);
        }
    };
    let rounds: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let mut bench = RoleBench::new(role);
    // Ten repetitions; the fastest is reported (this machine is shared and noisy).
    let per = rounds.div_ceil(10).max(1);
    let mut best = f64::MAX;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        for _ in 0..per {
            bench.round();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(per * FLOWS));
    }
    println!("{role:?}: {best:.1} ns per packet (best of 10)");
    if let Some(stages) = pipeline::stages::report() {
        println!("  TSC cycles per packet: {stages}");
    }
}
