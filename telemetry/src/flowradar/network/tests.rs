use super::*;
use crate::flowradar::analysis::link_losses;
use crate::flowradar::sim::{SimConfig, simulate};

fn assert_exact(epoch: &crate::flowradar::sim::SimEpoch, r: &NetworkResult) {
    for (s, sw) in r.switches.iter().enumerate() {
        assert!(
            sw.keys_complete && sw.counters_complete,
            "switch {s} incomplete: keys {} counters {} single {} flows {} truth {}",
            sw.keys_complete,
            sw.counters_complete,
            r.single[s].complete,
            sw.flows.len(),
            epoch.truth[s].len()
        );
        assert_eq!(sw.flows.len(), epoch.truth[s].len(), "switch {s}: flows");
        for f in &sw.flows {
            let (p, b) = epoch.truth[s][&f.key];
            assert_eq!(
                (f.packets, f.bytes),
                (Some(p), Some(b)),
                "switch {s} flow {}",
                f.key
            );
        }
    }
}

/// Loss on known links: network-wide decoding returns every switch's exact per-flow packet
/// and byte counts, and per-link loss from the counters equals the packets really dropped.
#[test]
fn exact_counts_and_localised_loss() {
    // K = 4: 20 switches, 16 hosts. Drop 10% on one aggregation -> core link and 30% on one
    // core -> aggregation link.
    let (agg, core) = (4, 0);
    let (core2, agg2) = (3, 4 + 4 + 1);
    let cfg = SimConfig {
        k: 4,
        flows: 3000,
        max_packets: 30,
        provisioned_flows: Some(2000),
        filter_bits_per_flow: 32.0,
        lossy_links: vec![((agg, core), 0.1), ((core2, agg2), 0.3)],
        seed: 7,
        ..SimConfig::default()
    };
    let epoch = simulate(&cfg);
    assert!(
        epoch.lost.values().sum::<u64>() > 100,
        "some loss happened: {:?}",
        epoch.lost
    );
    let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
    let r = network_decode(&refs);
    assert_exact(&epoch, &r);
    let losses = link_losses(&r, &epoch.paths);
    for l in &losses {
        let truth = epoch.lost.get(&(l.from, l.to)).copied().unwrap_or(0);
        assert_eq!(l.packets_lost, truth, "link {} -> {}", l.from, l.to);
    }
    let lossy: Vec<(usize, usize)> = losses
        .iter()
        .filter(|l| l.packets_lost > 0)
        .map(|l| (l.from, l.to))
        .collect();
    let mut expected: Vec<(usize, usize)> = epoch.lost.keys().copied().collect();
    expected.sort();
    assert_eq!(lossy, expected, "exactly the lossy links");
}

/// A burst: tables sized for fewer flows than the busiest switches see. SingleDecode fails
/// there; network-wide decoding recovers the flows from the other switches and still gets
/// exact counters.
#[test]
fn network_wide_decoding_recovers_a_burst() {
    let cfg = SimConfig {
        k: 4,
        flows: 5000,
        provisioned_flows: Some(900),
        cells_per_flow: 1.3,
        filter_bits_per_flow: 32.0,
        seed: 3,
        ..SimConfig::default()
    };
    let epoch = simulate(&cfg);
    let busiest = *epoch.flows_per_switch().iter().max().unwrap();
    assert!(
        busiest as f64 > 900.0 * 1.3 / 1.22,
        "the burst overloads some switch: {busiest}"
    );
    let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
    let r = network_decode(&refs);
    assert!(
        r.single.iter().any(|s| !s.complete),
        "SingleDecode fails somewhere"
    );
    assert!(r.network_pairs() > r.single_pairs());
    for (s, sw) in r.switches.iter().enumerate() {
        if sw.keys_complete && sw.counters_complete {
            for f in &sw.flows {
                let (p, b) = epoch.truth[s][&f.key];
                assert_eq!((f.packets, f.bytes), (Some(p), Some(b)));
            }
        }
        // Whatever is reported is right, complete or not.
        for f in &sw.flows {
            assert!(
                epoch.truth[s].contains_key(&f.key),
                "switch {s}: a flow that never passed"
            );
        }
    }
}

#[test]
fn counter_decode_solves_a_system_peeling_cannot() {
    // Three flows in a table of one sub-table with two cells would be underdetermined; use a
    // real flowset where flows share all cells pairwise so peeling stalls.
    let cfg = SimConfig {
        k: 4,
        flows: 400,
        provisioned_flows: Some(300),
        cells_per_flow: 1.05,
        filter_bits_per_flow: 32.0,
        seed: 11,
        ..SimConfig::default()
    };
    let epoch = simulate(&cfg);
    let mut stalled = 0;
    for (s, fs) in epoch.flowsets.iter().enumerate() {
        let keys: Vec<FlowKey> = epoch.truth[s].keys().copied().collect();
        let (counts, ok) = counter_decode(fs, &keys);
        if ok {
            for (k, c) in keys.iter().zip(counts) {
                let (p, b) = epoch.truth[s][k];
                assert_eq!(c, Some((p, b)));
            }
        } else {
            stalled += 1;
        }
    }
    assert!(stalled < epoch.flowsets.len(), "most systems solve");
}

/// A burst so deep that a busy switch's counters alone are underdetermined (fewer than about
/// 1.09 cells per flow): the counters decoded at the other switches on the flows' paths,
/// verified against every cell, still give every switch exact counters.
#[test]
fn counters_of_a_deep_burst_come_from_other_switches() {
    let cfg = SimConfig {
        k: 4,
        flows: 6500,
        provisioned_flows: Some(1000),
        cells_per_flow: 1.3,
        seed: 5,
        ..SimConfig::default()
    };
    let epoch = simulate(&cfg);
    let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
    // Per switch, with every key given, counters alone do not solve somewhere.
    let alone_fails = epoch.flowsets.iter().enumerate().any(|(s, fs)| {
        let keys: Vec<FlowKey> = epoch.truth[s].keys().copied().collect();
        !counter_decode(fs, &keys).1
    });
    assert!(
        alone_fails,
        "the burst is deep enough to need other switches"
    );
    let r = network_decode(&refs);
    assert!(
        r.single.iter().all(|s| !s.complete),
        "SingleDecode fails everywhere"
    );
    assert_exact(&epoch, &r);
}

/// Loss in a deep burst: hints from switches before the lossy link are wrong after it. They
/// are rejected by the cells' checks, never taken: whatever is reported is exact.
#[test]
fn wrong_hints_are_never_taken() {
    let cfg = SimConfig {
        k: 4,
        flows: 6000,
        provisioned_flows: Some(1000),
        cells_per_flow: 1.3,
        lossy_links: vec![((4, 0), 0.2), ((0, 5), 0.2), ((8, 2), 0.2)],
        max_packets: 30,
        seed: 9,
        ..SimConfig::default()
    };
    let epoch = simulate(&cfg);
    assert!(epoch.lost.values().sum::<u64>() > 50);
    let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
    let r = network_decode(&refs);
    let mut reported = 0;
    for (s, sw) in r.switches.iter().enumerate() {
        for f in &sw.flows {
            let (p, b) = epoch.truth[s][&f.key];
            if let (Some(fp), Some(fb)) = (f.packets, f.bytes) {
                assert_eq!((fp, fb), (p, b), "switch {s} flow {}", f.key);
                reported += 1;
            }
        }
    }
    let total: usize = epoch.truth.iter().map(|t| t.len()).sum();
    assert!(
        reported * 10 > total * 9,
        "most counters are found: {reported} of {total}"
    );
}

/// Filters so small that first packets often hit false positives, hiding flows from a
/// switch's keys while their packets stay in its counters. Whatever a result calls complete
/// must be the truth: a switch that says all its keys are known lists every flow that
/// passed it, and one that says its counters are known has every flow's exact counts; the
/// same for SingleDecode.
#[test]
fn complete_means_every_flow_with_hidden_flows_about() {
    let mut hidden_somewhere = false;
    for seed in 0..6 {
        let cfg = SimConfig {
            k: 4,
            flows: 1500,
            provisioned_flows: Some(1500),
            cells_per_flow: 1.5,
            filter_bits_per_flow: 1.0,
            seed,
            ..SimConfig::default()
        };
        let epoch = simulate(&cfg);
        let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
        let r = network_decode(&refs);
        for (s, sw) in r.switches.iter().enumerate() {
            let truth = &epoch.truth[s];
            let listed = sw.flows.len();
            if listed < truth.len() {
                hidden_somewhere = true;
            }
            if sw.keys_complete {
                assert_eq!(listed, truth.len(), "seed {seed} switch {s}: keys complete");
            }
            if sw.counters_complete {
                assert!(sw.keys_complete, "seed {seed} switch {s}");
                for f in &sw.flows {
                    assert_eq!(
                        (f.packets, f.bytes),
                        truth.get(&f.key).map(|&(p, b)| (Some(p), Some(b))).unwrap()
                    );
                }
            }
            let single = &r.single[s];
            if single.complete {
                assert_eq!(
                    single.flows.len(),
                    truth.len(),
                    "seed {seed} switch {s}: single"
                );
            }
            for f in &single.flows {
                assert_eq!(
                    truth.get(&f.key),
                    Some(&(f.packets, f.bytes)),
                    "seed {seed} switch {s}: single"
                );
            }
        }
    }
    assert!(hidden_somewhere, "the filters hid some flows");
}

/// A switch whose flows no other switch sees, overloaded: FlowDecode cannot finish its keys,
/// but the flows SingleDecode peeled there keep their exact counters (network-wide decoding
/// never reports fewer than SingleDecode alone).
#[test]
fn a_switch_network_decoding_cannot_finish_keeps_what_single_decode_found() {
    use crate::flowradar::flowset::FlowSetConfig;
    let key = |i: u32| FlowKey {
        src: 0x0a00_0000 | i,
        dst: 0x0b00_0000 | i.wrapping_mul(7),
        src_port: i as u16,
        dst_port: 80,
        protocol: 17,
    };
    // Switch 0: 100 flows in a table for 80 (SingleDecode stalls part-way). Switch 1: other
    // flows, well within its size. Switch 2: more of switch 1's flows, overloaded too.
    let mut sets: Vec<FlowSet> = (0..3)
        .map(|s| {
            FlowSet::new(&FlowSetConfig {
                filter_bits_per_flow: 32.0,
                ..FlowSetConfig::for_flows(80, s + 1)
            })
        })
        .collect();
    let mut truth: Vec<rustc_hash::FxHashMap<FlowKey, (u64, u64)>> =
        vec![rustc_hash::FxHashMap::default(); 3];
    let mut count = |sets: &mut Vec<FlowSet>, s: usize, f: u32| {
        let packets = 1 + f % 5;
        for _ in 0..packets {
            sets[s].update(&key(f), 100 + f);
        }
        let e = truth[s].entry(key(f)).or_default();
        e.0 += u64::from(packets);
        e.1 += u64::from(packets * (100 + f));
    };
    for f in 0..100 {
        count(&mut sets, 0, f);
    }
    for f in 1000..1040 {
        count(&mut sets, 1, f);
        count(&mut sets, 2, f);
    }
    for f in 2000..2070 {
        count(&mut sets, 2, f);
    }
    let refs: Vec<&FlowSet> = sets.iter().collect();
    let r = network_decode(&refs);
    assert!(!r.single[0].complete, "switch 0 is overloaded");
    assert!(
        !r.single[0].flows.is_empty(),
        "SingleDecode peels some of it"
    );
    assert!(!r.switches[0].keys_complete, "nothing else sees its flows");
    for (s, (alone, net)) in r.single.iter().zip(&r.switches).enumerate() {
        for f in &alone.flows {
            let found = net.flows.iter().find(|n| n.key == f.key);
            assert_eq!(
                found.map(|n| (n.packets, n.bytes)),
                Some((Some(f.packets), Some(f.bytes))),
                "switch {s}: a flow SingleDecode found keeps its counters"
            );
            assert_eq!(truth[s][&f.key], (f.packets, f.bytes));
        }
        let known = net.flows.iter().filter(|f| f.packets.is_some()).count();
        assert!(known >= alone.flows.len(), "switch {s}");
    }
}
