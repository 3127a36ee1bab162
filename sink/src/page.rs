//! One page that shows what the telemetry says about a network: the topology drawn in SVG
//! with each link's loss and utilisation (impaired links marked), the events on a timeline,
//! each large flow's decoded path (and, in a lab, its configured route) with per-hop latency
//! bars and per-switch counts, and the totals. Self-contained HTML (no external resources;
//! the live page has one script, its refresh, and the report none): the sink serves it live
//! at `/`, and `pint-lab` writes it as its report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::layout::layout;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One switch's totals.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SwitchRow {
    /// Name.
    pub name: String,
    /// Switch ID.
    pub id: u32,
    /// Whether hosts hang off it.
    pub hosts: bool,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Drops by reason (non-zero ones).
    pub drops: BTreeMap<String, u64>,
    /// Packets it did not send: a tx queue stayed full, a link was down or a port closed.
    pub tx_full_drops: u64,
    /// Digests exported to the sink.
    pub digests_exported: u64,
    /// Flowsets exported.
    pub flowsets_exported: u64,
    /// Digests the sink received from it.
    pub digests_received: u64,
    /// Flowsets the sink received from it.
    pub flowsets_received: u64,
    /// Its digests, flowsets and probe arrivals the sink received and dropped, falling
    /// behind (a decode queue or the flowset memory full): the counts, paths and losses
    /// shown miss them.
    #[serde(default)]
    pub dropped_at_sink: u64,
    /// How the process ended.
    pub exit: String,
}

/// One direction of a link.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkRow {
    /// Sending switch.
    pub from: String,
    /// Receiving switch.
    pub to: String,
    /// Packets the sink found lost on it (FlowRadar counts along decoded paths).
    pub lost_packets: i64,
    /// Flows seen crossing it.
    pub flows: u64,
    /// Mean utilisation over the traffic's duration (bytes sent / capacity), when known.
    pub utilisation: Option<f64>,
    /// The impairment on it, in words.
    pub impaired: Option<String>,
    /// Packets its impairment dropped, lost or over its delay line's limit (the switch's
    /// counts); None without an impairment, or with one whose switch wrote no summary.
    pub impair_dropped: Option<u64>,
}

/// Per-hop latency of a flow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HopLatency {
    /// Hop (1 = first switch).
    pub hop: usize,
    /// The switch, when decoded.
    pub switch: Option<String>,
    /// Samples.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Share of the samples at the code's largest value: theirs were that or more.
    #[serde(default)]
    pub at_top: f64,
    /// The code's largest value, µs (a quantile there is a lower bound).
    #[serde(default)]
    pub top_us: f64,
}

/// One flow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowRow {
    /// The flow.
    pub flow: String,
    /// The route the switches' tables give it.
    pub route: Vec<String>,
    /// The path the sink decoded, if it did.
    pub decoded: Option<Vec<String>>,
    /// Digests it took to decode.
    pub digests_to_decode: Option<u64>,
    /// Packets (the largest count at any switch).
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Per-hop latency.
    pub latency: Vec<HopLatency>,
    /// Exact packet and byte counts per switch: (switch, packets, bytes).
    pub counters: Vec<(String, u64, u64)>,
}

/// One detected event.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EventRow {
    /// `delay`, `loss` or `reordering`.
    pub kind: String,
    /// Where it was found (`probes`, `latency`, `counters`).
    pub series: String,
    /// The flow.
    pub flow: String,
    /// Start, s since the traffic started.
    pub start_s: f64,
    /// End, s since the traffic started.
    pub end_s: f64,
    /// Loss rate.
    pub loss_rate: Option<f64>,
    /// Largest delay, ms.
    pub peak_ms: Option<f64>,
    /// Delay baseline, ms.
    pub baseline_ms: Option<f64>,
    /// Labels.
    pub labels: Vec<String>,
    /// The link it points to: (from, to).
    pub link: Option<(String, String)>,
    /// Other links of its path the evidence points at as much as at `link` (the flows
    /// that cross one cross the others): the problem is on one of them.
    #[serde(default)]
    pub also: Vec<(String, String)>,
    /// The flow's decoded path when it was reported (its switches, the first hop first);
    /// empty while not decoded.
    #[serde(default)]
    pub path: Vec<String>,
}

impl EventRow {
    /// Whether it points at link `from -> to`, alone or among links it cannot be told from.
    pub fn points_at(&self, from: &str, to: &str) -> bool {
        self.link
            .iter()
            .chain(&self.also)
            .any(|(a, b)| a == from && b == to)
    }

    /// Whether the detector puts it down to end-host noise alone (isolated delay spikes):
    /// then it says nothing about a link, wherever its flow's path goes.
    pub fn end_host_noise(&self) -> bool {
        !self.labels.is_empty() && self.labels.iter().all(|l| l == "end_host_noise")
    }

    /// Where it points, for people: its link (or the links it cannot be told from), the
    /// end hosts for end-host noise, the flow's path when no one link of it is known, or `?`
    /// when not even that is.
    pub fn place(&self) -> String {
        match &self.link {
            _ if self.end_host_noise() => "end hosts".into(),
            Some((a, b)) => {
                let mut at = format!("{a} -> {b}");
                for (a, b) in &self.also {
                    at.push_str(&format!(" or {a} -> {b}"));
                }
                at
            }
            None if !self.path.is_empty() => format!("on {}", self.path.join(" -> ")),
            None => "?".into(),
        }
    }

    /// The same with the flow's decoded path (switch names).
    #[cfg(test)]
    fn with_path(mut self, path: Vec<String>) -> EventRow {
        self.path = path;
        self
    }
}

/// One host switch's traffic.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostRow {
    /// The switch its hosts hang off.
    pub name: String,
    /// Packets sent.
    pub sent: u64,
    /// Packets received.
    pub received: u64,
    /// Packets missing from the received flows, from the gaps in their flow tags' sequence
    /// numbers (each sender's flows counted apart).
    #[serde(default)]
    pub lost: u64,
    /// Packets that arrived after a later one of their flow (reordered).
    #[serde(default)]
    pub late: u64,
    /// Packets that arrived more than 64 numbers after their place in their flow (late or
    /// duplicated, not told apart; their numbers are counted in `lost`).
    #[serde(default)]
    pub too_old: u64,
    /// Probes sent.
    #[serde(default)]
    pub probes_sent: u64,
    /// Probes received.
    pub probes_received: u64,
    /// Probes lost.
    pub probes_lost: u64,
}

/// One check of what the lab should show.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// What.
    pub name: String,
    /// Whether it held (true for a check that does not apply).
    pub ok: bool,
    /// The figures, or why the check does not apply.
    pub detail: String,
    /// Whether the run could be checked for it (a lab whose query plan traces no path
    /// cannot check paths): one that cannot is shown as such, neither held nor failed.
    #[serde(default = "applies_by_default")]
    pub applies: bool,
}

fn applies_by_default() -> bool {
    true
}

impl Check {
    /// A check made: `ok` is whether it held.
    pub fn new(name: impl Into<String>, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ok,
            detail: detail.into(),
            applies: true,
        }
    }

    /// A check this run cannot make, and why.
    pub fn not_applicable(name: impl Into<String>, why: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail: why.into(),
            applies: false,
        }
    }

    /// How a list shows its outcome: `ok`, `FAILED` or `n/a`.
    pub fn outcome(&self) -> &'static str {
        match (self.applies, self.ok) {
            (false, _) => "n/a",
            (true, true) => "ok",
            (true, false) => "FAILED",
        }
    }
}

/// Everything the page shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Page {
    /// The heading.
    pub title: String,
    /// A line under it.
    pub subtitle: String,
    /// Served live: the page reloads itself every few seconds.
    pub live: bool,
    /// Checks (a lab's), shown first.
    pub checks: Vec<Check>,
    /// Node positions: (name, x, y) in 0..1.
    pub layout: Vec<(String, f64, f64)>,
    /// Switches.
    pub switches: Vec<SwitchRow>,
    /// Link directions.
    pub links: Vec<LinkRow>,
    /// Events.
    pub events: Vec<EventRow>,
    /// The span of the events' timeline, s (from 0).
    pub span_s: f64,
    /// Flows seen.
    pub flows_total: usize,
    /// Flows whose path was decoded.
    pub flows_decoded: usize,
    /// Decoded flows equal to their routes (when routes are known).
    pub flows_matching: Option<usize>,
    /// Flows whose decoded path differs from the route.
    pub mismatches: Vec<String>,
    /// Median digests to decode a path.
    pub median_digests_to_decode: Option<u64>,
    /// The largest flows.
    pub flows: Vec<FlowRow>,
    /// Hosts' traffic (a lab's).
    pub hosts: Vec<HostRow>,
    /// Epoch counters.
    pub epochs: Value,
}

/// The epoch counters of `/api/epochs` in words: `2035 decoded (0 network-wide, 43
/// incomplete, 73 closed at their deadline); 8 flowsets came after their epoch, decoded on
/// their own`.
pub fn epochs_line(e: &Value) -> String {
    let n = |k: &str| e[k].as_u64().unwrap_or(0);
    let late = n("late_flowsets");
    format!(
        "{} decoded ({} network-wide, {} incomplete, {} closed at their deadline){}",
        n("epochs"),
        n("network"),
        n("incomplete"),
        n("by_deadline"),
        match late {
            0 => String::new(),
            1 => "; 1 flowset came after its epoch, decoded on its own".to_owned(),
            _ => format!("; {late} flowsets came after their epoch, decoded on their own"),
        }
    )
}

/// A flow's key in the page's words (`10.0.2.1:1024 > 10.0.3.7:9000 udp`), from the API's
/// flow object.
pub fn flow_label(f: &Value) -> String {
    let proto = match f["protocol"].as_u64() {
        Some(6) => "tcp".to_owned(),
        Some(17) => "udp".to_owned(),
        Some(p) => format!("proto {p}"),
        None => "?".into(),
    };
    format!(
        "{}:{} > {}:{} {proto}",
        f["src"].as_str().unwrap_or("?"),
        f["src_port"],
        f["dst"].as_str().unwrap_or("?"),
        f["dst_port"]
    )
}

/// A hop's latency figures: a quantile at the code's largest value is a lower bound ("≥"),
/// and the share of samples there is said.
fn hop_latency_text(l: &HopLatency) -> String {
    let at_least = |v: f64| {
        if l.at_top > 0.0 && l.top_us > 0.0 && v >= l.top_us * 0.999 {
            format!("≥ {v:.1}")
        } else {
            format!("{v:.1}")
        }
    };
    let mut t = format!(
        "p50 {} µs, p99 {} µs ({} samples",
        at_least(l.p50_us),
        at_least(l.p99_us),
        l.samples
    );
    if l.at_top > 0.0 {
        let _ = write!(t, ", {:.1}% at the code's top", l.at_top * 100.0);
    }
    t.push(')');
    t
}

/// A flow's row from the API's flow summary (`/api/flows`) and, when read, its detail
/// (`/api/flow`); `name` names a switch ID; `route` is the configured route, if known.
pub fn flow_row(
    summary: &Value,
    detail: Option<&Value>,
    name: &dyn Fn(u64) -> String,
    route: Vec<String>,
) -> FlowRow {
    let query = detail
        .and_then(|d| d["latency"].as_array())
        .and_then(|l| l.iter().find(|q| q["value"] == "hop_latency"));
    let top_us = query.and_then(|q| q["top"].as_f64()).unwrap_or(0.0) / 1e3;
    let latency = query
        .and_then(|q| q["hops"].as_array())
        .map(|hops| {
            hops.iter()
                .map(|h| {
                    let q = |want: f64| {
                        h["quantiles"].as_array().and_then(|qs| {
                            qs.iter()
                                .find(|x| x[0].as_f64() == Some(want))
                                .and_then(|x| x[1].as_f64())
                        })
                    };
                    HopLatency {
                        hop: h["hop"].as_u64().unwrap_or(0) as usize,
                        switch: h["switch"].as_u64().map(name),
                        samples: h["samples"].as_u64().unwrap_or(0),
                        p50_us: q(0.5).unwrap_or(0.0) / 1e3,
                        p99_us: q(0.99).unwrap_or(0.0) / 1e3,
                        max_us: q(1.0).unwrap_or(0.0) / 1e3,
                        at_top: h["at_top"].as_f64().unwrap_or(0.0),
                        top_us,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let counters = detail
        .and_then(|d| d["counters"].as_array())
        .map(|cs| {
            cs.iter()
                .map(|x| {
                    (
                        name(x["switch"].as_u64().unwrap_or(0)),
                        x["packets"].as_u64().unwrap_or(0),
                        x["bytes"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    FlowRow {
        flow: flow_label(&summary["flow"]),
        route,
        decoded: summary["path"]
            .as_array()
            .map(|p| p.iter().map(|id| name(id.as_u64().unwrap_or(0))).collect()),
        digests_to_decode: summary["path_digests"].as_u64(),
        packets: summary["packets"].as_u64().unwrap_or(0),
        bytes: summary["bytes"].as_u64().unwrap_or(0),
        latency,
        counters,
    }
}

/// An event's row from the API's event object (`/api/events`, event lines); times become
/// seconds since `t0` (Unix s); `link` is where it points, if known; `name` names a switch
/// of its path by ID.
pub fn event_row(
    e: &Value,
    t0: f64,
    link: Option<(String, String)>,
    name: impl Fn(u64) -> String,
) -> EventRow {
    let f = |k: &str| e[k].as_f64();
    EventRow {
        kind: e["kind"].as_str().unwrap_or("").to_owned(),
        series: e["series"].as_str().unwrap_or("").to_owned(),
        flow: flow_label(&e["flow"]),
        start_s: f("start").unwrap_or(0.0) - t0,
        end_s: f("end").unwrap_or(0.0) - t0,
        loss_rate: f("loss_rate"),
        peak_ms: f("peak_ms"),
        baseline_ms: f("baseline_ms"),
        labels: e["labels"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        link,
        also: Vec::new(),
        path: e["path"]
            .as_array()
            .map(|p| p.iter().map(|id| name(id.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default(),
    }
}

/// Seconds as shown to one decimal: those that would show as -0.0 as 0 (a time before
/// another by less than the decimal shown); others as they are.
fn no_negative_zero(s: f64) -> f64 {
    if s > -0.05 && s < 0.0 { 0.0 } else { s }
}

/// `s` cut to at most `chars` characters, its last an ellipsis where it was cut.
fn shortened(s: &str, chars: usize) -> String {
    if s.chars().count() > chars {
        s.chars().take(chars - 1).chain(['…']).collect()
    } else {
        s.to_owned()
    }
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The live page's refresh: every 3 s it fetches the page again and puts the new view in
/// place (the scroll position stays, the wide drawings' and tables' sideways scroll too, by
/// their boxes' ids);
/// while text is selected it waits (a selection would be lost); while the sink does not
/// answer (within 10 s) it keeps the last view under a line that stays at the top, and says
/// so in the tab's title (a reload showed the browser's error page instead, and stopped).
/// Without scripts, a meta refresh does the reloading.
const LIVE_SCRIPT: &str = "<script>(function(){var since=null;\
function say(){var b=document.getElementById('unreachable');if(!b){b=document.createElement('p');\
b.id='unreachable';b.className='bad';b.setAttribute('role','alert');document.body.insertBefore(b,document.body.firstChild);}\
var m='The sink has not answered since '+since.toLocaleTimeString()+': the last view it gave is shown.';\
if(b.textContent!==m)b.textContent=m;\
if(document.title.indexOf('(not answering) ')!==0)document.title='(not answering) '+document.title;}\
function tick(){var sel=window.getSelection&&window.getSelection().toString();if(sel){setTimeout(tick,3000);return;}\
var c=new AbortController();var t=setTimeout(function(){c.abort();},10000);\
fetch(location.href,{cache:'no-store',signal:c.signal}).then(function(r){if(!r.ok)throw new Error(r.status);return r.text();})\
.then(function(t){var d=new DOMParser().parseFromString(t,'text/html');\
var left={};Array.prototype.forEach.call(document.querySelectorAll('.wide[id]'),function(e){left[e.id]=e.scrollLeft;});\
document.title=d.title;document.body.innerHTML=d.body.innerHTML;since=null;\
Array.prototype.forEach.call(document.querySelectorAll('.wide[id]'),function(e){if(left[e.id])e.scrollLeft=left[e.id];});})\
.catch(function(){if(!since)since=new Date();say();})\
.finally(function(){clearTimeout(t);setTimeout(tick,3000);});}setTimeout(tick,3000);})();</script>";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:72em}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;\
text-align:left;font-size:.9em}th{background:#f3f3f3}.ok{color:#17712b}.bad{color:#b3261e}.na{color:#767676}\
.pending{color:#8a6d00}.mono{font-family:ui-monospace,monospace}svg text{font-family:system-ui,sans-serif}\
.legend{font-size:.85em;color:#555}.p50{color:#1f4e85}.p99{color:#6b93c2}.hosts{background:#dbe9f6;border:1px solid #345;border-radius:3px;padding:0 .3em}\
.wide{overflow-x:auto}#unreachable{position:sticky;top:0;background:#fff4f2;padding:.3em;border:1px solid #b3261e}";

/// The page as HTML.
pub fn render(r: &Page) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">{}<title>{}</title><style>{STYLE}</style></head><body>",
        if r.live {
            format!("<noscript><meta http-equiv=\"refresh\" content=\"3\"></noscript>{LIVE_SCRIPT}")
        } else {
            String::new()
        },
        esc(&r.title)
    );
    let _ = write!(
        h,
        "<h1 id=\"title\">{}</h1><p>{}</p>",
        esc(&r.title),
        esc(&r.subtitle)
    );
    if !r.checks.is_empty() {
        h.push_str("<h2>Checks</h2><ul id=\"checks\">");
        for c in &r.checks {
            let _ = write!(
                h,
                "<li class=\"{}\">{} {}: {}</li>",
                match c.outcome() {
                    "n/a" => "na",
                    "ok" => "ok",
                    _ => "bad",
                },
                match c.outcome() {
                    "n/a" => "&#8211;",
                    "ok" => "&#10003;",
                    _ => "&#10007;",
                },
                esc(&c.name),
                esc(&c.detail)
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("<h2>Topology</h2><div class=\"wide\" id=\"topology-box\">");
    h.push_str(&topology_svg(r));
    h.push_str("</div>");
    h.push_str("<p class=\"legend\">Red links lost packets (the count beside them); dashed links are impaired; the thicker a link, the more of it the traffic used. Switches with hosts are drawn <span class=\"hosts\">blue</span>. Each link's figures, per direction, in its tooltip and the table below.</p><div class=\"wide\" id=\"links-box\">");
    links_table(&mut h, r);
    h.push_str("</div>");
    h.push_str("<h2>Events</h2><div class=\"wide\" id=\"events-box\">");
    events(&mut h, r);
    h.push_str("</div>");
    let _ = write!(
        h,
        "<h2>Flows</h2><p>{} flows seen; {} paths decoded{}; median {} digests to decode a path.</p>",
        r.flows_total,
        r.flows_decoded,
        r.flows_matching
            .map_or(String::new(), |m| format!(", {m} equal to their routes")),
        r.median_digests_to_decode
            .map_or("-".into(), |d| d.to_string())
    );
    for m in &r.mismatches {
        let _ = write!(h, "<p class=\"bad mono\">{}</p>", esc(m));
    }
    for (i, f) in r.flows.iter().enumerate() {
        flow(&mut h, i, f);
    }
    totals(&mut h, r);
    h.push_str("</body></html>\n");
    h
}

/// A switch's box width in the drawing: wide enough for its name at 12 px (about 7 px a
/// character; a topology file's labels make long ones).
fn box_width(name: &str) -> f64 {
    (name.chars().count() as f64 * 7.0 + 12.0).max(84.0)
}

/// How far at most a link within a row bows above it, in pixels.
const BOW_MAX: f64 = 60.0;

fn topology_svg(r: &Page) -> String {
    // At least 900 x 360; wider where a layer's boxes would not fit side by side, taller
    // where there are more layers than 360 px hold (a large topology file's drawing
    // scrolls rather than piling its switches on one another).
    let mut layers: BTreeMap<u64, (usize, f64)> = BTreeMap::new();
    for (name, _, y) in &r.layout {
        let l = layers.entry(y.to_bits()).or_default();
        l.0 += 1;
        l.1 = l.1.max(box_width(name));
    }
    let pad = 50.0;
    // Room above the top row for the bows of its links.
    let top = pad + BOW_MAX;
    let widest = layers
        .values()
        .map(|&(n, bw)| n as f64 * (bw + 8.0))
        .fold(0.0, f64::max);
    let w = (widest + 2.0 * pad).max(900.0).ceil();
    let hgt = (layers.len().saturating_sub(1) as f64 * 40.0 + top + pad)
        .max(360.0)
        .ceil();
    let placed: std::collections::HashMap<&str, (f64, f64)> = r
        .layout
        .iter()
        .rev()
        .map(|(n, x, y)| (n.as_str(), (*x, *y)))
        .collect();
    let pos = |name: &str| {
        placed.get(name).map_or((w / 2.0, hgt / 2.0), |(x, y)| {
            (pad + x * (w - 2.0 * pad), top + y * (hgt - top - pad))
        })
    };
    let by_ends: std::collections::HashMap<(&str, &str), &LinkRow> = r
        .links
        .iter()
        .rev()
        .map(|l| ((l.from.as_str(), l.to.as_str()), l))
        .collect();
    // What the drawing shows, for those who cannot see it: the lossy links (the table
    // below has every link).
    let lossy: Vec<String> = r
        .links
        .iter()
        .filter(|l| l.lost_packets > 0)
        .map(|l| {
            format!(
                "{} → {} ({} lost)",
                esc(&l.from),
                esc(&l.to),
                l.lost_packets
            )
        })
        .collect();
    let mut s = format!(
        "<svg id=\"topology\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{hgt}\" viewBox=\"0 0 {w} {hgt}\" role=\"img\" aria-label=\"topology of {} switches; {}\">",
        r.switches.len(),
        if lossy.is_empty() {
            "no link lost packets".to_owned()
        } else {
            format!("links that lost packets: {}", lossy.join(", "))
        }
    );
    // Each link once, coloured by the worse of its two directions (either of which may be
    // all there is); their labels after the switches' boxes, which would hide them.
    let mut labels = String::new();
    for l in &r.links {
        let back = by_ends.get(&(l.to.as_str(), l.from.as_str())).copied();
        if l.from > l.to && back.is_some() {
            continue;
        }
        let lost = l.lost_packets.max(back.map_or(0, |b| b.lost_packets));
        let impaired = l.impaired.is_some() || back.is_some_and(|b| b.impaired.is_some());
        let util = l
            .utilisation
            .unwrap_or(0.0)
            .max(back.and_then(|b| b.utilisation).unwrap_or(0.0));
        let (x1, y1) = pos(&l.from);
        let (x2, y2) = pos(&l.to);
        let colour = if lost > 0 { "#b3261e" } else { "#6b7b8c" };
        // Each direction's loss and utilisation, where each is known, the larger loss first.
        let mut dirs: Vec<&LinkRow> = std::iter::once(l).chain(back).collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.lost_packets));
        let title = dirs
            .iter()
            .map(|d| {
                format!(
                    "{} → {}: {} lost{}",
                    esc(&d.from),
                    esc(&d.to),
                    d.lost_packets,
                    d.utilisation.map_or(String::new(), |u| format!(
                        ", utilisation {:.3}%",
                        u * 100.0
                    ))
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        // A link within a row bows above it, so that it does not run through the boxes
        // between its ends; its label sits at the top of the bow.
        let bow = if (y1 - y2).abs() < 0.5 {
            ((x2 - x1).abs() * 0.2).clamp(14.0, BOW_MAX)
        } else {
            0.0
        };
        let (mx, my) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0 - bow);
        let _ = write!(
            s,
            "<path class=\"link\" d=\"M {x1:.1} {y1:.1} Q {mx:.1} {:.1} {x2:.1} {y2:.1}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{:.1}\"{}><title>{title}</title></path>",
            my - bow,
            // A lossy link stands out on a large drawing.
            (1.5 + (util * 200.0).min(6.0)).max(if lost > 0 { 3.5 } else { 0.0 }),
            if impaired {
                " stroke-dasharray=\"8 4\""
            } else {
                ""
            },
        );
        if lost > 0 || impaired {
            let _ = write!(
                labels,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{colour}\">{}{} lost</text>",
                mx + 4.0,
                my,
                if impaired { "impaired: " } else { "" },
                lost
            );
        }
    }
    for sw in &r.switches {
        let (x, y) = pos(&sw.name);
        let fill = if sw.hosts { "#dbe9f6" } else { "#eeeeee" };
        let bw = box_width(&sw.name);
        let _ = write!(
            s,
            "<g class=\"switch\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bw:.0}\" height=\"26\" rx=\"5\" fill=\"{fill}\" stroke=\"#345\"/><text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text></g>",
            x - bw / 2.0,
            y - 13.0,
            y + 4.0,
            esc(&sw.name)
        );
    }
    s.push_str(&labels);
    s.push_str("</svg>");
    s
}

fn links_table(h: &mut String, r: &Page) {
    h.push_str("<table id=\"links\"><tr><th>link</th><th>lost packets</th><th>flows</th><th>utilisation</th><th>impairment</th></tr>");
    // Links that lost packets first (most first), then impaired ones, then the rest in
    // their order: on a large topology the lossy link was a row among hundreds.
    let mut rows: Vec<&LinkRow> = r.links.iter().collect();
    rows.sort_by_key(|l| {
        (
            std::cmp::Reverse(l.lost_packets.max(0)),
            l.impaired.is_none(),
        )
    });
    for l in rows {
        if l.flows == 0 && l.lost_packets == 0 && l.impaired.is_none() {
            continue;
        }
        let _ = write!(
            h,
            "<tr><td>{} &rarr; {}</td><td class=\"{}\"{}>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&l.from),
            esc(&l.to),
            // Below no loss: more counted after the link than before it (counts missing at
            // its start), neither loss nor none.
            match l.lost_packets {
                n if n > 0 => "bad",
                0 => "ok",
                _ => "pending",
            },
            if l.lost_packets < 0 {
                " title=\"counted after the link beyond those before it: counts missing at its start, not a gain\""
            } else {
                ""
            },
            l.lost_packets,
            l.flows,
            l.utilisation
                .map_or("-".into(), |u| format!("{:.3}%", u * 100.0)),
            l.impaired.as_ref().map_or(String::new(), |w| format!(
                "{} (dropped {})",
                esc(w),
                l.impair_dropped
                    .map_or("? (its switch wrote no summary)".to_owned(), |d| d
                        .to_string())
            ))
        );
    }
    h.push_str("</table>");
}

fn events(h: &mut String, r: &Page) {
    if r.events.is_empty() {
        h.push_str("<p>No events.</p>");
        return;
    }
    // A timeline: one row per event over the traffic's duration.
    let (w, row, left) = (900.0, 16.0, 260.0);
    const TIMELINE_EVENTS: usize = 40;
    let shown = r.events.iter().take(TIMELINE_EVENTS).collect::<Vec<_>>();
    if r.events.len() > TIMELINE_EVENTS {
        let _ = write!(
            h,
            "<p>The first {TIMELINE_EVENTS} of {} events on the timeline; all of them in the table below it.</p>",
            r.events.len()
        );
    }
    let height = 24.0 + row * shown.len() as f64;
    let span = r.span_s.max(1.0);
    let x = |t: f64| left + (t.clamp(0.0, span) / span) * (w - left - 10.0);
    let _ = write!(
        h,
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"timeline of the events in the table below\">"
    );
    let mut t = 0.0;
    while t <= span {
        let _ = write!(
            h,
            "<line x1=\"{0:.1}\" y1=\"12\" x2=\"{0:.1}\" y2=\"{height}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"10\" font-size=\"9\" text-anchor=\"middle\">{t:.0} s</text>",
            x(t)
        );
        t += (span / 10.0).max(1.0).round();
    }
    for (i, e) in shown.iter().enumerate() {
        let y = 18.0 + row * i as f64;
        let colour = match e.kind.as_str() {
            "delay" => "#c77700",
            "loss" => "#b3261e",
            _ => "#5b4bb7",
        };
        // Cut to end before the bars (about 45 characters of 10 px text in 256 px), the
        // whole of it in the label's title.
        let label = format!("{} {}", e.kind, e.place());
        let _ = write!(
            h,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"10\"><title>{}</title>{}</text><rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}</title></rect>",
            y + 10.0,
            esc(&label),
            esc(&shortened(&label, 44)),
            x(e.start_s),
            (x(e.end_s) - x(e.start_s)).max(2.0),
            row - 4.0,
            esc(&e.flow)
        );
    }
    h.push_str("</svg>");
    h.push_str("<table id=\"events\"><tr><th>kind</th><th>start (s)</th><th>end (s)</th><th>link</th><th>flow (series)</th><th>figures</th><th>labels</th></tr>");
    for e in &r.events {
        let mut figures = Vec::new();
        if let Some(l) = e.loss_rate.filter(|l| *l > 0.0) {
            figures.push(format!("loss {:.1}%", l * 100.0));
        }
        if let (Some(b), Some(p)) = (e.baseline_ms, e.peak_ms)
            && e.kind == "delay"
        {
            figures.push(format!("{b:.2} ms &rarr; {p:.2} ms"));
        }
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td class=\"mono\">{} ({})</td><td>{}</td><td>{}</td></tr>",
            esc(&e.kind),
            // Before the traffic's start by a rounding: 0 (not -0.0).
            no_negative_zero(e.start_s),
            no_negative_zero(e.end_s),
            esc(&e.place()),
            esc(&e.flow),
            esc(&e.series),
            figures.join(", "),
            esc(&e.labels.join(", "))
        );
    }
    h.push_str("</table>");
}

fn flow(h: &mut String, i: usize, f: &FlowRow) {
    let known = !f.route.is_empty();
    // Not decoded (yet) is neither right nor wrong, nor is a path without a route to check
    // it against (the live page's); right and wrong are marked as well as coloured.
    let (class, mark) = match &f.decoded {
        None => ("pending", ""),
        Some(_) if !known => ("unchecked", ""),
        Some(d) if *d == f.route => ("ok", "&#10003; "),
        Some(_) => ("bad", "&#10007; not the route: "),
    };
    let _ = write!(
        h,
        "<h3 class=\"mono\">{}</h3><table class=\"flow\" id=\"flow-{i}\">{}<tr><th>decoded path</th><td class=\"decoded {}\">{}{}</td></tr><tr><th>digests to decode</th><td>{}</td></tr><tr><th>packets / bytes</th><td>{} / {}</td></tr></table>",
        esc(&f.flow),
        if known {
            format!(
                "<tr><th>route</th><td class=\"route\">{}</td></tr>",
                esc(&f.route.join(" → "))
            )
        } else {
            String::new()
        },
        class,
        mark,
        f.decoded
            .as_ref()
            .map_or("not decoded".into(), |d| esc(&d.join(" → "))),
        f.digests_to_decode.map_or("-".into(), |d| d.to_string()),
        f.packets,
        f.bytes
    );
    if !f.latency.is_empty() {
        // Per-hop latency in the switch (rx to tx): median and p99 bars.
        let max = f.latency.iter().map(|l| l.p99_us).fold(1e-9, f64::max);
        let row = 18.0;
        // Bars from x = 200, at most 280 wide; the text after each at about 6 px a
        // character: the drawing as wide as its longest line.
        let scale = |v: f64| (v / max) * 280.0;
        let w = f
            .latency
            .iter()
            .map(|l| 216.0 + scale(l.p99_us) + 6.0 * hop_latency_text(l).chars().count() as f64)
            .fold(760.0, f64::max)
            .ceil();
        let height = row * f.latency.len() as f64 + 6.0;
        let _ = write!(
            h,
            "<p class=\"legend\">Latency in each switch: p50 <span class=\"p50\">&#9632;</span>, p99 <span class=\"p99\">&#9632;</span></p><div class=\"wide\" id=\"latency-{i}\"><svg class=\"latency\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"latency in each switch of the flow's path, p50 and p99, as the text beside each bar says\">"
        );
        for (j, l) in f.latency.iter().enumerate() {
            let y = 3.0 + row * j as f64;
            // The label before the bars is cut to fit.
            let label = shortened(
                &format!("hop {} {}", l.hop, l.switch.as_deref().unwrap_or("?")),
                32,
            );
            let _ = write!(
                h,
                "<text x=\"2\" y=\"{:.1}\" font-size=\"10\">{}</text><rect x=\"200\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#6b93c2\"/><rect x=\"200\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#1f4e85\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
                y + 11.0,
                esc(&label),
                scale(l.p99_us).max(1.0),
                row - 5.0,
                scale(l.p50_us).max(1.0),
                row - 5.0,
                206.0 + scale(l.p99_us),
                y + 11.0,
                esc(&hop_latency_text(l))
            );
        }
        h.push_str("</svg></div>");
    }
    if !f.counters.is_empty() {
        h.push_str("<table><tr><th>switch</th><th>packets</th><th>bytes</th></tr>");
        for (s, p, b) in &f.counters {
            let _ = write!(h, "<tr><td>{}</td><td>{p}</td><td>{b}</td></tr>", esc(s));
        }
        h.push_str("</table>");
    }
}

fn totals(h: &mut String, r: &Page) {
    h.push_str("<h2>Totals</h2>");
    if !r.hosts.is_empty() {
        h.push_str("<table id=\"hosts\"><tr><th>hosts at</th><th>sent</th><th>received</th><th>lost (flow tags)</th><th>late</th><th>probes sent</th><th>probes received</th><th>probes lost</th></tr>");
    }
    for x in &r.hosts {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.name),
            x.sent,
            x.received,
            x.lost,
            if x.too_old > 0 {
                format!("{} (and {} more than 64 behind)", x.late, x.too_old)
            } else {
                x.late.to_string()
            },
            x.probes_sent,
            x.probes_received,
            x.probes_lost
        );
    }
    if !r.hosts.is_empty() {
        h.push_str("</table>");
    }
    h.push_str("<table id=\"switches\"><tr><th>switch</th><th>rx</th><th>tx</th><th>drops</th><th>digests exported / at sink</th><th>flowsets exported / at sink</th></tr>");
    for s in &r.switches {
        let drops: Vec<String> = s
            .drops
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .chain((s.tx_full_drops > 0).then(|| format!("tx_full {}", s.tx_full_drops)))
            .chain((s.dropped_at_sink > 0).then(|| format!("at the sink {}", s.dropped_at_sink)))
            .collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td></tr>",
            esc(&s.name),
            s.rx_packets,
            s.tx_packets,
            esc(&drops.join(", ")),
            s.digests_exported,
            s.digests_received,
            s.flowsets_exported,
            s.flowsets_received
        );
    }
    h.push_str("</table>");
    let _ = write!(h, "<p>Epochs: {}</p>", esc(&epochs_line(&r.epochs)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::topology::Topology;

    fn row(labels: &[&str], link: Option<(&str, &str)>) -> EventRow {
        let e = serde_json::json!({
            "kind": "delay",
            "series": "probes",
            "start": 10.0,
            "end": 12.5,
            "labels": labels,
        });
        event_row(
            &e,
            10.0,
            link.map(|(a, b)| (a.to_owned(), b.to_owned())),
            |id| id.to_string(),
        )
    }

    /// A hop latency at the code's largest value reads as a lower bound, with the share of
    /// samples there (it read as an exact 66.1 µs).
    #[test]
    fn a_latency_at_the_codes_top_reads_as_at_least() {
        let detail = serde_json::json!({"latency": [{"value": "hop_latency", "top": 66_100.0,
            "hops": [
                {"hop": 1, "switch": 1, "samples": 12, "at_top": 0.25,
                 "quantiles": [[0.5, 1500.0], [0.99, 66_100.0], [1.0, 66_100.0]]},
                {"hop": 2, "switch": 2, "samples": 12, "at_top": 0.0,
                 "quantiles": [[0.5, 1500.0], [0.99, 2500.0], [1.0, 2600.0]]}]}]});
        let summary = serde_json::json!({"key": {}, "packets": 1, "bytes": 1});
        let name = |s: u64| format!("s{s}");
        let f = flow_row(&summary, Some(&detail), &name, Vec::new());
        let text: Vec<String> = f.latency.iter().map(hop_latency_text).collect();
        assert_eq!(
            text,
            [
                "p50 1.5 µs, p99 ≥ 66.1 µs (12 samples, 25.0% at the code's top)",
                "p50 1.5 µs, p99 2.5 µs (12 samples)"
            ]
        );
    }

    /// A lossy link's label is drawn over the switches' boxes (they hid it on a large
    /// drawing), and its title gives each direction's loss (the ends were put in name order).
    #[test]
    fn a_lossy_links_label_is_drawn_over_the_boxes_with_each_directions_loss() {
        let link = |from: &str, to: &str, lost| LinkRow {
            from: from.into(),
            to: to.into(),
            lost_packets: lost,
            flows: 1,
            utilisation: None,
            impaired: None,
            impair_dropped: None,
        };
        let switch = |name: &str| SwitchRow {
            name: name.into(),
            ..SwitchRow::default()
        };
        let svg = topology_svg(&Page {
            layout: vec![("b".into(), 0.2, 0.5), ("a".into(), 0.8, 0.5)],
            switches: vec![switch("a"), switch("b")],
            links: vec![
                link("b", "a", 53),
                LinkRow {
                    utilisation: Some(0.5),
                    ..link("a", "b", 0)
                },
            ],
            ..Page::default()
        });
        // Said to those who cannot see the drawing.
        assert!(
            svg.contains(
                "aria-label=\"topology of 2 switches; links that lost packets: b → a (53 lost)\""
            ),
            "{svg}"
        );
        let label = svg.find(">53 lost</text>").expect("the label");
        assert!(svg.rfind("class=\"switch\"").unwrap() < label, "{svg}");
        assert!(
            svg.contains("<title>b → a: 53 lost; a → b: 0 lost, utilisation 50.000%</title>"),
            "{svg}"
        );
    }

    /// A path not decoded yet is shown as pending, not as right (it was green); a decoded
    /// one is right when it is the route, or when no route is known.
    #[test]
    fn a_path_not_decoded_is_neither_right_nor_wrong() {
        let row = |route: &[&str], decoded: Option<&[&str]>| FlowRow {
            flow: "f".into(),
            route: route.iter().map(|s| s.to_string()).collect(),
            decoded: decoded.map(|d| d.iter().map(|s| s.to_string()).collect()),
            digests_to_decode: None,
            packets: 1,
            bytes: 1,
            latency: Vec::new(),
            counters: Vec::new(),
        };
        let class = |f: FlowRow| {
            let mut h = String::new();
            flow(&mut h, 0, &f);
            let at = h.find("class=\"decoded ").unwrap() + "class=\"decoded ".len();
            h[at..at + h[at..].find('"').unwrap()].to_owned()
        };
        assert_eq!(class(row(&[], None)), "pending");
        assert_eq!(class(row(&["a", "b"], None)), "pending");
        assert_eq!(class(row(&[], Some(&["a", "b"]))), "unchecked");
        assert_eq!(class(row(&["a", "b"], Some(&["a", "b"]))), "ok");
        assert_eq!(class(row(&["a", "b"], Some(&["a", "c"]))), "bad");
    }

    /// The drawings hold their text: a flow's latency drawing is as wide as its longest
    /// line (the lower bound's warning was cut off at 760 px), a timeline label is cut before
    /// the bars with the whole of it in its title, and a start a rounding before the traffic
    /// reads 0.0, not -0.0.
    #[test]
    fn the_drawings_hold_their_text() {
        let hop = |hop, p99_us| HopLatency {
            hop,
            switch: Some(format!("s{hop}")),
            samples: 88,
            p50_us: 0.7,
            p99_us,
            max_us: p99_us,
            at_top: 0.011,
            top_us: 66.1,
        };
        let f = FlowRow {
            flow: "f".into(),
            route: Vec::new(),
            decoded: None,
            digests_to_decode: None,
            packets: 1,
            bytes: 1,
            latency: vec![hop(1, 66.1), hop(2, 3.0)],
            counters: Vec::new(),
        };
        let mut h = String::new();
        flow(&mut h, 0, &f);
        let width: f64 = h
            .split("<svg class=\"latency\"")
            .nth(1)
            .and_then(|s| s.split("width=\"").nth(1))
            .and_then(|s| s.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        let longest =
            200.0 + 280.0 + 6.0 + 6.0 * hop_latency_text(&hop(1, 66.1)).chars().count() as f64;
        assert!(width >= longest, "{width} < {longest}: {h}");
        assert!(h.contains("at the code's top)</text>"), "{h}");

        let place: String = "a-switch-with-a-long-name -> another-long-name".into();
        let event = EventRow {
            kind: "loss".into(),
            series: "probes".into(),
            flow: "f".into(),
            start_s: -0.04,
            end_s: 2.0,
            loss_rate: Some(0.1),
            peak_ms: None,
            baseline_ms: None,
            labels: Vec::new(),
            link: Some((place.clone(), "x".into())),
            also: Vec::new(),
            path: Vec::new(),
        };
        let label = format!("loss {}", event.place());
        let mut h = String::new();
        events(
            &mut h,
            &Page {
                events: vec![event],
                span_s: 10.0,
                ..Page::default()
            },
        );
        assert!(
            h.contains(&format!("<title>{}</title>", esc(&label))),
            "{h}"
        );
        assert!(
            h.contains(&format!(">{}</text>", esc(&shortened(&label, 44)))),
            "{h}"
        );
        assert!(shortened(&label, 44).ends_with('…'));
        assert!(h.contains("<td>0.0</td><td>2.0</td>"), "{h}");
        assert!(!h.contains("-0.0"), "{h}");
        // A time well before the traffic's start stays as it is.
        assert_eq!(no_negative_zero(-3.0), -3.0);
        assert_eq!(no_negative_zero(-0.05), -0.05);
    }

    #[test]
    fn epoch_counters_read_as_words() {
        let e = serde_json::json!({"epochs": 2713, "network": 0, "incomplete": 16,
            "by_deadline": 26, "late_flowsets": 5, "flowsets": 13312});
        assert_eq!(
            epochs_line(&e),
            "2713 decoded (0 network-wide, 16 incomplete, 26 closed at their deadline); \
             5 flowsets came after their epoch, decoded on their own"
        );
        let one_late = serde_json::json!({"epochs": 3, "late_flowsets": 1});
        assert!(
            epochs_line(&one_late)
                .ends_with("; 1 flowset came after its epoch, decoded on its own"),
            "{}",
            epochs_line(&one_late)
        );
        let none_late = serde_json::json!({"epochs": 3, "network": 3});
        assert_eq!(
            epochs_line(&none_late),
            "3 decoded (3 network-wide, 0 incomplete, 0 closed at their deadline)"
        );
    }

    #[test]
    fn an_event_put_down_to_end_host_noise_alone_points_at_the_end_hosts() {
        let noise = row(&["end_host_noise"], Some(("leaf3", "spine2")));
        assert!(noise.end_host_noise());
        assert_eq!(noise.place(), "end hosts");
        assert_eq!((noise.start_s, noise.end_s), (0.0, 2.5));
        // With another diagnosis beside it, or none, it is the link's.
        let mixed = row(&["end_host_noise", "congestion_bursty"], Some(("a", "b")));
        assert!(!mixed.end_host_noise());
        assert_eq!(mixed.place(), "a -> b");
        let bare = row(&[], None);
        assert!(!bare.end_host_noise());
        assert_eq!(bare.place(), "?");
        // No link known, but the flow's path: somewhere on it.
        let on_path = bare.with_path(vec!["leaf1".into(), "spine2".into(), "leaf3".into()]);
        assert_eq!(on_path.place(), "on leaf1 -> spine2 -> leaf3");
        let linked = row(&[], Some(("spine2", "leaf3"))).with_path(on_path.path.clone());
        assert_eq!(linked.place(), "spine2 -> leaf3");
        // The event's own path, its switches named.
        let e = serde_json::json!({"kind": "loss", "path": [1, 2, 3]});
        let named = event_row(&e, 0.0, None, |id| format!("s{id}"));
        assert_eq!(named.place(), "on s1 -> s2 -> s3");
    }

    #[test]
    fn the_drawing_names_a_switch_with_its_label_when_the_topology_file_gives_one() {
        let t = Topology::parse_gml(
            "t",
            "graph [ node [ id 0 label \"Orangeburg\" ] node [ id 1 ] node [ id 2 label \"2\" ] \
             edge [ source 0 target 1 ] edge [ source 1 target 2 ] ]",
        )
        .unwrap();
        let names = |v: Vec<(String, f64, f64)>| -> Vec<String> {
            v.into_iter().map(|(n, _, _)| n).collect()
        };
        let shown = names(layout(&t, &[0, 2], |n| t.display_name(n)));
        assert_eq!(shown, ["0 (Orangeburg)", "1", "2"]);
        let keys = names(layout(&t, &[0, 2], |n| t.names[n as usize].clone()));
        assert_eq!(keys, ["0", "1", "2"]);
    }

    /// A small topology keeps the drawing's 900 x 360; a large one (UsCarrier, with its
    /// place names) gets a drawing as wide as its widest layer's boxes side by side and as
    /// tall as its layers, so that no two boxes of a layer overlap.
    #[test]
    fn the_drawing_grows_with_the_topology() {
        let size = |layout: Vec<(String, f64, f64)>| -> (f64, f64) {
            let svg = topology_svg(&Page {
                layout,
                ..Page::default()
            });
            let attr = |a: &str| -> f64 {
                let from = svg.find(&format!(" {a}=\"")).unwrap() + a.len() + 3;
                svg[from..from + svg[from..].find('"').unwrap()]
                    .parse()
                    .unwrap()
            };
            (attr("width"), attr("height"))
        };
        let line = Topology::line(3);
        assert_eq!(
            size(layout(&line, &[0, 2], |n| line.names[n as usize].clone())),
            (900.0, 360.0)
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/topologies");
        let us = Topology::load_file(&dir.join("UsCarrier.graphml")).unwrap();
        let hosts = [0, 40, 55, 147];
        let drawn = layout(&us, &hosts, |n| us.display_name(n));
        let (w, h) = size(drawn.clone());
        let mut by_layer: BTreeMap<u64, Vec<&(String, f64, f64)>> = BTreeMap::new();
        for d in &drawn {
            by_layer.entry(d.2.to_bits()).or_default().push(d);
        }
        assert!(
            h >= (by_layer.len() - 1) as f64 * 40.0,
            "{h} for {} layers",
            by_layer.len()
        );
        for row in by_layer.values() {
            // Neighbours in a layer are a slot apart: each box fits in its slot.
            let slot = (w - 100.0) / row.len() as f64;
            assert!(
                row.iter().all(|(name, _, _)| box_width(name) <= slot),
                "{w} wide, {} in a layer",
                row.len()
            );
        }
    }
}
