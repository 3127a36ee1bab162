//! The page the sink serves at `/` (`crate::page`), from what it knows now: switches and
//! their last counters, the topology (when given) with each link's loss, the largest flows
//! with their decoded paths, latency and counts, the latest events. It reloads itself.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use telemetry::topology::Topology;

use crate::app::Shared;
use crate::page::{LinkRow, Page, SwitchRow, event_row, flow_row, layout};

/// Flows shown.
const TOP_FLOWS: usize = 10;
/// Events shown.
const EVENTS: usize = 200;

/// The page now.
pub fn page(shared: &Shared) -> Page {
    let topo = shared.topology.as_deref();
    let name = |id: u64| -> String {
        topo.and_then(|t| t.node(id as u32))
            .map_or_else(|| format!("s{id}"), |n| t_name(topo, n))
    };
    let entries = shared.registry.switches();
    let mut switches: Vec<SwitchRow> = entries
        .iter()
        .map(|e| {
            let info = e.info.lock().expect("switch lock");
            let stat = |k: &str| {
                info.stats
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or(0, |(_, v)| *v)
            };
            SwitchRow {
                name: name(u64::from(info.id)),
                id: info.id,
                // An edge port that packets entered or left the network by (a lab gives
                // every switch an edge port, used or not).
                hosts: info.ports.iter().any(|p| p.1)
                    && ["shim_inserted", "shim_stripped", "one_hop"]
                        .iter()
                        .any(|&k| stat(k) > 0),
                rx_packets: stat("rx_packets"),
                tx_packets: stat("tx_packets"),
                drops: info
                    .stats
                    .iter()
                    .filter(|(n, v)| n.starts_with("drop_") && *v > 0)
                    .map(|(n, v)| (n["drop_".len()..].to_owned(), *v))
                    .collect(),
                tx_full_drops: stat("tx_full_drops"),
                digests_exported: stat("digests_exported"),
                flowsets_exported: stat("flowsets_exported"),
                digests_received: e.counters.digests.load(Relaxed),
                flowsets_received: e.counters.flowsets.load(Relaxed),
                dropped_at_sink: e.counters.digests_dropped.load(Relaxed)
                    + e.counters.flowsets_dropped.load(Relaxed)
                    + e.counters.probes_dropped.load(Relaxed),
                exit: if e.counters.connected.load(Relaxed) {
                    "connected".into()
                } else {
                    "disconnected".into()
                },
            }
        })
        .collect();
    switches.sort_by_key(|s| s.id);
    // Draw the topology when known (switches with the fewest neighbours at the bottom: the
    // edge of leaf-spine and fat-tree fabrics, the ends of a chain), else the switches heard
    // from in a row.
    let layout = match topo {
        Some(t) => {
            let min = (0..t.len() as u32)
                .map(|n| t.neighbours(n).len())
                .min()
                .unwrap_or(0);
            let edge: Vec<u32> = (0..t.len() as u32)
                .filter(|&n| t.neighbours(n).len() == min)
                .collect();
            let heard: std::collections::HashSet<u32> = switches.iter().map(|s| s.id).collect();
            for n in 0..t.len() as u32 {
                let id = t.switch_id(n);
                if !heard.contains(&id) {
                    switches.push(SwitchRow {
                        name: t_name(topo, n),
                        id,
                        hosts: false,
                        rx_packets: 0,
                        tx_packets: 0,
                        drops: Default::default(),
                        tx_full_drops: 0,
                        digests_exported: 0,
                        flowsets_exported: 0,
                        digests_received: 0,
                        flowsets_received: 0,
                        dropped_at_sink: 0,
                        exit: "never connected".into(),
                    });
                }
            }
            // The same for every page of this topology: worked out once.
            shared
                .layout
                .get_or_init(|| layout(t, &edge, |n| t_name(topo, n)))
                .clone()
        }
        None => switches
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.name.clone(),
                    (i as f64 + 0.5) / switches.len().max(1) as f64,
                    0.5,
                )
            })
            .collect(),
    };
    let row = |from: String, to: String| LinkRow {
        from,
        to,
        lost_packets: 0,
        flows: 0,
        utilisation: None,
        impaired: None,
        impair_dropped: None,
    };
    let mut links: Vec<LinkRow> = crate::metrics::links(shared)
        .into_iter()
        .map(|((from, to), st)| LinkRow {
            lost_packets: st.lost_packets,
            flows: st.flows,
            ..row(name(u64::from(from)), name(u64::from(to)))
        })
        .collect();
    // Every link of the topology, those no decoded path crosses too.
    if let Some(t) = topo {
        let shown: std::collections::HashSet<(String, String)> = links
            .iter()
            .flat_map(|l| {
                [
                    (l.from.clone(), l.to.clone()),
                    (l.to.clone(), l.from.clone()),
                ]
            })
            .collect();
        for a in 0..t.len() as u32 {
            for &b in t.neighbours(a).iter().filter(|&&b| b > a) {
                let (x, y) = (t_name(topo, a), t_name(topo, b));
                if !shown.contains(&(x.clone(), y.clone())) {
                    links.push(row(x, y));
                }
            }
        }
    }
    let flows_all: Vec<(bool, Option<u64>)> = shared
        .shards
        .iter()
        .flat_map(|s| {
            let t = s.table.lock().expect("flow table lock");
            t.iter()
                .map(|f| (f.decode_digests.is_some(), f.decode_digests))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut to_decode: Vec<u64> = flows_all.iter().filter_map(|f| f.1).collect();
    to_decode.sort_unstable();
    let flows = crate::api::top_flows(shared, TOP_FLOWS)
        .iter()
        .map(|(s, d)| flow_row(s, Some(d), &name, Vec::new()))
        .collect();
    let uptime = shared.started.elapsed().as_secs_f64();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let t0 = now - uptime;
    let events = shared
        .events
        .latest(EVENTS, None)
        .iter()
        .map(|e| {
            let link = e
                .place
                .lossy_link
                .map(|[a, b]| (name(u64::from(a)), name(u64::from(b))));
            event_row(
                &serde_json::to_value(e).unwrap_or(Value::Null),
                t0,
                link,
                name,
            )
        })
        .collect();
    let c = &shared.epochs.counters;
    let finished = c.finished();
    Page {
        title: "pint-sink".into(),
        subtitle: format!(
            "Live: {} switches connected, {} flows, up {uptime:.0} s (times below are seconds since the sink started). The API is under /api/, Prometheus at /metrics.",
            entries
                .iter()
                .filter(|e| e.counters.connected.load(Relaxed))
                .count(),
            flows_all.len()
        ),
        live: true,
        checks: Vec::new(),
        layout,
        switches,
        links,
        events,
        span_s: uptime,
        flows_total: flows_all.len(),
        flows_decoded: flows_all.iter().filter(|f| f.0).count(),
        flows_matching: None,
        mismatches: Vec::new(),
        median_digests_to_decode: to_decode.get(to_decode.len() / 2).copied(),
        flows,
        hosts: Vec::new(),
        epochs: serde_json::json!({
            "epochs": finished.0,
            "network": finished.1,
            "incomplete": c.incomplete.load(Relaxed),
            "by_deadline": c.by_deadline.load(Relaxed),
            "late_flowsets": c.late_flowsets.load(Relaxed),
        }),
    }
}

fn t_name(topo: Option<&Topology>, n: u32) -> String {
    topo.filter(|t| (n as usize) < t.len())
        .map(|t| t.display_name(n))
        .unwrap_or_else(|| format!("node {n}"))
}
