//! The control thread's digest batch encoding, per digest: a batch of 4096 digests whose
//! flows are all different and one over 64 flows, each with flows the connection already
//! has slots for (`known`, the steady state) and with every flow defined anew (`new`, the
//! encoder reset before each batch: a new connection, the worst case)
//! (`cargo bench -p bench --bench protocol`).

use bench::flowradar::random_key;
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use telemetry::flowradar::FlowKey;
use telemetry::protocol::{DigestEncoder, WireDigest};
use telemetry::sim_rng::SimRng;

fn batch(n: usize, flows: u32, seed: u64) -> Vec<WireDigest> {
    let mut rng = SimRng::new(seed);
    let keys: Vec<FlowKey> = (0..flows).map(|_| random_key(&mut rng, 17)).collect();
    let mut t = 1_700_000_000_000_000_000u64;
    (0..n)
        .map(|i| {
            t += 80 + rng.below(40);
            WireDigest {
                key: keys[i % keys.len()],
                ingress_port: 1,
                egress_port: 0,
                pid: rng.next_u32(),
                hops: 3,
                plan_version: 1,
                digest: rng.next_u64() & 0xffff,
                time_ns: t,
            }
        })
        .collect()
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("digest_batch_encode");
    for flows in [4096u32, 64] {
        let digests = batch(4096, flows, 5);
        g.throughput(Throughput::Elements(digests.len() as u64));
        for (name, reset) in [("known", false), ("new", true)] {
            let id = BenchmarkId::new(format!("flows_{name}"), flows);
            g.bench_with_input(id, &digests, |b, d| {
                let mut enc = DigestEncoder::default();
                b.iter(|| {
                    if reset {
                        enc.reset();
                    }
                    black_box(enc.encode(0, d, |_| 2).len())
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
