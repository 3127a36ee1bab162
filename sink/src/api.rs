//! The HTTP/JSON API (`docs/api.md`) and `/metrics`. Handlers read the sink's state under
//! short locks; nothing here changes it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;

use axum::Router;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use telemetry::flowradar::FlowKey;
use telemetry::pint::path_decoder::Space;
use telemetry::pint::plan::QueryKind;
use telemetry::pint::recording::path_context;
use telemetry::wire::prefix::Ipv4Prefix;

use crate::app::Shared;
use crate::detect::Kind;
use crate::epochs::EpochReport;
use crate::flows::{FlowId, FlowState, QUANTILES, decoded_path};
use crate::metrics::SinkMetrics;
use crate::registry::SwitchInfo;

struct ApiState {
    shared: Arc<Shared>,
    metrics: SinkMetrics,
    /// Held while work that reads every flow table runs off the server's thread (the live
    /// page, the largest flows): one at a time, however many clients; a client that leaves
    /// while waiting for it leaves no work behind.
    heavy: Arc<tokio::sync::Semaphore>,
    /// The same for scrapes, which then never wait behind the API's heavy requests (a
    /// scrape that times out is a gap in every series).
    scrape: Arc<tokio::sync::Semaphore>,
}

type St = State<Arc<ApiState>>;

/// The HTTP server's thread and what stops it.
pub type HttpThread = (JoinHandle<()>, tokio::sync::oneshot::Sender<()>);

/// Serves the API on `listener` from a thread of its own; returns its address, the thread
/// and what stops it.
pub fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
) -> anyhow::Result<(SocketAddr, HttpThread)> {
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let state = Arc::new(ApiState {
        shared,
        metrics: SinkMetrics::new(),
        heavy: Arc::new(tokio::sync::Semaphore::new(1)),
        scrape: Arc::new(tokio::sync::Semaphore::new(1)),
    });
    let t = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the HTTP server");
            rt.block_on(async move {
                let l = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("http: {e}");
                        return;
                    }
                };
                let shutdown = async {
                    let _ = rx.await;
                };
                let refused = Arc::clone(&state.shared.http_refused);
                crate::http::serve(
                    l,
                    router(state),
                    shutdown,
                    crate::http::Limits::default(),
                    refused,
                )
                .await;
            });
            // Work already handed to a blocking thread is not waited for long at the stop.
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        })?;
    Ok((addr, (t, tx)))
}

fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/switches", get(switches))
        .route("/api/plans", get(plans))
        .route("/api/flows", get(flows))
        .route("/api/flow", get(flow))
        .route("/api/links", get(links))
        .route("/api/epochs", get(epochs))
        .route("/api/events", get(events))
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": format!("no such path: {}", uri.path()) })),
    )
        .into_response()
}

async fn method_not_allowed(method: axum::http::Method) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(serde_json::json!({ "error": format!("{method} is not served here: GET and HEAD only") })),
    )
        .into_response()
}

fn bad_request(msg: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": msg })),
    )
        .into_response()
}

/// A query string that, when it does not parse, answers 400 in the API's JSON error form
/// (`{"error": ...}`) like every other bad request, not as plain text.
struct Params<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(q)) => Ok(Params(q)),
            Err(e) => Err(bad_request(e.body_text())),
        }
    }
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    uptime_seconds: f64,
    switches_connected: usize,
    switches_known: usize,
    flows: usize,
    epochs: u64,
    /// Events found so far.
    events: u64,
    backlog: crate::app::Backlog,
}

async fn health(State(s): St) -> Json<Health> {
    let sw = s.shared.registry.switches();
    Json(Health {
        status: "ok",
        uptime_seconds: s.shared.started.elapsed().as_secs_f64(),
        switches_connected: sw
            .iter()
            .filter(|e| e.counters.connected.load(Relaxed))
            .count(),
        switches_known: sw.len(),
        flows: s
            .shared
            .shards
            .iter()
            .map(|x| x.table.lock().expect("flow table lock").len())
            .sum(),
        epochs: s.shared.epochs.counters.epochs.load(Relaxed),
        events: s.shared.events.total(),
        backlog: s.shared.backlog(),
    })
}

#[derive(Serialize)]
struct SwitchView {
    #[serde(flatten)]
    info: SwitchInfo,
    connected: bool,
    connections: u64,
    frames: u64,
    bytes: u64,
    rejected: u64,
    reject_reasons: std::collections::BTreeMap<&'static str, u64>,
    sequence_gaps: u64,
    digests: u64,
    digests_dropped: u64,
    digests_unknown_plan: u64,
    digests_unknown_flow: u64,
    flowsets: u64,
    flowsets_dropped: u64,
    probes: u64,
    probes_dropped: u64,
    /// How long after its epochs' end the last flowset arrived, ms ([`crate::registry::FlowsetLag`]).
    flowset_lag_ms: Option<i64>,
}

async fn switches(State(s): St) -> Json<Vec<SwitchView>> {
    Json(
        s.shared
            .registry
            .switches()
            .iter()
            .map(|e| {
                let c = &e.counters;
                SwitchView {
                    info: e.info.lock().expect("switch lock").clone(),
                    connected: c.connected.load(Relaxed),
                    connections: c.connections.load(Relaxed),
                    frames: c.frames.load(Relaxed),
                    bytes: c.bytes.load(Relaxed),
                    rejected: c.rejected.load(Relaxed),
                    reject_reasons: e.reject_reasons.lock().expect("switch lock").clone(),
                    sequence_gaps: c.sequence_gaps.load(Relaxed),
                    digests: c.digests.load(Relaxed),
                    digests_dropped: c.digests_dropped.load(Relaxed),
                    digests_unknown_plan: c.digests_unknown_plan.load(Relaxed),
                    digests_unknown_flow: c.digests_unknown_flow.load(Relaxed),
                    flowsets: c.flowsets.load(Relaxed),
                    flowsets_dropped: c.flowsets_dropped.load(Relaxed),
                    probes: c.probes.load(Relaxed),
                    probes_dropped: c.probes_dropped.load(Relaxed),
                    flowset_lag_ms: c.flowset_lag.get(),
                }
            })
            .collect(),
    )
}

#[derive(Serialize)]
struct PlanView {
    version: String,
    description: String,
    text: String,
}

async fn plans(State(s): St) -> Json<Vec<PlanView>> {
    Json(
        s.shared
            .registry
            .plans()
            .iter()
            .map(|p| PlanView {
                version: format!("{:08x}", p.version),
                description: p.plan.describe(),
                text: p.text.clone(),
            })
            .collect(),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowsQuery {
    /// How many (default 20, at most 10000).
    top: Option<usize>,
    /// `packets`, `bytes` (default) or `digests`.
    by: Option<String>,
    /// `A.B.C.D/LEN`: flows from or to it.
    prefix: Option<String>,
}

#[derive(Serialize, Clone)]
struct FlowSummary {
    flow: FlowId,
    /// Largest count at any switch (the packets that entered the network).
    packets: u64,
    /// As above, bytes.
    bytes: u64,
    digests: u64,
    path: Option<Vec<u32>>,
    /// Digests it took to decode the path.
    path_digests: Option<u64>,
    path_decoded_hops: usize,
    hops: Option<usize>,
    first_ms: u64,
    last_ms: u64,
}

/// A flow's packets: the most any switch counted.
fn flow_packets(f: &FlowState) -> u64 {
    f.counts.iter().map(|c| c.packets).max().unwrap_or(0)
}

/// A flow's bytes: the most any switch counted.
fn flow_bytes(f: &FlowState) -> u64 {
    f.counts.iter().map(|c| c.bytes).max().unwrap_or(0)
}

/// The `n` flows of `flows` with the largest `key`, largest first: ranked by the key alone,
/// so that the lock a caller holds is held for a pass and a partial sort, not for every
/// flow's summary.
fn largest<'a>(
    flows: impl Iterator<Item = &'a FlowState>,
    key: fn(&FlowState) -> u64,
    n: usize,
) -> Vec<(u64, &'a FlowState)> {
    if n == 0 {
        return Vec::new();
    }
    let mut v: Vec<(u64, &FlowState)> = flows.map(|f| (key(f), f)).collect();
    if v.len() > n {
        v.select_nth_unstable_by_key(n - 1, |(k, _)| std::cmp::Reverse(*k));
        v.truncate(n);
    }
    v.sort_unstable_by_key(|(k, _)| std::cmp::Reverse(*k));
    v
}

fn summary(f: &FlowState, space: Space<'_>) -> FlowSummary {
    let packets = flow_packets(f);
    let bytes = flow_bytes(f);
    let (decoded, hops) = match &f.pint {
        Some(p) => (
            p.plan
                .path_query
                .and_then(|q| p.record.path(q))
                .map_or(0, |s| s.decoded_hops()),
            Some(p.record.k()),
        ),
        None => (0, None),
    };
    FlowSummary {
        flow: f.key.into(),
        packets,
        bytes,
        digests: f.digests,
        path: decoded_path(f, space),
        path_digests: f.decode_digests,
        path_decoded_hops: decoded,
        hops,
        first_ms: f.first_ms,
        last_ms: f.last_ms,
    }
}

fn with_space<T>(shared: &Shared, f: impl FnOnce(Space<'_>) -> T) -> T {
    match &shared.topology {
        Some(t) => f(Space::Topology(t)),
        None => {
            let ids = shared.registry.ids();
            f(Space::Ids(&ids))
        }
    }
}

async fn flows(State(s): St, Params(q): Params<FlowsQuery>) -> Response {
    let top = q.top.unwrap_or(20).min(10_000);
    let by = q.by.as_deref().unwrap_or("bytes");
    let key: fn(&FlowState) -> u64 = match by {
        "bytes" => flow_bytes,
        "packets" => flow_packets,
        "digests" => |f| f.digests,
        other => {
            return bad_request(format!(
                "by: `{other}` is not one of packets, bytes, digests"
            ));
        }
    };
    let prefix = match q
        .prefix
        .as_deref()
        .map(str::parse::<Ipv4Prefix>)
        .transpose()
    {
        Ok(p) => p,
        Err(e) => return bad_request(format!("prefix: {e}")),
    };
    let found = off_thread(&Arc::clone(&s.heavy), move || {
        let mut all: Vec<(u64, FlowSummary)> = Vec::new();
        with_space(&s.shared, |space| {
            for shard in &s.shared.shards {
                let t = shard.table.lock().expect("flow table lock");
                let wanted = t.iter().filter(|f| {
                    prefix.is_none_or(|p| p.contains(f.key.src) || p.contains(f.key.dst))
                });
                for (k, f) in largest(wanted, key, top) {
                    all.push((k, summary(f, space)));
                }
            }
        });
        all.sort_by_key(|(k, _)| std::cmp::Reverse(*k));
        all.truncate(top);
        all.into_iter().map(|(_, f)| f).collect::<Vec<_>>()
    })
    .await;
    match found {
        Ok(flows) => Json(flows).into_response(),
        Err(r) => r,
    }
}

/// Runs `f` off the server's one thread, holding `slot`: work that reads every flow table
/// (the largest flows, the live page, a scrape) would hold every other request,
/// Prometheus scrapes and the API, while it runs.
async fn off_thread<T: Send + 'static>(
    slot: &Arc<tokio::sync::Semaphore>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    let internal = |e: String| (StatusCode::INTERNAL_SERVER_ERROR, e).into_response();
    let permit = Arc::clone(slot)
        .acquire_owned()
        .await
        .map_err(|e| internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || {
        let _one = permit;
        f()
    })
    .await
    .map_err(|e| internal(e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowQuery {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    // Also by the names `/api/flows` gives the key's fields.
    #[serde(alias = "src_port")]
    sport: u16,
    #[serde(alias = "dst_port")]
    dport: u16,
    #[serde(alias = "protocol")]
    proto: u8,
}

#[derive(Serialize)]
struct HopView {
    hop: usize,
    switch: Option<u32>,
    /// Candidates left (None: nothing known yet).
    candidates: Option<usize>,
}

#[derive(Serialize)]
struct LatencyHop {
    hop: usize,
    switch: Option<u32>,
    samples: u64,
    /// (quantile, value in the query's unit).
    quantiles: Vec<(f64, f64)>,
    /// Share of the samples at the code's largest value (`top`): theirs were that or more.
    at_top: f64,
}

/// A static query other than the path's (a port per hop): each hop's value once decoded.
#[derive(Serialize)]
struct StaticView {
    query: String,
    value: telemetry::pint::query::ValueKind,
    hops: Vec<Option<u32>>,
}

#[derive(Serialize)]
struct LatencyView {
    query: String,
    /// What the query measures (`hop_latency` in ns, `queue_occupancy` in bytes,
    /// `link_utilization`).
    value: telemetry::pint::query::ValueKind,
    kll_k: u16,
    /// The sketches' normalized rank error (99% confidence): a quantile answered is the true
    /// quantile of a rank within this much of the one asked (plus the compression's own
    /// error and the sampling's).
    rank_error: f64,
    budget_bytes: u64,
    /// The largest value the query's code carries: larger ones are carried as it, so a
    /// quantile equal to it means at least that.
    top: f64,
    hops: Vec<LatencyHop>,
}

#[derive(Serialize)]
struct AggregateView {
    query: String,
    count: u64,
    last: f64,
    mean: f64,
    max: f64,
    /// Share of the packets whose value was at the code's largest: theirs were that or
    /// more (the mean and the largest are then lower bounds).
    at_top: f64,
    /// (from, to, packets): values in [from, to).
    histogram: Vec<(f64, f64, u32)>,
}

#[derive(Serialize)]
struct CounterView {
    switch: u32,
    packets: u64,
    bytes: u64,
    epochs: u32,
    /// Of those, epochs whose flowsets at the switch did not decode whole.
    unsure_epochs: u32,
    first_ms: u64,
    last_ms: u64,
}

#[derive(Serialize)]
struct LossView {
    from: u32,
    to: u32,
    lost_packets: i64,
}

#[derive(Serialize)]
struct FlowDetail {
    #[serde(flatten)]
    summary: FlowSummary,
    plan: Option<String>,
    reporter: Option<u32>,
    ingress_port: Option<u8>,
    egress_port: Option<u8>,
    first_hop_pinned: bool,
    path_resets: u32,
    path_hops: Vec<HopView>,
    static_values: Vec<StaticView>,
    latency: Vec<LatencyView>,
    aggregates: Vec<AggregateView>,
    counters: Vec<CounterView>,
    loss: Vec<LossView>,
    events: Vec<crate::events::FlowEvent>,
}

fn detail(f: &FlowState, space: Space<'_>) -> FlowDetail {
    let mut d = FlowDetail {
        summary: summary(f, space),
        plan: None,
        reporter: None,
        ingress_port: None,
        egress_port: None,
        first_hop_pinned: false,
        path_resets: f.path_resets,
        path_hops: Vec::new(),
        static_values: Vec::new(),
        latency: Vec::new(),
        aggregates: Vec::new(),
        counters: f
            .counts
            .iter()
            .map(|c| CounterView {
                switch: c.switch,
                packets: c.packets,
                bytes: c.bytes,
                epochs: c.epochs,
                unsure_epochs: c.unsure_epochs,
                first_ms: c.first_ms,
                last_ms: c.last_ms,
            })
            .collect(),
        loss: Vec::new(),
        events: Vec::new(),
    };
    if let Some(path) = &d.summary.path {
        for w in path.windows(2) {
            let c = |s: u32| f.counts.iter().find(|c| c.switch == s).map(|c| c.packets);
            // As the link's totals count it (epochs whose counts were unsure left out),
            // else from the counts.
            let lost = f
                .loss_on((w[0], w[1]))
                .or_else(|| c(w[0]).map(|up| up as i64 - c(w[1]).unwrap_or(0) as i64));
            if let Some(lost_packets) = lost {
                d.loss.push(LossView {
                    from: w[0],
                    to: w[1],
                    lost_packets,
                });
            }
        }
    }
    let Some(p) = &f.pint else { return d };
    d.plan = Some(format!("{:08x}", p.plan.version));
    d.reporter = Some(p.reporter);
    d.ingress_port = Some(p.ingress_port);
    d.egress_port = Some(p.egress_port);
    d.first_hop_pinned = p.first_pinned;
    let plan = &p.plan.plan;
    let k = p.record.k();
    let hop_switch = |hop: usize| -> Option<u32> {
        let q = p.plan.path_query?;
        p.record.path(q)?.hop(path_context(plan, space, q)?, hop)
    };
    if let Some(q) = p.plan.path_query
        && let Some(st) = p.record.path(q)
        && let Some(cx) = path_context(plan, space, q)
    {
        d.path_hops = (1..=k)
            .map(|i| HopView {
                hop: i,
                switch: st.hop(cx, i),
                candidates: st.candidates(i),
            })
            .collect();
    }
    for (qi, q) in plan.queries.iter().enumerate() {
        match &q.kind {
            QueryKind::DynamicPerFlow { .. } => {
                let Some(sk) = p.record.sketches(qi) else {
                    continue;
                };
                d.latency.push(LatencyView {
                    query: q.name.clone(),
                    value: q.value,
                    kll_k: sk.kll_k(),
                    rank_error: sk.rank_error(),
                    budget_bytes: sk.budget_bytes(),
                    top: sk.top_value(),
                    hops: (1..=k)
                        .map(|h| LatencyHop {
                            hop: h,
                            switch: hop_switch(h),
                            samples: sk.samples(h),
                            quantiles: QUANTILES
                                .iter()
                                .filter_map(|&x| sk.quantile(h, x).map(|v| (x, v)))
                                .collect(),
                            at_top: sk.share_at_top(h),
                        })
                        .collect(),
                });
            }
            QueryKind::PerPacket { .. } => {
                let Some(a) = p.record.aggregate(qi) else {
                    continue;
                };
                d.aggregates.push(AggregateView {
                    query: q.name.clone(),
                    count: a.count,
                    last: a.last,
                    mean: a.mean,
                    max: a.max,
                    at_top: a.at_top as f64 / a.count.max(1) as f64,
                    histogram: a
                        .histogram
                        .iter()
                        .map(|&(e, n)| {
                            if e == i8::MIN {
                                // Values at or below zero (JSON has no infinity).
                                (0.0, 0.0, n)
                            } else {
                                (2f64.powi(i32::from(e)), 2f64.powi(i32::from(e) + 1), n)
                            }
                        })
                        .collect(),
                });
            }
            QueryKind::StaticPerFlow { .. } => {
                if Some(qi) == p.plan.path_query {
                    continue;
                }
                if let (Some(st), Some(cx)) = (p.record.path(qi), path_context(plan, space, qi)) {
                    d.static_values.push(StaticView {
                        query: q.name.clone(),
                        value: q.value,
                        hops: (1..=k).map(|h| st.hop(cx, h)).collect(),
                    });
                }
            }
        }
    }
    d
}

async fn flow(
    State(s): St,
    q: Result<Query<FlowQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(q) = match q {
        Ok(q) => q,
        Err(e) => return bad_request(format!("{e} (want src, dst, sport, dport, proto)")),
    };
    let key = FlowKey {
        src: u32::from(q.src),
        dst: u32::from(q.dst),
        src_port: q.sport,
        dst_port: q.dport,
        protocol: q.proto,
    };
    let n = s.shared.shards.len();
    let t = s.shared.shards[crate::shard::shard_of(&key, n)]
        .table
        .lock()
        .expect("flow table lock");
    match t.get(&key) {
        Some(f) => with_space(&s.shared, |space| {
            let mut d = detail(f, space);
            d.events = s.shared.events.of_flow(&key);
            Json(d).into_response()
        }),
        None => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": format!("flow {key} is not tracked") })),
        )
            .into_response(),
    }
}

#[derive(Serialize)]
struct LinkView {
    from: u32,
    to: u32,
    #[serde(flatten)]
    stats: crate::flows::LinkStats,
}

async fn links(State(s): St) -> Json<Vec<LinkView>> {
    let mut v: Vec<LinkView> = crate::metrics::links(&s.shared)
        .into_iter()
        .map(|((from, to), stats)| LinkView { from, to, stats })
        .collect();
    v.sort_by_key(|l| (std::cmp::Reverse(l.stats.lost_packets), l.from, l.to));
    Json(v)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EpochsQuery {
    /// How many of the latest (default 20).
    n: Option<usize>,
}

#[derive(Serialize)]
struct EpochsView<'a> {
    epochs: u64,
    network: u64,
    incomplete: u64,
    by_deadline: u64,
    late_flowsets: u64,
    duplicate_flowsets: u64,
    flowsets: u64,
    latest: Vec<&'a EpochReport>,
}

/// The latest epochs' reports: taken (shared) under the epoch log's lock, which the epoch
/// assembler takes for each epoch, and serialised after it (512 epochs of a large topology
/// are hundreds of thousands of switch parts).
async fn epochs(State(s): St, Params(q): Params<EpochsQuery>) -> Response {
    let c = &s.shared.epochs.counters;
    let mut latest: Vec<Arc<EpochReport>> = {
        let reports = s.shared.epochs.reports.lock().expect("epoch log lock");
        let n = q.n.unwrap_or(20).min(reports.len());
        reports.iter().rev().take(n).cloned().collect()
    };
    // Newest first by when they began: one finished at its deadline came after newer ones.
    latest.sort_by_key(|r| std::cmp::Reverse(u128::from(r.epoch) * u128::from(r.epoch_ns)));
    let (epochs, network) = c.finished();
    Json(EpochsView {
        epochs,
        network,
        incomplete: c.incomplete.load(Relaxed),
        by_deadline: c.by_deadline.load(Relaxed),
        late_flowsets: c.late_flowsets.load(Relaxed),
        duplicate_flowsets: c.duplicate_flowsets.load(Relaxed),
        flowsets: c.flowsets.load(Relaxed),
        latest: latest.iter().map(|r| &**r).collect(),
    })
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// How many of the latest (default 50).
    n: Option<usize>,
    /// `delay`, `loss` or `reordering`.
    kind: Option<String>,
}

async fn events(State(s): St, Params(q): Params<EventsQuery>) -> Response {
    let kind = match q.kind.as_deref() {
        None => None,
        Some(k) => match Kind::ALL.into_iter().find(|x| x.name() == k) {
            Some(x) => Some(x),
            None => {
                return bad_request(format!("kind: `{k}` is not one of delay, loss, reordering"));
            }
        },
    };
    Json(s.shared.events.latest(q.n.unwrap_or(50).min(10_000), kind)).into_response()
}

/// The live page, built off the server's one thread (it reads every flow table): other
/// requests (Prometheus scrapes, the API) go on meanwhile.
async fn index(State(s): St) -> Response {
    let built = off_thread(&Arc::clone(&s.heavy), move || {
        crate::page::render(&crate::live::page(&s.shared))
    })
    .await;
    match built {
        Ok(html) => axum::response::Html(html).into_response(),
        Err(r) => r,
    }
}

/// The `n` largest flows by bytes: each flow's summary and detail as the API serves them.
pub(crate) fn top_flows(shared: &Shared, n: usize) -> Vec<(serde_json::Value, serde_json::Value)> {
    let mut all: Vec<(u64, serde_json::Value, serde_json::Value)> = Vec::new();
    with_space(shared, |space| {
        for shard in &shared.shards {
            let t = shard.table.lock().expect("flow table lock");
            for (b, f) in largest(t.iter(), flow_bytes, n) {
                let mut d = detail(f, space);
                d.events = shared.events.of_flow(&f.key);
                all.push((
                    b,
                    serde_json::to_value(summary(f, space)).unwrap_or_default(),
                    serde_json::to_value(d).unwrap_or_default(),
                ));
            }
        }
    });
    all.sort_by_key(|(b, _, _)| std::cmp::Reverse(*b));
    all.into_iter().take(n).map(|(_, s, d)| (s, d)).collect()
}

async fn metrics(State(s): St) -> Response {
    match off_thread(&Arc::clone(&s.scrape), move || s.metrics.render(&s.shared)).await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(r) => r,
    }
}
