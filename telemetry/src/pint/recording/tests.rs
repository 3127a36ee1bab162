//! A flow's record against encoded digests: paths, samples, aggregates and their values.

use super::*;
use crate::hash::hash32;

/// The paper's plan (configs/queries/paper.toml).
fn paper_plan() -> Plan {
    let file = crate::pint::query::QueryFile::from_toml(include_str!(
        "../../../../configs/queries/paper.toml"
    ))
    .expect("the paper's query file");
    Plan::compile(&file).expect("the paper's plan")
}

/// Recording reads every digest as the plan's own readings say: each sample at the hop
/// and with the code [`Plan::readings`] gives, each aggregate with its value.
#[test]
fn recording_follows_the_plans_readings() {
    let plan = paper_plan();
    let ids: Vec<u32> = (1..=20).collect();
    for k in [1usize, 3, 5, 9] {
        let mut rec = FlowRecord::new(&plan, k);
        let mut samples = Vec::new();
        let mut per_hop = vec![vec![0u64; k + 1]; plan.queries.len()];
        let mut last: Vec<Option<f64>> = vec![None; plan.queries.len()];
        for n in 0..4000u64 {
            let pid = hash32(7, &[n]);
            let digest = u64::from(hash32(8, &[n])) & 0xffff;
            let before = samples.len();
            rec.record_samples(&plan, Space::Ids(&ids), pid, digest, &mut samples);
            let mut expected = Vec::new();
            for (q, r) in plan.readings(pid, k, digest) {
                match r {
                    Reading::Sample { hop, code, .. } => {
                        per_hop[q][hop] += 1;
                        expected.push((q, hop, code));
                    }
                    Reading::Aggregate(v) => last[q] = Some(v),
                    Reading::Fields(_) => {}
                }
            }
            assert_eq!(&samples[before..], &expected[..], "pid {pid}");
            if rec.conflict() {
                // Random digests soon contradict every path; start the path over.
                rec.restart_paths();
                assert!(!rec.conflict());
            }
        }
        for (q, hops) in per_hop.iter().enumerate() {
            if let Some(s) = rec.sketches(q) {
                for (hop, &n) in hops.iter().enumerate().skip(1) {
                    assert_eq!(s.samples(hop), n, "query {q} hop {hop} of {k}");
                }
            }
            if let Some(a) = rec.aggregate(q) {
                assert_eq!(Some(a.last), last[q]);
            }
        }
    }
}

/// A path restarted from a fresh pinned record is where restarting and pinning again
/// leave it, the values' sketches kept.
#[test]
fn a_restart_from_a_fresh_record_is_a_restart_and_a_pin() {
    let plan = paper_plan();
    let t = crate::topology::Topology::fat_tree(8);
    let space = Space::Topology(&t);
    let (k, reporter) = (
        5,
        t.switch_id(crate::topology::Topology::fat_tree_edges(8)[3]),
    );
    let mut fresh = FlowRecord::new(&plan, k);
    fresh.pin(&plan, space, k, reporter);
    let mut a = FlowRecord::new(&plan, k);
    a.pin(&plan, space, k, reporter);
    for n in 0..300u64 {
        let digest = u64::from(hash32(8, &[n])) & 0xffff;
        a.record(&plan, space, hash32(7, &[n]), digest);
    }
    let mut b = a.clone();
    a.restart_paths();
    a.pin(&plan, space, k, reporter);
    b.restart_paths_from(&fresh);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_ne!(format!("{a:?}"), format!("{fresh:?}"), "the values stay");
}

/// Utilization reads as U (1.0 = line rate) whatever the query's aggregation: the switch
/// carries `512 U`, and a sampled (dynamic per-flow) query's quantiles and frequent
/// values, and a per-packet product over k hops, read 512 times (512^(k-1) times) too
/// high.
/// Packet `pid`'s digest across hops of switch 1 whose links run at utilisation `u`.
fn at_utilisation(plan: &Plan, pid: u32, u: &[f64]) -> u64 {
    u.iter().enumerate().fold(0, |digest, (h, &uh)| {
        plan.encode(
            digest,
            &crate::pint::plan::HopInput {
                pid,
                hop: h + 1,
                switch_id: 1,
                ingress_port: 0,
                egress_port: 0,
                hop_latency_ns: 0,
                queue_bytes: 0,
                utilization: crate::pint::plan::HopInput::utilization_value(uh),
            },
        )
    })
}

#[test]
fn utilization_reads_as_a_share_of_line_rate_in_every_aggregation() {
    let text = r#"
global_bits = 24
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "dynamic_per_flow"
bits = 8
[[queries]]
name = "util_max"
value = "link_utilization"
aggregation = "max"
bits = 8
[[queries]]
name = "util_product"
value = "link_utilization"
aggregation = "product"
bits = 8
"#;
    let file = crate::pint::query::QueryFile::from_toml(text).unwrap();
    let plan = Plan::compile(&file).unwrap();
    let k = 3;
    // Low enough that the product of three hops' carried values (26^3) stays within an
    // 8-bit code's range; each reads back as what it was carried as, 26/512.
    let u = [0.05, 0.05, 0.05];
    let carried = (512.0f64 * 0.05).ceil() / 512.0;
    let mut rec = FlowRecord::new(&plan, k);
    for n in 0..3000u64 {
        let pid = hash32(11, &[n]);
        rec.record(&plan, Space::Ids(&[1]), pid, at_utilisation(&plan, pid, &u));
    }
    let s = rec.sketches(0).expect("sampled");
    for hop in 1..=k {
        let m = s.quantile(hop, 0.5).unwrap();
        assert!((m - carried).abs() < carried * 0.06, "hop {hop} median {m}");
        let top = s.frequent(hop, 0.3);
        assert!(
            (top[0].0 - carried).abs() < carried * 0.06,
            "hop {hop}: {top:?}"
        );
    }
    let max = rec.aggregate(1).expect("max").mean;
    assert!((max - carried).abs() < carried * 0.06, "max {max}");
    let product = rec.aggregate(2).expect("product").mean;
    let want = carried.powi(3);
    assert!((product - want).abs() < want * 0.15, "product {product}");
    assert_eq!(
        (
            rec.aggregate(1).unwrap().at_top,
            rec.aggregate(2).unwrap().at_top
        ),
        (0, 0)
    );
    // At half load three hops' product (256^3) is past the code's range: every packet's
    // product is at the code's top, said as such (it read as a number far too small);
    // the maximum is not.
    let mut busy = FlowRecord::new(&plan, k);
    for n in 0..200u64 {
        let pid = hash32(12, &[n]);
        let digest = at_utilisation(&plan, pid, &[0.5; 3]);
        busy.record(&plan, Space::Ids(&[1]), pid, digest);
    }
    let (max, product) = (busy.aggregate(1).unwrap(), busy.aggregate(2).unwrap());
    assert_eq!((max.at_top, product.at_top), (0, product.count));
    assert!(product.count > 100, "{}", product.count);
}

/// A plan with a static port query beside the path: the port query decodes to each
/// hop's egress port and the path to its switches, and pinning the known switches
/// touches the path only (a pinned port query contradicted its first digest, and the
/// record started over again and again, the path never decoded).
#[test]
fn port_queries_decode_to_ports_beside_the_path() {
    let text = r#"
global_bits = 16
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
[[queries]]
name = "egress"
value = "egress_port"
aggregation = "static_per_flow"
bits = 8
frequency = 0.5
"#;
    let plan = Plan::compile(&crate::pint::query::QueryFile::from_toml(text).unwrap()).unwrap();
    let switches = [3u32, 17, 12, 5, 9];
    let ports = [1u32, 2, 40, 4, 0];
    let ids: Vec<u32> = (1..=20).collect();
    let space = Space::Ids(&ids);
    let k = switches.len();
    let mut rec = FlowRecord::new(&plan, k);
    rec.pin(&plan, space, k, 9);
    rec.pin(&plan, space, 1, 3);
    for n in 0..3000u64 {
        let pid = hash32(11, &[n]);
        let mut digest = 0;
        for (h, (&s, &e)) in switches.iter().zip(&ports).enumerate() {
            let input = crate::pint::plan::HopInput {
                pid,
                hop: h + 1,
                switch_id: s,
                ingress_port: 0,
                egress_port: e,
                hop_latency_ns: 0,
                queue_bytes: 0,
                utilization: 1,
            };
            digest = plan.encode(digest, &input);
        }
        rec.record(&plan, space, pid, digest);
        assert!(!rec.conflict(), "packet {n}");
    }
    let decoded = |q: usize| {
        rec.path(q)
            .unwrap()
            .path(path_context(&plan, space, q).unwrap())
    };
    assert_eq!(decoded(0), Some(switches.to_vec()));
    assert_eq!(decoded(1), Some(ports.to_vec()));
}

/// The library never keeps more items than the bound the sizing relies on.
#[test]
fn kll_stays_within_the_items_bound() {
    for k in [8u16, 9, 12, 20, 33, 64, 100, 200] {
        let mut s = KllSketch::<u32>::new(k).unwrap();
        let mut n = 0u64;
        for step in [100u64, 1_000, 10_000, 100_000, 400_000] {
            while n < step {
                s.update(hash32(k.into(), &[n]));
                n += 1;
                let bound = kll_items_bound(k, n);
                assert!(
                    s.num_retained() as u64 <= bound,
                    "k {k} n {n}: {} retained, bound {bound}",
                    s.num_retained()
                );
            }
        }
    }
}

#[test]
fn sketches_are_sized_to_their_budget() {
    let narrow = LogCompressor::with_epsilon(0.022, 8);
    let wide = LogCompressor::with_epsilon(0.002, 12);
    for (hops, budget, c) in [
        (1usize, 4096u32, &narrow),
        (3, 4096, &narrow),
        (5, 4096, &narrow),
        (4, 4000, &narrow),
        (2, 100_000, &narrow),
        (5, 4096, &wide),
        (2, 100_000, &wide),
    ] {
        let s = HopSketches::new(hops, c.clone(), budget);
        assert!(
            s.budget_bytes() <= u64::from(budget),
            "{hops} hops, {budget} bytes: K {} needs {}",
            s.kll_k(),
            s.budget_bytes()
        );
        // And the largest K that does.
        let bigger = u64::from(s.kll_k()) + 1;
        assert!(
            hops as u64
                * kll_items_bound(bigger as u16, SIZED_FOR_SAMPLES)
                * u64::from(s.item_bytes())
                > u64::from(budget)
        );
    }
    // Too small for even the smallest sketches: K = 8, and the need is reported.
    let tiny = HopSketches::new(4, narrow, 400);
    assert_eq!(tiny.kll_k(), 8);
    assert!(tiny.budget_bytes() > 400);
}

/// Values beyond the code's range are carried as its largest value: the sketches say
/// which that is and what share of a hop's samples it holds (a 500 µs stall read as
/// 66 µs at every quantile, with nothing to say it was at least that).
#[test]
fn saturated_samples_are_told_apart() {
    let c = LogCompressor::with_epsilon(0.022, 8);
    let mut s = HopSketches::new(2, c.clone(), 4096);
    let top = c.decompress(c.max_code());
    assert_eq!(s.top_value(), top);
    assert!((60_000.0..70_000.0).contains(&top), "{top}");
    for n in 0..1000u32 {
        let ns = if n % 4 == 0 { 500_000 } else { 2_000 };
        s.add(1, c.compress(ns, n.wrapping_mul(0x9e37_79b9)));
        s.add(2, c.compress(2_000, n));
    }
    assert!(
        (s.share_at_top(1) - 0.25).abs() < 0.02,
        "{}",
        s.share_at_top(1)
    );
    assert_eq!(s.share_at_top(2), 0.0);
    assert_eq!(s.quantile(1, 0.99), Some(top));
    assert_eq!(HopSketches::new(1, c, 4096).share_at_top(1), 0.0);
}

/// A lone saturated sample among many is still counted once the sketch has compacted it
/// away: the share at the top agrees with the maximum the quantiles report.
#[test]
fn a_lone_saturated_sample_is_counted_exactly() {
    let c = LogCompressor::with_epsilon(0.022, 8);
    let mut s = HopSketches::new(1, c.clone(), 1024);
    s.add(1, c.max_code() + 5);
    for n in 0..20_000u32 {
        s.add(1, c.compress(2_000, n));
    }
    assert!(s.retained() < 20_001, "the sketch compacted");
    assert_eq!(s.quantile(1, 1.0), Some(s.top_value()));
    assert_eq!(s.share_at_top(1), 1.0 / 20_001.0);
    assert_eq!(s.share_at_top(7), 0.0);
}

#[test]
fn sketch_items_are_as_narrow_as_the_codes() {
    let narrow = LogCompressor::with_epsilon(0.022, 8);
    let wide = LogCompressor::with_epsilon(0.002, 12);
    let (a, b) = (
        HopSketches::new(5, narrow.clone(), 4096),
        HopSketches::new(5, wide.clone(), 4096),
    );
    assert_eq!((a.item_bytes(), b.item_bytes()), (1, 2));
    // The same budget buys the narrower items a larger K.
    assert!(a.kll_k() > b.kll_k(), "{} vs {}", a.kll_k(), b.kll_k());
    // Codes above 255 survive in two-byte items, and what they stand for comes back.
    let mut s = HopSketches::new(1, wide.clone(), 100_000);
    let big = wide.max_code() - 7;
    for _ in 0..100 {
        s.add(1, big);
    }
    assert_eq!(s.quantile(1, 0.5), Some(wide.decompress(big)));
    // A code beyond the largest (a corrupt field) reads as the largest, in either width.
    for c in [&narrow, &wide] {
        let mut s = HopSketches::new(1, c.clone(), 4096);
        s.add(1, c.max_code() + 1000);
        assert_eq!(s.quantile(1, 1.0), Some(c.decompress(c.max_code())));
        assert_eq!(s.samples(1), 1);
    }
}

#[test]
fn sketches_answer_quantiles_and_frequent_values_within_budget() {
    let c = LogCompressor::with_epsilon(0.022, 8);
    let mut small = HopSketches::new(4, c.clone(), 400);
    // Accuracy is checked on sketches of up to 420 one-byte items per hop (K about 100).
    let mut medium = HopSketches::new(4, c.clone(), 4 * 420);
    let mut exact = HopSketches::large(4, c.clone());
    for i in 0..50_000u32 {
        let hop = 1 + (i % 4) as usize;
        // Hop h: latency uniform in [1000 h, 2000 h] ns, codes with randomized rounding.
        let x =
            1000.0 * hop as f64 * (1.0 + f64::from(hash32(1, &[u64::from(i)])) / 4_294_967_296.0);
        let code = c.compress(x.round() as u64, hash32(2, &[u64::from(i)]) >> 16);
        small.add(hop, code);
        medium.add(hop, code);
        exact.add(hop, code);
    }
    assert!(
        small.retained() <= 4 * 100,
        "within budget: {}",
        small.retained()
    );
    // KLL compacts with random coin flips (not seedable), so the bound is the library's
    // rank error, doubled (far beyond its 99% level), turned into value error for a
    // uniform [1000 h, 2000 h] (a rank error r moves the median by r x 1000 h, i.e. 2r/3 of
    // 1500 h), plus the compression's own error.
    let tolerance = 2.0 * medium.rank_error() * 2.0 / 3.0 + 0.03;
    assert!(
        tolerance < 0.07,
        "a bound that still means something: {tolerance}"
    );
    for hop in 1..=4 {
        let truth = 1500.0 * hop as f64;
        let m = medium.quantile(hop, 0.5).unwrap();
        assert!(
            (m - truth).abs() / truth < tolerance,
            "hop {hop}: median {m} vs {truth} (tolerance {tolerance})"
        );
        let e = exact.quantile(hop, 0.5).unwrap();
        assert!(
            (e - truth).abs() / truth < 0.03,
            "hop {hop}: median {e} vs {truth}"
        );
    }
    assert_eq!(small.samples(2), 12_500);
    assert!(small.distinct_values(1).is_err());
    assert!(
        small
            .entropy(1)
            .unwrap_err()
            .to_string()
            .contains("sampled stream")
    );
    // A constant value is frequent.
    let mut f = HopSketches::new(1, c.clone(), 1000);
    for i in 0..1000u32 {
        f.add(1, if i % 4 == 0 { 10 } else { 100 });
    }
    let top = f.frequent(1, 0.1);
    assert_eq!(top.len(), 2);
    assert!(
        (top[0].0 - c.decompress(100)).abs() < 1e-9 && (top[0].1 - 0.75).abs() < 0.05,
        "{top:?}"
    );
}
