//! FlowRadar per-packet update cost at 10K and 100K flows, and SingleDecode of 100K flows
//! (`cargo bench -p bench --bench flowradar`).

use bench::flowradar::random_key;
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use telemetry::flowradar::{
    EpochCounts, FlowKey, FlowSet, FlowSetConfig, SingleDecoder, single_decode,
};
use telemetry::hash::key_hash;
use telemetry::sim_rng::SimRng;

fn keys(n: u32, seed: u64) -> Vec<FlowKey> {
    let mut rng = SimRng::new(seed);
    (0..n).map(|_| random_key(&mut rng, 6)).collect()
}

fn updates(c: &mut Criterion) {
    let mut g = c.benchmark_group("flowset_update");
    for n in [10_000u32, 100_000] {
        let ks = keys(n, 1);
        // Packets of flows in a random order, 8 per flow on average.
        let mut rng = SimRng::new(2);
        let order: Vec<u32> = (0..8 * n).map(|_| rng.below(u64::from(n)) as u32).collect();
        g.throughput(Throughput::Elements(order.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut fs = FlowSet::new(&FlowSetConfig::for_flows(n, 1));
            b.iter(|| {
                fs.clear();
                for &i in &order {
                    fs.update(&ks[i as usize], 1000);
                }
                black_box(fs.packets())
            })
        });
    }
    g.finish();
}

fn decode(c: &mut Criterion) {
    let n = 100_000u32;
    let mut fs = FlowSet::new(&FlowSetConfig::for_flows(n, 3));
    for (i, k) in keys(n, 3).iter().enumerate() {
        for _ in 0..(1 + i % 5) {
            fs.update(k, 700);
        }
    }
    let mut g = c.benchmark_group("single_decode");
    g.throughput(Throughput::Elements(u64::from(n)));
    g.sample_size(20);
    g.bench_function("100k_flows", |b| {
        b.iter(|| black_box(single_decode(&fs).flows.len()))
    });
    // As a collector runs it: one decoder, its buffers reused epoch after epoch.
    let mut decoder = SingleDecoder::default();
    g.bench_function("100k_flows_reused_decoder", |b| {
        b.iter(|| black_box(decoder.decode(&fs).flows.len()))
    });
    g.finish();
}

/// One epoch of a worker's counting as the switch does it: every flow's packets counted in
/// the flow cache, then the cache folded into the flowset (the control thread's part), then
/// both cleared; per flow.
fn epochs(c: &mut Criterion) {
    let mut g = c.benchmark_group("epoch_count_and_fold");
    for n in [10_000u32, 100_000] {
        let words: Vec<[u64; 2]> = keys(n, 4).iter().map(|k| k.words()).collect();
        g.throughput(Throughput::Elements(u64::from(n)));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut counts = EpochCounts::new(&FlowSetConfig::for_flows(n, 1));
            b.iter(|| {
                for &[w0, w1] in &words {
                    let f = key_hash(w0, w1);
                    for _ in 0..4 {
                        counts.count(f, w0, w1, 700);
                    }
                }
                let flows = counts.finish().flows();
                counts.clear();
                black_box(flows)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, updates, decode, epochs);
criterion_main!(benches);
