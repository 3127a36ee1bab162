//! Nanoseconds per packet of the pipeline itself, burst by burst over frames in memory, for
//! each telemetry role (`cargo bench -p bench --bench pipeline`): the same code the switch
//! runs, without the DPDK drivers around it. The forwarding benchmark (`pint-bench forward`)
//! measures the whole switch; this one shows which stage costs what while tuning.

use std::net::Ipv4Addr;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use pipeline::capture::{PacketSpec, with_shim};
use pipeline::emulator::{Emulator, EmulatorConfig};
use pipeline::fabric::{host_addr, port_mac};
use pipeline::{BurstVerdicts, Forwarder, PacketBuf, Pipeline, VecFrame};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;

const PAPER: &str = include_str!("../../configs/queries/paper.toml");
const FLOWS: u32 = 10_000;
const BURST: usize = 32;

/// `FLOWS` 60-byte UDP frames from node `src`'s hosts to node `dst`'s, as node `at` receives
/// them (with TTL `ttl`, shimmed or not).
fn frames(src: u32, dst: u32, at: u32, ttl: u8, shim: Option<&SwitchPlan>) -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let mut p = PacketSpec::udp(
                Ipv4Addr::from(host_addr(src, 1) + (i >> 8)),
                Ipv4Addr::from(host_addr(dst, 1)),
                1024 + (i & 0xff) as u16,
                4791,
            );
            p.ttl = ttl;
            p.ident = i as u16;
            p.dst_mac = port_mac(at, 1);
            let f = p.build();
            match shim {
                Some(plan) => with_shim(&f, 0x88b5, plan.tag(), plan.digest_bytes(), 0),
                None => f,
            }
        })
        .collect()
}

fn run_bursts(p: &mut Pipeline, port: usize, frames: &[Vec<u8>], burst: &mut Vec<VecFrame>) {
    let mut out = BurstVerdicts::default();
    for chunk in frames.chunks(BURST) {
        if burst.len() < chunk.len() {
            burst.resize(chunk.len(), VecFrame::new(&[]));
        }
        for (b, f) in burst.iter_mut().zip(chunk) {
            b.reset(f);
        }
        let n = chunk.len();
        p.process_burst(port, &mut burst[..n], 0, || 1_000, &mut out);
        black_box(&out);
        black_box(burst[0].data()[0]);
    }
}

fn roles(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_per_packet");
    g.throughput(Throughput::Elements(u64::from(FLOWS)));
    let plan = SwitchPlan::compile(PAPER, 1).unwrap();
    let mut emu = Emulator::new(
        Topology::line(3),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            expected_flows: FLOWS,
            ring: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    let mut burst = Vec::with_capacity(BURST);
    // Telemetry off: node 0's tables, no telemetry stages.
    let fwd = Arc::new(Forwarder::new(&emu.nodes[0].tables).unwrap());
    let mut off = Pipeline::new(fwd, false);
    let plain = frames(0, 2, 0, 64, None);
    g.bench_function(BenchmarkId::from_parameter("off"), |b| {
        b.iter(|| run_bursts(&mut off, 0, &plain, &mut burst))
    });
    g.bench_function(BenchmarkId::from_parameter("edge_ingress"), |b| {
        b.iter(|| run_bursts(&mut emu.nodes[0].pipeline, 0, &plain, &mut burst))
    });
    let transit = frames(0, 2, 1, 63, Some(&plan));
    g.bench_function(BenchmarkId::from_parameter("transit"), |b| {
        b.iter(|| run_bursts(&mut emu.nodes[1].pipeline, 1, &transit, &mut burst))
    });
    let egress = frames(0, 2, 2, 62, Some(&plan));
    g.bench_function(BenchmarkId::from_parameter("edge_egress"), |b| {
        b.iter(|| {
            run_bursts(&mut emu.nodes[2].pipeline, 1, &egress, &mut burst);
            black_box(emu.digests(2).len())
        })
    });
    g.finish();
}

criterion_group!(benches, roles);
criterion_main!(benches);
