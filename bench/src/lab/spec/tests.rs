//! Lab files: their shapes, defaults, hosts, impairments and the errors bad ones get.

use super::*;

fn parse(text: &str) -> Result<Lab, LabError> {
    Lab::parse(text, Path::new("/labs"), "t")
}

fn key(e: LabError) -> String {
    match e {
        LabError::Key { key, .. } => key,
        other => panic!("expected a key error: {other}"),
    }
}

#[test]
fn shapes_hosts_and_defaults() {
    let l = parse("[topology]\nkind = \"leaf-spine\"\nspines = 2\nleaves = 3\n").unwrap();
    assert_eq!(l.topology.len(), 5);
    assert_eq!(l.hosts, vec![2, 3, 4]);
    assert_eq!(l.topology.names[2], "leaf1");
    assert_eq!(l.traffic.pairs.len(), 6);
    assert_eq!(l.destinations(2), vec![3, 4]);
    assert_eq!(l.queries, None, "the paper's plan, built into the switch");
    assert_eq!((l.duration_s, l.idle, l.epoch_ms), (20.0, Idle::Sleep, 10));
    // Larger labs get longer epochs unless they say.
    assert_eq!(
        [1, 20, 21, 40, 158, 197, 256].map(default_epoch_ms),
        [10, 10, 20, 20, 80, 100, 130]
    );
    let big = "[topology]\nkind = \"chain\"\nswitches = 60\n";
    assert_eq!(parse(big).unwrap().epoch_ms, 30);
    let set = format!("{big}[switches]\nepoch_ms = 10\n");
    assert_eq!(parse(&set).unwrap().epoch_ms, 10);
    let c = parse("[topology]\nkind = \"chain\"\nswitches = 3\n").unwrap();
    assert_eq!(c.hosts, vec![0, 2]);
    assert_eq!(c.topology.neighbours(1), &[0, 2]);
    let f = parse("[topology]\nkind = \"fat-tree\"\nk = 4\n").unwrap();
    assert_eq!((f.topology.len(), f.hosts.len()), (20, 8));
    let l = parse(
            "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"b\", \"d\"]]\nhosts = [\"a\", \"c\"]\n",
        )
        .unwrap();
    assert_eq!(l.topology.names, ["a", "b", "c", "d"]);
    assert_eq!(l.topology.neighbours(1), &[0, 2, 3]);
    assert_eq!(l.hosts, vec![0, 2]);
    assert_eq!(
        key(
            parse("[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"c\", \"d\"]]\n")
                .unwrap_err()
        ),
        "topology.links"
    );
    let twice = parse(
        "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"b\", \"a\"]]\n",
    )
    .unwrap_err();
    let msg = twice.to_string();
    assert!(msg.contains("linked twice"), "{msg}");
    assert_eq!(key(twice), "topology.links[2]", "{msg}");
    // Too many switches are refused at the first one too many (a list of tens of
    // thousands of links took seconds of quadratic checks before it was refused).
    let star: Vec<String> = (0..40_000).map(|i| format!("[\"h\", \"s{i}\"]")).collect();
    let many = parse(&format!(
        "[topology]\nkind = \"links\"\nlinks = [{}]\n",
        star.join(", ")
    ))
    .unwrap_err();
    let msg = many.to_string();
    assert!(msg.contains("more than 256 switches"), "{msg}");
    assert_eq!(key(many), "topology.links", "{msg}");
}

/// Routes too long for a hop index are refused; hosts with nobody to talk to, and
/// destinations no flow goes to, are said, and an impairment only they would cross acts
/// on no traffic.
#[test]
fn routes_and_hosts_that_carry_no_traffic_are_said() {
    let line = |n: usize| {
        let links: Vec<String> = (1..n)
            .map(|i| format!("[\"s{}\", \"s{i}\"]", i - 1))
            .collect();
        format!(
            "[topology]\nkind = \"links\"\nlinks = [{}]\nhosts = [\"s0\", \"s{}\"]\n",
            links.join(", "),
            n - 1
        )
    };
    assert_eq!(parse(&line(127)).unwrap().longest_route(), 127);
    let e = parse(&line(128)).unwrap_err();
    assert!(e.to_string().contains("128 switches"), "{e}");
    assert_eq!(key(e), "topology");
    // A file whose c - d lies apart from a - b: d has hosts and no one to talk to.
    let dir = std::env::temp_dir().join(format!("pint-lab-apart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
            dir.join("apart.gml"),
            "graph [\n  node [ id 0 label \"a\" ]\n  node [ id 1 label \"b\" ]\n  node [ id 2 label \"c\" ]\n  node [ id 3 label \"d\" ]\n  edge [ source 0 target 1 ]\n  edge [ source 2 target 3 ]\n]\n",
        )
        .unwrap();
    let apart = Lab::parse(
        "[topology]\nkind = \"file\"\npath = \"apart.gml\"\nhosts = [\"a\", \"b\", \"d\"]\n",
        &dir,
        "t",
    )
    .unwrap();
    // Its node ids are its names: a number that is none of them is no switch.
    let e = Lab::parse(
        "[topology]\nkind = \"file\"\npath = \"apart.gml\"\nhosts = [\"a\", \"4\"]\n",
        &dir,
        "t",
    )
    .unwrap_err();
    assert!(e.to_string().contains("no switch is called `4`"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let w = apart.warnings();
    assert!(w.len() == 1 && w[0].contains("(d)`"), "{w:?}");
    // A TOML adjacency file's switches by ID: `"10"` is the switch it names `s10`.
    let dir = std::env::temp_dir().join(format!("pint-lab-ids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ids.toml"), "links = [[10, 20], [20, 30]]\n").unwrap();
    let by_id = Lab::parse(
        "[topology]\nkind = \"file\"\npath = \"ids.toml\"\nhosts = [\"10\", \"s30\"]\n",
        &dir,
        "t",
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let hosts: Vec<u32> = by_id.hosts.iter().map(|&h| by_id.switch_id(h)).collect();
    assert_eq!(hosts, [10, 30]);
    // A star of 5 hosts around a hub, and a switch x without hosts on it, 2 flows a host
    // and no probes: each host sends to its first two destinations only (the next two
    // hosts); the link to x carries nothing.
    let star = |impair: &str| {
        parse(&format!(
                "[topology]\nkind = \"links\"\nlinks = [[\"h\", \"a\"], [\"h\", \"b\"], [\"h\", \"c\"], [\"h\", \"d\"], [\"h\", \"e\"], [\"h\", \"x\"]]\n\
                 hosts = [\"a\", \"b\", \"c\", \"d\", \"e\"]\n[traffic]\nflows = 2\nprobes = 0\n{impair}"
            ))
            .unwrap()
    };
    let s = star("");
    assert_eq!(s.active_pairs().len(), 10);
    let w = s.warnings();
    assert!(
        w.len() == 1 && w[0].contains("10 of the 20 host pairs"),
        "{w:?}"
    );
    let w = star("[[impair]]\nlink = [\"h\", \"x\"]\nloss = 0.1\n").warnings();
    assert!(w.len() == 2 && w[1].contains("acts on no traffic"), "{w:?}");
    let w = star("[[impair]]\nlink = [\"h\", \"b\"]\nloss = 0.1\n").warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    // Delay on a link data crosses but no probe stream does (no probes, and the paper's
    // plan sums no latency): no delay event can point at it.
    let w = star("[[impair]]\nlink = [\"h\", \"b\"]\ndelay_us = 5000\nfrom_s = 2\n").warnings();
    assert!(
        w.len() == 2 && w[1].contains("impair[0].delay_us: no probe stream crosses"),
        "{w:?}"
    );
    // With a probe stream a host: each host's first destination, b among them.
    let probed = parse(
            "[topology]\nkind = \"links\"\nlinks = [[\"h\", \"a\"], [\"h\", \"b\"], [\"h\", \"c\"], [\"h\", \"d\"], [\"h\", \"e\"]]\n\
             hosts = [\"a\", \"b\", \"c\", \"d\", \"e\"]\n[traffic]\nflows = 2\nprobes = 1\n[[impair]]\nlink = [\"h\", \"b\"]\ndelay_us = 5000\n",
        )
        .unwrap();
    let w = probed.warnings();
    assert!(!w.iter().any(|w| w.contains("delay_us")), "{w:?}");
}

#[test]
fn switches_off_every_route_carry_no_traffic() {
    // a - b - c, b - d, and a square a - e - f - c beside it: hosts a and c, so a to c
    // takes a-b-c (2 hops); d, e and f carry nothing.
    let l = parse(
        "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"b\", \"d\"], \
             [\"a\", \"e\"], [\"e\", \"f\"], [\"f\", \"c\"]]\nhosts = [\"a\", \"c\"]\n",
    )
    .unwrap();
    assert_eq!(l.topology.names, ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(l.carries_traffic(), [true, true, true, false, false, false]);
    // ECMP: both halves of a square carry traffic between opposite corners.
    let sq = parse(
        "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"a\", \"d\"], \
             [\"d\", \"c\"], [\"c\", \"e\"]]\nhosts = [\"a\", \"c\"]\n",
    )
    .unwrap();
    assert_eq!(sq.carries_traffic(), [true, true, true, true, false]);
}

#[test]
fn impairments_no_route_crosses_are_warned_about() {
    // a - b - c with a branch b - d; hosts at a and c.
    let lab = |link: &str| {
        parse(&format!(
                "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"b\", \"d\"]]\n\
                 hosts = [\"a\", \"c\"]\n[[impair]]\nlink = {link}\nloss = 0.1\n"
            ))
            .unwrap()
    };
    for crossed in ["[\"a\", \"b\"]", "[\"b\", \"a\"]", "[\"c\", \"b\"]"] {
        assert_eq!(lab(crossed).warnings(), Vec::<String>::new());
    }
    let w = lab("[\"b\", \"d\"]").warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("impair[0].link: ") && w[0].contains("b -> d"),
        "{w:?}"
    );
    // Only the pairs that send count: a alone sending to c leaves c -> b idle.
    let one_way = parse(
        "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"]]\n\
             [traffic]\npairs = [[\"a\", \"c\"]]\n[[impair]]\nlink = [\"c\", \"b\"]\nloss = 0.1\n",
    )
    .unwrap();
    assert_eq!(one_way.warnings().len(), 1);
    // An impairment that starts after the traffic.
    let mut late = lab("[\"a\", \"b\"]");
    late.impair[0].from_s = late.duration_s;
    let w = late.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("impair[0].from_s: "),
        "{w:?}"
    );
    // Reordering without a delay, and a delay from the start to the end, cannot be seen.
    let mut reorder = lab("[\"a\", \"b\"]");
    reorder.impair[0].reorder = 0.05;
    let w = reorder.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("impair[0].reorder: "),
        "{w:?}"
    );
    // With a delay it overtakes only what was sent in the last delay plus jitter: 40 ms
    // cannot reorder probes 50 ms apart (20 a second), 60 ms can.
    reorder.impair[0].delay_us = 20_000;
    reorder.impair[0].jitter_us = 20_000;
    reorder.impair[0].from_s = 5.0;
    reorder.traffic.probes = 1;
    let w = reorder.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("impair[0].reorder: ") && w[0].contains("above 25"),
        "{w:?}"
    );
    reorder.impair[0].delay_us = 40_000;
    assert_eq!(reorder.warnings(), Vec::<String>::new());
    let mut constant = lab("[\"a\", \"b\"]");
    constant.impair[0].delay_us = 20_000;
    constant.traffic.probes = 1;
    let w = constant.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("impair[0]: a delay for the whole run"),
        "{w:?}"
    );
    // One that ends within the run but starts at once: detection takes it for the
    // baseline and sees only its end (a fall).
    constant.impair[0].until_s = Some(constant.duration_s / 2.0);
    let w = constant.warnings();
    assert!(
        w.len() == 1
            && w[0].starts_with("impair[0].from_s: a delay from the traffic's first packet"),
        "{w:?}"
    );
    // A few normal samples first are enough.
    constant.impair[0].from_s = 0.3;
    assert_eq!(constant.warnings(), Vec::<String>::new());
    // Jitter spreads every window's delays: seen whatever the level, for the whole run too.
    constant.impair[0].from_s = 0.0;
    constant.impair[0].until_s = None;
    constant.impair[0].jitter_us = 10_000;
    assert_eq!(constant.warnings(), Vec::<String>::new());
}

/// A pair says which of its switches has no hosts; a lab named by its file says the
/// name came from there.
#[test]
fn pair_and_name_errors_say_which() {
    let base = "[topology]\nkind = \"chain\"\nswitches = 3\n";
    let e = parse(&format!("{base}[traffic]\npairs = [[\"s1\", \"s2\"]]\n")).unwrap_err();
    assert!(e.to_string().contains("`s2` has no hosts"), "{e}");
    let e = parse(&format!("{base}[traffic]\npairs = [[\"s3\", \"s3\"]]\n")).unwrap_err();
    assert!(e.to_string().contains("`s3` twice"), "{e}");
    let e = parse(&format!(
        "{base}[traffic]\npairs = [[\"s1\", \"s3\"], [\"s3\", \"s1\"], [\"s1\", \"s3\"]]\n"
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("traffic.pairs[2]: the same pair as traffic.pairs[0]"),
        "{e}"
    );
    let e = Lab::parse(base, Path::new("."), "chain.v2").unwrap_err();
    assert!(
        e.to_string().contains("the file's name") && e.to_string().contains("set `name`"),
        "{e}"
    );
}

#[test]
fn bad_values_name_their_key() {
    let base = "[topology]\nkind = \"chain\"\nswitches = 3\n";
    for (extra, want) in [
        ("[traffic]\nrate_pps = 0\n", "traffic.rate_pps"),
        ("[traffic]\npacket_size = \"huge\"\n", "traffic.packet_size"),
        (
            "[traffic]\npairs = [[\"s1\", \"s2\"]]\n",
            "traffic.pairs[0]",
        ),
        (
            "[[impair]]\nlink = [\"s1\", \"s3\"]\nloss = 0.1\n",
            "impair[0].link",
        ),
        ("[[impair]]\nlink = [\"s1\", \"s9\"]\n", "impair[0].link"),
        // Values are checked here as the switch would check them, named here.
        (
            "[[impair]]\nlink = [\"s1\", \"s2\"]\nloss = 1.5\n",
            "impair[0].loss",
        ),
        (
            "[[impair]]\nlink = [\"s1\", \"s2\"]\nloss = 0.1\nfrom_s = 5\nuntil_s = 2\n",
            "impair[0].until_s",
        ),
        (
            "[[impair]]\nlink = [\"s1\", \"s2\"]\ndelay_us = 10\njitter_us = 20\n",
            "impair[0].jitter_us",
        ),
        ("[[impair]]\nlink = [\"s1\", \"s2\"]\n", "impair[0]"),
        ("[switches]\nidle = \"nap\"\n", "switches.idle"),
        (
            "[traffic]\nrate_pps = 100\nprobes = 5\nprobe_hz = 20\n",
            "traffic.probe_hz",
        ),
        ("[switches]\ncapacity = \"fast\"\n", "switches.capacity"),
        ("[traffic]\npacket_size = 40\n", "traffic.packet_size"),
        // The sink's flags, checked by the sink's own parser before anything starts.
        ("[sink]\nsensitivity = \"extreme\"\n", "sink.sensitivity"),
        ("[sink]\nargs = [\"--bogus\"]\n", "sink.args"),
        ("[sink]\nargs = [\"--max-flows\", \"0\"]\n", "sink.args"),
        // The lab gives the sink its addresses itself.
        (
            "[sink]\nargs = [\"--listen\", \"127.0.0.1:1\"]\n",
            "sink.args",
        ),
    ] {
        assert_eq!(
            key(parse(&format!("{base}{extra}")).unwrap_err()),
            want,
            "{extra}"
        );
    }
    // A frame size is a number or a string of one.
    for size in ["1000", "\"1000\""] {
        let lab = parse(&format!("{base}[traffic]\npacket_size = {size}\n")).unwrap();
        assert_eq!(lab.traffic.packet_size, "1000");
    }
    let lab = parse(&format!(
        "{base}[sink]\nargs = [\"--max-flows\", \"5000\"]\n"
    ))
    .unwrap();
    assert_eq!(lab.sink_args, ["--max-flows", "5000"]);
    assert_eq!(
        key(parse("[topology]\nkind = \"ring\"\n").unwrap_err()),
        "topology.kind"
    );
    assert_eq!(
        key(parse("[topology]\nkind = \"fat-tree\"\nk = 3\n").unwrap_err()),
        "topology.k"
    );
    assert!(matches!(
        parse("[topology]\nkind = \"chain\"\nswitches = 3\nspeed = 1\n"),
        Err(LabError::Parse { .. })
    ));
    // Another kind's key is named, not ignored.
    let e = parse("[topology]\nkind = \"chain\"\nswitches = 3\nspines = 2\n").unwrap_err();
    assert_eq!(key(e), "topology.spines");
    let e = parse("[topology]\nkind = \"fat-tree\"\nk = 4\nleaves = 2\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("not a key of a fat-tree topology (it takes k)"),
        "{e}"
    );
    let e = parse(
        "[topology]\nkind = \"chain\"\nswitches = 3\n[traffic]\nprobes = 1\nprobe_hz = 100001\n",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("100001.0: 0.000001 to 100000"),
        "{e}"
    );
    // Slower than pint-gen takes (its period is no time).
    let e = parse(
        "[topology]\nkind = \"chain\"\nswitches = 3\n[traffic]\nprobes = 1\nprobe_hz = 1e-300\n",
    )
    .unwrap_err();
    let e = e.to_string();
    assert_eq!(e, "traffic.probe_hz: 1e-300: 0.000001 to 100000");
    // The switches' own flowset limit, named by the lab's key, without the hint at more
    // workers a lab does not have.
    let e =
        parse("[topology]\nkind = \"chain\"\nswitches = 3\n[switches]\nexpected_flows = 1200000\n")
            .unwrap_err();
    let said = e.to_string();
    assert!(said.contains("switches.expected_flows"), "{said}");
    assert!(
        said.contains("more than a frame to the sink holds"),
        "{said}"
    );
    assert!(!said.contains("workers"), "{said}");
    // A hub may have a neighbour on every port but its hosts' one.
    let star = |leaves: usize| {
        let links: Vec<String> = (1..=leaves)
            .map(|l| format!("[\"hub\", \"l{l}\"]"))
            .collect();
        format!(
            "[topology]\nkind = \"links\"\nlinks = [{}]\n",
            links.join(", ")
        )
    };
    let lab = parse(&star(pipeline::MAX_PORTS - 1)).unwrap();
    assert_eq!(lab.topology.neighbours(0).len(), pipeline::MAX_PORTS - 1);
    let err = parse(&star(pipeline::MAX_PORTS)).unwrap_err();
    assert_eq!(key(err), "topology");
}

/// A lab whose files are in `dir`.
fn parse_in(dir: &crate::scratch::Scratch, text: &str) -> Result<Lab, LabError> {
    Lab::parse(text, &dir.path(""), "t")
}

#[test]
fn a_topology_in_parts_pairs_only_hosts_with_a_path() {
    let dir = crate::scratch::Scratch::new("lab-parts").unwrap();
    std::fs::write(dir.path("t.toml"), "links = [[1, 2], [2, 3], [4, 5]]\n").unwrap();
    let lab = |extra: &str| {
        parse_in(
            &dir,
            &format!("[topology]\nkind = \"file\"\npath = \"t.toml\"\n{extra}"),
        )
    };
    let l = lab("").unwrap();
    assert_eq!(l.hosts, vec![0, 2, 3, 4]);
    let mut pairs = l.traffic.pairs.clone();
    pairs.sort_unstable();
    assert_eq!(pairs, [(0, 2), (2, 0), (3, 4), (4, 3)]);
    let name = |n: usize| l.topology.names[n].clone();
    let e = lab(&format!(
        "[traffic]\npairs = [[\"{}\", \"{}\"]]\n",
        name(0),
        name(3)
    ))
    .unwrap_err();
    assert_eq!(key(e), "traffic.pairs[0]");
    let e = lab(&format!("hosts = [\"{}\", \"{}\"]\n", name(0), name(4))).unwrap_err();
    assert_eq!(key(e), "topology.hosts");
}

/// A topology in parts each with one switch of one neighbour: each part's switches all get
/// hosts (the one-neighbour switches of the whole file, one per part, had no path between
/// them and the lab could not run).
#[test]
fn each_part_of_a_topology_gets_hosts_of_its_own() {
    let dir = crate::scratch::Scratch::new("lab-islands").unwrap();
    std::fs::write(
        dir.path("t.toml"),
        "links = [[1, 2], [2, 3], [3, 1], [3, 4], [5, 6], [6, 7], [7, 5], [7, 8], [9, 10], [10, 11]]\n",
    )
    .unwrap();
    let l = parse_in(&dir, "[topology]\nkind = \"file\"\npath = \"t.toml\"\n").unwrap();
    // Parts {1, 2, 3, 4} and {5, 6, 7, 8} have one switch of one neighbour each: all of
    // theirs; {9, 10, 11} has two: those.
    assert_eq!(l.hosts, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 10]);
    assert!(
        l.traffic
            .pairs
            .iter()
            .all(|&(a, b)| (a < 4) == (b < 4) && (a < 8) == (b < 8))
    );
    assert_eq!(l.traffic.pairs.len(), 12 + 12 + 2);
}

/// Without `traffic.pairs`, a host's destinations start from the host after it, so that hosts
/// with fewer flows than destinations send to different hosts (all sent to the first few).
#[test]
fn hosts_with_few_flows_spread_them_over_different_destinations() {
    let dir = crate::scratch::Scratch::new("lab-spread").unwrap();
    std::fs::write(
        dir.path("t.toml"),
        "links = [[1, 9], [2, 9], [3, 9], [4, 9], [5, 9]]\n",
    )
    .unwrap();
    let l = parse_in(
        &dir,
        "[topology]\nkind = \"file\"\npath = \"t.toml\"\n[traffic]\nflows = 1\nprobes = 0\n",
    )
    .unwrap();
    assert_eq!(l.hosts.len(), 5);
    let firsts: Vec<u32> = l.hosts.iter().map(|&h| l.destinations(h)[0]).collect();
    let mut distinct = firsts.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "first destinations {firsts:?}");
    assert_eq!(l.active_pairs().len(), 5);
}

#[test]
fn switches_on_no_link_are_left_out_and_the_others_keep_their_ids() {
    let dir = crate::scratch::Scratch::new("lab-isolated").unwrap();
    // Node "lone" (switch 2 in file order) has no edge; "loop" only a self-loop.
    std::fs::write(
        dir.path("t.graphml"),
        r#"<graphml><graph>
                <node id="a"/><node id="lone"/><node id="b"/><node id="c"/><node id="loop"/>
                <edge source="a" target="b"/><edge source="b" target="c"/>
                <edge source="loop" target="loop"/>
            </graph></graphml>"#,
    )
    .unwrap();
    let lab = |extra: &str| {
        parse_in(
            &dir,
            &format!("[topology]\nkind = \"file\"\npath = \"t.graphml\"\n{extra}"),
        )
    };
    let l = lab("").unwrap();
    assert_eq!(l.left_out, vec!["lone", "loop"]);
    assert_eq!(l.topology.names, vec!["a", "b", "c"]);
    let ids: Vec<u32> = (0..3).map(|n| l.switch_id(n)).collect();
    assert_eq!(
        ids,
        vec![1, 3, 4],
        "switch IDs stay those of the file's order"
    );
    assert_eq!(l.node_of_id(3), Some(1));
    assert_eq!(l.node_of_id(2), None);
    assert_eq!(l.hosts, vec![0, 2]);
    let note = l.left_out_note().unwrap();
    assert!(
        note.contains("2 switches") && note.contains("`lone`"),
        "{note}"
    );
    // The sink reads the lab's topology file back with the same switches and links.
    let sink_view =
        Topology::parse_toml("t", &crate::lab::plan::LabPlan::topology_toml(&l)).unwrap();
    assert_eq!(sink_view.switch_ids(), vec![1, 3, 4]);
    assert_eq!(sink_view.names, l.topology.names);
    assert_eq!(sink_view.edges(), 2);
    // Naming a left-out switch says why it is not there.
    let e = lab("hosts = [\"a\", \"lone\"]\n").unwrap_err();
    assert!(e.to_string().contains("on no link"), "{e}");
    assert_eq!(key(e), "topology.hosts");
    // A number is a node's name in a GML file, never a switch ID: the left-out node
    // `2` is not switch 2 (node `1`), nor is `4`, which names no node, switch 4.
    std::fs::write(
        dir.path("n.gml"),
        "graph [ node [ id 0 ] node [ id 1 ] node [ id 2 ] node [ id 3 ]\n\
             edge [ source 0 target 1 ] edge [ source 1 target 3 ] ]\n",
    )
    .unwrap();
    let gml = |hosts: &str| {
        parse_in(
            &dir,
            &format!("[topology]\nkind = \"file\"\npath = \"n.gml\"\nhosts = {hosts}\n"),
        )
    };
    let e = gml("[\"0\", \"2\"]").unwrap_err();
    assert!(e.to_string().contains("`2` is on no link"), "{e}");
    let e = gml("[\"0\", \"4\"]").unwrap_err();
    assert!(e.to_string().contains("no switch is called `4`"), "{e}");
    assert_eq!(gml("[\"0\", \"3\"]").unwrap().hosts, vec![0, 2]);
    // Too few switches on a link.
    std::fs::write(
        dir.path("t.graphml"),
        r#"<graphml><graph><node id="a"/><node id="b"/><node id="c"/>
                <edge source="a" target="a"/></graph></graphml>"#,
    )
    .unwrap();
    let e = lab("").unwrap_err();
    assert!(e.to_string().contains("0 switches on a link"), "{e}");
}

#[test]
fn a_gml_topology_is_a_lab_and_a_broken_one_names_the_key_and_line() {
    let dir = crate::scratch::Scratch::new("lab-gml").unwrap();
    std::fs::write(
        dir.path("zoo.gml"),
        "graph [\n  node [ id 0 label \"West\" ]\n  node [ id 1 label \"Middle\" ]\n\
             node [ id 2 label \"East\" ]\n  node [ id 3 ]\n\
             edge [ source 0 target 1 ]\n  edge [ source 1 target 2 ]\n]\n",
    )
    .unwrap();
    let lab = |path: &str| {
        parse_in(
            &dir,
            &format!("[topology]\nkind = \"file\"\npath = \"{path}\"\n"),
        )
    };
    let l = lab("zoo.gml").unwrap();
    assert_eq!(l.topology.names, vec!["0", "1", "2"]);
    // The summary and report show the place names beside the ids, and so does the
    // sink, from the topology file the lab hands it.
    assert_eq!(l.shown(0), "0 (West)");
    let sink_view =
        Topology::parse_toml("t", &crate::lab::plan::LabPlan::topology_toml(&l)).unwrap();
    let shown: Vec<String> = (0..3).map(|n| sink_view.display_name(n)).collect();
    assert_eq!(shown, ["0 (West)", "1 (Middle)", "2 (East)"]);
    // Switches may be named by their labels where no other switch shares them.
    let by_label = parse_in(
        &dir,
        "[topology]\nkind = \"file\"\npath = \"zoo.gml\"\nhosts = [\"West\", \"1\"]\n",
    )
    .unwrap();
    assert_eq!(by_label.hosts, vec![0, 1]);
    // A lab on GML text `gml` with hosts `hosts`: its error.
    let refused = |gml: &str, hosts: &str| {
        std::fs::write(dir.path("other.gml"), gml).unwrap();
        let lab = format!("[topology]\nkind = \"file\"\npath = \"other.gml\"\nhosts = {hosts}\n");
        parse_in(&dir, &lab).unwrap_err()
    };
    let e = refused(
        "graph [ node [ id 0 label \"Twin\" ] node [ id 1 label \"Twin\" ] \
             edge [ source 0 target 1 ] ]",
        "[\"Twin\", \"1\"]",
    );
    assert!(e.to_string().contains("several switches (0, 1)"), "{e}");
    assert_eq!(key(e), "topology.hosts");
    assert_eq!(l.left_out, vec!["3"]);
    // Node 2, on no link, named by its label: said to be left out.
    let e = refused(
        "graph [ node [ id 0 ] node [ id 1 ] node [ id 2 label \"Lone\" ] \
             edge [ source 0 target 1 ] ]",
        "[\"0\", \"Lone\"]",
    );
    assert!(e.to_string().contains("`Lone` is on no link"), "{e}");
    assert_eq!(l.hosts, vec![0, 2], "the line's two ends");
    assert_eq!(
        (0..3).map(|n| l.switch_id(n)).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    std::fs::write(
        dir.path("broken.gml"),
        "graph [\n  node [ id 0 ]\n  edge [ source 0 target ]\n]\n",
    )
    .unwrap();
    let e = lab("broken.gml").unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
    assert_eq!(key(e), "topology.path");
}

#[test]
fn a_toml_topology_keeps_its_switch_ids() {
    let dir = crate::scratch::Scratch::new("lab-ids").unwrap();
    std::fs::write(
        dir.path("t.toml"),
        "links = [[10, 20], [20, 30]]\n[names]\n20 = \"core\"\n",
    )
    .unwrap();
    let l = parse_in(&dir, "[topology]\nkind = \"file\"\npath = \"t.toml\"\n").unwrap();
    let ids: Vec<u32> = (0..3).map(|n| l.switch_id(n)).collect();
    assert_eq!(ids, vec![10, 20, 30]);
    assert_eq!(l.node_of_id(20), Some(1));
    assert_eq!(l.name(1), "core");
    let sink_view =
        Topology::parse_toml("t", &crate::lab::plan::LabPlan::topology_toml(&l)).unwrap();
    assert_eq!(sink_view.switch_ids(), vec![10, 20, 30]);
}

#[test]
fn a_query_file_is_read_where_the_lab_is_and_checked() {
    let dir = crate::scratch::Scratch::new("lab-queries").unwrap();
    std::fs::write(
        dir.path("good.toml"),
        control::config::telemetry::PAPER_QUERIES,
    )
    .unwrap();
    std::fs::write(dir.path("bad.toml"), "global_bits = 99\n").unwrap();
    let lab = |q: &str| {
        parse_in(
            &dir,
            &format!("queries = \"{q}\"\n[topology]\nkind = \"chain\"\nswitches = 3\n"),
        )
    };
    assert_eq!(
        lab("good.toml").unwrap().queries,
        Some(dir.path("good.toml"))
    );
    for q in ["bad.toml", "missing.toml"] {
        assert_eq!(key(lab(q).unwrap_err()), "queries", "{q}");
    }
}

/// A lab that runs but cannot show what it is for says so before it starts: flowsets sized
/// below the flows an epoch brings them (they do not decode and their counts are lost), a
/// query plan that traces no path (no path or loss per link to check); and a flowset
/// size the switches would refuse is refused under the lab's own key.
#[test]
fn labs_that_cannot_show_their_telemetry_are_warned_about() {
    let chain = |extra: &str| {
        parse(&format!(
            "[topology]\nkind = \"chain\"\nswitches = 3\n{extra}"
        ))
    };
    assert_eq!(chain("").unwrap().warnings(), Vec::<String>::new());
    // The chain's ends: 20 flows out and 20 in each, 40 packets an epoch (2000 pps both
    // ways over 10 ms): 40 flows an epoch at most.
    let w = chain("[switches]\nexpected_flows = 1\n")
        .unwrap()
        .warnings();
    assert!(
        w.len() == 1
            && w[0].starts_with("switches.expected_flows: 1, but about 40 flows an epoch cross s"),
        "{w:?}"
    );
    assert_eq!(
        chain("[switches]\nexpected_flows = 40\n")
            .unwrap()
            .warnings(),
        Vec::<String>::new()
    );
    // Flows that only cross a switch count there too: with hosts at all three, s2 also
    // carries s1's and s3's flows to each other (60 flows, 60 packets an epoch).
    let w = chain("hosts = [\"s1\", \"s2\", \"s3\"]\n[switches]\nexpected_flows = 50\n")
        .unwrap()
        .warnings();
    assert!(
        w.len() == 1
            && w[0]
                .starts_with("switches.expected_flows: 50, but about 60 flows an epoch cross s2"),
        "{w:?}"
    );
    // Fewer packets an epoch than flows: the packets bound it.
    let w = chain("[switches]\nexpected_flows = 10\nepoch_ms = 2\n")
        .unwrap()
        .warnings();
    assert!(w.is_empty(), "8 packets an epoch: {w:?}");
    let dir = crate::scratch::Scratch::new("lab-no-paths").unwrap();
    std::fs::write(
        dir.path("q.toml"),
        "global_bits = 8\n[[queries]]\nname = \"u\"\nvalue = \"link_utilization\"\naggregation = \"max\"\nbits = 8\n",
    )
    .unwrap();
    let lab = parse_in(
        &dir,
        "queries = \"q.toml\"\n[topology]\nkind = \"chain\"\nswitches = 3\n",
    )
    .unwrap();
    assert!(!lab.plan_traces_paths());
    let w = lab.warnings();
    assert!(
        w.len() == 1 && w[0].starts_with("queries: the query plan traces no path"),
        "{w:?}"
    );
    assert!(chain("").unwrap().plan_traces_paths());
    // Within the lab's range, beyond what a flowset frame holds.
    let e = chain("[switches]\nexpected_flows = 5000000\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("more than a frame to the sink holds"),
        "{e}"
    );
    assert_eq!(key(e), "switches.expected_flows");
    assert!(chain("[switches]\nexpected_flows = 1000000\n").is_ok());
}
