//! What a lab found, from what its processes said: the sink's API (paths, latencies,
//! counters, link loss, epochs), its event lines, the switches' summaries and the
//! generators' reports. The report compares each flow's decoded path with its configured
//! route, points each event at a link, checks that the impaired link is the one found, and
//! is written as JSON, a one-screen text summary and a self-contained HTML page.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use control::summary::Summary;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use telemetry::flowradar::FlowKey;

use super::http::get_json;
use sink::page::{Check, EventRow, FlowRow, HostRow, LinkRow, Page, SwitchRow, layout};

use sink::page::flow_label;

use super::plan::{LabPlan, forwarders, port_name, route};
use super::spec::Lab;

/// The sink's view, read before it stops.
#[derive(Debug, Clone, Default)]
pub struct SinkView {
    /// Every flow (`/api/flows`), or the [`FLOWS_READ`] with the most packets.
    pub flows: Vec<Value>,
    /// Flows the sink holds (`/api/health`): more than `flows` when it has over
    /// [`FLOWS_READ`].
    pub flows_seen: usize,
    /// The details of the largest flows (`/api/flow`).
    pub details: BTreeMap<String, Value>,
    /// `/api/links`.
    pub links: Vec<Value>,
    /// `/api/epochs`.
    pub epochs: Value,
    /// `/api/switches`.
    pub switches: Vec<Value>,
    /// `/api/events`: the latest events, up to the 10000 the sink keeps, newest first (what
    /// the report takes if its `--event-lines` file lost some).
    pub events: Vec<Value>,
    /// Events the sink had found (`/api/health`), however many it keeps.
    pub events_found: usize,
}

fn flow_query(f: &Value) -> String {
    format!(
        "/api/flow?src={}&dst={}&sport={}&dport={}&proto={}",
        f["src"].as_str().unwrap_or(""),
        f["dst"].as_str().unwrap_or(""),
        f["src_port"],
        f["dst_port"],
        f["protocol"]
    )
}

fn key_of(f: &Value) -> Option<FlowKey> {
    Some(FlowKey {
        src: u32::from(f["src"].as_str()?.parse::<Ipv4Addr>().ok()?),
        dst: u32::from(f["dst"].as_str()?.parse::<Ipv4Addr>().ok()?),
        src_port: f["src_port"].as_u64()? as u16,
        dst_port: f["dst_port"].as_u64()? as u16,
        protocol: f["protocol"].as_u64()? as u8,
    })
}

fn traced_by_default() -> bool {
    true
}

/// The most flows the report reads from the sink (the API's cap on `/api/flows?top=`):
/// their paths are the ones checked.
pub const FLOWS_READ: usize = 10_000;

impl SinkView {
    /// Reads the sink at `http`: every flow (up to [`FLOWS_READ`]), the details of the
    /// `top` largest.
    pub fn read(http: SocketAddr, top: usize) -> anyhow::Result<SinkView> {
        let flows = get_json(http, &format!("/api/flows?top={FLOWS_READ}&by=packets"))?
            .as_array()
            .cloned()
            .unwrap_or_default();
        let health = get_json(http, "/api/health")?;
        let flows_seen = health["flows"]
            .as_u64()
            .map_or(flows.len(), |n| (n as usize).max(flows.len()));
        let events_found = health["events"].as_u64().unwrap_or(0) as usize;
        let mut details = BTreeMap::new();
        for f in flows.iter().take(top) {
            let q = flow_query(&f["flow"]);
            if let Ok(d) = get_json(http, &q) {
                details.insert(flow_label(&f["flow"]), d);
            }
        }
        Ok(SinkView {
            flows,
            flows_seen,
            details,
            links: get_json(http, "/api/links")?
                .as_array()
                .cloned()
                .unwrap_or_default(),
            epochs: get_json(http, "/api/epochs?n=5")?,
            events: get_json(http, "/api/events?n=10000")?
                .as_array()
                .cloned()
                .unwrap_or_default(),
            events_found,
            switches: get_json(http, "/api/switches")?
                .as_array()
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// Everything a run produced, before it is judged.
#[derive(Debug)]
pub struct Collected {
    /// The run directory.
    pub dir: PathBuf,
    /// What ran.
    pub plan: LabPlan,
    /// When the traffic started, Unix s.
    pub start_unix: f64,
    /// When a Ctrl-C stopped the traffic, s after its start (None: it ran its course).
    pub cut_short_at: Option<f64>,
    /// The whole run, s.
    pub wall_seconds: f64,
    /// Each switch's summary (None if it wrote none) and how it ended.
    pub summaries: Vec<(u32, Option<Summary>, String)>,
    /// Each generator's JSON report.
    pub generators: Vec<(u32, String)>,
    /// The sink's view.
    pub view: SinkView,
    /// The sink's event lines.
    pub events: String,
    /// When the sink's event lines file held fewer events than the sink had found as the
    /// lab read its view (its writes failed: a full disk; or it was killed before writing
    /// its last): (events in the file, events found, events from the API, which `events`
    /// then holds: the latest 10000 at most).
    pub events_file_short: Option<(usize, usize, usize)>,
}

impl Collected {
    /// Takes the events from the sink's API (`view.events`) when its event lines file holds
    /// fewer whole events than the sink had found (the file may hold more: events found
    /// after the view was read), noting it.
    pub fn events_from_api_if_short(&mut self) {
        let in_file = self
            .events
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok())
            .count();
        let found = self.view.events_found;
        if in_file < found {
            self.events_file_short = Some((in_file, found, self.view.events.len()));
            self.events = self
                .view
                .events
                .iter()
                .rev()
                .map(|e| format!("{e}\n"))
                .collect();
        }
    }
}

/// The report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabReport {
    /// The lab.
    pub lab: String,
    /// What it shows.
    pub description: String,
    /// Seconds of traffic: the lab's, or less when it was interrupted.
    pub duration_s: f64,
    /// Seconds of traffic the lab asked for.
    #[serde(default)]
    pub planned_s: f64,
    /// Seconds the whole run took.
    pub wall_seconds: f64,
    /// The run directory.
    pub dir: PathBuf,
    /// Switches.
    pub switches: Vec<SwitchRow>,
    /// Link directions (every direction of every link).
    pub links: Vec<LinkRow>,
    /// Flows seen by the sink.
    pub flows_total: usize,
    /// Of those, the ones whose paths were checked (the [`FLOWS_READ`] with the most
    /// packets when there were more).
    #[serde(default)]
    pub flows_checked: usize,
    /// Flows whose path was decoded.
    pub flows_decoded: usize,
    /// Decoded flows whose path equals the route.
    pub flows_matching: usize,
    /// Per link (`from -> to`), the packets of the flows whose route crosses it and whose
    /// path the sink had not decoded (it puts their loss on no link); only when every flow
    /// was checked.
    #[serde(default)]
    pub undecoded_through: BTreeMap<String, u64>,
    /// Decoded flows whose path does not (at most 20).
    pub mismatches: Vec<String>,
    /// Median digests to decode a path.
    pub median_digests_to_decode: Option<u64>,
    /// The largest flows.
    pub flows: Vec<FlowRow>,
    /// Events.
    pub events: Vec<EventRow>,
    /// Hosts.
    pub hosts: Vec<HostRow>,
    /// The sink's epoch counters.
    pub epochs: Value,
    /// Checks.
    pub checks: Vec<Check>,
    /// The packets in the flows' FlowRadar counts (each flow's largest count at a switch),
    /// when the report read every flow the sink saw.
    #[serde(default)]
    pub packets_counted: Option<u64>,
    /// Whether the lab's query plan traces paths (a `static_per_flow` `switch_id` query):
    /// without one the sink decodes no path and puts loss on no link.
    #[serde(default = "traced_by_default")]
    pub paths_traced: bool,
    /// Node positions for drawing: (name, x, y) in 0..1.
    pub layout: Vec<(String, f64, f64)>,
}

fn name_of_id(lab: &Lab, id: u64) -> String {
    lab.node_of_id(id as u32)
        .map_or_else(|| format!("#{id}"), |n| lab.shown(n))
}

/// A share as a percentage, as people write it (`7%`, `0.5%`: no float noise).
fn percent(share: f64) -> String {
    let p = format!("{:.4}", share * 100.0);
    let p = p.trim_end_matches('0').trim_end_matches('.');
    if p == "0" && share > 0.0 {
        return "below 0.0001%".into();
    }
    format!("{p}%")
}

fn impair_words(i: &super::spec::LinkImpair) -> String {
    let mut w = Vec::new();
    if i.loss > 0.0 {
        w.push(format!("loss {}", percent(i.loss)));
    }
    if i.delay_us > 0 {
        let mut d = format!("delay {} ms", i.delay_us as f64 / 1e3);
        if i.jitter_us > 0 {
            d.push_str(&format!(" ± {} ms", i.jitter_us as f64 / 1e3));
        }
        w.push(d);
    }
    if i.reorder > 0.0 {
        w.push(format!("reorder {}", percent(i.reorder)));
    }
    let mut s = w.join(", ");
    match i.until_s {
        Some(u) => s.push_str(&format!(" from {} s to {u} s", i.from_s)),
        None if i.from_s > 0.0 => s.push_str(&format!(" from {} s", i.from_s)),
        None => {}
    }
    s
}

impl LabReport {
    /// Judges what a run collected.
    pub fn build(lab: &Lab, c: Collected, top: usize) -> anyhow::Result<LabReport> {
        let fwd = forwarders(&c.plan)?;
        // The seconds the traffic ran (a tenth at least: no rate over no time).
        let traffic_s = c
            .cut_short_at
            .map_or(lab.duration_s, |at| at.clamp(0.1, lab.duration_s));
        let names = |ids: &[Value]| -> Vec<String> {
            ids.iter()
                .map(|v| name_of_id(lab, v.as_u64().unwrap_or(0)))
                .collect()
        };
        let summary_of = |n: u32| {
            c.summaries
                .iter()
                .find(|(m, _, _)| *m == n)
                .and_then(|(_, s, _)| s.as_ref())
        };
        // Switches.
        let switches: Vec<SwitchRow> = (0..lab.topology.len() as u32)
            .map(|n| {
                let id = lab.switch_id(n);
                let s = summary_of(n);
                let at_sink = c
                    .view
                    .switches
                    .iter()
                    .find(|v| v["id"].as_u64() == Some(u64::from(id)));
                SwitchRow {
                    name: lab.shown(n),
                    id,
                    hosts: lab.hosts.contains(&n),
                    rx_packets: s.map_or(0, |s| s.rx_packets),
                    tx_packets: s.map_or(0, |s| s.tx_packets),
                    drops: s.map_or_else(BTreeMap::new, |s| {
                        s.drops
                            .nonzero()
                            .map(|(r, v)| (r.name().to_owned(), v))
                            .collect()
                    }),
                    tx_full_drops: s.map_or(0, |s| s.tx_full_drops),
                    digests_exported: s.map_or(0, |s| s.telemetry.digests_exported),
                    flowsets_exported: s.map_or(0, |s| s.telemetry.flowsets_exported),
                    digests_received: at_sink.and_then(|v| v["digests"].as_u64()).unwrap_or(0),
                    flowsets_received: at_sink.and_then(|v| v["flowsets"].as_u64()).unwrap_or(0),
                    dropped_at_sink: at_sink.map_or(0, |v| {
                        ["digests_dropped", "flowsets_dropped", "probes_dropped"]
                            .iter()
                            .map(|k| v[*k].as_u64().unwrap_or(0))
                            .sum()
                    }),
                    exit: c
                        .summaries
                        .iter()
                        .find(|(m, _, _)| *m == n)
                        .map_or_else(String::new, |x| x.2.clone()),
                }
            })
            .collect();
        // Links, both directions.
        let capacity = control::config::types::parse_capacity(&lab.capacity)
            .map_err(anyhow::Error::msg)? as f64;
        let mut links = Vec::new();
        for a in 0..lab.topology.len() as u32 {
            for (j, &b) in lab.topology.neighbours(a).iter().enumerate() {
                let at_sink = c.view.links.iter().find(|l| {
                    l["from"].as_u64() == Some(u64::from(lab.switch_id(a)))
                        && l["to"].as_u64() == Some(u64::from(lab.switch_id(b)))
                });
                let port = j + 1;
                let tx_bytes = summary_of(a)
                    .and_then(|s| {
                        let pn = port_name(lab, a, port as u16);
                        s.ports
                            .iter()
                            .find(|p| p.name == pn)
                            .map(|p| p.forwarded_bytes)
                    })
                    .unwrap_or(0);
                let imp = lab.impair.iter().find(|i| (i.from, i.to) == (a, b));
                links.push(LinkRow {
                    from: lab.shown(a),
                    to: lab.shown(b),
                    lost_packets: at_sink
                        .and_then(|l| l["lost_packets"].as_i64())
                        .unwrap_or(0),
                    flows: at_sink.and_then(|l| l["flows"].as_u64()).unwrap_or(0),
                    utilisation: Some(tx_bytes as f64 * 8.0 / traffic_s / capacity),
                    impaired: imp.map(impair_words),
                    // What the impairment of this port dropped, lost or over its delay
                    // line's limit (the switch counts both per port); unknown (None) when
                    // the switch wrote no summary.
                    impair_dropped: imp.and_then(|_| {
                        let pn = port_name(lab, a, port as u16);
                        summary_of(a).map(|s| {
                            s.ports
                                .iter()
                                .find(|p| p.name == pn)
                                .map_or(0, |p| p.impair_lost + p.impair_overflow)
                        })
                    }),
                });
            }
        }
        // Flows: decoded path against route.
        let mut decoded = 0;
        let mut matching = 0;
        let mut mismatches = Vec::new();
        let mut to_decode = Vec::new();
        let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut routes: Vec<Vec<String>> = Vec::with_capacity(c.view.flows.len());
        let mut undecoded_through: BTreeMap<String, u64> = BTreeMap::new();
        for f in &c.view.flows {
            let label = flow_label(&f["flow"]);
            let route = key_of(&f["flow"])
                .and_then(|k| route(lab, &fwd, &k))
                .map(|r| r.iter().map(|&n| lab.shown(n)).collect::<Vec<_>>());
            if let Some(r) = &route {
                paths.insert(label.clone(), r.clone());
            }
            routes.push(route.clone().unwrap_or_default());
            let Some(p) = f["path"].as_array() else {
                if let Some(r) = &route {
                    let packets = f["packets"].as_u64().unwrap_or(0);
                    for hop in r.windows(2) {
                        *undecoded_through
                            .entry(format!("{} -> {}", hop[0], hop[1]))
                            .or_default() += packets;
                    }
                }
                continue;
            };
            decoded += 1;
            if let Some(d) = f["path_digests"].as_u64() {
                to_decode.push(d);
            }
            let p = names(p);
            if route.as_ref() == Some(&p) {
                matching += 1;
            } else if mismatches.len() < 20 {
                mismatches.push(format!("{label}: decoded {p:?}, route {route:?}"));
            }
            paths.insert(label, p);
        }
        to_decode.sort_unstable();
        let flows: Vec<FlowRow> = c
            .view
            .flows
            .iter()
            .zip(routes)
            .take(top)
            .map(|(f, route)| {
                let d = c.view.details.get(&flow_label(&f["flow"]));
                sink::page::flow_row(f, d, &|id| name_of_id(lab, id), route)
            })
            .collect();
        let events = events(lab, &c, &paths);
        let hosts = c
            .generators
            .iter()
            .map(|(n, text)| {
                let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                HostRow {
                    name: lab.shown(*n),
                    sent: v["sent"]["packets"].as_u64().unwrap_or(0),
                    received: v["received"]["packets"].as_u64().unwrap_or(0),
                    lost: v["received"]["flows"]["lost"].as_u64().unwrap_or(0),
                    late: v["received"]["flows"]["late"].as_u64().unwrap_or(0),
                    too_old: v["received"]["flows"]["too_old"].as_u64().unwrap_or(0),
                    probes_sent: v["sent"]["probes"].as_u64().unwrap_or(0),
                    probes_received: v["received"]["probes"]["received"].as_u64().unwrap_or(0),
                    probes_lost: v["received"]["probes"]["lost"].as_u64().unwrap_or(0),
                }
            })
            .collect();
        let mut report = LabReport {
            lab: lab.name.clone(),
            description: lab.description.clone(),
            duration_s: traffic_s,
            planned_s: lab.duration_s,
            wall_seconds: c.wall_seconds,
            dir: c.dir.clone(),
            switches,
            links,
            flows_total: c.view.flows_seen.max(c.view.flows.len()),
            flows_checked: c.view.flows.len(),
            flows_decoded: decoded,
            flows_matching: matching,
            undecoded_through: if c.view.flows_seen > c.view.flows.len() {
                BTreeMap::new()
            } else {
                undecoded_through
            },
            mismatches,
            median_digests_to_decode: to_decode.get(to_decode.len() / 2).copied(),
            flows,
            events,
            hosts,
            epochs: {
                let mut e = c.view.epochs.clone();
                if let Some(o) = e.as_object_mut() {
                    o.remove("latest");
                }
                e
            },
            checks: Vec::new(),
            packets_counted: (c.view.flows_seen <= c.view.flows.len()).then(|| {
                c.view
                    .flows
                    .iter()
                    .map(|f| f["packets"].as_u64().unwrap_or(0))
                    .sum()
            }),
            paths_traced: lab.plan_traces_paths(),
            layout: layout(&lab.topology, &lab.hosts, |n| lab.shown(n)),
        };
        report.checks = checks(lab, &report);
        report.checks.push(processes_check(lab, &c));
        if let Some((in_file, found, from_api)) = c.events_file_short {
            report.checks.push(Check::new(
                "the sink wrote every event it found",
                false,
                format!(
                    "events.jsonl holds {in_file} of the {found} events the sink found (sink.log says why); this report takes the {from_api} its API lists{}",
                    if from_api < found {
                        " (it keeps the latest 10000)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if let Some(at) = c.cut_short_at {
            report.checks.push(Check::new(
                "the traffic ran its course",
                false,
                format!(
                    "interrupted {at:.1} s into its {} s (Ctrl-C or a signal): the counts are of what was sent until then",
                    lab.duration_s
                ),
            ));
        }
        Ok(report)
    }

    /// Writes `report.json` and `report.html` into `dir`, each whole or not at all (a full
    /// disk leaves no empty or cut file behind); an error names the file.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        write_whole(
            &dir.join("report.json"),
            serde_json::to_string_pretty(self)?,
        )?;
        write_whole(&dir.join("report.html"), sink::page::render(&self.page()))
    }

    /// The report as the page the sink also serves.
    pub fn page(&self) -> Page {
        Page {
            title: format!("pint-lab {}", self.lab),
            subtitle: format!(
                "{}{} of traffic, {:.0} s in all; run directory {}.",
                if self.description.is_empty() {
                    String::new()
                } else {
                    format!("{}. ", self.description.trim_end_matches('.'))
                },
                self.traffic_words(),
                self.wall_seconds,
                self.dir.display()
            ),
            live: false,
            checks: self.checks.clone(),
            layout: self.layout.clone(),
            switches: self.switches.clone(),
            links: self.links.clone(),
            events: self.events.clone(),
            span_s: self.duration_s,
            flows_total: self.flows_total,
            flows_decoded: self.flows_decoded,
            flows_matching: Some(self.flows_matching),
            mismatches: self.mismatches.clone(),
            median_digests_to_decode: self.median_digests_to_decode,
            flows: self.flows.clone(),
            hosts: self.hosts.clone(),
            epochs: self.epochs.clone(),
        }
    }

    /// What the path figures cover when it is not every flow (empty when it is).
    fn checked_note(&self) -> String {
        if self.flows_checked < self.flows_total {
            format!(", of which the {} largest checked", self.flows_checked)
        } else {
            String::new()
        }
    }

    /// How long the traffic ran: `20 s`, or `4.2 s (interrupted; 20 s planned)`.
    fn traffic_words(&self) -> String {
        if self.duration_s < self.planned_s {
            format!(
                "{:.1} s (interrupted; {:.0} s planned)",
                self.duration_s, self.planned_s
            )
        } else {
            format!("{:.0} s", self.duration_s)
        }
    }

    /// Whether every check held.
    pub fn all_ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok || !c.applies)
    }

    /// The one-screen summary.
    pub fn text(&self) -> String {
        let mut s = format!(
            "== pint-lab {}: {} of traffic, {:.0} s in all ==\n",
            self.lab,
            self.traffic_words(),
            self.wall_seconds
        );
        // Columns as wide as the longest name (a topology file's labels can be long).
        let w = self
            .hosts
            .iter()
            .map(|h| h.name.chars().count())
            .fold(12, usize::max);
        // At most SUMMARY_ROWS rows of each list: a large lab's would push the checks off
        // the screen (report.html has them all). Hosts that lost or were late first.
        let mut hosts: Vec<_> = self.hosts.iter().collect();
        if hosts.len() > SUMMARY_ROWS {
            hosts.sort_by_key(|h| std::cmp::Reverse(h.lost + h.late + h.probes_lost));
        }
        for h in hosts.iter().take(SUMMARY_ROWS) {
            s.push_str(&format!(
                "hosts at {:<w$} sent {:>8}  received {:>8} (lost {}, late {}{})  probes received {} lost {}\n",
                h.name,
                h.sent,
                h.received,
                h.lost,
                h.late,
                if h.too_old > 0 {
                    format!(", {} more than 64 behind", h.too_old)
                } else {
                    String::new()
                },
                h.probes_received,
                h.probes_lost
            ));
        }
        more_rows(&mut s, self.hosts.len(), "hosts");
        s.push_str(&format!(
            "paths: {} flows{}, {} decoded, {} equal their routes (median {} digests to decode)\n",
            self.flows_total,
            self.checked_note(),
            self.flows_decoded,
            self.flows_matching,
            self.median_digests_to_decode
                .map_or("-".into(), |d| d.to_string())
        ));
        let mut lossy: Vec<&LinkRow> = self
            .links
            .iter()
            .filter(|l| l.lost_packets != 0 || l.impaired.is_some())
            .collect();
        // The impaired links first, then the most loss (or counts missing).
        lossy.sort_by_key(|l| {
            (
                l.impaired.is_none(),
                std::cmp::Reverse(l.lost_packets.unsigned_abs()),
            )
        });
        for l in lossy.iter().take(SUMMARY_ROWS) {
            // More counted after a link than before it: some of the counts never reached
            // the sink's tables (it dropped them), not packets made on the link.
            let lost = if l.lost_packets < 0 {
                format!(
                    "{} packets counted after it beyond those before it (counts missing)",
                    -l.lost_packets
                )
            } else {
                format!("{} packets lost", l.lost_packets)
            };
            s.push_str(&format!(
                "link {} -> {}: {lost}{}{}\n",
                l.from,
                l.to,
                match (l.impair_dropped, &l.impaired) {
                    (Some(d), _) => format!(" (its impairment dropped {d})"),
                    (None, Some(_)) => {
                        " (what its impairment dropped is unknown: its switch wrote no summary)"
                            .to_owned()
                    }
                    (None, None) => String::new(),
                },
                l.impaired
                    .as_ref()
                    .map_or(String::new(), |w| format!(" [impaired: {w}]"))
            ));
        }
        more_rows(&mut s, lossy.len(), "links with loss or an impairment");
        if self.events.is_empty() {
            s.push_str("events: none\n");
        }
        // Events grouped by kind and link: how many, of how many flows, over which span.
        let mut groups: BTreeMap<(String, String), EventGroup> = BTreeMap::new();
        for e in &self.events {
            let link = match e.place().as_str() {
                "?" => "an unknown link".into(),
                place => place.to_owned(),
            };
            let g = groups.entry((e.kind.clone(), link)).or_insert((
                0,
                f64::MAX,
                f64::MIN,
                BTreeSet::new(),
                BTreeSet::new(),
            ));
            g.0 += 1;
            g.1 = g.1.min(e.start_s);
            g.2 = g.2.max(e.end_s);
            g.3.extend(e.labels.iter().cloned());
            g.4.insert(e.flow.as_str());
        }
        // The impaired links' first, then the most events.
        let impaired: BTreeSet<String> = self
            .links
            .iter()
            .filter(|l| l.impaired.is_some())
            .map(|l| format!("{} -> {}", l.from, l.to))
            .collect();
        let mut groups: Vec<_> = groups.into_iter().collect();
        let at_impaired = |place: &str| place.split(" or ").any(|l| impaired.contains(l));
        groups.sort_by_key(|((_, link), g)| (!at_impaired(link), std::cmp::Reverse(g.0)));
        let w = groups
            .iter()
            .take(SUMMARY_ROWS)
            .map(|((_, link), _)| place_words(link).chars().count())
            .fold(24, usize::max);
        for ((kind, link), (n, from, to, labels, flows)) in groups.iter().take(SUMMARY_ROWS) {
            let link = place_words(link);
            // A window that opened just before the traffic: from its start (no `-0.0 s`).
            let (from, to) = (from.max(0.0), to.max(0.0));
            // The nouns padded to their plurals' width: the columns stay aligned.
            let events = if *n == 1 { "event" } else { "events" };
            let of_flows = if flows.len() == 1 { "flow," } else { "flows," };
            s.push_str(&format!(
                "event {kind:<10} on {link:<w$} {n:>3} {events:<6} of {:>3} {of_flows:<6} {from:.1} s to {to:.1} s ({})\n",
                flows.len(),
                labels.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        more_rows(&mut s, groups.len(), "kinds of event on links");
        s.push_str(&format!(
            "epochs: {}\n",
            sink::page::epochs_line(&self.epochs)
        ));
        for c in &self.checks {
            s.push_str(&format!("[{}] {}: {}\n", c.outcome(), c.name, c.detail));
        }
        s.push_str(&format!(
            "report: {}\n",
            self.dir.join("report.html").display()
        ));
        s
    }
}

/// Rows of each list the one-screen summary shows at most.
const SUMMARY_ROWS: usize = 16;

/// Says how many of a list's `n` rows the summary left out, if any.
fn more_rows(s: &mut String, n: usize, what: &str) {
    if n > SUMMARY_ROWS {
        s.push_str(&format!(
            "... and {} more {what} (report.html lists them all)\n",
            n - SUMMARY_ROWS
        ));
    }
}

/// Events of one kind on one link: how many, first start, last end, their labels.
/// A kind's events on one link: how many, first start, last end, labels, the flows.
type EventGroup<'a> = (usize, f64, f64, BTreeSet<String>, BTreeSet<&'a str>);

/// The events, each pointed at a link: loss at the link of the flow's path where its
/// counters say the packets went missing (else as below); delay and reordering as
/// [`blame`] says.
fn events(lab: &Lab, c: &Collected, paths: &BTreeMap<String, Vec<String>>) -> Vec<EventRow> {
    let raw: Vec<Value> = c
        .events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let probe_flows: BTreeSet<String> = paths
        .keys()
        .filter(|k| k.contains(&format!(":{} ", crate::generator::traffic::PROBE_PORT)))
        .cloned()
        .collect();
    let spans: Vec<Span> = raw.iter().map(Span::of).collect();
    // The link the sink names in a loss event (`lossy_link`, switch IDs): where the flow's
    // counters lost the most during the event.
    let named_link = |e: &Value| {
        let l = e["lossy_link"].as_array()?;
        Some((
            name_of_id(lab, l.first()?.as_u64()?),
            name_of_id(lab, l.get(1)?.as_u64()?),
        ))
    };
    let mut out: Vec<EventRow> = raw
        .iter()
        .zip(&spans)
        .map(|(e, this)| {
            let (label, kind) = (&this.flow, this.kind.as_str());
            let path = paths.get(label).cloned().unwrap_or_default();
            // What the sink said in this event or in the flow's loss event at the same time
            // (where the loss was then), else the flow's details (read for the largest flows
            // only: its link that lost the most over the whole run), so that which flows'
            // details were read (`--top`) moves only events the sink placed nowhere.
            let in_details = c.view.details.get(label).and_then(|d| {
                d["loss"]
                    .as_array()?
                    .iter()
                    .filter(|l| l["lost_packets"].as_i64().unwrap_or(0) > 0)
                    .max_by_key(|l| l["lost_packets"].as_i64())
                    .map(|l| {
                        (
                            name_of_id(lab, l["from"].as_u64().unwrap_or(0)),
                            name_of_id(lab, l["to"].as_u64().unwrap_or(0)),
                        )
                    })
            });
            let lossy_link = named_link(e)
                .or_else(|| {
                    raw.iter()
                        .zip(&spans)
                        .filter(|(_, s)| {
                            s.kind == "loss"
                                && s.flow == this.flow
                                && s.start <= this.end
                                && this.start <= s.end
                        })
                        .find_map(|(l, _)| named_link(l))
                })
                .or(in_details);
            // Else the link of its path that lost the most (all flows together).
            let most_lost = || {
                links_of(&path)
                    .into_iter()
                    .map(|(a, b)| {
                        let lost = c
                            .view
                            .links
                            .iter()
                            .find(|l| {
                                name_of_id(lab, l["from"].as_u64().unwrap_or(0)) == a
                                    && name_of_id(lab, l["to"].as_u64().unwrap_or(0)) == b
                            })
                            .and_then(|l| l["lost_packets"].as_i64())
                            .unwrap_or(0);
                        ((a, b), lost)
                    })
                    .filter(|(_, lost)| *lost > 0)
                    .max_by_key(|(_, lost)| *lost)
                    .map(|(l, _)| l)
            };
            let blamed = || {
                let mut tied = blame(this, &path, &spans, paths, &probe_flows).into_iter();
                (tied.next(), tied.collect())
            };
            let one = |l: Option<(String, String)>| (l, Vec::new());
            let (link, also) = if kind == "loss" {
                match lossy_link.or_else(most_lost) {
                    Some(l) => one(Some(l)),
                    None => blamed(),
                }
            } else if loses_meanwhile(this, &spans) && lossy_link.is_some() {
                one(lossy_link)
            } else {
                blamed()
            };
            // The path the sink had decoded when it reported the event, else the flow's.
            let mut row = sink::page::event_row(e, c.start_unix, link, |id| name_of_id(lab, id));
            row.also = also;
            if row.path.is_empty() {
                row.path = path;
            }
            row
        })
        .collect();
    out.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    out
}

/// One detected event: its kind, its flow, and when (the detector's clock).
#[derive(Debug, Clone, PartialEq)]
struct Span {
    kind: String,
    flow: String,
    start: f64,
    end: f64,
}

impl Span {
    /// The span of an event line of the sink.
    fn of(e: &Value) -> Span {
        Span {
            kind: e["kind"].as_str().unwrap_or("").to_owned(),
            flow: flow_label(&e["flow"]),
            start: e["start"].as_f64().unwrap_or(0.0),
            end: e["end"].as_f64().unwrap_or(0.0),
        }
    }
}

/// Whether the flow of `this` (a delay or reordering event) has a loss event at the same
/// time: then both point at the link where its counters say its packets went missing (a
/// queue that delays, reorders and drops), whatever other flows show. On a machine whose
/// stalls delay every path now and then, that keeps the evidence of the lossy link from
/// being outvoted by the noise on the others.
fn loses_meanwhile(this: &Span, spans: &[Span]) -> bool {
    spans.iter().any(|s| {
        s.kind == "loss" && s.flow == this.flow && s.start <= this.end && this.start <= s.end
    })
}

/// The links of `path` that the event `this` (on a flow with that path) points at: the one
/// crossed by the most flows with an event of the same kind and the fewest probe streams
/// with no event at all at the time; between links that tie, the one crossed by the most
/// flows with an event of another kind at the same time. (A jittery link that reorders one
/// flow's probes delays or loses others' without reordering them enough to tell: those are
/// no evidence against it, and they tell it from the links it shares the flow with.) Links
/// that still tie are all returned, in the path's order: the flows cannot tell them apart
/// (the same flows cross each).
fn blame(
    this: &Span,
    path: &[String],
    spans: &[Span],
    paths: &BTreeMap<String, Vec<String>>,
    probe_flows: &BTreeSet<String>,
) -> Vec<(String, String)> {
    let same: BTreeSet<&String> = spans
        .iter()
        .filter(|s| s.kind == this.kind)
        .map(|s| &s.flow)
        .collect();
    let beside: BTreeSet<&String> = spans
        .iter()
        .filter(|s| s.kind != this.kind && s.start <= this.end && this.start <= s.end)
        .map(|s| &s.flow)
        .collect();
    let mut best: Vec<(String, String)> = Vec::new();
    let mut best_score = None;
    for l in links_of(path) {
        let crosses = |f: &String| paths.get(f).is_some_and(|p| links_of(p).contains(&l));
        let hits = same.iter().filter(|f| crosses(f)).count() as i64;
        let misses = probe_flows
            .iter()
            .filter(|f| !same.contains(f) && !beside.contains(f) && crosses(f))
            .count() as i64;
        let score = (hits - misses, beside.iter().filter(|f| crosses(f)).count());
        match best_score {
            Some(s) if score < s => {}
            Some(s) if score == s => best.push(l),
            _ => {
                best_score = Some(score);
                best = vec![l];
            }
        }
    }
    best
}

/// The links of a path, in order.
fn links_of(path: &[String]) -> Vec<(String, String)> {
    path.windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect()
}

/// Whether every switch ended cleanly with its summary and every generator gave its
/// report: a run with a process that died or was killed shows partial counts, which the
/// other checks could still pass on.
fn processes_check(lab: &Lab, c: &Collected) -> Check {
    let mut broken: Vec<String> = c
        .summaries
        .iter()
        .filter(|(_, summary, exit)| summary.is_none() || exit != "exit status: 0")
        .map(|(n, summary, exit)| {
            let summary = if summary.is_some() {
                ""
            } else {
                ", no summary"
            };
            format!("switch {} ({exit}{summary})", lab.shown(*n))
        })
        .collect();
    broken.extend(
        c.generators
            .iter()
            .filter(|(_, text)| {
                serde_json::from_str::<Value>(text)
                    .map_or(true, |v| v["sent"].is_null() && v["received"].is_null())
            })
            .map(|(n, _)| format!("generator at {} (no report)", lab.shown(*n))),
    );
    Check::new(
        "every process ended cleanly",
        broken.is_empty(),
        if broken.is_empty() {
            format!(
                "{} switches and {} generators",
                c.summaries.len(),
                c.generators.len()
            )
        } else {
            broken.join("; ")
        },
    )
}

/// What the lab should show, checked.
fn checks(lab: &Lab, r: &LabReport) -> Vec<Check> {
    let mut v = vec![
        if r.paths_traced {
            Check::new(
                "decoded paths equal routes",
                r.flows_decoded > 0 && r.flows_matching == r.flows_decoded,
                format!(
                    "{} of {} decoded paths ({} flows{})",
                    r.flows_matching,
                    r.flows_decoded,
                    r.flows_total,
                    r.checked_note()
                ),
            )
        } else {
            Check::not_applicable("decoded paths equal routes", NO_PATHS)
        },
        delivery_check(r),
        counting_check(r),
    ];
    let impaired: Vec<(String, String)> = lab
        .impair
        .iter()
        .map(|i| (lab.shown(i.from), lab.shown(i.to)))
        .collect();
    let others = || {
        r.links
            .iter()
            .filter(|l| !impaired.contains(&(l.from.clone(), l.to.clone())))
    };
    let row_of = |a: u32, b: u32| {
        let (from, to) = (lab.shown(a), lab.shown(b));
        r.links.iter().find(move |l| l.from == from && l.to == to)
    };
    let slack = detection_window_s(lab);
    // The most a link without an impairment lost: an impaired link must stand out above it.
    let most_elsewhere = others().map(|l| l.lost_packets).max().unwrap_or(0);
    for i in &lab.impair {
        let (from, to) = (lab.shown(i.from), lab.shown(i.to));
        let (from, to) = (from.as_str(), to.as_str());
        let row = row_of(i.from, i.to);
        if i.loss > 0.0 && !r.paths_traced {
            v.push(Check::not_applicable(
                format!("loss found on the impaired link {from} -> {to}"),
                NO_PATHS,
            ));
        } else if i.loss > 0.0 {
            let lost = row.map_or(0, |l| l.lost_packets);
            // The switch counts what each port's impairment drops: unknown when it wrote
            // no summary (then the loss need only stand out).
            let known = row.and_then(|l| l.impair_dropped);
            let dropped = known.unwrap_or(lost.max(0) as u64);
            let mut detail = match known {
                Some(d) => format!("{lost} packets lost, the impairment dropped {d}"),
                None => format!(
                    "{lost} packets lost; what the impairment dropped is unknown ({from} wrote no summary)"
                ),
            };
            // The sink puts a flow's loss on links once its path is decoded: what flows
            // without one carried over this link may hold the rest of what was dropped
            // (known only when every flow was checked).
            let undecoded = r
                .undecoded_through
                .get(&format!("{from} -> {to}"))
                .copied()
                .unwrap_or(0);
            let short = dropped as i64 - lost;
            let accounted = short == 0 || (short > 0 && short <= undecoded as i64);
            if short != 0 && undecoded > 0 {
                detail += &format!(
                    "; flows whose path the sink had not decoded carried {undecoded} packets over it (their loss is on no link)"
                );
            }
            v.push(Check::new(
                format!("loss found on the impaired link {from} -> {to}"),
                lost > 0 && accounted && lost > most_elsewhere,
                detail,
            ));
        }
        if i.delay_us > 0 {
            // Delay events while the impairment acted (a detection window's slack either
            // side), whose delay rose above their baseline by the sink's delay threshold:
            // a fall back to normal after it, or the window of such a fall, is no finding
            // of it. Delay put down to end-host noise points at no link.
            let rise = sink::detect::Sensitivity::parse(&lab.sensitivity).map_or(0.0, |s| {
                sink::detect::Params::with_sensitivity(s).delay_threshold_ms
            });
            let delays = || {
                events_while(r, i, "delay", slack).filter(move |e| {
                    match (e.peak_ms, e.baseline_ms) {
                        (Some(peak), Some(base)) => peak > base + rise,
                        _ => true,
                    }
                })
            };
            let noise = delays().filter(|e| e.end_host_noise()).count();
            let hits = delays()
                .filter(|e| !e.end_host_noise() && e.points_at(from, to))
                .count();
            // Of those, the ones that point at other links as much (the same flows cross
            // them): the lab cannot say which of them it is.
            let shared = delays()
                .filter(|e| !e.end_host_noise() && e.points_at(from, to) && !e.also.is_empty())
                .count();
            let mut detail = format!(
                "{hits} delay events point at it while it acted, {} elsewhere, {noise} put down to end-host noise",
                delays().count() - hits - noise
            );
            if shared > 0 {
                detail += &format!(
                    " ({shared} of them at it or at links the same flows cross, which they cannot tell apart)"
                );
            }
            v.push(Check::new(
                format!("delay event on the impaired link {from} -> {to}"),
                hits > 0,
                detail,
            ));
        }
        if i.reorder > 0.0 {
            let name = format!("reordering event on the impaired link {from} -> {to}");
            if let Some(why) = i.reorders_no_probes(1000.0 / lab.traffic.probe_hz) {
                v.push(Check::not_applicable(name, why));
            } else {
                let reorderings = || events_while(r, i, "reordering", slack);
                let hits = reorderings().filter(|e| e.points_at(from, to)).count();
                v.push(Check::new(
                    name,
                    hits > 0,
                    format!(
                        "{hits} reordering events point at it while it acted, {} elsewhere",
                        reorderings().count() - hits
                    ),
                ));
            }
        }
    }
    let elsewhere: i64 = others().map(|l| l.lost_packets.max(0)).sum();
    // Links that counted more after them than before: counts missing, which could hide loss.
    let missing: i64 = others().map(|l| (-l.lost_packets).max(0)).sum();
    let mut detail = format!("{elsewhere} packets lost on links without an impairment");
    if missing > 0 {
        detail += &format!(
            "; {missing} more packets counted after links than before them (counts missing)"
        );
    }
    for note in [full_queue_note(&r.switches), sink_drop_note(&r.switches)]
        .into_iter()
        .flatten()
    {
        detail += &format!("; {note}");
    }
    v.push(if r.paths_traced {
        Check::new("no loss elsewhere", elsewhere == 0 && missing == 0, detail)
    } else {
        Check::not_applicable("no loss elsewhere", NO_PATHS)
    });
    v
}

/// Widest place of an event in the summary's table, characters.
const PLACE_WORDS_MAX: usize = 64;

/// An event's place as the summary's table shows it: whole, or, where it is one of many
/// links (`A -> B or C -> D or ...`) too long for a line, its first links and how many more
/// (the report's page and JSON have them all).
fn place_words(place: &str) -> String {
    if place.chars().count() <= PLACE_WORDS_MAX {
        return place.to_owned();
    }
    let links: Vec<&str> = place.split(" or ").collect();
    let mut shown = links[0].to_owned();
    for (i, l) in links.iter().enumerate().skip(1) {
        let with = format!("{shown} or {l}");
        let after = links.len() - i - 1;
        let tail = if after > 0 {
            format!(" or {after} more").chars().count()
        } else {
            0
        };
        if with.chars().count() + tail > PLACE_WORDS_MAX {
            return format!("{shown} or {} more", links.len() - i);
        }
        shown = with;
    }
    shown
}

/// The report's events of `kind` while impairment `i` acted, or `slack` s either side.
fn events_while<'a>(
    r: &'a LabReport,
    i: &'a super::spec::LinkImpair,
    kind: &'a str,
    slack: f64,
) -> impl Iterator<Item = &'a EventRow> + 'a {
    let until = i.until_s.unwrap_or(r.duration_s).min(r.duration_s);
    r.events.iter().filter(move |e| {
        e.kind == kind && e.start_s <= until + slack && e.end_s >= i.from_s - slack
    })
}

/// The sink's detection window for the lab's probe streams (s): 5 s, or about 20 probes
/// when they are sparser (as the sink sizes it); an event may start or end up to one
/// window from the change it found.
fn detection_window_s(lab: &Lab) -> f64 {
    sink::detect::window_for(
        Some(1.0 / lab.traffic.probe_hz),
        &sink::detect::Params::default(),
    )
}

/// Why a lab whose plan traces no path cannot check paths or loss per link.
const NO_PATHS: &str = "the query plan traces no path (no static_per_flow switch_id query): the sink decodes none and puts loss on no link";

/// Whether every packet the hosts sent reached a host or was dropped by an impairment: a
/// lab whose switches drop its traffic (or whose machine does not keep up) fails here,
/// whatever the telemetry says.
fn delivery_check(r: &LabReport) -> Check {
    let sent: u64 = r.hosts.iter().map(|h| h.sent).sum();
    let received: u64 = r.hosts.iter().map(|h| h.received).sum();
    let impaired: u64 = r
        .switches
        .iter()
        .flat_map(|s| s.drops.iter())
        .filter(|(reason, _)| reason.starts_with("impair_"))
        .map(|(_, n)| n)
        .sum();
    let mut detail = format!("{sent} sent, {received} received, {impaired} dropped by impairments");
    let ok = sent > 0 && received + impaired == sent;
    if !ok && received + impaired < sent {
        detail += &format!("; {} missing", sent - received - impaired);
    }
    if !ok {
        let mut drops: Vec<(u64, String)> = r
            .switches
            .iter()
            .flat_map(|s| {
                s.drops
                    .iter()
                    .filter(|(reason, _)| !reason.starts_with("impair_"))
                    .map(move |(reason, n)| (*n, format!("{} {reason} {n}", s.name)))
            })
            .collect();
        drops.sort_by(|a, b| b.cmp(a));
        if !drops.is_empty() {
            detail += &format!(
                "; switches dropped: {}{}",
                drops
                    .iter()
                    .take(4)
                    .map(|(_, d)| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if drops.len() > 4 { ", ..." } else { "" }
            );
        }
        if let Some(note) = full_queue_note(&r.switches) {
            detail += &format!("; {note}");
        }
    }
    Check::new(
        "every packet sent arrived or was dropped by an impairment",
        ok,
        detail,
    )
}

/// Whether the flows' FlowRadar counts hold every packet the hosts sent (each flow's
/// largest count at a switch is what entered the network): flowsets too full to decode,
/// or dropped on their way, lose counts.
fn counting_check(r: &LabReport) -> Check {
    const NAME: &str = "FlowRadar counted every packet sent";
    let Some(counted) = r.packets_counted else {
        return Check::not_applicable(
            NAME,
            format!(
                "the sink saw {} flows, more than the report reads ({FLOWS_READ})",
                r.flows_total
            ),
        );
    };
    let sent: u64 = r.hosts.iter().map(|h| h.sent).sum();
    let mut detail = format!(
        "{counted} packets in the counts of {} flows, {sent} sent",
        r.flows_total
    );
    if counted < sent {
        detail += &format!(
            "; {} missing: counts of flowsets that did not decode (more flows an epoch than \
             switches.expected_flows) or did not reach the sink",
            sent - counted
        );
    } else if counted > sent {
        detail += &format!("; {} more than sent", counted - sent);
    }
    if let Some(note) = sink_drop_note(&r.switches) {
        detail += &format!("; {note}");
    }
    Check::new(NAME, sent > 0 && counted == sent, detail)
}

/// Writes `text` to `path` through a file beside it, renamed over it once whole.
fn write_whole(path: &Path, text: String) -> anyhow::Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = std::path::PathBuf::from(part);
    let written = std::fs::write(&part, text).and_then(|()| std::fs::rename(&part, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&part);
        anyhow::anyhow!("writing {}: {e}", path.display())
    })
}

/// What the switches did not send, if anything (full tx queues, a link down, or a port
/// closed while restarted): packets lost on their links too, in a lab most likely because
/// the machine did not keep up (their peers did not drain the links in time).
fn full_queue_note(switches: &[SwitchRow]) -> Option<String> {
    let full: u64 = switches.iter().map(|s| s.tx_full_drops).sum();
    if full == 0 {
        return None;
    }
    let mut worst: Vec<&SwitchRow> = switches.iter().filter(|s| s.tx_full_drops > 0).collect();
    worst.sort_by_key(|s| std::cmp::Reverse(s.tx_full_drops));
    let names: Vec<String> = worst
        .iter()
        .take(3)
        .map(|s| format!("{} {}", s.name, s.tx_full_drops))
        .collect();
    Some(format!(
        "{full} dropped by switches at full tx queues ({}{}): the machine did not keep up, most likely (fewer hosts, a lower traffic.rate_pps or more CPUs), or a link was down or a port restarted",
        names.join(", "),
        if worst.len() > 3 { ", ..." } else { "" }
    ))
}

/// What the sink received from the switches and dropped, if anything: it fell behind, so
/// the counts (and the losses worked out from them) miss that much.
fn sink_drop_note(switches: &[SwitchRow]) -> Option<String> {
    let dropped: u64 = switches.iter().map(|s| s.dropped_at_sink).sum();
    (dropped > 0).then(|| {
        format!(
            "the sink dropped {dropped} of the digests, flowsets and probe reports it received (it fell behind): counts and losses miss them"
        )
    })
}

#[cfg(test)]
mod tests;
