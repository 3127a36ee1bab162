//! The route lookup: the project's Rust LPM (16-8-8 multibit trie) against DPDK's `rte_lpm`
//! (DIR-24-8), single lookups and bursts of 32, on 1000 routes shaped like a routing table
//! (mostly /24, some /16 to /32) and random destinations (`cargo bench -p bench --bench lpm`).

use std::ffi::CString;

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use dataplane::dpdk::Eal;
use pipeline::lpm::Lpm;
use telemetry::sim_rng::SimRng;

fn routes(rng: &mut SimRng) -> Vec<(u32, u8, u32)> {
    (0..1000u32)
        .map(|i| {
            let len = match rng.below(10) {
                0 => 16,
                1 => 20,
                2 => 32,
                _ => 24,
            };
            (rng.next_u32() & (u32::MAX << (32 - len)), len as u8, i)
        })
        .collect()
}

fn lookups(c: &mut Criterion) {
    let eal = Eal::init(
        &[
            "--no-huge",
            "-m",
            "256",
            "--no-pci",
            "--no-shconf",
            "--log-level",
            "warning",
            "--no-telemetry",
        ]
        .map(String::from),
    )
    .expect("EAL for rte_lpm");
    let mut rng = SimRng::new(5);
    let table = routes(&mut rng);
    // Destinations: half inside some route, half random.
    let addrs: Vec<u32> = (0..4096)
        .map(|i| {
            if i % 2 == 0 {
                table[rng.below(1000) as usize].0 | (rng.next_u32() & 0xff)
            } else {
                rng.next_u32()
            }
        })
        .collect();
    let rust = Lpm::build(&table).unwrap();
    let name = CString::new("bench_lpm").unwrap();
    let cfg = dpdk_sys::rte_lpm_config {
        max_rules: 2048,
        number_tbl8s: 1024,
        flags: 0,
    };
    // SAFETY: EAL is initialised; name and config are valid.
    let dpdk = unsafe { dpdk_sys::rte_lpm_create(name.as_ptr(), 0, &cfg) };
    assert!(!dpdk.is_null(), "rte_lpm_create failed");
    for &(a, l, v) in &table {
        // SAFETY: dpdk is a valid table.
        assert_eq!(unsafe { dpdk_sys::rte_lpm_add(dpdk, a, l, v) }, 0);
    }
    // Both give the same answers.
    for &a in &addrs {
        let mut hop = 0u32;
        // SAFETY: valid table and out pointer.
        let found = unsafe { dpdk_sys::rte_lpm_lookup(dpdk, a, &mut hop) } == 0;
        let ours = rust.lookup(a);
        assert_eq!(ours.is_some(), found, "{a:08x}");
        if let Some(v) = ours {
            let (ra, rl, _) = table[v as usize];
            let (da, dl, _) = table[hop as usize];
            assert_eq!((ra, rl), (da, dl), "same prefix for {a:08x}");
        }
    }
    let mut g = c.benchmark_group("lpm_lookup");
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("rust_16_8_8", |b| {
        b.iter(|| {
            addrs
                .iter()
                .fold(0u32, |acc, &a| acc ^ rust.lookup(black_box(a)).unwrap_or(0))
        })
    });
    g.bench_function("rte_lpm_single", |b| {
        b.iter(|| {
            addrs.iter().fold(0u32, |acc, &a| {
                let mut hop = 0;
                // SAFETY: valid table and out pointer.
                unsafe { dpdk_sys::rte_lpm_lookup(dpdk, black_box(a), &mut hop) };
                acc ^ hop
            })
        })
    });
    g.bench_function("rte_lpm_bulk32", |b| {
        let mut hops = [0u32; 32];
        b.iter(|| {
            let mut acc = 0;
            for chunk in addrs.chunks_exact(32) {
                // SAFETY: valid table; 32 inputs and outputs.
                unsafe {
                    dpdk_sys::rte_lpm_lookup_bulk_func(dpdk, chunk.as_ptr(), hops.as_mut_ptr(), 32)
                };
                acc ^= hops[7];
            }
            acc
        })
    });
    g.finish();
    // SAFETY: the table is no longer used.
    unsafe { dpdk_sys::rte_lpm_free(dpdk) };
    drop(eal);
}

criterion_group!(benches, lookups);
criterion_main!(benches);
