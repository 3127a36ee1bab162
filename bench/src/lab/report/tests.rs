//! The lab's report from collected outputs: checks, links, events and their places.

use super::*;

fn path(p: &str) -> Vec<String> {
    p.split(' ').map(str::to_owned).collect()
}

fn span(kind: &str, flow: &str, start: f64, end: f64) -> Span {
    Span {
        kind: kind.into(),
        flow: flow.into(),
        start,
        end,
    }
}

fn links(l: &[(&str, &str)]) -> Vec<(String, String)> {
    l.iter().map(|&(a, b)| (a.into(), b.into())).collect()
}

/// Probe streams a (leaf2 to leaf3), b (leaf1 to leaf3) and c (leaf2 to leaf1), all
/// through spine1; spine1 -> leaf3 is the bad link.
fn fabric() -> (BTreeMap<String, Vec<String>>, BTreeSet<String>) {
    let paths: BTreeMap<String, Vec<String>> = [
        ("a", "leaf2 spine1 leaf3"),
        ("b", "leaf1 spine1 leaf3"),
        ("c", "leaf2 spine1 leaf1"),
    ]
    .into_iter()
    .map(|(f, p)| (f.to_owned(), path(p)))
    .collect();
    let probes = paths.keys().cloned().collect();
    (paths, probes)
}

/// A link that counted more packets after it than before hides loss as well as it
/// shows it: the check fails and says counts are missing, and the summary does not call
/// it loss.
#[test]
fn more_counted_after_a_link_than_before_is_missing_counts_not_loss() {
    let lab = Lab::parse(
        "[topology]\nkind = \"chain\"\nswitches = 3\n",
        Path::new("."),
        "t",
    )
    .unwrap();
    let link = |from: &str, to: &str, lost_packets: i64| link_row(from, to, lost_packets, None);
    let mut r = report_of(vec![link("s1", "s2", 0), link("s2", "s3", 0)]);
    let elsewhere = |r: &LabReport| {
        checks(&lab, r)
            .into_iter()
            .find(|c| c.name == "no loss elsewhere")
            .unwrap()
    };
    assert!(elsewhere(&r).ok);
    // 5 lost before s2, and 5 more counted after s2 than before it: they cancel in a
    // sum, not here.
    r.links = vec![link("s1", "s2", 5), link("s2", "s3", -5)];
    let c = elsewhere(&r);
    assert!(!c.ok);
    assert!(
            c.detail.starts_with("5 packets lost on links without an impairment; 5 more packets counted after links than before them (counts missing)"),
            "{}",
            c.detail
        );
    let text = r.text();
    assert!(text.contains("link s1 -> s2: 5 packets lost\n"), "{text}");
    assert!(
        text.contains(
            "link s2 -> s3: 5 packets counted after it beyond those before it (counts missing)\n"
        ),
        "{text}"
    );
}

/// A sink with more flows than the report reads says how many it checked, rather than
/// giving the flows read as all it saw.
#[test]
fn a_report_of_more_flows_than_it_reads_says_so() {
    let mut r = report_of(Vec::new());
    r.flows_total = 25_000;
    r.flows_checked = FLOWS_READ;
    r.flows_decoded = 9_000;
    r.flows_matching = 9_000;
    assert!(
        r.text()
            .contains("paths: 25000 flows, of which the 10000 largest checked, 9000 decoded"),
        "{}",
        r.text()
    );
    r.flows_checked = 25_000;
    assert!(
        r.text().contains("paths: 25000 flows, 9000 decoded"),
        "{}",
        r.text()
    );
}

/// The shipped chain lab.
fn chain_lab() -> Lab {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/labs");
    let text = std::fs::read_to_string(base.join("chain.toml")).unwrap();
    Lab::parse(&text, &base, "chain").unwrap()
}

/// What a run of `lab` collected: its switches' summaries, its generators' reports and
/// the sink's event lines; the sink read nothing else.
fn collected_of(
    lab: &Lab,
    summaries: Vec<(u32, Option<Summary>, String)>,
    generators: Vec<(u32, String)>,
    events: String,
) -> Collected {
    let at = super::super::plan::Endpoints {
        dir: std::env::temp_dir(),
        sink_listen: "127.0.0.1:1".parse().unwrap(),
        sink_http: "127.0.0.1:2".parse().unwrap(),
        main_lcore: 0,
        worker_lcores: vec![1],
    };
    Collected {
        dir: PathBuf::new(),
        plan: super::super::plan::LabPlan::new(lab, &at).unwrap(),
        start_unix: 0.0,
        cut_short_at: None,
        wall_seconds: 1.0,
        summaries,
        generators,
        view: SinkView {
            flows: Vec::new(),
            flows_seen: 0,
            details: BTreeMap::new(),
            links: Vec::new(),
            epochs: Value::Null,
            switches: Vec::new(),
            events: Vec::new(),
            events_found: 0,
        },
        events,
        events_file_short: None,
    }
}

/// A run with a switch that was killed (no summary) or exited with an error, or a
/// generator without a report, fails a check of its own: the other checks could pass
/// on its partial counts.
#[test]
fn a_process_that_did_not_end_cleanly_fails_the_run() {
    let lab = chain_lab();
    let summary = Summary::from_totals(1, 1.0, &pipeline::LocalCounters::default());
    let collected = |summaries: Vec<(u32, Option<Summary>, String)>, report: &str| {
        collected_of(
            &lab,
            summaries,
            vec![
                (0, report.into()),
                (2, r#"{"sent": {"packets": 1}}"#.into()),
            ],
            String::new(),
        )
    };
    let clean = |n| (n, Some(summary.clone()), "exit status: 0".to_owned());
    let good = r#"{"sent": {"packets": 1}}"#;
    let c = collected(vec![clean(0), clean(1), clean(2)], good);
    assert!(processes_check(&lab, &c).ok);
    let c = collected(
        vec![
            clean(0),
            (1, None, "signal: 9 (SIGKILL)".into()),
            (2, Some(summary.clone()), "exit status: 1".into()),
        ],
        "",
    );
    let check = processes_check(&lab, &c);
    assert!(!check.ok);
    assert_eq!(
        check.detail,
        "switch s2 (signal: 9 (SIGKILL), no summary); switch s3 (exit status: 1); \
             generator at s1 (no report)"
    );
}

/// A probe stream of the chain lab, from s1's hosts to s3's.
const PROBE_FLOW: &str =
    r#"{"src":"10.0.1.1","src_port":50000,"dst":"10.0.3.1","dst_port":7,"protocol":17}"#;

/// The chain lab, a run of it that collected these event lines, [`PROBE_FLOW`]'s path
/// and its three switches' names.
fn chain_run(events: &str) -> (Lab, Collected, BTreeMap<String, Vec<String>>, [String; 3]) {
    let lab = chain_lab();
    let names = [1, 2, 3].map(|id| name_of_id(&lab, id));
    let c = collected_of(&lab, Vec::new(), Vec::new(), events.to_owned());
    let label = flow_label(&serde_json::from_str(PROBE_FLOW).unwrap());
    let paths = BTreeMap::from([(label, names.to_vec())]);
    (lab, c, paths, names)
}

/// A delay event at the same time as its flow's loss event points where the sink's loss
/// event says the flow lost its packets, also for a flow whose details the report did not
/// read (`--top`: probe streams are small, so a delay event went to the first link of
/// its path instead).
#[test]
fn events_point_where_the_sink_says_without_the_flows_details() {
    let flow = PROBE_FLOW;
    let (lab, c, paths, [_, b, z]) = chain_run(&format!(
        "{{\"kind\":\"loss\",\"series\":\"probes\",\"flow\":{flow},\"start\":10.0,\"end\":12.0,\"lossy_link\":[2,3]}}\n\
             {{\"kind\":\"delay\",\"series\":\"probes\",\"flow\":{flow},\"start\":10.5,\"end\":11.5}}\n"
    ));
    let rows = super::events(&lab, &c, &paths);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.link, Some((b.clone(), z.clone())), "{} event", r.kind);
    }
    // With the flow's details read (`--top`), whose whole run lost more on the first
    // link: the events still point where the sink saw the loss at their time.
    let mut c = c;
    c.view.details.insert(
        flow_label(&serde_json::from_str(flow).unwrap()),
        serde_json::json!({"loss": [
                {"from": 1, "to": 2, "lost_packets": 500},
                {"from": 2, "to": 3, "lost_packets": 40}]}),
    );
    let rows = super::events(&lab, &c, &paths);
    for r in &rows {
        assert_eq!(r.link, Some((b.clone(), z.clone())), "{} event", r.kind);
    }
}

/// Events the sink's event lines file lost (a full disk) are taken from its API, oldest
/// first, and the run fails a check saying so: the report said "events: none" and failed
/// the detection checks as if the sink had found nothing.
#[test]
fn events_the_file_lost_are_taken_from_the_sinks_api() {
    let flow = PROBE_FLOW;
    let line = |kind: &str, start: f64| {
        format!(
            "{{\"kind\":\"{kind}\",\"series\":\"probes\",\"flow\":{flow},\"start\":{start},\"end\":{}}}",
            start + 1.0
        )
    };
    let (lab, mut c, paths, _) = chain_run(&format!("{}\n", line("loss", 10.0)));
    // The API lists the newest first.
    c.view.events = [line("delay", 12.0), line("loss", 10.0)]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    c.view.events_found = 2;
    c.events_from_api_if_short();
    assert_eq!(c.events_file_short, Some((1, 2, 2)));
    let rows = super::events(&lab, &c, &paths);
    let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["loss", "delay"]);
    // A whole file is kept as it is.
    let (_, mut whole, _, _) = chain_run(&format!(
        "{}\n{}\n",
        line("loss", 10.0),
        line("delay", 12.0)
    ));
    whole.view.events = c.view.events.clone();
    whole.view.events_found = 2;
    let before = whole.events.clone();
    whole.events_from_api_if_short();
    assert_eq!((whole.events_file_short, whole.events), (None, before));
    // A line torn by a failed write is no event.
    let (_, mut torn, _, _) = chain_run(&format!("{}\n{{\"kind\":\"de\n", line("loss", 10.0)));
    torn.view.events = c.view.events.clone();
    torn.view.events_found = 2;
    torn.events_from_api_if_short();
    assert_eq!(torn.events_file_short, Some((1, 2, 2)));
}

/// A delay event of a flow whose links the same flows cross points at all of them: the
/// lab cannot tell which one delays, says so, and counts it as pointing at each.
#[test]
fn an_event_links_the_flows_cannot_tell_apart_points_at_each() {
    let (lab, c, paths, [a, b, z]) = chain_run(&format!(
        "{{\"kind\":\"delay\",\"series\":\"probes\",\"flow\":{PROBE_FLOW},\"start\":10.5,\"end\":11.5}}\n"
    ));
    let rows = super::events(&lab, &c, &paths);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.link, Some((a.clone(), b.clone())));
    assert_eq!(r.also, vec![(b.clone(), z.clone())]);
    assert_eq!(r.place(), format!("{a} -> {b} or {b} -> {z}"));
    assert!(r.points_at(&a, &b) && r.points_at(&b, &z));
    assert!(!r.points_at(&z, &b));
}

/// A link of 4 flows that lost `lost_packets`, its switch's impairments having dropped
/// `dropped`.
fn link_row(from: &str, to: &str, lost_packets: i64, dropped: Option<u64>) -> LinkRow {
    LinkRow {
        from: from.into(),
        to: to.into(),
        lost_packets,
        flows: 4,
        utilisation: None,
        impaired: None,
        impair_dropped: dropped,
    }
}

/// A report of a lab run with only `links` filled in.
fn report_of(links: Vec<LinkRow>) -> LabReport {
    LabReport {
        lab: "t".into(),
        description: String::new(),
        duration_s: 1.0,
        planned_s: 1.0,
        wall_seconds: 1.0,
        dir: PathBuf::new(),
        switches: Vec::new(),
        links,
        flows_total: 0,
        flows_checked: 0,
        flows_decoded: 0,
        flows_matching: 0,
        undecoded_through: BTreeMap::new(),
        mismatches: Vec::new(),
        median_digests_to_decode: None,
        flows: Vec::new(),
        events: Vec::new(),
        hosts: Vec::new(),
        epochs: Value::Null,
        checks: Vec::new(),
        packets_counted: None,
        paths_traced: true,
        layout: Vec::new(),
    }
}

/// Each lossy link out of one switch is checked against what its own port's impairment
/// dropped (the switch counts it per port).
#[test]
fn lossy_links_out_of_one_switch_are_checked_each_against_its_port() {
    let lab = Lab::parse(
        "[topology]\nkind = \"leaf-spine\"\nspines = 2\nleaves = 3\n\
             [[impair]]\nlink = [\"spine1\", \"leaf3\"]\nloss = 0.05\n\
             [[impair]]\nlink = [\"spine1\", \"leaf2\"]\nloss = 0.02\n",
        Path::new("."),
        "t",
    )
    .unwrap();
    let link = link_row;
    let loss_checks = |r: &LabReport| -> Vec<bool> {
        checks(&lab, r)
            .into_iter()
            .filter(|c| c.name.starts_with("loss found"))
            .map(|c| c.ok)
            .collect()
    };
    let mut r = report_of(vec![
        link("spine1", "leaf3", 30, Some(30)),
        link("spine1", "leaf2", 20, Some(20)),
        link("leaf1", "spine1", 0, None),
    ]);
    assert_eq!(loss_checks(&r), [true, true]);
    // A link without an impairment lost as much as an impaired one.
    r.links[2].lost_packets = 20;
    assert_eq!(loss_checks(&r), [true, false]);
    // Loss put on the wrong one of the two: their sum is what the switch dropped, each
    // link's is not.
    r.links[2].lost_packets = 0;
    r.links[0].lost_packets = 40;
    r.links[1].lost_packets = 10;
    assert_eq!(loss_checks(&r), [false, false]);
    // A port that dropped more than its link lost.
    r.links[0].lost_packets = 30;
    r.links[1].lost_packets = 20;
    r.links[0].impair_dropped = Some(40);
    assert_eq!(loss_checks(&r), [false, true]);
    // Unless flows whose paths are not decoded crossed it with at least the packets
    // missing: their loss is on no link (never more than the drops, though).
    r.undecoded_through.insert("spine1 -> leaf3".into(), 9);
    assert_eq!(loss_checks(&r), [false, true], "9 packets cannot hide 10");
    r.undecoded_through.insert("spine1 -> leaf3".into(), 10);
    assert_eq!(loss_checks(&r), [true, true]);
    r.links[0].impair_dropped = Some(20);
    assert_eq!(loss_checks(&r), [false, true]);
    // A switch that wrote no summary (its disk full): what its port dropped is unknown,
    // not 0, and the loss need only stand out.
    r.undecoded_through.clear();
    r.links[0].impair_dropped = None;
    assert_eq!(loss_checks(&r), [true, true]);
    let c = checks(&lab, &r);
    let first = c.iter().find(|c| c.name.starts_with("loss found")).unwrap();
    assert!(
        first
            .detail
            .contains("is unknown (spine1 wrote no summary)"),
        "{}",
        first.detail
    );
    r.links[2].lost_packets = 30;
    assert_eq!(loss_checks(&r), [false, false]);
}

#[test]
fn drops_at_full_tx_queues_are_put_down_to_the_machine() {
    let row = |name: &str, tx_full_drops: u64| SwitchRow {
        name: name.into(),
        tx_full_drops,
        ..SwitchRow::default()
    };
    assert_eq!(full_queue_note(&[row("a", 0), row("b", 0)]), None);
    let note = full_queue_note(&[
        row("a", 5),
        row("b", 0),
        row("c", 40),
        row("d", 7),
        row("e", 1),
    ])
    .unwrap();
    assert!(
        note.starts_with("53 dropped by switches at full tx queues (c 40, d 7, a 5, ...)"),
        "{note}"
    );
}

/// One flow's reordering ties between the two links of its path (each has one other
/// probe stream without reordering); the loss the bad link gave two flows at the same
/// time tells them apart.
#[test]
fn a_tie_goes_to_the_link_with_other_events_at_the_time() {
    let (paths, probes) = fabric();
    let this = span("reordering", "a", 10.0, 15.0);
    let mut spans = vec![this.clone()];
    let blamed = |spans: &[Span]| blame(&this, &paths["a"], spans, &paths, &probes);
    // With no other evidence both links tie: each is crossed by a and by one stream
    // without the event.
    let both = links(&[("leaf2", "spine1"), ("spine1", "leaf3")]);
    assert_eq!(blamed(&spans), both, "no other evidence");
    spans.push(span("loss", "a", 5.0, 15.0));
    spans.push(span("loss", "b", 5.0, 15.4));
    assert_eq!(blamed(&spans), links(&[("spine1", "leaf3")]));
    // Events of another kind at another time are no evidence.
    spans.truncate(1);
    spans.push(span("loss", "a", 1.0, 2.0));
    spans.push(span("loss", "b", 20.0, 25.0));
    assert_eq!(blamed(&spans), both);
}

/// A probe stream through the bad link that shows only another kind of event at the
/// time (loss, not reordering) is no evidence against it: one flow's reordering on
/// leaf1 -> spine1 -> leaf3 goes to spine1 -> leaf3, which the lossy stream a shares.
#[test]
fn a_stream_with_another_event_is_no_evidence_against_a_link() {
    let (paths, probes) = fabric();
    let this = span("reordering", "b", 10.0, 15.0);
    let mut spans = vec![this.clone()];
    let blamed = |spans: &[Span]| blame(&this, &paths["b"], spans, &paths, &probes);
    assert_eq!(
        blamed(&spans),
        links(&[("leaf1", "spine1")]),
        "a counts against spine1 -> leaf3"
    );
    spans.push(span("loss", "a", 5.0, 15.0));
    spans.push(span("loss", "b", 5.0, 15.0));
    assert_eq!(blamed(&spans), links(&[("spine1", "leaf3")]));
}

/// A delay event on a flow that loses packets at the same time goes where the loss is;
/// one before or after its loss does not.
#[test]
fn a_delay_with_loss_at_the_time_goes_where_the_loss_is() {
    let this = span("delay", "a", 10.0, 15.0);
    let mut spans = vec![this.clone(), span("loss", "b", 10.0, 15.0)];
    assert!(!loses_meanwhile(&this, &spans), "another flow's loss");
    spans.push(span("loss", "a", 2.0, 9.5));
    assert!(!loses_meanwhile(&this, &spans), "its loss before");
    spans.push(span("loss", "a", 14.0, 20.0));
    assert!(loses_meanwhile(&this, &spans));
}

/// The events of the same kind come first: a link that more flows with the event cross
/// wins over one with more events of other kinds.
#[test]
fn the_same_kind_of_event_outweighs_others() {
    let (paths, probes) = fabric();
    let this = span("delay", "a", 10.0, 15.0);
    let spans = vec![
        this.clone(),
        span("delay", "c", 10.0, 15.0),
        span("loss", "a", 10.0, 15.0),
        span("loss", "b", 10.0, 15.0),
    ];
    assert_eq!(
        blame(&this, &paths["a"], &spans, &paths, &probes),
        links(&[("leaf2", "spine1")])
    );
}

/// Shares read as people write them.
#[test]
fn shares_print_without_float_noise() {
    assert_eq!(percent(0.07), "7%");
    assert_eq!(percent(0.005), "0.5%");
    assert_eq!(percent(0.0001), "0.01%");
    assert_eq!(percent(1.0), "100%");
    assert_eq!(percent(1e-7), "below 0.0001%");
}

/// Hosts that sent `sent` packets each and received `received` each.
fn hosts(sent: u64, received: u64) -> Vec<HostRow> {
    ["s1", "s3"]
        .map(|name| HostRow {
            name: name.into(),
            sent,
            received,
            ..HostRow::default()
        })
        .to_vec()
}

/// A switch that dropped these packets by reason.
fn dropping(name: &str, drops: &[(&str, u64)]) -> SwitchRow {
    SwitchRow {
        name: name.into(),
        drops: drops.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
        ..SwitchRow::default()
    }
}

/// A lab whose switches drop its traffic fails, however quiet the telemetry is (a switch
/// of another shim EtherType dropped every packet and the report said every check held);
/// what impairments drop is no failure.
#[test]
fn traffic_that_does_not_arrive_fails_the_run() {
    let mut r = report_of(Vec::new());
    r.hosts = hosts(8000, 8000);
    r.switches = vec![dropping("s2", &[])];
    let c = delivery_check(&r);
    assert!(c.ok, "{}", c.detail);
    assert_eq!(
        c.detail,
        "16000 sent, 16000 received, 0 dropped by impairments"
    );
    // What an impairment dropped is accounted for.
    r.hosts[1].received = 7815;
    r.switches = vec![dropping(
        "s2",
        &[("impair_loss", 180), ("impair_overflow", 5)],
    )];
    assert!(delivery_check(&r).ok, "{}", delivery_check(&r).detail);
    // A switch dropping the traffic.
    r.hosts = hosts(8000, 0);
    r.switches = vec![
        dropping("s1", &[("arp", 2)]),
        dropping("s2", &[("other_ethertype", 16000)]),
    ];
    let c = delivery_check(&r);
    assert!(!c.ok);
    assert_eq!(
        c.detail,
        "16000 sent, 0 received, 0 dropped by impairments; 16000 missing; switches dropped: \
         s2 other_ethertype 16000, s1 arp 2"
    );
    // Nothing sent is nothing shown.
    r.hosts = hosts(0, 0);
    r.switches = Vec::new();
    assert!(!delivery_check(&r).ok);
}

/// The flows' FlowRadar counts must hold every packet sent: flowsets sized for one flow
/// decoded nothing and the report said every check held.
#[test]
fn counts_short_of_what_was_sent_fail_the_run() {
    let mut r = report_of(Vec::new());
    r.hosts = hosts(8000, 8000);
    r.flows_total = 24;
    r.packets_counted = Some(16000);
    let c = counting_check(&r);
    assert!(c.ok && c.applies, "{}", c.detail);
    assert_eq!(
        c.detail,
        "16000 packets in the counts of 24 flows, 16000 sent"
    );
    r.packets_counted = Some(0);
    let c = counting_check(&r);
    assert!(!c.ok);
    assert!(
        c.detail
            .starts_with("0 packets in the counts of 24 flows, 16000 sent; 16000 missing"),
        "{}",
        c.detail
    );
    r.packets_counted = Some(16001);
    assert!(!counting_check(&r).ok);
    // Flows beyond what the report reads: not checked, and not a failure.
    r.packets_counted = None;
    r.flows_total = 20_000;
    let c = counting_check(&r);
    assert!(!c.applies);
    r.checks = vec![c];
    assert!(r.all_ok());
    assert!(
        r.text()
            .contains("[n/a] FlowRadar counted every packet sent: the sink saw 20000 flows"),
        "{}",
        r.text()
    );
}

/// A plan that traces no path cannot check paths or loss per link: those checks say so
/// instead of failing (0 of 0 paths) or passing on nothing (no loss anywhere).
#[test]
fn a_plan_without_paths_checks_neither_paths_nor_loss_per_link() {
    let lab = Lab::parse(
        "[topology]\nkind = \"chain\"\nswitches = 3\n\
             [[impair]]\nlink = [\"s2\", \"s3\"]\nloss = 0.05\n",
        Path::new("."),
        "t",
    )
    .unwrap();
    let mut r = report_of(vec![link_row("s2", "s3", 0, Some(185))]);
    r.hosts = hosts(8000, 8000);
    let outcomes = |r: &LabReport| -> Vec<(String, &'static str)> {
        checks(&lab, r)
            .iter()
            .map(|c| (c.name.clone(), c.outcome()))
            .collect()
    };
    let traced = outcomes(&r);
    assert_eq!(traced[0], ("decoded paths equal routes".into(), "FAILED"));
    assert!(traced.contains(&("loss found on the impaired link s2 -> s3".into(), "FAILED")));
    r.paths_traced = false;
    let untraced = outcomes(&r);
    for name in [
        "decoded paths equal routes",
        "loss found on the impaired link s2 -> s3",
        "no loss elsewhere",
    ] {
        assert!(
            untraced.contains(&(name.into(), "n/a")),
            "{name}: {untraced:?}"
        );
    }
}

/// The delay check counts events while the impairment acted whose delay rose: the fall
/// back to normal after a delay detection took for the baseline (an impairment from the
/// traffic's start) passed it, at a time the impairment had ended.
#[test]
fn only_delay_events_while_the_impairment_acted_find_it() {
    let lab = Lab::parse(
        "[topology]\nkind = \"chain\"\nswitches = 3\n\
             [[impair]]\nlink = [\"s2\", \"s3\"]\ndelay_us = 15000\nfrom_s = 5\nuntil_s = 15\n",
        Path::new("."),
        "t",
    )
    .unwrap();
    let event = |start_s: f64, end_s: f64, peak_ms: f64| EventRow {
        kind: "delay".into(),
        start_s,
        end_s,
        peak_ms: Some(peak_ms),
        baseline_ms: Some(0.4),
        link: Some(("s2".into(), "s3".into())),
        ..EventRow::default()
    };
    let found = |events: Vec<EventRow>| {
        let mut r = report_of(Vec::new());
        r.duration_s = 40.0;
        r.events = events;
        checks(&lab, &r)
            .into_iter()
            .find(|c| c.name.starts_with("delay event"))
            .unwrap()
            .ok
    };
    assert!(found(vec![event(5.0, 15.0, 15.8)]));
    // Found a window late or early: still it.
    assert!(found(vec![event(17.0, 19.0, 15.8)]));
    // Long after it, or before it.
    assert!(!found(vec![event(25.0, 30.0, 15.8)]));
    // A fall below the baseline, or the window of a fall from a raised baseline (its
    // peak within the delay threshold of it).
    assert!(!found(vec![event(10.0, 15.0, 0.3)]));
    assert!(!found(vec![event(10.0, 15.0, 0.4 + 4.9)]));
}

/// A reordering impairment is checked like a delay: a reordering event pointing at it while
/// it acted; without a delay nothing reorders probe streams, nor with a delay shorter than
/// the probes' spacing, so the check cannot be made.
#[test]
fn reordering_impairments_are_checked() {
    let lab = |delay: &str| {
        Lab::parse(
            &format!(
                "[topology]\nkind = \"chain\"\nswitches = 3\n\
                 [[impair]]\nlink = [\"s2\", \"s3\"]\nreorder = 0.05\n{delay}from_s = 5\nuntil_s = 15\n"
            ),
            Path::new("."),
            "t",
        )
        .unwrap()
    };
    let event = |kind: &str, start_s: f64, link: (&str, &str)| EventRow {
        kind: kind.into(),
        start_s,
        end_s: start_s + 5.0,
        link: Some((link.0.into(), link.1.into())),
        ..EventRow::default()
    };
    let outcome = |lab: &Lab, events: Vec<EventRow>| {
        let mut r = report_of(Vec::new());
        r.duration_s = 40.0;
        r.events = events;
        checks(lab, &r)
            .into_iter()
            .find(|c| c.name.starts_with("reordering event"))
            .unwrap()
            .outcome()
    };
    let delayed = lab("delay_us = 60000\n");
    assert_eq!(
        outcome(&delayed, vec![event("reordering", 5.0, ("s2", "s3"))]),
        "ok"
    );
    assert_eq!(
        outcome(&delayed, vec![event("delay", 5.0, ("s2", "s3"))]),
        "FAILED"
    );
    assert_eq!(
        outcome(&delayed, vec![event("reordering", 5.0, ("s1", "s2"))]),
        "FAILED"
    );
    assert_eq!(
        outcome(&delayed, vec![event("reordering", 30.0, ("s2", "s3"))]),
        "FAILED"
    );
    assert_eq!(outcome(&lab(""), Vec::new()), "n/a");
    // 30 ms reorders nothing among probes 50 ms apart (20 a second, the default).
    let short = lab("delay_us = 30000\n");
    assert_eq!(outcome(&short, Vec::new()), "n/a");
}

/// A large lab's summary keeps each list to a screen's share (the checks came hundreds of
/// lines down): the impaired links and their events first, then the most loss and the
/// most events, then how many more there are.
#[test]
fn a_large_labs_summary_keeps_its_lists_short() {
    let mut links: Vec<LinkRow> = (0..40)
        .map(|i| link_row(&format!("a{i}"), &format!("b{i}"), i + 1, None))
        .collect();
    links[0].impaired = Some("loss 5%".into());
    let mut r = report_of(links);
    r.hosts = (0..20)
        .map(|i| HostRow {
            name: format!("h{i}"),
            sent: 100,
            received: 100 - i,
            lost: i,
            ..HostRow::default()
        })
        .collect();
    r.events = (0..20)
        .map(|i| EventRow {
            kind: "loss".into(),
            start_s: 1.0,
            end_s: 2.0,
            link: Some((format!("a{i}"), format!("b{i}"))),
            ..EventRow::default()
        })
        .collect();
    let text = r.text();
    let lines = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(
        (lines("link "), lines("hosts at "), lines("event ")),
        (16, 16, 16),
        "{text}"
    );
    assert!(
        text.contains("... and 24 more links with loss or an impairment"),
        "{text}"
    );
    assert!(text.contains("... and 4 more hosts"), "{text}");
    assert!(
        text.contains("... and 4 more kinds of event on links"),
        "{text}"
    );
    // The impaired link, with 1 lost, first; then the most loss.
    let link_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("link ")).collect();
    assert!(
        link_lines[0].starts_with("link a0 -> b0: 1 packets lost"),
        "{text}"
    );
    assert!(
        link_lines[1].starts_with("link a39 -> b39: 40 packets lost"),
        "{text}"
    );
    // The impaired link's events too; hosts that lost most first.
    assert!(text.contains("on a0 -> b0"), "{text}");
    assert!(text.contains("hosts at h19 "), "{text}");
    assert!(!text.contains("hosts at h0 "), "{text}");
}

/// A run interrupted part way says how long its traffic ran, and rates are over that time.
#[test]
fn an_interrupted_run_says_how_long_its_traffic_ran() {
    let lab = chain_lab();
    let mut c = collected_of(&lab, Vec::new(), Vec::new(), String::new());
    c.cut_short_at = Some(4.25);
    let r = LabReport::build(&lab, c, 10).unwrap();
    assert_eq!((r.duration_s, r.planned_s), (4.25, 15.0));
    let text = r.text();
    assert!(
        text.starts_with("== pint-lab chain: 4.2 s (interrupted; 15 s planned) of traffic,"),
        "{text}"
    );
    assert!(
        r.page()
            .subtitle
            .contains("4.2 s (interrupted; 15 s planned) of traffic"),
        "{}",
        r.page().subtitle
    );
    let whole = LabReport::build(
        &lab,
        collected_of(&lab, Vec::new(), Vec::new(), String::new()),
        10,
    )
    .unwrap();
    assert!(
        whole
            .text()
            .starts_with("== pint-lab chain: 15 s of traffic,")
    );
}

/// An event's place of many links is cut to a line in the summary's table, saying how many
/// more; a short one is whole.
#[test]
fn long_places_are_shortened_in_the_summary() {
    use super::place_words;
    assert_eq!(place_words("a -> b"), "a -> b");
    let many: Vec<String> = (0..30)
        .map(|i| format!("{i} (Town {i}) -> {} (Town {})", i + 1, i + 1))
        .collect();
    let place = many.join(" or ");
    let shown = place_words(&place);
    assert!(shown.chars().count() <= 64, "{shown}");
    assert!(
        shown.starts_with("0 (Town 0) -> 1 (Town 1) or 1 (Town 1) -> 2 (Town 2)"),
        "{shown}"
    );
    assert!(shown.ends_with(" more"), "{shown}");
    // The links shown and the number said make all 30.
    let listed = shown.split(" or ").count() - 1;
    let more: usize = shown
        .rsplit(" or ")
        .next()
        .unwrap()
        .trim_end_matches(" more")
        .parse()
        .unwrap();
    assert_eq!(listed + more, 30, "{shown}");
}
