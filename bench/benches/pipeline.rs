//! Nanoseconds per packet of the pipeline itself, burst by burst over frames in memory, for
//! each telemetry role (`cargo bench -p bench --bench pipeline`): the same code the switch
//! runs, without the DPDK drivers around it (`bench::pipeline_roles`). The forwarding
//! benchmark (`pint-bench forward`) measures the whole switch; this one, and
//! `examples/pipeline_stages.rs` stage by stage, show which part costs what while tuning.

use bench::pipeline_roles::{FLOWS, Role, RoleBench};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn roles(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_per_packet");
    g.throughput(Throughput::Elements(u64::from(FLOWS)));
    for (name, role) in [
        ("off", Role::Off),
        ("edge_ingress", Role::Ingress),
        ("transit", Role::Transit),
        ("edge_egress", Role::Egress),
    ] {
        let mut bench = RoleBench::new(role);
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| bench.round())
        });
    }
    g.finish();
}

criterion_group!(benches, roles);
criterion_main!(benches);
