//! Nanoseconds per packet per hop of the PINT encoders, and per packet of the sink's
//! decoding (`cargo bench -p bench --bench pint`).

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use telemetry::pint::coding::{PathCoding, Scheme};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::pint::path_decoder::{PathDecoder, Space};
use telemetry::pint::plan::{HopInput, Plan};
use telemetry::pint::query::QueryFile;
use telemetry::pint::tape::packet_word;
use telemetry::topology::Topology;

fn input(pid: u32, hop: usize) -> HopInput {
    HopInput {
        pid,
        hop,
        switch_id: 17,
        ingress_port: 1,
        egress_port: 2,
        hop_latency_ns: 1234 + u64::from(pid % 977),
        queue_bytes: 20_000,
        utilization: HopInput::utilization_value(0.7),
    }
}

fn one_query(text: &str) -> Plan {
    Plan::compile(&QueryFile::from_toml(text).unwrap()).unwrap()
}

fn encoders(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode_per_hop");
    g.throughput(Throughput::Elements(1024));
    let plans = [
        (
            "paper_plan_16bit",
            Plan::compile(&QueryFile::paper_example()).unwrap(),
        ),
        (
            "max_latency_8bit",
            one_query(
                "global_bits = 8\n[[queries]]\nname = \"m\"\nvalue = \"hop_latency\"\naggregation = \"max\"\nbits = 8\n",
            ),
        ),
        (
            "sum_queue_8bit",
            one_query(
                "global_bits = 8\n[[queries]]\nname = \"s\"\nvalue = \"queue_occupancy\"\naggregation = \"sum\"\nbits = 8\nunit = 1000.0\n",
            ),
        ),
        (
            "path_1x8bit",
            one_query(
                "global_bits = 8\n[[queries]]\nname = \"p\"\nvalue = \"switch_id\"\naggregation = \"static_per_flow\"\nbits = 8\n",
            ),
        ),
        (
            "path_2x8bit",
            one_query(
                "global_bits = 16\n[[queries]]\nname = \"p\"\nvalue = \"switch_id\"\naggregation = \"static_per_flow\"\nbits = 8\ninstances = 2\n",
            ),
        ),
        (
            "latency_sample_8bit",
            one_query(
                "global_bits = 8\n[[queries]]\nname = \"l\"\nvalue = \"hop_latency\"\naggregation = \"dynamic_per_flow\"\nbits = 8\n",
            ),
        ),
    ];
    for (name, plan) in &plans {
        g.bench_with_input(BenchmarkId::from_parameter(name), plan, |b, plan| {
            b.iter(|| {
                let mut acc = 0u64;
                for pid in 0..1024u32 {
                    acc ^= plan.encode(
                        black_box(u64::from(pid) & 0xff),
                        &input(pid.wrapping_mul(2_654_435_761), 1 + (pid % 5) as usize),
                    );
                }
                acc
            })
        });
    }
    g.finish();
    // What a switch runs: the plan with its own value keys precomputed, from the packet ID
    // (the packet word included).
    let mut g = c.benchmark_group("switch_encode_per_hop");
    g.throughput(Throughput::Elements(1024));
    let sp = SwitchPlan::new(
        Plan::compile(&QueryFile::paper_example()).unwrap(),
        String::new(),
        17,
    );
    g.bench_function("paper_plan_16bit", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for pid in 0..1024u32 {
                let pid = pid.wrapping_mul(2_654_435_761);
                acc ^= sp.encode(
                    black_box(u64::from(pid) & 0xff),
                    packet_word(pid),
                    &input(pid, 1 + (pid % 5) as usize),
                );
            }
            acc
        })
    });
    g.finish();
}

fn decoders(c: &mut Criterion) {
    let kdl = Topology::load_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/topologies/Kdl.graphml"
    )))
    .unwrap();
    let (mut a, mut b) = (0, 0);
    'outer: for s in 0..kdl.len() as u32 {
        let (dist, _) = kdl.bfs(s);
        for (d, &x) in dist.iter().enumerate() {
            if x == 58 {
                (a, b) = (s, d as u32);
                break 'outer;
            }
        }
    }
    let path: Vec<u32> = kdl
        .shortest_path(a, b)
        .unwrap()
        .iter()
        .map(|&n| kdl.switch_id(n))
        .collect();
    let coding = PathCoding::for_diameter(Scheme::Interleaved, 8, 2, 10);
    let digests: Vec<(u32, Vec<u64>)> = (0..64u32)
        .map(|i| {
            let pid = i.wrapping_mul(0x9e37_79b9);
            let f = (0..2)
                .map(|n| {
                    path.iter()
                        .enumerate()
                        .fold(0, |acc, (h, &v)| coding.encode(n, pid, h + 1, v, acc))
                })
                .collect();
            (pid, f)
        })
        .collect();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    g.bench_function("kdl_59_hops_2x8bit_until_decoded", |bch| {
        bch.iter(|| {
            let mut d = PathDecoder::new(path.len(), &coding, Space::Topology(&kdl));
            d.pin(path.len(), *path.last().unwrap());
            for (pid, f) in &digests {
                d.feed(*pid, f);
                if d.is_decoded() {
                    break;
                }
            }
            d.packets()
        })
    });
    let plan = Plan::compile(&QueryFile::paper_example()).unwrap();
    g.bench_function("paper_plan_read_digest", |bch| {
        let mut pid = 0u32;
        bch.iter(|| {
            pid = pid.wrapping_add(0x9e37_79b9);
            plan.decode(pid, 5, black_box(0xabcd))
        })
    });
    g.finish();
}

criterion_group!(benches, encoders, decoders);
criterion_main!(benches);
