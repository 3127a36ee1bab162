//! The flow table against digests, counts and probes with known truth: path decoding,
//! loss per link, detection windows, memory bounds and sweeps.

use super::loss::{LOSS_MARKS, LossMarks, loss_input};
use super::*;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;

const PAPER: &str = include_str!("../../../configs/queries/paper.toml");

fn context() -> (ShardContext, u32) {
    let registry = Arc::new(Registry::default());
    let version = Plan::compile(&QueryFile::from_toml(PAPER).unwrap())
        .unwrap()
        .version;
    registry.add_plan(version, PAPER).unwrap();
    (
        ShardContext {
            registry,
            topology: None,
            events: Arc::new(EventLog::default()),
            detection: Params::default(),
            unfit_said_ms: Arc::default(),
        },
        version,
    )
}

/// Sweeps every flow out of `t` as idle (none has had a packet for the last 5 ms), their
/// windows closed and judged in `cx`.
fn forget_idle_flows(t: &mut FlowTable, cx: Option<&ShardContext>) {
    std::thread::sleep(Duration::from_millis(5));
    t.sweep(
        Duration::from_millis(1),
        Duration::from_secs(3600),
        cx,
        |_| true,
    );
}

fn digest(version: u32, flow: u32, i: u32) -> WireDigest {
    WireDigest {
        key: FlowKey {
            src: 0x0a00_0000 | (flow >> 16),
            dst: 0x0b00_0001,
            src_port: flow as u16,
            dst_port: 443,
            protocol: 6,
        },
        ingress_port: 1,
        egress_port: 0,
        pid: i.wrapping_mul(0x9e37_79b9) ^ flow,
        hops: 3,
        plan_version: version,
        digest: u64::from(i) & 0xffff,
        time_ns: 1_700_000_000_000_000_000,
    }
}

/// A flood of distinct flows stays within the table's bound; the ones refused are
/// counted, and memory follows the flows kept, not the flows offered.
#[test]
fn a_flood_of_flows_stays_within_the_bound() {
    let (cx, v) = context();
    let mut t = FlowTable::new(1000);
    for burst in 0..50u32 {
        let ds: Vec<WireDigest> = (0..2000).map(|i| digest(v, burst * 2000 + i, i)).collect();
        t.add_digests(&cx, 9, &ds, &FlowRuns::default());
        assert!(t.len() <= 1000);
    }
    assert_eq!(t.len(), 1000);
    assert_eq!(t.stats.flows_created, 1000);
    assert_eq!(t.stats.flows_refused, 99_000);
    let per_flow = t.memory_bytes() / t.len();
    assert!(
        per_flow < 8 * 1024,
        "one digest per flow: {per_flow} bytes per flow"
    );
    // Flows already tracked keep being recorded while the table is full.
    let again: Vec<WireDigest> = (0..1000).map(|i| digest(v, i, i + 1)).collect();
    let before = t.stats.flows_refused;
    t.add_digests(&cx, 9, &again, &FlowRuns::default());
    let tracked = (0..1000)
        .filter(|&i| t.get(&digest(v, i, 0).key).is_some_and(|f| f.digests == 2))
        .count();
    assert_eq!(tracked + (t.stats.flows_refused - before) as usize, 1000);
}

/// Flows of the longest paths take the table's hops before its flows: their records are
/// refused (counted) once the hops run out, and memory stays near what the table's
/// capacity of average paths would take.
#[test]
fn long_paths_fill_the_table_by_their_hops() {
    let (cx, v) = context();
    let mut t = FlowTable::new(1000);
    let long = |f: u32| WireDigest {
        hops: telemetry::packet_id::MAX_PATH_LENGTH,
        ..digest(v, f, f)
    };
    let ds: Vec<WireDigest> = (0..1000).map(long).collect();
    t.add_digests(&cx, 9, &ds, &FlowRuns::default());
    let paths = 1000 * HOPS_PER_FLOW / usize::from(telemetry::packet_id::MAX_PATH_LENGTH);
    let with_path = (0..1000)
        .filter(|&f| t.get(&long(f).key).is_some_and(|s| s.pint.is_some()))
        .count();
    assert_eq!(with_path, paths);
    assert_eq!(t.stats.flows_refused, (1000 - paths) as u64);
    let short: Vec<WireDigest> = (0..1000).map(|f| digest(v, f, f)).collect();
    // The short paths of the same flows start over: each gives back its long path's hops.
    t.add_digests(&cx, 9, &short, &FlowRuns::default());
    let with_path = (0..1000)
        .filter(|&f| t.get(&long(f).key).is_some_and(|s| s.pint.is_some()))
        .count();
    assert_eq!(with_path, 1000, "3-hop paths fit");
    assert_eq!(t.hops_held, 3000);
    // Forgotten flows give their hops back.
    forget_idle_flows(&mut t, None);
    assert_eq!((t.len(), t.hops_held), (0, 0));
}

/// Digests taken grouped by flow record exactly what they record as sent: the same
/// flows (and the same refused when the table is full), digests, path decoding and
/// resets, samples per hop, switch summaries and counters.
#[test]
fn grouped_digests_record_as_digests_in_order_do() {
    let (cx, v) = context();
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as u32
    };
    let batches: Vec<Vec<WireDigest>> = (0..4)
        .map(|b| {
            (0..600u32)
                .map(|i| {
                    let r = next();
                    // One digest in twenty of a plan the sink lacks.
                    let version = if r % 20 == 0 { v ^ 1 } else { v };
                    let mut d = digest(version, r % 30, b * 600 + i);
                    d.digest = u64::from(next()) & 0xffff;
                    d
                })
                .collect()
        })
        .collect();
    let group = |ds: &[WireDigest]| -> FlowRuns {
        let mut keys: Vec<FlowKey> = Vec::new();
        for d in ds {
            if !keys.contains(&d.key) {
                keys.push(d.key);
            }
        }
        let mut runs = FlowRuns::default();
        for k in &keys {
            runs.order
                .extend((0..ds.len() as u32).filter(|&i| ds[i as usize].key == *k));
            runs.ends.push(runs.order.len() as u32);
        }
        runs
    };
    // Grouped three ways: by an order and its runs (as a connection decodes a batch),
    // by an order alone (runs found by key), and the digests put in that order with
    // only their runs (as a batch split between decode threads goes to each).
    let mut plain = FlowTable::new(25);
    let mut grouped = [FlowTable::new(25), FlowTable::new(25), FlowTable::new(25)];
    for ds in &batches {
        plain.add_digests(&cx, 9, ds, &FlowRuns::default());
        let runs = group(ds);
        grouped[0].add_digests(&cx, 9, ds, &runs);
        let order_only = FlowRuns {
            order: runs.order.clone(),
            ends: Vec::new(),
        };
        grouped[1].add_digests(&cx, 9, ds, &order_only);
        let in_order: Vec<WireDigest> = runs.order.iter().map(|&i| ds[i as usize]).collect();
        let ends_only = FlowRuns {
            order: Vec::new(),
            ends: runs.ends.clone(),
        };
        grouped[2].add_digests(&cx, 9, &in_order, &ends_only);
    }
    assert!(plain.stats.flows_refused > 0 && plain.stats.unknown_plan > 0);
    for grouped in &grouped {
        same_recording(&plain, grouped);
    }
}

/// Two tables that recorded the same digests (in whatever order) hold the same.
fn same_recording(plain: &FlowTable, grouped: &FlowTable) {
    let stats = |t: &FlowTable| serde_json::to_string(&t.stats).unwrap();
    assert_eq!(stats(plain), stats(grouped));
    assert_eq!(plain.len(), grouped.len());
    for f in plain.iter() {
        let g = grouped.get(&f.key).expect("the same flows");
        assert_eq!(
            (f.digests, f.path_resets, f.decode_digests),
            (g.digests, g.path_resets, g.decode_digests)
        );
        let (a, b) = (f.pint.as_ref().unwrap(), g.pint.as_ref().unwrap());
        assert_eq!(a.record.packets(), b.record.packets());
        for q in 0..a.plan.plan.queries.len() {
            assert_eq!(
                a.record.path(q).map(|p| format!("{p:?}")),
                b.record.path(q).map(|p| format!("{p:?}"))
            );
            assert_eq!(
                a.record.sketches(q).is_some(),
                b.record.sketches(q).is_some()
            );
            if let (Some(x), Some(y)) = (a.record.sketches(q), b.record.sketches(q)) {
                for hop in 1..=a.record.k() {
                    assert_eq!(x.samples(hop), y.samples(hop));
                }
            }
        }
    }
    let summaries = |t: &FlowTable| -> Vec<String> {
        let mut s: Vec<String> = t
            .switch_samples()
            .map(|(k, c)| format!("{k:?} {c:?}"))
            .collect();
        s.sort();
        s
    };
    assert_eq!(summaries(plain), summaries(grouped));
}

/// An epoch whose counts come in parts (the last switch's flowset late) gives its loss
/// once: N sent, N delivered is no loss, however the parts arrive.
#[test]
fn an_epochs_counts_in_parts_add_up_to_its_loss() {
    let mut fed = [(u64::MAX, 0, 0); LOSS_EPOCHS_KEPT];
    // Epoch 7: the first switch's count, then the last's (late).
    assert_eq!(loss_input(&mut fed, 7, Some(100), None), Some((100, 100)));
    assert_eq!(
        loss_input(&mut fed, 7, Some(100), Some(100)),
        Some((-100, 0))
    );
    // Nothing new: nothing given.
    assert_eq!(loss_input(&mut fed, 7, Some(100), Some(100)), None);
    // The first switch has moved on to epoch 8 when epoch 7's last count comes.
    assert_eq!(loss_input(&mut fed, 8, Some(50), None), Some((50, 50)));
    assert_eq!(loss_input(&mut fed, 8, None, Some(48)), Some((-48, 0)));
    // Both at once, 3 lost.
    assert_eq!(loss_input(&mut fed, 9, Some(20), Some(17)), Some((3, 20)));
    // Four epochs are kept: epoch 7 is still known after 10, forgotten after 11; a part
    // of it that comes then is left out (alone in a later window it was a false loss).
    assert_eq!(loss_input(&mut fed, 10, Some(1), Some(1)), Some((0, 1)));
    assert_eq!(loss_input(&mut fed, 7, Some(100), Some(100)), None);
    assert_eq!(loss_input(&mut fed, 11, Some(1), Some(1)), Some((0, 1)));
    assert_eq!(loss_input(&mut fed, 7, Some(100), None), None);
    assert_eq!(loss_input(&mut fed, 6, None, Some(90)), None);
    // Newer epochs still take the oldest's place.
    assert_eq!(loss_input(&mut fed, 12, Some(5), Some(4)), Some((1, 5)));
}

/// A flow of two hops, switch 1 then switch 2 (a line topology; its source's edge
/// switch learned): its path is decoded from its pins alone.
fn two_hop_flow(t: &mut FlowTable) -> (ShardContext, FlowKey) {
    let (mut cx, v) = context();
    cx.topology = Some(Arc::new(Topology::line(2)));
    let d = WireDigest {
        hops: 2,
        ..digest(v, 7, 1)
    };
    cx.registry.learn_owners(&[(d.key.src, 1)]);
    t.add_digests(&cx, 2, &[d], &FlowRuns::default());
    let path = decoded_path(
        t.flows.get(&d.key).unwrap(),
        Space::Topology(&Topology::line(2)),
    );
    assert_eq!(path, Some(vec![1, 2]));
    (cx, d.key)
}

/// A flowset missing at its epoch's deadline and coming late: the link's totals are
/// exact once it comes, and the flow's loss series leaves the epoch out (it took the
/// sent packets in one window and the delivered ones, late, in a later one: a false
/// loss event on a loaded machine).
#[test]
fn a_late_flowset_completes_the_totals_and_stays_out_of_the_loss_series() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    t.add_counts(&cx, 1, (1000, 10), &[(key, 1, 100, 10_000)], &[], &[2]);
    t.add_counts(&cx, 1, (1000, 10), &[(key, 2, 100, 10_000)], &[], &[]);
    assert_eq!(lost(&t, key), (0, 0, 0));
    assert_eq!(
        t.flows[&key].loss_fed.iter().find(|f| f.0 == 1),
        Some(&(1, u64::MAX, u64::MAX))
    );
    assert!(t.flows[&key].loss_detector.is_none(), "nothing fed");
}

/// The flow's first epoch unsure at its first switch (which missed it): the link keeps
/// no loss from it, and what follows counts from there (it read as 50 packets more
/// arriving than were sent).
#[test]
fn a_first_epoch_unsure_upstream_adds_no_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    t.add_counts(&cx, 1, (1000, 10), &[(key, 2, 50, 5_000)], &[1], &[]);
    assert_eq!(lost(&t, key), (0, 0, 0));
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key, 1, 100, 10_000), (key, 2, 99, 9_900)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (1, 1, 0));
    // Unsure switches elsewhere in the network, before a path is known, leave the loss of
    // links they are not on as it is.
    let mut t = FlowTable::new(10);
    let (mut cx, v) = context();
    cx.topology = Some(Arc::new(Topology::line(2)));
    let d = WireDigest {
        hops: 2,
        ..digest(v, 8, 1)
    };
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(d.key, 1, 10, 1_000), (d.key, 2, 7, 700)],
        &[44],
        &[],
    );
    cx.registry.learn_owners(&[(d.key.src, 1)]);
    t.add_digests(&cx, 2, &[d], &FlowRuns::default());
    assert_eq!(lost(&t, d.key), (3, 3, 0));
}

/// A source's edge switch learned wrongly (a multi-homed host): pinned as the flow's
/// first hop, its conflict starts the path over without that pin, and the path decodes
/// and stays decoded (the pin came back every 64 digests and broke it each time).
#[test]
fn a_wrong_first_hop_pin_is_not_tried_again() {
    let (mut cx, v) = context();
    let line = Arc::new(Topology::line(3));
    cx.topology = Some(Arc::clone(&line));
    let key = digest(v, 5, 0).key;
    // The flow enters at switch 2 and leaves at 3; its source is believed behind 1.
    cx.registry.learn_owners(&[(key.src, 1)]);
    let mut t = FlowTable::new(10);
    record_along(&mut t, &cx, v, (5, &[2, 3]), 2000, 1_000, 0);
    let f = &t.flows[&key];
    assert_eq!(decoded_path(f, Space::Topology(&line)), Some(vec![2, 3]));
    assert!(f.path_resets <= 2, "{} resets", f.path_resets);
}

/// Encodes `n` packets of flow `flow` (numbered `from` on) along `path` (switch IDs)
/// with every hop's latency `latency_ns`, and records them in `t`.
fn record_along(
    t: &mut FlowTable,
    cx: &ShardContext,
    v: u32,
    (flow, path): (u32, &[u32]),
    n: u32,
    latency_ns: u64,
    from: u32,
) {
    let plan = cx.registry.plan(v).unwrap();
    for i in from..from + n {
        let pid = i.wrapping_mul(0x9e37_79b9) ^ flow;
        let mut d = 0;
        for (h, &s) in path.iter().enumerate() {
            d = plan.plan.encode(
                d,
                &telemetry::pint::plan::HopInput {
                    pid,
                    hop: h + 1,
                    switch_id: s,
                    ingress_port: 1,
                    egress_port: 0,
                    hop_latency_ns: latency_ns,
                    queue_bytes: 0,
                    utilization: 100,
                },
            );
        }
        let w = WireDigest {
            pid,
            hops: path.len() as u8,
            digest: d,
            ..digest(v, flow, i)
        };
        t.add_digests(cx, *path.last().unwrap(), &[w], &FlowRuns::default());
    }
}

/// A context over a diamond, 1 - 2 - 4 and 1 - 3 - 4 (two routes from 1 to 4).
fn diamond_context() -> (ShardContext, u32, Arc<Topology>) {
    let (mut cx, v) = context();
    let diamond = Arc::new(Topology::from_edges(
        "diamond",
        (1..=4).map(|i| format!("s{i}")).collect(),
        &[(0, 1), (0, 2), (1, 3), (2, 3)],
    ));
    cx.topology = Some(Arc::clone(&diamond));
    (cx, v, diamond)
}

/// A route change (the path decodes again, to another) starts the hops' values over:
/// hop latency after it is the new route's alone.
#[test]
fn a_route_change_starts_the_hops_values_over() {
    let (cx, v, diamond) = diamond_context();
    let latency = cx
        .registry
        .plan(v)
        .unwrap()
        .plan
        .queries
        .iter()
        .position(|q| matches!(q.kind, QueryKind::DynamicPerFlow { .. }))
        .unwrap();
    let mut t = FlowTable::new(10);
    record_along(&mut t, &cx, v, (6, &[1, 2, 4]), 3000, 2_000, 0);
    let key = digest(v, 6, 0).key;
    let space = Space::Topology(&diamond);
    assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 2, 4]));
    record_along(&mut t, &cx, v, (6, &[1, 3, 4]), 3000, 8_000, 3000);
    let f = &t.flows[&key];
    assert_eq!(decoded_path(f, space), Some(vec![1, 3, 4]));
    assert!(f.path_resets >= 1);
    let s = f.pint.as_ref().unwrap().record.sketches(latency).unwrap();
    for h in 1..=3 {
        let q = s.quantile(h, 0.1).unwrap();
        assert!((q - 8000.0).abs() < 8000.0 * 0.05, "hop {h}: {q}");
    }
}

/// A route change: the new route's links count loss from the change on. The counts
/// are totals over the flow's life, so the old route's packets read as lost on the new
/// first link (and as negative loss on the new last one) when the new links counted
/// from no loss.
#[test]
fn a_route_change_counts_the_new_links_loss_from_the_change_on() {
    let (cx, v, diamond) = diamond_context();
    let space = Space::Topology(&diamond);
    let mut t = FlowTable::new(10);
    let key = digest(v, 6, 0).key;
    let at = |e: u64| (1_000_000 + 10 * e, 10);
    record_along(&mut t, &cx, v, (6, &[1, 2, 4]), 3000, 2_000, 0);
    assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 2, 4]));
    // 1000 packets on 1 - 2 - 4, 10 lost between 2 and 4.
    t.add_counts(
        &cx,
        1,
        at(1),
        &[(key, 1, 1000, 0), (key, 2, 1000, 0), (key, 4, 990, 0)],
        &[],
        &[],
    );
    assert_eq!(t.flows[&key].loss_on((2, 4)), Some(10));
    record_along(&mut t, &cx, v, (6, &[1, 3, 4]), 3000, 2_000, 3000);
    assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 3, 4]));
    // 500 on 1 - 3 - 4, none lost; then 100, 5 lost between 1 and 3.
    t.add_counts(
        &cx,
        2,
        at(2),
        &[(key, 1, 500, 0), (key, 3, 500, 0), (key, 4, 500, 0)],
        &[],
        &[],
    );
    let f = &t.flows[&key];
    assert_eq!((f.loss_on((1, 3)), f.loss_on((3, 4))), (Some(0), Some(0)));
    t.add_counts(
        &cx,
        3,
        at(3),
        &[(key, 1, 100, 0), (key, 3, 95, 0), (key, 4, 95, 0)],
        &[],
        &[],
    );
    let f = &t.flows[&key];
    assert_eq!((f.loss_on((1, 3)), f.loss_on((3, 4))), (Some(5), Some(0)));
    let lost = |a, b| t.links[&(a, b)].lost_packets;
    assert_eq!((lost(1, 3), lost(3, 4), lost(2, 4)), (5, 0, 10));
    assert_eq!(t.links[&(1, 3)].flows_with_loss, 1);
}

/// A path that cannot decode (a switch on it missing from the topology) starts its
/// decoding over and over, but the hops' latency samples and utilisation values stay:
/// each conflict threw them away, so such a flow showed almost none. (Here the topology
/// alone decodes the path to 1, 2, 3 again after each conflict: the same path, so no
/// route change.)
#[test]
fn a_path_that_cannot_decode_keeps_its_hops_values() {
    let (mut cx, v) = context();
    let line = Arc::new(Topology::line(3));
    cx.topology = Some(Arc::clone(&line));
    let plan = cx.registry.plan(v).unwrap();
    let latency = plan
        .plan
        .queries
        .iter()
        .position(|q| matches!(q.kind, QueryKind::DynamicPerFlow { .. }))
        .expect("the paper plan samples hop latency");
    let utilisation = plan
        .plan
        .queries
        .iter()
        .position(|q| matches!(q.kind, QueryKind::PerPacket { .. }))
        .expect("the paper plan has a per-packet query");
    let key = digest(v, 6, 0).key;
    let mut t = FlowTable::new(10);
    // Switch 9 is not in the topology: hop 2 has no candidate left once it writes.
    let n = 4000u32;
    record_along(&mut t, &cx, v, (6, &[1, 9, 3]), n, 2_000, 0);
    let f = &t.flows[&key];
    assert!(f.path_resets > 3, "{} resets", f.path_resets);
    let p = f.pint.as_ref().unwrap();
    let s = p.record.sketches(latency).unwrap();
    let samples: u64 = (1..=3).map(|h| s.samples(h)).sum();
    // About 15/16 of the packets carry a latency sample.
    assert!(
        samples as f64 >= 0.85 * f64::from(n),
        "{samples} latency samples of {n} packets"
    );
    for h in 1..=3 {
        let q = s.quantile(h, 0.5).unwrap();
        assert!((q - 2000.0).abs() < 2000.0 * 0.05, "hop {h}: {q}");
    }
    let a = p.record.aggregate(utilisation).unwrap();
    assert!(a.count as f64 >= 0.03 * f64::from(n), "{} values", a.count);
}

/// A flow whose digests fit no path of the topology (its switches are there, a link of its
/// route is not) is said in the log, once; one whose path decodes is not.
#[test]
fn a_flow_that_fits_no_path_of_the_topology_is_said() {
    let (mut cx, v) = context();
    cx.topology = Some(Arc::new(Topology::line(3)));
    let mut t = FlowTable::new(10);
    record_along(&mut t, &cx, v, (6, &[1, 2, 3]), 2000, 2_000, 0);
    let key = digest(v, 6, 0).key;
    assert!(
        t.flows[&key]
            .pint
            .as_ref()
            .unwrap()
            .path(cx.switches().space())
            .is_some()
    );
    assert_eq!(t.flows[&key].path_resets, 0);
    assert_eq!(cx.unfit_said_ms.load(Relaxed), 0, "a path that decodes");
    // 1 -> 3 is no link of the line 1 - 2 - 3.
    record_along(&mut t, &cx, v, (7, &[2, 1, 3]), 2000, 2_000, 0);
    let f = &t.flows[&digest(v, 7, 0).key];
    assert!(
        f.path_resets >= super::UNFIT_RESETS,
        "{} resets",
        f.path_resets
    );
    let said = cx.unfit_said_ms.load(Relaxed);
    assert!(said > 0, "said");
    // Said once a minute at most.
    record_along(&mut t, &cx, v, (8, &[3, 1, 2]), 2000, 2_000, 0);
    assert!(t.flows[&digest(v, 8, 0).key].path_resets >= super::UNFIT_RESETS);
    assert_eq!(cx.unfit_said_ms.load(Relaxed), said);
}

/// Lost packets on the flow's link as the link's totals count them.
fn lost(t: &FlowTable, key: FlowKey) -> (i64, i64, u64) {
    let l = &t.links[&(1, 2)];
    (
        t.flows[&key].loss_on((1, 2)).unwrap(),
        l.lost_packets,
        l.vanished_flows,
    )
}

/// An epoch whose counts at one end of a link are unsure (its flowset not decoded whole,
/// or its switch disconnected) adds no loss to the link: the difference it leaves is
/// what that end missed. Loss before and after it still counts.
#[test]
fn an_epoch_unsure_at_one_end_adds_no_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    // Epoch 1: 100 sent, 97 through.
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(key, 1, 100, 10_000), (key, 2, 97, 9_700)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (3, 3, 0));
    // Epoch 2: sure, nothing more lost (the 3 were no packets in flight).
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key, 1, 10, 1_000), (key, 2, 10, 1_000)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (3, 3, 0));
    // Epoch 3: switch 2 did not decode the flow: it looks vanished there, but is not.
    t.add_counts(&cx, 3, (1020, 10), &[(key, 1, 100, 10_000)], &[2], &[]);
    assert_eq!(lost(&t, key), (3, 3, 0));
    // Epoch 4: switch 1 not decoded whole (it missed the flow), switch 2 counted it.
    t.add_counts(&cx, 4, (1030, 10), &[(key, 2, 50, 5_000)], &[1], &[]);
    assert_eq!(lost(&t, key), (3, 3, 0));
    // Epoch 5: both sure, 2 lost.
    t.add_counts(
        &cx,
        5,
        (1040, 10),
        &[(key, 1, 60, 6_000), (key, 2, 58, 5_800)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (5, 5, 0));
    // The flow's own loss series saw the sure epochs only.
    let unsure: Vec<_> = t.flows[&key]
        .loss_fed
        .iter()
        .filter(|f| f.0 == 3 || f.0 == 4)
        .collect();
    assert_eq!(unsure, [&(3, u64::MAX, u64::MAX), &(4, u64::MAX, u64::MAX)]);
    // Epoch 6: switch 2 counted the flow in a flowset it did not decode whole; epoch 7:
    // switch 1 counted it, switch 2 (unsure) has none of it. Each switch's counts say how
    // many of their epochs were unsure there, those that missed the flow included.
    t.add_counts(
        &cx,
        6,
        (1050, 10),
        &[(key, 1, 10, 1_000), (key, 2, 10, 1_000)],
        &[2],
        &[],
    );
    t.add_counts(&cx, 7, (1060, 10), &[(key, 1, 10, 1_000)], &[2], &[]);
    let unsure_at = |s: u32| {
        let c = t.flows[&key].counts.iter().find(|c| c.switch == s).unwrap();
        (c.epochs, c.unsure_epochs)
    };
    assert_eq!((unsure_at(1), unsure_at(2)), ((6, 1), (5, 3)));
    // Switch 2's unsure flowset of epoch 6 counted the flow: the 2 lost in epoch 5 were
    // not missed there, and stay.
    assert_eq!(lost(&t, key), (5, 5, 0));
}

/// Packets counted at the first switch at the end of an epoch and in flight into the next,
/// which the second switch's flowset (not decoded whole) missed, are no loss for good; nor
/// is a packet the first switch's unsure flowset missed, counted at the second switch in
/// the epoch after, where the flow was in no count of the unsure epoch (it showed as -1 for
/// good). The flow's first loss, seen over two epochs, stays.
#[test]
fn packets_in_flight_that_an_unsure_end_missed_are_no_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(key, 1, 10, 1_000), (key, 2, 9, 900)],
        &[],
        &[],
    );
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key, 1, 5, 500), (key, 2, 5, 500)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (1, 1, 0));
    // Epoch 3: 4 counted at switch 1, 2 of them still on the link at its end.
    t.add_counts(
        &cx,
        3,
        (1020, 10),
        &[(key, 1, 4, 400), (key, 2, 2, 200)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (3, 3, 0));
    // Epoch 4: switch 2's flowset missed the flow (the 2 it would have counted), and no
    // other switch counted it: the flow is in no count of the epoch.
    t.add_counts(&cx, 4, (1030, 10), &[], &[2], &[]);
    // Epoch 5: both sure and even.
    t.add_counts(
        &cx,
        5,
        (1040, 10),
        &[(key, 1, 3, 300), (key, 2, 3, 300)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (1, 1, 0), "the 2 in flight are no loss");
    // Epoch 6: switch 1's flowset missed a packet that switch 2 counts in epoch 7.
    t.add_counts(&cx, 6, (1050, 10), &[], &[1], &[]);
    t.add_counts(&cx, 7, (1060, 10), &[(key, 2, 1, 100)], &[], &[]);
    t.add_counts(
        &cx,
        8,
        (1070, 10),
        &[(key, 1, 2, 200), (key, 2, 2, 200)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (1, 1, 0), "no gain either");
    // A flow without loss: switch 1's unsure flowset of epoch 2 counts two of its three
    // packets; switch 2 counts two, the third in epoch 3.
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(key, 1, 5, 500), (key, 2, 5, 500)],
        &[],
        &[],
    );
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key, 1, 2, 200), (key, 2, 2, 200)],
        &[1],
        &[],
    );
    t.add_counts(&cx, 3, (1020, 10), &[(key, 2, 1, 100)], &[], &[]);
    assert_eq!(
        lost(&t, key),
        (0, 0, 0),
        "nor after an epoch that counted the flow"
    );
    // Packets in flight at a sure epoch's end, counted at switch 2 in an epoch whose counts
    // at switch 1 are unsure, are no loss when the flow has ended (they were kept as 5).
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    let both = |a: u64, b: u64| [(key, 1, a, a * 100), (key, 2, b, b * 100)];
    t.add_counts(&cx, 1, (1000, 10), &both(50, 50), &[], &[]);
    t.add_counts(&cx, 2, (1010, 10), &both(50, 45), &[], &[]);
    t.add_counts(&cx, 3, (1020, 10), &[(key, 2, 50, 5_000)], &[1], &[]);
    t.add_counts(&cx, 4, (1030, 10), &[(key, 2, 5, 500)], &[], &[]);
    assert_eq!(lost(&t, key), (0, 0, 0));
}

/// Packets in flight across an unsure epoch (counted at the first switch in it, at the
/// second only in the next) take back what it set aside: the link never shows negative
/// loss (it showed -10 for good).
#[test]
fn packets_in_flight_across_an_unsure_epoch_make_no_negative_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(key, 1, 100, 10_000), (key, 2, 90, 9_000)],
        &[2],
        &[],
    );
    t.add_counts(&cx, 2, (1010, 10), &[(key, 2, 10, 1_000)], &[], &[]);
    assert_eq!(lost(&t, key), (0, 0, 0));
}

/// Switch `id` says hello to the context's sink now.
fn connect(cx: &ShardContext, id: u32) {
    let hello = crate::registry::tests::hello(id, None);
    cx.registry.connect(&hello, "test", 0).unwrap();
}

/// When switch `id`'s hello was taken, Unix ms.
fn connected_ms(cx: &ShardContext, id: u32) -> u64 {
    let e = cx.registry.switch(id).unwrap();
    e.counters
        .connected_ms
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// With both switches connected all along, the second counting the flow an epoch before
/// the first (the clocks differ) is no missed start: loss is the counts' difference, which
/// evens out.
#[test]
fn counts_downstream_first_under_clock_skew_even_out() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    connect(&cx, 1);
    connect(&cx, 2);
    let after = connected_ms(&cx, 1) + 1000;
    t.add_counts(&cx, 1, (after, 10), &[(key, 2, 10, 1_000)], &[], &[]);
    t.add_counts(
        &cx,
        2,
        (after + 10, 10),
        &[(key, 1, 100, 10_000), (key, 2, 90, 9_000)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (0, 0, 0));
}

/// After the sink's restart the second switch came back first: it counted the flow in an
/// epoch its first switch, not yet connected, never sent. What it counted then is no gain
/// on the link (it read as -50 for good), packets in flight across the first shared epoch
/// included, and loss after counts.
#[test]
fn counts_downstream_before_the_first_switch_came_back_make_no_negative_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    // Switch 1 connected now, after the epochs below began (their times are long past).
    connect(&cx, 1);
    t.add_counts(&cx, 1, (1000, 10), &[(key, 2, 50, 5_000)], &[], &[]);
    // Both count; 5 are on the link at the epoch's end.
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key, 1, 50, 5_000), (key, 2, 45, 4_500)],
        &[],
        &[],
    );
    t.add_counts(
        &cx,
        3,
        (1020, 10),
        &[(key, 1, 50, 5_000), (key, 2, 55, 5_500)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (0, 0, 0));
    t.add_counts(
        &cx,
        4,
        (1030, 10),
        &[(key, 1, 100, 10_000), (key, 2, 96, 9_600)],
        &[],
        &[],
    );
    assert_eq!(lost(&t, key), (4, 4, 0));
}

/// The second switch said hello only after the first had counted the flow (it came later
/// than the others, or back later after the sink's restart) and counted it from the epoch
/// of its hello on: the flow's packets it forwarded before (50, in an epoch whose flowset
/// the sink never had from it) are no loss on the link, which read as loss for good;
/// packets in flight across its first epoch take nothing back, and loss after counts (4).
/// Where the second switch was there all along and counted none of the first 50, they were
/// lost; where it counted the flow long before its hello (it reconnected since), what it
/// missed then (10) was.
#[test]
fn counts_upstream_before_the_second_switch_came_are_no_loss() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Second {
        CameLate,
        ThereAllAlong,
        CountedBeforeItsHello,
    }
    for second in [
        Second::CameLate,
        Second::ThereAllAlong,
        Second::CountedBeforeItsHello,
    ] {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        connect(&cx, 1);
        // (Its hello, after a reconnection, comes long after its counts began.)
        if second != Second::CameLate {
            connect(&cx, 2);
        }
        let now = connected_ms(&cx, 1);
        // Epochs (shown 10 ms long) spread around the second switch's hello, after it, or
        // long before it.
        let at = |e: u64| {
            let start = match second {
                Second::CameLate => now - 1600 + 400 * e,
                Second::ThereAllAlong => now + 1000 + 10 * e,
                Second::CountedBeforeItsHello => now - 60_000 + 10 * e,
            };
            (start, 10)
        };
        let first: &[_] = if second == Second::CountedBeforeItsHello {
            // 10 of the first 50 lost.
            &[(key, 1, 50, 5_000), (key, 2, 40, 4_000)]
        } else {
            &[(key, 1, 50, 5_000)]
        };
        t.add_counts(&cx, 1, at(1), first, &[], &[]);
        if second == Second::CameLate {
            connect(&cx, 2);
        }
        let both = |up: u64, down: u64| [(key, 1, up, up * 100), (key, 2, down, down * 100)];
        t.add_counts(&cx, 2, at(2), &both(50, 45), &[], &[]);
        // Both count; 5 are on the link at the epoch's end.
        t.add_counts(&cx, 3, at(3), &both(50, 55), &[], &[]);
        t.add_counts(&cx, 4, at(4), &both(100, 96), &[], &[]);
        let want = match second {
            Second::CameLate => 4,
            Second::ThereAllAlong => 54,
            Second::CountedBeforeItsHello => 14,
        };
        assert_eq!(lost(&t, key), (want, want, 0), "{second:?}");
    }
}

/// The kinds of loss events from counters of flow `key`.
fn counter_losses(cx: &ShardContext, key: &FlowKey) -> Vec<crate::events::FlowEvent> {
    cx.events
        .of_flow(key)
        .into_iter()
        .filter(|e| e.series == "counters")
        .collect()
}

/// A flow of two packets an epoch, each counted at its last switch an epoch after its
/// first, whose last switch then misses its epochs' deadlines for good: the packets in
/// flight into the first epoch left out, counted sent and never delivered, are no loss
/// (they were a fifth of the window's counted packets: a false loss event on a loaded
/// machine). The window is not judged, more of it being left out than counted.
#[test]
fn packets_in_flight_into_epochs_left_out_are_no_loss() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    let at = |e: u64| (1_000_000 + 10 * e, 10);
    for e in 1..6 {
        let delivered = if e == 1 {
            vec![]
        } else {
            vec![(key, 2, 2, 200)]
        };
        let counts = [vec![(key, 1, 2, 200)], delivered].concat();
        t.add_counts(&cx, e, at(e), &counts, &[], &[]);
    }
    // Switch 2 missing from here on (15 s: the windows close).
    for e in 6..1500 {
        t.add_counts(&cx, e, at(e), &[(key, 1, 2, 200)], &[], &[2]);
    }
    t.flush(Some(&cx), |_| true);
    let loss = counter_losses(&cx, &key);
    assert!(loss.is_empty(), "{loss:?}");
}

/// A flow whose last switch's clock runs 30 ms behind its first's: the last switch counts
/// each packet three 10 ms epochs earlier. Its loss series starts mid-flow (as it does once
/// the path decodes), and the flow ends two epochs into a window: by epoch numbers, those
/// epochs' packets were sent and never delivered (a loss event of them all). Taken at the
/// time they stand for (the switch's lead, from when its flowsets arrive), the counts agree.
#[test]
fn counts_of_a_last_switch_whose_clock_runs_behind_are_taken_at_their_time() {
    for leads in [vec![(2, -30)], vec![]] {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        let at = |e: u64| (1_000_000 + 10 * e, 10);
        for e in 10..2020u64 {
            let mut counts = Vec::new();
            if e <= 2011 {
                counts.push((key, 1, 10, 1000));
            }
            if e + 3 <= 2011 {
                counts.push((key, 2, 10, 1000));
            }
            let c = crate::epochs::EpochCounts {
                epoch: e,
                epoch_ms: at(e),
                counts: Vec::new(),
                unsure: Vec::new(),
                missing: Vec::new(),
                leads: leads.clone(),
            };
            t.add_epoch_counts(&cx, &c, &counts);
        }
        t.flush(Some(&cx), |_| true);
        let loss = counter_losses(&cx, &key);
        assert_eq!(
            loss.is_empty(),
            !leads.is_empty(),
            "leads {leads:?}: {loss:?}"
        );
    }
}

/// A flow losing a fifth of its packets while a few of its epochs (one in 25) are left
/// out still shows the loss: a hole here and there takes nothing from what the others
/// counted.
#[test]
fn loss_among_a_few_epochs_left_out_is_found() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    let at = |e: u64| (1_000_000 + 10 * e, 10);
    for e in 1..1500 {
        if e % 25 == 0 {
            t.add_counts(&cx, e, at(e), &[(key, 1, 10, 1000)], &[], &[2]);
        } else {
            let counts = [(key, 1, 10, 1000), (key, 2, 8, 800)];
            t.add_counts(&cx, e, at(e), &counts, &[], &[]);
        }
    }
    t.flush(Some(&cx), |_| true);
    let loss = counter_losses(&cx, &key);
    assert!(!loss.is_empty(), "no loss event");
    assert!(
        loss.iter()
            .all(|e| (0.15..0.25).contains(&e.event.loss_rate)),
        "{loss:?}"
    );
}

/// A loss event says where: the flow's decoded path and the link of it where its
/// counters lost the packets, in the event line too.
#[test]
fn a_loss_event_says_which_path_and_link() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    let at = |e: u64| (1_000_000 + 10 * e, 10);
    for e in 1..800 {
        let counts = [(key, 1, 10, 1000), (key, 2, 8, 800)];
        t.add_counts(&cx, e, at(e), &counts, &[], &[]);
    }
    t.flush(Some(&cx), |_| true);
    let loss = counter_losses(&cx, &key);
    assert!(!loss.is_empty(), "no loss event");
    for e in &loss {
        assert_eq!(e.place.path.as_deref(), Some(&[1, 2][..]), "{e:?}");
        assert_eq!(e.place.lossy_link, Some([1, 2]), "{e:?}");
        let line = serde_json::to_value(e).unwrap();
        assert_eq!(line["path"], serde_json::json!([1, 2]), "{line}");
        assert_eq!(line["lossy_link"], serde_json::json!([1, 2]), "{line}");
    }
}

/// Probe arrivals of one stream of flow 7 at 20 Hz from `t0` s: (sequence number, send
/// time offset in s) each, 1 ms one-way delay.
fn probes(seqs: impl Iterator<Item = (u64, f64)>) -> Vec<telemetry::protocol::WireProbe> {
    probes_from(1_796_000_000.0, seqs)
}

/// Flow 7's probes (sequence number, send time after `t0` Unix s), each received a
/// millisecond after it was sent.
fn probes_from(
    t0: f64,
    seqs: impl Iterator<Item = (u64, f64)>,
) -> Vec<telemetry::protocol::WireProbe> {
    seqs.map(|(seq, t)| {
        let sent_ns = ((t0 + t) * 1e9) as u64;
        telemetry::protocol::WireProbe {
            key: digest(0, 7, 0).key,
            stream: 0,
            seq,
            sent_ns,
            recv_ns: sent_ns + 1_000_000,
        }
    })
    .collect()
}

/// Where flow 7's probe series has closed its windows up to (the last closed window's
/// end, Unix s), if it has closed one.
fn probes_closed_until(t: &FlowTable) -> Option<f64> {
    let det = t.flows[&digest(0, 7, 0).key].probe_detector.as_ref();
    det.expect("a probe series")
        .last_window
        .as_ref()
        .map(|w| w.end)
}

/// The kinds of the events found so far for flow 7's probes.
fn probe_events(cx: &ShardContext) -> Vec<crate::detect::Kind> {
    cx.events
        .of_flow(&digest(0, 7, 0).key)
        .iter()
        .filter(|e| e.series == "probes")
        .map(|e| e.event.kind)
        .collect()
}

/// A probe whose send time is long after its arrival (a clock stepped, a forged probe)
/// is left out and counted; without that it closed every window and opened one far
/// ahead that the later probes fell into, and the loss that follows was not found as it
/// happened.
#[test]
fn a_probe_sent_long_after_it_arrived_is_left_out() {
    let (cx, _) = context();
    let mut t = FlowTable::new(10);
    t.add_probes(&cx, &probes((0..100).map(|s| (s, s as f64 / 20.0))));
    let mut stray = probes(std::iter::once((100, 5.0)));
    stray[0].sent_ns += 3_600_000_000_000;
    t.add_probes(&cx, &stray);
    // 60 of the next 100 lost, then 25 s more received.
    let rest = (101..700u64).filter(|s| !(120..180).contains(s));
    t.add_probes(&cx, &probes(rest.map(|s| (s, s as f64 / 20.0))));
    assert_eq!(t.stats.probes_refused, 1);
    let kinds = probe_events(&cx);
    assert!(kinds.contains(&crate::detect::Kind::Loss), "{kinds:?}");
}

/// Probes left out for their times while a clock was stepped (here the sender's, 3 s ahead
/// for 80 of them) arrived: the gap they leave in the stream's numbers is no loss. Had they
/// not arrived, it would be.
#[test]
fn probes_left_out_for_a_stepped_clock_are_no_loss() {
    for refused in [true, false] {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let mut all = probes((0..700).map(|s| (s, s as f64 / 20.0)));
        if refused {
            for p in &mut all[100..180] {
                p.sent_ns += 3_000_000_000;
            }
        } else {
            all.drain(100..180);
        }
        t.add_probes(&cx, &all);
        forget_idle_flows(&mut t, Some(&cx));
        assert_eq!(t.stats.probes_refused, if refused { 80 } else { 0 });
        let kinds = probe_events(&cx);
        let loss = kinds.contains(&crate::detect::Kind::Loss);
        assert_eq!(loss, !refused, "refused {refused}: {kinds:?}");
    }
}

/// Flow 7's probe loss events: (start, end), s after the probes' `t0`.
fn probe_loss_spans(cx: &ShardContext) -> Vec<(f64, f64)> {
    cx.events
        .of_flow(&digest(0, 7, 0).key)
        .iter()
        .filter(|e| e.series == "probes" && e.event.kind == crate::detect::Kind::Loss)
        .map(|e| {
            (
                e.event.start - 1_796_000_000.0,
                e.event.end - 1_796_000_000.0,
            )
        })
        .collect()
}

/// Probes whose reports the sink dropped (its decode queue full) arrived: the gap they
/// leave in the stream's numbers is no loss, whether they are noted before the probes
/// queued ahead of them are applied (before the stream has a detector, or in the middle),
/// or as they came. Had they not arrived, it would be (60 of 700 lost). Probes 300-339 are
/// lost in every case and must still be found.
#[test]
fn probes_whose_reports_the_sink_dropped_are_no_loss() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Dropped {
        NotedFirst,
        NotedInOrder,
        NeverArrived,
    }
    for how in [
        Dropped::NotedFirst,
        Dropped::NotedInOrder,
        Dropped::NeverArrived,
    ] {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let seqs = |r: std::ops::Range<u64>| probes(r.map(|s| (s, s as f64 / 20.0)));
        let later = (180..700u64).filter(|s| !(300..340).contains(s));
        let later = probes(later.map(|s| (s, s as f64 / 20.0)));
        match how {
            Dropped::NotedFirst => {
                t.add_unseen_probes(&cx, &seqs(120..180));
                t.add_probes(&cx, &seqs(0..120));
            }
            Dropped::NotedInOrder => {
                t.add_probes(&cx, &seqs(0..120));
                t.add_unseen_probes(&cx, &seqs(120..180));
            }
            Dropped::NeverArrived => t.add_probes(&cx, &seqs(0..120)),
        }
        t.add_probes(&cx, &later);
        forget_idle_flows(&mut t, Some(&cx));
        let flow = &t.flows.get(&digest(0, 7, 0).key);
        assert!(flow.is_none(), "{how:?}: forgotten at the sweep");
        let spans = probe_loss_spans(&cx);
        // Probe 120 is sent at 6 s, probe 300 at 15 s (windows of 5 s).
        let early = spans.iter().any(|&(start, _)| start < 10.0);
        let late = spans
            .iter()
            .any(|&(start, end)| start <= 15.0 && end >= 15.0);
        assert_eq!(early, how == Dropped::NeverArrived, "{how:?}: {spans:?}");
        assert!(late, "{how:?}: {spans:?}");
    }
}

/// A probe stream whose reports from one switch span a break in that switch's probe
/// records (it reconnected to the sink, or said in its stats that it dropped records):
/// the probes numbered between its last probe before the break and its first after it
/// (120-319) are not counted as lost, their records may be what was lost (a switch cut off
/// from the sink for 10 s gave loss events). Without the break, or across a break of
/// another switch, they are lost. A loss before the last probe before the break (40-59)
/// is found whatever the break.
#[test]
fn probes_across_a_break_in_their_switchs_records_are_no_loss() {
    for (breaks_after, excused) in [((3, 8), true), ((3, 7), false), ((4, 8), false)] {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let seqs = |r: std::ops::Range<u64>| {
            probes(
                r.filter(|s| !(40..60).contains(s))
                    .map(|s| (s, s as f64 / 20.0)),
            )
        };
        t.add_reported_probes(&cx, (3, 7), &seqs(0..120));
        t.add_reported_probes(&cx, breaks_after, &seqs(320..700));
        forget_idle_flows(&mut t, Some(&cx));
        let spans = probe_loss_spans(&cx);
        // Probe 40 is sent at 2 s, probe 120 at 6 s.
        let early = spans.iter().any(|&(start, _)| start < 5.0);
        let gap = spans.iter().any(|&(start, end)| start <= 8.0 && end >= 8.0);
        assert!(early, "{breaks_after:?}: {spans:?}");
        assert_eq!(gap, !excused, "{breaks_after:?}: {spans:?}");
    }
}

/// A probe timed a day ahead of the sink's clock, its send and arrival times agreeing (a
/// switch's and a sender's clocks stepped ahead together, a forged probe), is left out and
/// counted: taken, it closed every window and opened one a day ahead that the later probes
/// fell into, and the loss that follows was not found.
#[test]
fn a_probe_timed_far_ahead_of_the_sinks_clock_is_left_out() {
    let (cx, _) = context();
    let mut t = FlowTable::new(10);
    let t0 = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 100.0;
    t.add_probes(
        &cx,
        &probes_from(t0, (0..100).map(|s| (s, s as f64 / 20.0))),
    );
    // Numbered 0: taken, it would have started the stream anew.
    t.add_probes(&cx, &probes_from(t0 + 86_400.0, std::iter::once((0, 5.0))));
    let detector = &t.flows[&digest(0, 7, 0).key].probe_detector;
    let highest = detector.as_ref().and_then(|d| d.highest_seq());
    assert_eq!(highest, Some(99), "the stream goes on");
    // 60 of the next 100 lost, then 25 s more received.
    let rest = (101..700u64).filter(|s| !(120..180).contains(s));
    t.add_probes(&cx, &probes_from(t0, rest.map(|s| (s, s as f64 / 20.0))));
    assert_eq!((t.stats.samples_ahead, t.stats.probes_refused), (1, 0));
    let kinds = probe_events(&cx);
    assert!(kinds.contains(&crate::detect::Kind::Loss), "{kinds:?}");
}

/// Probes sent an hour before they arrived (a capture replayed, its probes carrying the
/// send times of its making; a sender's clock far off) are left out and counted: their
/// delays were events of years.
#[test]
fn probes_sent_long_before_they_arrived_are_left_out() {
    let (cx, _) = context();
    let mut t = FlowTable::new(10);
    let mut old = probes((0..200).map(|s| (s, s as f64 / 20.0)));
    for p in &mut old {
        p.sent_ns -= 3_600_000_000_000;
    }
    t.add_probes(&cx, &old);
    t.sweep(
        Duration::from_secs(3600),
        Duration::from_secs(3600),
        Some(&cx),
        |_| true,
    );
    assert_eq!(t.stats.probes_refused, 200);
    assert!(probe_events(&cx).is_empty());
    let flow = &t.flows[&digest(0, 7, 0).key];
    assert!(flow.probe_detector.is_none(), "no series of them");
    assert_eq!(flow.probes, 200, "counted as arrived");
}

/// A probe stream that starts again from 0 (its sender restarted) is a new series: no
/// reordering is seen where the old numbers meet the new ones, and the new stream's
/// loss is found although its numbers are below the old stream's; also when the new
/// stream's first probes are lost.
#[test]
fn a_probe_stream_that_restarts_is_a_new_series() {
    for first in [0, 3] {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        t.add_probes(&cx, &probes((0..960).map(|s| (s, s as f64 / 20.0))));
        // Restarted within the same 5 s window; 60 of its probes 100 to 200 lost.
        let new = (first..600u64).filter(|s| !(100..160).contains(s));
        t.add_probes(&cx, &probes(new.map(|s| (s, 48.0 + s as f64 / 20.0))));
        t.flush(Some(&cx), |_| true);
        let kinds = probe_events(&cx);
        assert!(
            !kinds.contains(&crate::detect::Kind::Reordering),
            "first {first}: {kinds:?}"
        );
        assert!(
            kinds.contains(&crate::detect::Kind::Loss),
            "first {first}: {kinds:?}"
        );
    }
}

/// An old probe arriving long after its stream went on (sent before the others) is
/// reordering in the same series, not a restart.
#[test]
fn a_late_old_probe_is_no_restart() {
    let (cx, _) = context();
    let mut t = FlowTable::new(10);
    let arrivals = (1..400u64).chain([0]).chain(400..600);
    t.add_probes(&cx, &probes(arrivals.map(|s| (s, s as f64 / 20.0))));
    let d = t.flows[&digest(0, 7, 0).key]
        .probe_detector
        .as_ref()
        .unwrap();
    assert_eq!(d.highest_seq(), Some(599), "one series");
    t.flush(Some(&cx), |_| true);
    let kinds = probe_events(&cx);
    assert!(!kinds.contains(&crate::detect::Kind::Loss), "{kinds:?}");
}

/// A record's start and end are those of the epochs whose counts it carries: after an
/// active-timeout record, the next starts where counting resumed, not at the flow's
/// first epoch (collectors take rates from the span).
#[test]
fn each_record_spans_the_epochs_it_counts() {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    let d = digest(v, 3, 0);
    t.add_digests(&cx, 9, &[d], &FlowRuns::default());
    let mut out = Vec::new();
    let sweep = |t: &mut FlowTable| {
        let mut got = Vec::new();
        t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
            got.push(r);
            true
        });
        got
    };
    t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
    t.add_counts(&cx, 2, (1010, 10), &[(d.key, 9, 5, 500)], &[], &[]);
    out.extend(sweep(&mut t));
    // Nothing counted since: no record.
    out.extend(sweep(&mut t));
    t.add_counts(&cx, 4, (1030, 10), &[(d.key, 9, 2, 200)], &[], &[]);
    t.add_counts(&cx, 3, (1020, 10), &[(d.key, 9, 1, 100)], &[], &[]);
    out.extend(sweep(&mut t));
    let got: Vec<_> = out
        .iter()
        .map(|r| (r.packets, r.bytes, r.start_ms, r.end_ms, r.end_reason))
        .collect();
    assert_eq!(
        got,
        [
            (10, 1000, 1000, 1020, EndReason::ActiveTimeout),
            (3, 300, 1020, 1040, EndReason::ActiveTimeout)
        ]
    );
    // A late flowset of an epoch before the last record's end: its packets go in the next
    // record, which starts where the last ended (it started at the late epoch, inside
    // the span of the record before).
    t.add_counts(&cx, 2, (1010, 10), &[(d.key, 9, 4, 400)], &[], &[]);
    let late = sweep(&mut t);
    assert_eq!(
        late.iter()
            .map(|r| (r.packets, r.start_ms, r.end_ms))
            .collect::<Vec<_>>(),
        [(4, 1040, 1040)]
    );
    // The sink stopping: what is left goes as a forced end.
    t.add_counts(&cx, 5, (1040, 10), &[(d.key, 9, 1, 100)], &[], &[]);
    let mut last = Vec::new();
    t.flush(None, |r| {
        last.push(r);
        true
    });
    assert_eq!(last.len(), 1);
    assert_eq!(
        (last[0].start_ms, last[0].end_ms, last[0].end_reason),
        (1040, 1050, EndReason::ForcedEnd)
    );
    assert!(last[0].ended);
}

/// A full table of 10 flows, each counted 5 packets at switch 9.
fn ten_flows_of_five_packets() -> FlowTable {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    let ds: Vec<WireDigest> = (0..10).map(|f| digest(v, f, 0)).collect();
    t.add_digests(&cx, 9, &ds, &FlowRuns::default());
    let counts: Vec<(FlowKey, u32, u64, u64)> = ds.iter().map(|d| (d.key, 9, 5, 500)).collect();
    t.add_counts(&cx, 1, (1000, 10), &counts, &[], &[]);
    t
}

/// A sweep looks at the flows with something due and passes the others by: after the
/// first sweep (every flow), only flows given new counts are looked at when the active
/// timeout is zero, and their records carry just the new counts.
#[test]
fn a_sweep_looks_only_at_flows_due() {
    let (cx, _) = context();
    let mut t = ten_flows_of_five_packets();
    let mut out = Vec::new();
    let mut sweep = |t: &mut FlowTable| {
        out.clear();
        t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
            out.push(r);
            true
        });
        out.iter()
            .map(|r| (r.key.src_port, r.packets))
            .collect::<Vec<_>>()
    };
    assert_eq!(sweep(&mut t).len(), 10);
    assert_eq!(t.stats.flows_swept, 10);
    assert!(sweep(&mut t).is_empty());
    assert_eq!(t.stats.flows_swept, 10, "nothing new: no flow looked at");
    let key = |f: u32| digest(0, f, 0).key;
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(key(3), 9, 2, 200), (key(7), 9, 4, 400)],
        &[],
        &[],
    );
    let mut got = sweep(&mut t);
    got.sort_unstable();
    assert_eq!(got, [(3, 2), (7, 4)]);
    assert_eq!(t.stats.flows_swept, 12);
    assert_eq!(t.len(), 10);
}

/// `now` stepped on by `s` seconds, both clocks: tests step the clocks the sweeps read (a
/// busy machine running a test late must not move its windows).
fn later(now: Now, s: f64) -> Now {
    Now {
        at: now.at + Duration::from_secs_f64(s),
        unix_s: now.unix_s + s,
    }
}

/// A sweep at `now`, with timeouts that end no flow.
fn sweep_at(t: &mut FlowTable, cx: &ShardContext, now: Now) {
    let long = Duration::from_secs(600);
    t.sweep_as(now, long, long, EndReason::IdleTimeout, Some(cx), |_| true);
}

/// Detection windows close on time in sweeps that look only at the flows due: a probe
/// stream that stops with windows open (no later probe closes them) has them closed by
/// the first sweep after its own clock has left them behind by a window, and its flow
/// is not looked at again after.
#[test]
fn a_sweep_closes_detection_windows_on_time() {
    let (mut cx, _) = context();
    cx.detection.window_s = 0.5;
    let mut t = FlowTable::new(10);
    let start = Now::read();
    let after = |s: f64| later(start, s);
    let sweep = |t: &mut FlowTable, now: Now| sweep_at(t, &cx, now);
    sweep(&mut t, start);
    // 2 s of probes at 40 a second (20 a window), the last sent 0.125 s ago: windows
    // of 0.5 s, the last two still open, due to close 0.5 s after the last one's end.
    let t0 = start.unix_s - 2.1;
    t.add_probes_at(
        &cx,
        &probes_from(t0, (0..80u64).map(|s| (s, s as f64 / 40.0))),
        None,
        false,
        start,
    );
    // Window ends are Unix seconds in an f64 (steps of 2^-22 s at today's times): the
    // span from `t0` comes out within a step of the window's, not always equal; compared
    // to the millisecond.
    let closed_until =
        |t: &FlowTable| probes_closed_until(t).map(|end| ((end - t0) * 1000.0).round() / 1000.0);
    assert_eq!(closed_until(&t), Some(1.0));
    sweep(&mut t, after(0.8));
    assert_eq!(closed_until(&t), Some(2.0));
    assert_eq!(t.stats.flows_swept, 1);
    sweep(&mut t, after(0.8));
    assert_eq!(t.stats.flows_swept, 1, "its windows closed: nothing due");
    assert_eq!(t.len(), 1);
}

/// A detection window that closes after its flow was listed (a deadline ahead, placed
/// from the wall clock onto the schedule's seconds) closes in the first sweep after its
/// time, not later.
#[test]
fn a_detection_window_due_later_closes_when_its_time_comes() {
    let (mut cx, _) = context();
    cx.detection.window_s = 0.2;
    let mut t = FlowTable::new(10);
    let start = Now::read();
    sweep_at(&mut t, &cx, start);
    // A tenth of a second of probes ending now: one window, closing 0.3 s from now.
    let t0 = start.unix_s - 0.1;
    t.add_probes_at(
        &cx,
        &probes_from(t0, (0..20u64).map(|s| (s, s as f64 / 200.0))),
        None,
        false,
        start,
    );
    let closed = |t: &FlowTable| probes_closed_until(t).map(|end| end - t0);
    assert_eq!(closed(&t), None);
    sweep_at(&mut t, &cx, later(start, 0.6));
    let end = closed(&t).expect("the window closed");
    assert!((end - 0.2).abs() < 1e-6, "{end}");
}

/// A flow listed in two of the seconds one sweep takes (its idle deadline, and a nearer
/// detection window) is looked at once in that sweep, also when its records wait and it
/// is listed again for a second already taken.
#[test]
fn a_flow_listed_twice_is_looked_at_once_a_sweep() {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    t.sweep(Duration::ZERO, Duration::ZERO, None, |_| true);
    // Its idle deadline a second after the schedule's start, so in a second of its own.
    std::thread::sleep(Duration::from_millis(1100));
    let d = digest(v, 7, 0);
    t.add_digests(&cx, 9, &[d], &FlowRuns::default());
    t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
    // Probes of the same flow a minute ago: a window due at once, a second of its own.
    let t0 = Now::read().unix_s - 60.0;
    t.add_probes(
        &cx,
        &probes_from(t0, (0..10u64).map(|s| (s, s as f64 / 20.0))),
    );
    for sweeps in 1..=2 {
        t.sweep(Duration::ZERO, Duration::ZERO, None, |_| false);
        assert_eq!(t.stats.flows_swept, sweeps);
    }
    assert_eq!((t.stats.exports_deferred, t.len()), (1, 1));
}

/// A flow whose loss series is fed all along is not due for its detection windows:
/// each feed that closes a window puts the next close off, so a sweep has nothing to
/// look at it for (it was looked at once a window, about every 5 s, for nothing).
#[test]
fn a_flow_fed_all_along_is_not_due_for_detection() {
    let mut t = FlowTable::new(10);
    let (cx, key) = two_hop_flow(&mut t);
    let long = Duration::from_secs(600);
    t.sweep(long, long, None, |_| true);
    // 12 s of epochs up to now: the first window closed by the feeds themselves, the
    // next closing 3 s from now.
    let start = unix_ms() - 12_000;
    for e in 0..1200 {
        let counts = [(key, 1, 10, 1000), (key, 2, 10, 1000)];
        t.add_counts(&cx, e, (start + 10 * e, 10), &counts, &[], &[]);
    }
    let det = t.flows[&key].loss_detector.as_ref().expect("a loss series");
    assert!(det.last_window.is_some(), "windows closed by the feeds");
    t.sweep(long, long, None, |_| true);
    assert_eq!(t.stats.flows_swept, 0);
}

/// A step of the wall clock lists every flow again: a detection window whose close was
/// placed seconds ahead by the clocks' old offset closes in the first sweep after the
/// wall clock passed it, not when the monotonic clock reaches the place.
#[test]
fn a_wall_clock_step_closes_windows_it_passed() {
    let (cx, _) = context();
    let mut t = FlowTable::new(10);
    let long = Duration::from_secs(600);
    let now = Now::read();
    t.sweep_as(now, long, long, EndReason::IdleTimeout, None, |_| true);
    // A second of probes up to now: one window, closing 9 s from now.
    let t0 = now.unix_s - 1.0;
    t.add_probes(
        &cx,
        &probes_from(t0, (0..20u64).map(|s| (s, s as f64 / 20.0))),
    );
    let closed = |t: &FlowTable| probes_closed_until(t).is_some();
    t.sweep_as(
        Now::read(),
        long,
        long,
        EndReason::IdleTimeout,
        None,
        |_| true,
    );
    assert!(!closed(&t), "not due yet");
    // The wall clock steps 20 s ahead; the monotonic clock has barely moved.
    let stepped = Now {
        at: Instant::now(),
        unix_s: Now::read().unix_s + 20.0,
    };
    t.sweep_as(stepped, long, long, EndReason::IdleTimeout, None, |_| true);
    assert!(closed(&t), "the window the wall clock passed closed");
}

/// Idle flows are exported (their remaining counters) and forgotten, making room.
#[test]
fn idle_flows_are_exported_and_forgotten() {
    let mut t = ten_flows_of_five_packets();
    let mut out = Vec::new();
    // Not idle yet, and the active timeout has not passed: nothing.
    t.sweep(
        Duration::from_secs(60),
        Duration::from_secs(60),
        None,
        |r| {
            out.push(r);
            true
        },
    );
    assert!(out.is_empty());
    t.sweep(Duration::ZERO, Duration::from_secs(60), None, |r| {
        out.push(r);
        true
    });
    assert_eq!(t.len(), 0);
    assert_eq!(t.stats.flows_evicted, 10);
    assert_eq!(out.len(), 10);
    for r in &out {
        assert_eq!((r.packets, r.bytes, r.switch), (5, 500, 9));
        assert!(r.ended);
        assert_eq!(r.end_reason, EndReason::IdleTimeout);
        assert_eq!(
            (r.ingress, r.egress),
            (Some(1), Some(0)),
            "known at the reporting switch"
        );
        assert_eq!((r.start_ms, r.end_ms), (1000, 1010));
    }
    // Room again.
    let (cx, v) = context();
    t.add_digests(&cx, 9, &[digest(v, 77, 0)], &FlowRuns::default());
    assert_eq!(t.len(), 1);
}

/// Records the export queue has no room for wait for a later sweep: their counts are
/// not lost (they were, for good, and later records left them out too), an ended flow
/// stays until its records go, and a switch whose end went does not send it twice.
#[test]
fn records_that_find_the_queue_full_go_later_with_their_counts() {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    let d = digest(v, 3, 0);
    t.add_digests(&cx, 9, &[d], &FlowRuns::default());
    t.add_counts(
        &cx,
        1,
        (1000, 10),
        &[(d.key, 9, 5, 500), (d.key, 8, 5, 500)],
        &[],
        &[],
    );
    // The queue full: nothing goes.
    t.sweep(Duration::from_secs(60), Duration::ZERO, None, |_| false);
    t.sweep(Duration::from_secs(60), Duration::ZERO, None, |_| false);
    assert_eq!(t.stats.exports_deferred, 2, "each record counted once");
    assert_eq!(t.stats.exports_dropped, 0);
    t.add_counts(
        &cx,
        2,
        (1010, 10),
        &[(d.key, 9, 1, 100), (d.key, 8, 1, 100)],
        &[],
        &[],
    );
    let mut out = Vec::new();
    // Room for one record only, then the flow ends: switch 9's (or 8's) waits again.
    let mut room = 1;
    t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
        if room == 0 {
            return false;
        }
        room -= 1;
        out.push(r);
        true
    });
    assert_eq!(t.len(), 1, "an ended flow stays until its records go");
    t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
        out.push(r);
        true
    });
    assert_eq!(t.len(), 0);
    let mut got: Vec<_> = out
        .iter()
        .map(|r| (r.switch, r.packets, r.bytes, r.start_ms, r.end_ms, r.ended))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [(8, 6, 600, 1000, 1020, true), (9, 6, 600, 1000, 1020, true)],
        "every packet in one record per switch, none twice"
    );
    assert_eq!(t.stats.exports_dropped, 0);
}

/// An ended flow is not kept for its records while the table is nearly full: they are
/// dropped (counted) and the flow makes room, as it did before records could wait.
#[test]
fn a_full_table_keeps_no_flow_for_its_records() {
    let mut t = ten_flows_of_five_packets();
    t.sweep(Duration::ZERO, Duration::from_secs(60), None, |_| false);
    assert_eq!(t.len(), 0);
    assert_eq!((t.stats.exports_dropped, t.stats.exports_deferred), (10, 0));
}

/// At the sink's stop a record that finds the queue full is lost, and counted.
#[test]
fn records_that_find_the_queue_full_at_the_stop_are_counted_lost() {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    let d = digest(v, 3, 0);
    t.add_digests(&cx, 9, &[d], &FlowRuns::default());
    t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
    t.flush(None, |_| false);
    assert_eq!(t.stats.exports_dropped, 1);
    assert_eq!(t.len(), 0);
}

/// A flow whose last packets already went in an active-timeout record still gets an
/// end record when it goes idle (no packets, `ended`, idle timeout): collectors and
/// JSON consumers wait for the end.
#[test]
fn a_flow_that_ends_says_so_even_with_nothing_new() {
    let (cx, v) = context();
    let mut t = FlowTable::new(10);
    let d = digest(v, 3, 0);
    t.add_digests(&cx, 9, &[d], &FlowRuns::default());
    t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
    let mut out = Vec::new();
    t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
        out.push(r);
        true
    });
    t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
        out.push(r);
        true
    });
    let got: Vec<_> = out
        .iter()
        .map(|r| (r.packets, r.ended, r.end_reason, r.start_ms, r.end_ms))
        .collect();
    assert_eq!(
        got,
        [
            (5, false, EndReason::ActiveTimeout, 1000, 1010),
            (0, true, EndReason::IdleTimeout, 1010, 1010)
        ]
    );
    assert_eq!(t.len(), 0);
}

/// A loss event from the counters points at the link that lost the flow's packets during
/// the event, not at one that lost more of them later, before the event was reported (the
/// counters' totals so far put an early loss on a later one's link).
#[test]
fn a_loss_event_points_where_the_flow_lost_packets_at_its_time() {
    let (mut cx, v) = context();
    let line = Arc::new(Topology::line(4));
    cx.topology = Some(Arc::clone(&line));
    let key = digest(v, 5, 0).key;
    cx.registry.learn_owners(&[(key.src, 1)]);
    let mut t = FlowTable::new(10);
    record_along(&mut t, &cx, v, (5, &[1, 2, 3, 4]), 3000, 1_000, 0);
    assert_eq!(
        decoded_path(&t.flows[&key], Space::Topology(&line)),
        Some(vec![1, 2, 3, 4])
    );
    // 200 packets in each 100 ms epoch for 40 s: 1 -> 2 drops 10% from 5 s to 10 s, then
    // 3 -> 4 half of them from 20 s to 30 s (two events: more than 5 s apart).
    for e in 0..400u64 {
        let s = e as f64 / 10.0;
        let after_12: u64 = if (5.0..10.0).contains(&s) { 180 } else { 200 };
        let after_34 = if (20.0..30.0).contains(&s) {
            after_12 / 2
        } else {
            after_12
        };
        t.add_counts(
            &cx,
            e,
            (1_000_000 + e * 100, 100),
            &[
                (key, 1, 200, 20_000),
                (key, 2, after_12, after_12 * 100),
                (key, 3, after_12, after_12 * 100),
                (key, 4, after_34, after_34 * 100),
            ],
            &[],
            &[],
        );
    }
    let flow = &t.flows[&key];
    assert_eq!(
        (flow.loss_on((1, 2)), flow.loss_on((3, 4))),
        (Some(1000), Some(10_000))
    );
    t.flush(Some(&cx), |_| true);
    let events = counter_losses(&cx, &key);
    let at = |s: f64| {
        let s = 1000.0 + s;
        events
            .iter()
            .find(|e| e.event.start <= s && s <= e.event.end)
            .unwrap_or_else(|| panic!("no event at {s}: {events:?}"))
            .place
            .lossy_link
    };
    assert_eq!(at(7.0), Some([1, 2]), "the early loss");
    assert_eq!(at(25.0), Some([3, 4]), "the later loss");
}

/// A link's loss marks give its loss as each period began, and say when a period is
/// older than the marks kept.
#[test]
fn loss_marks_give_the_loss_as_each_period_began() {
    let mut m = LossMarks::default();
    assert_eq!(m.at_start_of(3, 7), Some(7), "no change yet: as now");
    m.note(10, 0, 5);
    m.note(10, 5, 8);
    m.note(12, 8, 20);
    assert_eq!(m.at_start_of(5, 20), Some(0));
    assert_eq!(m.at_start_of(10, 20), Some(0));
    assert_eq!(m.at_start_of(11, 20), Some(8));
    assert_eq!(m.at_start_of(13, 20), Some(20));
    // A late flowset of period 11 takes 3 back: the loss at 12's start read 3 less, and
    // 11's start is where 12's stood.
    m.note(11, 20, 17);
    assert_eq!(m.at_start_of(11, 17), Some(8));
    assert_eq!(m.at_start_of(12, 17), Some(5));
    assert_eq!(m.at_start_of(13, 17), Some(17));
    for p in 13..13 + LOSS_MARKS as u32 {
        m.note(p, i64::from(p), i64::from(p) + 1);
    }
    assert_eq!(m.at_start_of(12, 99), None, "dropped");
    assert_eq!(m.at_start_of(13, 99), Some(13));
    // One older than every mark kept is read into them, not kept.
    m.note(5, 99, 100);
    assert_eq!(m.at_start_of(13, 100), Some(14));
    assert_eq!(m.at_start_of(12, 100), None);
}
