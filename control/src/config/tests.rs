use super::*;

const GOOD: &str = r#"
switch_id = 7

[stats]
interval_ms = 500

[[ports]]
name = "in"
device = "net_pcap0,rx_pcap=/tmp/in.pcap"
role = "edge"
mac = "02:00:00:00:00:01"

[[ports]]
name = "up0"
device = "net_null0,no-rx=1"
role = "fabric"
mac = "02:00:00:00:01:00"
capacity = "40G"
mtu = 9000

[[ports]]
name = "up1"
device = "0000:3b:00.1"
role = "fabric"
mac = "02:00:00:00:01:01"

[[workers]]
lcore = 1
rx = ["in", "up0:1"]

[[workers]]
lcore = 2
rx = ["up0:0"]

[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{ port = "up0", mac = "02:00:00:00:02:00" }, { port = "up1", mac = "02:00:00:00:02:01" }]

[[routes]]
prefix = "0.0.0.0/0"
next_hops = [{ port = "in", mac = "02:00:00:00:03:00" }]
"#;

fn err(text: &str) -> ConfigError {
    Config::from_toml(text).expect_err("config should be rejected")
}

fn key_of(e: &ConfigError) -> &str {
    match e {
        ConfigError::Key { key, .. } => key,
        other => panic!("expected a key error, got {other}"),
    }
}

#[test]
fn good_config_resolves_defaults() {
    let c = Config::from_toml(GOOD).unwrap();
    assert_eq!(c.switch_id, 7);
    assert_eq!(c.ports.len(), 3);
    assert_eq!(c.ports[0].mtu, 1500);
    assert_eq!(c.ports[0].capacity_bps, 10_000_000_000);
    assert_eq!(c.ports[1].capacity_bps, 40_000_000_000);
    assert_eq!(c.ports[1].rx_queues, 2);
    assert_eq!(c.ports[2].rx_queues, 1);
    assert!(c.ports[2].is_pci());
    assert!(!c.ports[0].is_pci());
    assert_eq!(
        c.workers[0].rx[1],
        RxQueueRef {
            port: "up0".into(),
            port_index: 1,
            queue: 1
        }
    );
    assert_eq!(c.routes[0].next_hops[1].port_index, 2);
    assert_eq!(c.stats.interval_ms, 500);
    assert_eq!(c.dataplane.idle, IdleMode::Poll);
    let printed = c.to_toml();
    assert!(printed.contains("switch_id = 7"), "{printed}");
    assert!(printed.contains("prefix = \"10.0.0.0/8\""), "{printed}");
    assert!(printed.contains("mac = \"02:00:00:00:02:01\""), "{printed}");
}

#[test]
fn syntax_errors_name_the_line() {
    let e = err(&GOOD.replace("mtu = 9000", "mtu = 9000\nmttu = 1"));
    let ConfigError::Syntax(msg) = &e else {
        panic!("{e}")
    };
    assert!(msg.contains("mttu"), "{msg}");
    let e = err("switch_id = \"seven\"\n");
    assert!(matches!(e, ConfigError::Syntax(_)), "{e}");
}

#[test]
fn bad_values_name_their_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("switch_id = 7", "switch_id = 0", "switch_id"),
        ("switch_id = 7", "", "switch_id"),
        (
            "mac = \"02:00:00:00:00:01\"",
            "mac = \"02:00:00:00:00\"",
            "ports[0].mac",
        ),
        (
            "mac = \"02:00:00:00:00:01\"",
            "mac = \"01:00:5e:00:00:01\"",
            "ports[0].mac",
        ),
        (
            "mac = \"02:00:00:00:00:01\"",
            "mac = \"00:00:00:00:00:00\"",
            "ports[0].mac",
        ),
        (
            "mac = \"02:00:00:00:03:00\"",
            "mac = \"ff:ff:ff:ff:ff:ff\"",
            "routes[1].next_hops[0].mac",
        ),
        (
            "mac = \"02:00:00:00:03:00\"",
            "mac = \"00:00:00:00:00:00\"",
            "routes[1].next_hops[0].mac",
        ),
        (
            "name = \"up1\"",
            "name = \"uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu\"",
            "ports[2].name",
        ),
        ("name = \"up1\"", "name = \"#up1\"", "ports[2].name"),
        ("name = \"up1\"", "name = \"up\\u0001\"", "ports[2].name"),
        ("name = \"up1\"", "name = \"u p\"", "ports[2].name"),
        ("mtu = 9000", "mtu = 20", "ports[1].mtu"),
        (
            "capacity = \"40G\"",
            "capacity = \"40Q\"",
            "ports[1].capacity",
        ),
        // Values of a type the key does not take are named by the key, not by the type
        // that reads them.
        ("capacity = \"40G\"", "capacity = -5", "ports[1].capacity"),
        (
            "capacity = \"40G\"",
            "capacity = 2.5e9",
            "ports[1].capacity",
        ),
        ("capacity = \"40G\"", "capacity = true", "ports[1].capacity"),
        // Above 1 Pbit/s, written either way.
        (
            "capacity = \"40G\"",
            "capacity = 1000000000000001",
            "ports[1].capacity",
        ),
        (
            "capacity = \"40G\"",
            "capacity = \"1000.1T\"",
            "ports[1].capacity",
        ),
        ("name = \"up1\"", "name = \"up0\"", "ports[2].name"),
        (
            "device = \"0000:3b:00.1\"",
            "device = \"net_null0\"",
            "ports[2].device",
        ),
        ("lcore = 2", "lcore = 1", "workers[1].lcore"),
        ("rx = [\"up0:0\"]", "rx = [\"up0:1\"]", "workers[1].rx[0]"),
        ("rx = [\"up0:0\"]", "rx = [\"nope\"]", "workers[1].rx[0]"),
        ("rx = [\"up0:0\"]", "rx = [\"up0:x\"]", "workers[1].rx[0]"),
        ("rx = [\"up0:0\"]", "rx = []", "workers[1].rx"),
        (
            "prefix = \"10.0.0.0/8\"",
            "prefix = \"10.0.0.1/8\"",
            "routes[0].prefix",
        ),
        (
            "prefix = \"10.0.0.0/8\"",
            "prefix = \"0.0.0.0/0\"",
            "routes[1].prefix",
        ),
        (
            "{ port = \"up1\", mac = \"02:00:00:00:02:01\" }",
            "{ port = \"up9\", mac = \"02:00:00:00:02:01\" }",
            "routes[0].next_hops[1].port",
        ),
        (
            "{ port = \"up1\", mac = \"02:00:00:00:02:01\" }",
            "{ port = \"up1\" }",
            "routes[0].next_hops[1].mac",
        ),
        ("interval_ms = 500", "interval_ms = 5", "stats.interval_ms"),
        (
            "prefix = \"10.0.0.0/8\"",
            "prefix = \"10.0.0.0/+8\"",
            "routes[0].prefix",
        ),
    ];
    for (from, to, key) in cases {
        assert!(GOOD.contains(from), "test case does not apply: {from}");
        let e = err(&GOOD.replacen(from, to, 1));
        assert_eq!(key_of(&e), *key, "{from} -> {to}: {e}");
    }
}

/// A route without `next_hops` says the key is missing; a next hop listed twice names the
/// first listing.
#[test]
fn route_next_hop_errors_say_what_is_wrong() {
    let no_hops = GOOD.replace(
        "next_hops = [{ port = \"in\", mac = \"02:00:00:00:03:00\" }]",
        "",
    );
    let e = err(&no_hops);
    assert_eq!(key_of(&e), "routes[1].next_hops");
    assert!(e.to_string().contains("missing"), "{e}");
    let twice = GOOD.replace(
        "{ port = \"up1\", mac = \"02:00:00:00:02:01\" }",
        "{ port = \"up0\", mac = \"02:00:00:00:02:00\" }",
    );
    let e = err(&twice);
    assert_eq!(key_of(&e), "routes[0].next_hops[1].port");
    assert!(e.to_string().contains("next_hops[0]"), "{e}");
}

#[test]
fn unpolled_lower_queue_is_rejected() {
    let e = err(&GOOD.replace("rx = [\"up0:0\"]", "rx = [\"up0:3\"]"));
    assert_eq!(key_of(&e), "workers");
    assert!(e.to_string().contains("queue"), "{e}");
}

#[test]
fn empty_sections_are_rejected() {
    assert_eq!(key_of(&err("switch_id = 1\n")), "ports");
    let no_workers = GOOD.split("[[workers]]").next().unwrap().to_owned();
    assert_eq!(key_of(&err(&no_workers)), "workers");
}

#[test]
fn pci_addresses() {
    assert!(is_pci_address("0000:01:00.0"));
    assert!(is_pci_address("3b:00.1"));
    assert!(!is_pci_address("net_pcap0"));
    assert!(!is_pci_address("0000:01:00"));
    assert!(!is_pci_address("virtio_user0"));
}

/// Two spellings of one device are one device: DPDK gives both one port.
#[test]
fn a_device_spelt_twice_is_one_device() {
    assert_eq!(device_name("3B:00.1,txq_inline=128"), "0000:3b:00.1");
    assert_eq!(device_name(" 0000:3b:00.1 "), "0000:3b:00.1");
    assert_eq!(device_name("net_null0,no-rx=1"), "net_null0");
    for (spelt, other) in [
        ("3b:00.1", "0000:3b:00.1"),
        ("0000:3B:00.1", "0000:3b:00.1"),
        (" net_null0 ,no-rx=1", "net_null0"),
    ] {
        let text = GOOD
            .replace(
                "device = \"net_null0,no-rx=1\"",
                &format!("device = \"{spelt}\""),
            )
            .replace(
                "device = \"0000:3b:00.1\"",
                &format!("device = \"{other}\""),
            );
        let e = err(&text);
        assert_eq!(key_of(&e), "ports[2].device", "{spelt} and {other}: {e}");
        assert!(e.to_string().contains("ports[1]"), "{e}");
    }
}

#[test]
fn telemetry_is_off_without_its_table_and_on_with_it() {
    let c = Config::from_toml(GOOD).unwrap();
    assert!(!c.telemetry.enabled);
    assert_eq!(c.metrics.listen, None);
    let c = Config::from_toml(&format!("{GOOD}\n[telemetry]\n")).unwrap();
    let t = &c.telemetry;
    assert!(t.enabled);
    assert_eq!(t.shim_ethertype, 0x88b5);
    assert_eq!(t.epoch_ms, 10);
    assert_eq!(t.flowradar.hashes, 3);
    assert_eq!(
        t.query_text,
        telemetry::PAPER_QUERIES,
        "the paper plan by default"
    );
    let c = Config::from_toml(&format!(
        "{GOOD}\n[telemetry]\nshim_ethertype = \"0x9000\"\nsink = \"localhost:7300\"\npath_length_bound = 6\n[telemetry.flowradar]\nexpected_flows = 500\n[metrics]\nlisten = \"127.0.0.1:9400\"\n"
    ))
    .unwrap();
    assert_eq!(c.telemetry.shim_ethertype, 0x9000);
    assert_eq!(c.telemetry.sink.as_deref(), Some("localhost:7300"));
    assert_eq!(c.telemetry.flowradar.expected_flows, 500);
    assert!(
        c.telemetry.query_text.contains("max_path_length = 6"),
        "the bound is written into the effective query file: {}",
        c.telemetry.query_text
    );
    assert_eq!(c.metrics.listen.unwrap().port(), 9400);
    let printed = c.to_toml();
    assert!(printed.contains("[telemetry.flowradar]"), "{printed}");
}

#[test]
fn bad_telemetry_values_name_their_key() {
    let cases: &[(&str, &str)] = &[
        ("shim_ethertype = 0x0800", "telemetry.shim_ethertype"),
        ("shim_ethertype = true", "telemetry.shim_ethertype"),
        ("shim_ethertype = [1]", "telemetry.shim_ethertype"),
        ("shim_ethertype = \"zz\"", "telemetry.shim_ethertype"),
        ("shim_ethertype = 12", "telemetry.shim_ethertype"),
        ("shim_ethertype = 0x8808", "telemetry.shim_ethertype"),
        ("shim_ethertype = \"0x88cc\"", "telemetry.shim_ethertype"),
        ("shim_ethertype = \"0x9100\"", "telemetry.shim_ethertype"),
        ("epoch_ms = 0", "telemetry.epoch_ms"),
        ("sink = \"nowhere\"", "telemetry.sink"),
        ("sink = \"host:0\"", "telemetry.sink"),
        ("path_length_bound = 0", "telemetry.path_length_bound"),
        ("digest_ring = 1", "telemetry.digest_ring"),
        ("flowset_buffers = 1", "telemetry.flowset_buffers"),
        ("queries = \"/nonexistent/q.toml\"", "telemetry.queries"),
        (
            "[telemetry.flowradar]\nhashes = 9",
            "telemetry.flowradar.hashes",
        ),
        (
            "[telemetry.flowradar]\ncells_per_flow = 0.5",
            "telemetry.flowradar.cells_per_flow",
        ),
        (
            "[telemetry.flowradar]\nexpected_flows = 0",
            "telemetry.flowradar.expected_flows",
        ),
        // Sizes the protocol cannot carry: more cells than a flowset holds, a full flowset
        // above a frame's 64 MiB, more filter blocks than a flowset holds, a queue that
        // cannot hold one flowset.
        (
            "[telemetry.flowradar]\nexpected_flows = 10000000\ncells_per_flow = 2.0",
            "telemetry.flowradar.cells_per_flow",
        ),
        // A full flowset above a frame because a per-flow size was raised names it.
        (
            "[telemetry.flowradar]\nexpected_flows = 1000000\ncells_per_flow = 16",
            "telemetry.flowradar.cells_per_flow",
        ),
        (
            "[telemetry.flowradar]\nexpected_flows = 1000000\nfilter_bits_per_flow = 512",
            "telemetry.flowradar.filter_bits_per_flow",
        ),
        (
            "[telemetry.flowradar]\nexpected_flows = 2000000",
            "telemetry.flowradar.expected_flows",
        ),
        (
            "[telemetry.flowradar]\nexpected_flows = 5000000\nfilter_bits_per_flow = 512",
            "telemetry.flowradar.filter_bits_per_flow",
        ),
        (
            "export_queue_mb = 1\n[telemetry.flowradar]\nexpected_flows = 100000",
            "telemetry.export_queue_mb",
        ),
    ];
    for (line, key) in cases {
        let e = err(&format!("{GOOD}\n[telemetry]\n{line}\n"));
        assert_eq!(key_of(&e), *key, "{line}: {e}");
    }
    // A negative EtherType is shown as written.
    let e = err(&format!("{GOOD}\n[telemetry]\nshim_ethertype = -1\n"));
    assert!(e.to_string().contains("-1 is not an EtherType"), "{e}");
    for listen in ["9400", "127.0.0.1:0"] {
        let e = err(&format!("{GOOD}\n[metrics]\nlisten = \"{listen}\"\n"));
        assert_eq!(key_of(&e), "metrics.listen", "{listen}: {e}");
    }
    // Keys eal.args overrides change nothing: said, not refused.
    let c = Config::from_toml(&format!(
        "{GOOD}\n[eal]\nargs = [\"-l\", \"0-2\"]\nmain_lcore = 0\nmemory_mb = 512\n"
    ))
    .unwrap();
    let w = c.warnings();
    for key in ["eal.main_lcore", "eal.memory_mb"] {
        assert!(
            w.iter()
                .any(|w| w.contains(&format!("`{key}` is not used"))),
            "{w:?}"
        );
    }
}

#[test]
fn query_files_are_read_relative_to_the_config_and_checked() {
    let dir = std::env::temp_dir().join(format!("pint-config-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("q")).unwrap();
    std::fs::write(
        dir.join("q/bad.toml"),
        "global_bits = 16\n[[queries]]\nname = \"latency\"\nvalue = \"hop_latency\"\naggregation = \"max\"\nbits = 40\n",
    )
    .unwrap();
    std::fs::write(dir.join("q/good.toml"), telemetry::PAPER_QUERIES).unwrap();
    let cfg = dir.join("switch.toml");
    std::fs::write(
        &cfg,
        format!("{GOOD}\n[telemetry]\nqueries = \"q/good.toml\"\n"),
    )
    .unwrap();
    let c = Config::from_file(&cfg).unwrap();
    assert_eq!(
        c.telemetry.queries.as_deref(),
        Some(dir.join("q/good.toml").as_path())
    );
    std::fs::write(
        &cfg,
        format!("{GOOD}\n[telemetry]\nqueries = \"q/bad.toml\"\n"),
    )
    .unwrap();
    let e = Config::from_file(&cfg).unwrap_err();
    assert_eq!(key_of(&e), "telemetry.queries");
    assert!(e.to_string().contains("query `latency`"), "{e}");
    // A file that is not TOML for a switch is named, with the parser's line.
    std::fs::write(&cfg, "switch_id = \"seven\"\n").unwrap();
    let e = Config::from_file(&cfg).unwrap_err();
    let said = e.to_string();
    assert!(
        said.starts_with(&format!("config is not valid: {}: ", cfg.display()))
            && said.contains("line 1"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn impairments_are_validated_by_key() {
    let with = |imp: &str| {
        GOOD.replacen(
            "capacity = \"40G\"",
            &format!("capacity = \"40G\"\nimpair = {{ {imp} }}"),
            1,
        )
    };
    let c = Config::from_toml(&with(
        "loss = 0.01, delay_us = 2000, jitter_us = 500, reorder = 0.001, from_s = 5, until_s = 15",
    ))
    .unwrap();
    let i = c.ports[1].impair.as_ref().unwrap();
    assert_eq!((i.loss, i.delay_us, i.jitter_us), (0.01, 2000, 500));
    assert_eq!((i.from_s, i.until_s, i.limit), (5.0, Some(15.0), 8192));
    assert!(c.ports[0].impair.is_none());
    // Times become cycles at the worker's clock rate.
    let s = i.spec(2_000_000_000, 7);
    assert_eq!((s.delay_cycles, s.jitter_cycles), (4_000_000, 1_000_000));
    assert_eq!(
        (s.from_cycles, s.until_cycles),
        (10_000_000_000, 30_000_000_000)
    );
    assert_eq!(s.seed, 7);

    for (imp, key) in [
        ("loss = 1.0", "ports[1].impair.loss"),
        ("loss = -0.1", "ports[1].impair.loss"),
        ("reorder = 2", "ports[1].impair.reorder"),
        ("delay_us = 2000000", "ports[1].impair.delay_us"),
        (
            "delay_us = 100, jitter_us = 200",
            "ports[1].impair.jitter_us",
        ),
        ("loss = 0.1, limit = 0", "ports[1].impair.limit"),
        (
            "loss = 0.1, from_s = 5, until_s = 4",
            "ports[1].impair.until_s",
        ),
        ("loss = 0.1, from_s = -1", "ports[1].impair.from_s"),
        ("jitter_us = 0", "ports[1].impair"),
    ] {
        let e = err(&with(imp));
        assert_eq!(key_of(&e), key, "{imp}: {e}");
    }
    assert!(Config::from_toml(&with("loss = 0.1, speed = 3")).is_err());
}

#[test]
fn idle_sleeps_default_and_are_checked() {
    let c = Config::from_toml(GOOD).unwrap();
    assert_eq!(
        (c.dataplane.idle_sleep_us, c.dataplane.idle_sleep_max_us),
        (100, 1000)
    );
    let with = |table: &str| format!("{GOOD}\n[dataplane]\nidle = \"sleep\"\n{table}\n");
    let c = Config::from_toml(&with("idle_sleep_us = 5000")).unwrap();
    assert_eq!(
        (c.dataplane.idle_sleep_us, c.dataplane.idle_sleep_max_us),
        (5000, 5000),
        "the longest sleep is never below the first"
    );
    let c = Config::from_toml(&with("idle_sleep_max_us = 100")).unwrap();
    assert_eq!(c.dataplane.idle_sleep_max_us, 100, "no backing off");
    for table in [
        "idle_sleep_us = 200\nidle_sleep_max_us = 100",
        "idle_sleep_max_us = 2000000",
    ] {
        let e = err(&with(table));
        assert_eq!(key_of(&e), "dataplane.idle_sleep_max_us", "{table}: {e}");
    }
    // A cache DPDK would refuse for the pool's size (at most mbufs / 1.5).
    assert!(Config::from_toml(&with("mbufs = 768\nmbuf_cache = 512")).is_ok());
    let e = err(&with("mbufs = 767\nmbuf_cache = 512"));
    assert_eq!(key_of(&e), "dataplane.mbuf_cache", "{e}");
}

#[test]
fn fabric_ports_without_room_for_the_shim_are_warned_about() {
    assert!(
        Config::from_toml(GOOD).unwrap().warnings().is_empty(),
        "telemetry off: no shim"
    );
    // `in` (edge, 1500), `up0` (fabric, 9000), `up1` (fabric, 1500); the paper's plan
    // writes an 8-byte shim.
    let on = Config::from_toml(&format!("{GOOD}\n[telemetry]\n")).unwrap();
    let w = on.warnings();
    assert_eq!(
        w,
        vec![
            "config key `ports[2].mtu` (fabric port `up1`): 1500 leaves no room for the plan's \
             8-byte shim on packets above 1492 bytes, which edge port `in` (mtu 1500) admits: \
             they cross it without telemetry (counted as `no_telemetry_mtu`); set it to 1508 \
             or more"
        ]
    );
    let with_mtu = |mtu: u32| {
        let text = GOOD.replace(
            "mac = \"02:00:00:00:01:01\"\n",
            &format!("mac = \"02:00:00:00:01:01\"\nmtu = {mtu}\n"),
        );
        Config::from_toml(&format!("{text}\n[telemetry]\n")).unwrap()
    };
    assert!(with_mtu(1508).warnings().is_empty());
    assert_eq!(with_mtu(1507).warnings().len(), 1);
    // A wider plan needs more: the longest shim (64-bit digests) is 14 bytes.
    assert!(with_mtu(1508).shim_room_warnings(14)[0].contains("set it to 1514 or more"));
    assert!(with_mtu(1514).shim_room_warnings(14).is_empty());
    // Jumbo hosts leave no fabric MTU that fits: the warning says what to lower.
    let jumbo = GOOD.replace(
        "role = \"edge\"\nmac = \"02:00:00:00:00:01\"\n",
        "role = \"edge\"\nmac = \"02:00:00:00:00:01\"\nmtu = 9600\n",
    );
    let jumbo = Config::from_toml(&format!("{jumbo}\n[telemetry]\n")).unwrap();
    let w = jumbo.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].ends_with("a port's MTU cannot go above 9600: lower edge port `in`'s to 9592 or less"),
        "{}",
        w[0]
    );
    // Without edge ports (a spine) nothing is known of what hosts send.
    let spine = GOOD.replace("role = \"edge\"", "role = \"fabric\"");
    let spine = Config::from_toml(&format!("{spine}\n[telemetry]\n")).unwrap();
    assert!(spine.warnings().is_empty());
}

/// A memif port with more than one queue either way is warned about, naming its key: its
/// peer must have as many (pint-gen has one of each); with one worker and one rx queue,
/// nothing is said.
#[test]
fn memif_ports_with_several_queues_are_warned_about() {
    let memif = GOOD.replace(
        "device = \"net_null0,no-rx=1\"",
        "device = \"net_memif0,role=server,socket=/tmp/m.sock,socket-abstract=no\"",
    );
    let w = Config::from_toml(&memif).unwrap().warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("config key `ports[1].device`: a memif port here has 2 tx queue(s)")
            && w[0].contains("2 rx queue(s)"),
        "{}",
        w[0]
    );
    // One worker polling one queue of it: one queue each way, as pint-gen has.
    let single = memif
        .replace("rx = [\"in\", \"up0:1\"]", "rx = [\"in\", \"up0\"]")
        .replace("[[workers]]\nlcore = 2\nrx = [\"up0:0\"]\n", "");
    let c = Config::from_toml(&single).unwrap();
    assert_eq!(c.workers.len(), 1);
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
}

/// An idle sleep longer than an epoch is warned about when telemetry is on (the worker's
/// flowsets would come late, each spanning several epochs); not when it polls, nor
/// without telemetry.
#[test]
fn an_idle_sleep_longer_than_an_epoch_is_warned_about() {
    let sleepy = GOOD.replacen(
        "[stats]",
        "[dataplane]\nidle = \"sleep\"\nidle_sleep_max_us = 50000\n\n[stats]",
        1,
    );
    let c = Config::from_toml(&format!("{sleepy}\n[telemetry]\n")).unwrap();
    let w = c.warnings();
    assert!(
        w.iter().any(|w| w.starts_with(
            "config key `dataplane.idle_sleep_max_us` (50000 us; never below `idle_sleep_us`) is longer than an epoch"
        )),
        "{w:?}"
    );
    let said = |c: &Config| c.warnings().iter().any(|w| w.contains("idle_sleep_max_us"));
    assert!(said(&c));
    let long_epochs =
        Config::from_toml(&format!("{sleepy}\n[telemetry]\nepoch_ms = 100\n")).unwrap();
    assert!(!said(&long_epochs));
    assert!(!said(&Config::from_toml(&sleepy).unwrap()), "no telemetry");
    let polling = sleepy.replace("idle = \"sleep\"", "idle = \"poll\"");
    assert!(!said(
        &Config::from_toml(&format!("{polling}\n[telemetry]\n")).unwrap()
    ));
}

#[test]
fn a_printed_config_reads_back_as_the_same_switch() {
    // Every optional key set, a query file given relative to the config's directory: what
    // `--check-config` prints is a file that configures the same switch from anywhere.
    let dir = std::env::temp_dir().join(format!("pint-config-print-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("q")).unwrap();
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    std::fs::write(dir.join("q/good.toml"), telemetry::PAPER_QUERIES).unwrap();
    std::fs::write(
        dir.join("q/table.routes"),
        "172.16.0.0/12 up1 02:00:00:00:02:01 up0 02:00:00:00:02:00\n",
    )
    .unwrap();
    let every_key = GOOD
        .replacen(
            "switch_id = 7",
            "switch_id = 7\nroutes_file = \"q/table.routes\"",
            1,
        )
        .replacen(
            "capacity = \"40G\"",
            "capacity = \"40G\"\nrx_descriptors = 512\ntx_descriptors = 2048\npromiscuous = false\nimpair = { loss = 0.01, delay_us = 2000, jitter_us = 500, reorder = 0.001, limit = 100, from_s = 5, until_s = 15.5, seed = 9 }",
            1,
        )
        .replacen(
            "[stats]",
            "[eal]\nmain_lcore = 0\nmemory_mb = 512\nhugepages = true\n\n[dataplane]\nidle = \"sleep\"\nidle_sleep_us = 50\nidle_sleep_max_us = 400\nmbufs = 20000\nmbuf_cache = 128\necmp_seed = 12345\nprefetch = true\n\n[stats]",
            1,
        )
        + "\n[telemetry]\nqueries = \"q/good.toml\"\nshim_ethertype = \"0x9000\"\npath_length_bound = 6\nepoch_ms = 20\nsink = \"localhost:7300\"\nbase_rtt_us = 25\ndigest_ring = 4096\nbatch_digests = 1000\nflowset_buffers = 4\nexport_queue_mb = 16\n[telemetry.flowradar]\nexpected_flows = 500\ncells_per_flow = 1.7\nhashes = 4\nfilter_bits_per_flow = 40.5\n[metrics]\nlisten = \"127.0.0.1:9400\"\n";
    let eal_args = GOOD.replacen(
        "[stats]",
        "[eal]\nargs = [\"-l\", \"0-2\", \"--no-huge\"]\n\n[stats]",
        1,
    );
    for (name, text) in [
        ("minimal", GOOD.to_owned()),
        ("eal args", eal_args),
        ("every key", every_key),
    ] {
        let cfg = dir.join("switch.toml");
        std::fs::write(&cfg, &text).unwrap();
        let c = Config::from_file(&cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = c.to_toml();
        let again = dir.join("elsewhere/printed.toml");
        std::fs::write(&again, &printed).unwrap();
        let c2 = Config::from_file(&again).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert_eq!(format!("{c:?}"), format!("{c2:?}"), "{name}:\n{printed}");
        assert_eq!(c2.to_toml(), printed, "{name}");
    }
    let c = Config::from_file(&dir.join("switch.toml")).unwrap();
    let printed = c.to_toml();
    for line in [
        "capacity = 40000000000",
        "rx = [\"in:0\", \"up0:1\"]",
        "shim_ethertype = \"0x9000\"",
        "seed = 9",
    ] {
        assert!(printed.contains(line), "expected `{line}` in:\n{printed}");
    }
    assert!(!printed.contains("rx_queues"), "{printed}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_value_of_the_wrong_type_is_shown_with_its_key() {
    let e = err(&GOOD.replacen("capacity = \"40G\"", "capacity = true", 1));
    assert_eq!(
        e.to_string(),
        "config key `ports[1].capacity`: `true` (a TOML boolean) is not a capacity: write bit/s as a positive integer or a string such as \"10G\" or \"2.5G\""
    );
    let e = err(&format!("{GOOD}\n[telemetry]\nshim_ethertype = 1.5\n"));
    assert!(
        e.to_string()
            .starts_with("config key `telemetry.shim_ethertype`: `1.5` (a TOML float)"),
        "{e}"
    );
}

#[test]
fn a_query_file_longer_than_the_protocol_carries_goes_without_its_comments() {
    let dir = std::env::temp_dir().join(format!("pint-config-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let long = format!(
        "{}{}",
        "# a comment line that explains the queries at length\n".repeat(2000),
        telemetry::PAPER_QUERIES
    );
    assert!(long.len() > ::telemetry::protocol::MAX_PLAN_TEXT);
    let path = dir.join("long.toml");
    std::fs::write(&path, &long).unwrap();
    let (text, plan) = telemetry::load_queries(Some(&path), None).unwrap();
    assert!(
        text.len() <= ::telemetry::protocol::MAX_PLAN_TEXT,
        "{}",
        text.len()
    );
    // What the sink compiles from it is the same plan.
    let again = ::telemetry::pint::plan::Plan::compile(
        &::telemetry::pint::query::QueryFile::from_toml(&text).unwrap(),
    )
    .unwrap();
    assert_eq!(again.version, plan.version);
    let (_, paper) = telemetry::load_queries(None, None).unwrap();
    assert_eq!(plan.version, paper.version);
    let _ = std::fs::remove_dir_all(&dir);
}

/// More workers than the protocol to the sink carries (each sends a flowset per epoch) are
/// refused by the config, not by the sink at every hello.
#[test]
fn more_workers_than_the_sink_takes_are_refused() {
    let mut text = GOOD.to_owned();
    for lcore in 10..(11 + ::telemetry::protocol::MAX_WORKERS) {
        text.push_str(&format!("\n[[workers]]\nlcore = {lcore}\nrx = [\"in\"]\n"));
    }
    let e = err(&text);
    assert_eq!(key_of(&e), "workers", "{e}");
    assert!(e.to_string().contains("at most 256"), "{e}");
}

/// Switches whose configs give no ECMP seed each take their own: flows one switch sent up
/// one of its two links spread over all four links of the next switch's group (with one
/// seed for both, they took two of the four: polarisation). A seed given is kept.
#[test]
fn switches_without_an_ecmp_seed_do_not_polarise() {
    let seed_of = |id: u32| {
        Config::from_toml(&GOOD.replace("switch_id = 7", &format!("switch_id = {id}")))
            .unwrap()
            .dataplane
            .ecmp_seed
    };
    let (s1, s2) = (seed_of(1), seed_of(2));
    assert_eq!(s1, seed_of(1));
    // Printed back, it is a config the switch takes, with the same seed.
    let c = Config::from_toml(&GOOD.replace("switch_id = 7", "switch_id = 2")).unwrap();
    let back = Config::from_toml(&c.to_toml()).unwrap();
    assert_eq!(back.dataplane.ecmp_seed, s2);
    let pick =
        |seed: u64, f: u64, n: u64| (u64::from(::telemetry::hash::ecmp_hash(seed, f)) * n) >> 32;
    let spread = |s2: u64| {
        let mut links = [0u32; 4];
        for f in (0..8000u64).map(::telemetry::hash::mix64) {
            if pick(s1, f, 2) == 0 {
                links[pick(s2, f, 4) as usize] += 1;
            }
        }
        links
    };
    let links = spread(s2);
    let total: u32 = links.iter().sum();
    assert!(
        links.iter().all(|&n| n * 6 > total),
        "every link takes a share: {links:?}"
    );
    // The control: one seed for both tiers leaves half the links unused.
    assert_eq!(spread(s1).iter().filter(|&&n| n == 0).count(), 2);
    let given = GOOD.replace("[stats]", "[dataplane]\necmp_seed = 99\n\n[stats]");
    assert_eq!(Config::from_toml(&given).unwrap().dataplane.ecmp_seed, 99);
}

/// Every 64-bit seed can be written, above TOML's integers as a string, and is printed back
/// in a form that reads as the same seed.
#[test]
fn any_64_bit_ecmp_seed_is_taken_and_printed_back() {
    let with = |v: &str| {
        GOOD.replace(
            "[stats]",
            &format!("[dataplane]\necmp_seed = {v}\n\n[stats]"),
        )
    };
    for (written, seed) in [
        ("\"0xffffffffffffffff\"", u64::MAX),
        ("\"0X8000000000000000\"", 1 << 63),
        ("\"18446744073709551614\"", u64::MAX - 1),
        ("\" 42 \"", 42),
        ("\"0xfedc_ba98_7654_3210\"", 0xfedc_ba98_7654_3210),
        ("9223372036854775807", i64::MAX as u64),
        ("0", 0),
    ] {
        let c = Config::from_toml(&with(written)).unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(c.dataplane.ecmp_seed, seed, "{written}");
        let printed = c.to_toml();
        let back =
            Config::from_toml(&printed).unwrap_or_else(|e| panic!("{written}: {e}\n{printed}"));
        assert_eq!(back.dataplane.ecmp_seed, seed, "{written}:\n{printed}");
    }
    assert!(
        Config::from_toml(&with("\"0xffffffffffffffff\""))
            .unwrap()
            .to_toml()
            .contains("ecmp_seed = \"0xffffffffffffffff\"")
    );
    for (written, why) in [
        ("-1", "-1 is negative"),
        ("\"0x1g\"", "`0x1g` is not a seed"),
        ("\"+42\"", "`+42` is not a seed"),
        ("\"0x+ff\"", "`0x+ff` is not a seed"),
        ("\"0x10000000000000000\"", "is not a seed"),
        ("\"18446744073709551616\"", "is not a seed"),
        ("true", "`true` (a TOML boolean) is not a seed"),
    ] {
        let e = err(&with(written));
        assert_eq!(key_of(&e), "dataplane.ecmp_seed", "{written}");
        assert!(e.to_string().contains(why), "{written}: {e}");
    }
}

/// A next hop given one of the switch's own port MACs is warned about, naming its key.
#[test]
fn a_next_hop_with_the_switchs_own_mac_is_warned_about() {
    assert!(Config::from_toml(GOOD).unwrap().warnings().is_empty());
    let own = GOOD.replace(
        "{ port = \"up1\", mac = \"02:00:00:00:02:01\" }",
        "{ port = \"up1\", mac = \"02:00:00:00:01:00\" }",
    );
    let w = Config::from_toml(&own).unwrap().warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("routes[0].next_hops[1].mac"), "{w:?}");
}

/// The demo's template run as a config says what it is and what to fill in.
#[test]
fn the_demos_template_is_said_to_be_one() {
    let text = include_str!("../../../configs/demo.toml");
    let e = Config::from_toml(text).unwrap_err().to_string();
    assert!(
        e.contains("this is a template: `pint-switch --demo`"),
        "{e}"
    );
    let e = Config::from_toml("switch_id = x\n")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("template"), "{e}");
}
