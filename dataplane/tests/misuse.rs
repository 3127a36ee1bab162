//! Misuse of `pint-switch` gets a clear error that names the problem, no panic and no hang;
//! signals stop it cleanly with a final summary.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Scratch, capture_config, run_for_summary, run_switch, switch_config, text, worker_lcore, write,
};
use dataplane::capture::{bench_udp, write_pcap};
use telemetry::wire::MacAddr;

fn base(dir: &Scratch, extra_top: &str, out_device: &str, lcore: u32) -> String {
    capture_config(&dir.path("in.pcap"), extra_top, out_device, "", lcore)
}

fn setup(tag: &str) -> Scratch {
    let dir = Scratch::new(tag);
    let frames = bench_udp(2000, MacAddr([2, 0, 0, 0, 0, 1]));
    write_pcap(&dir.path("in.pcap"), frames.iter().map(Vec::as_slice)).unwrap();
    dir
}

/// Runs with a config and expects failure with every `needle` in the output.
fn expect_error(dir: &Scratch, config: &str, needles: &[&str]) {
    let cfg = dir.path("bad.toml");
    write(&cfg, config);
    let out = run_switch(
        &["--config", cfg.to_str().unwrap(), "--duration", "2"],
        Duration::from_secs(60),
    );
    let t = text(&out);
    assert!(!out.status.success(), "should fail:\n{t}");
    assert!(!t.contains("panicked"), "must not panic:\n{t}");
    for n in needles {
        assert!(t.contains(n), "expected `{n}` in:\n{t}");
    }
}

/// [`expect_error`], and the same error from `--check-config`: what a start checks before
/// DPDK, the check does too (it passed configs that then failed at start).
fn expect_error_checked(dir: &Scratch, config: &str, needles: &[&str]) {
    expect_error(dir, config, needles);
    let cfg = dir.path("bad.toml");
    let out = run_switch(
        &["--config", cfg.to_str().unwrap(), "--check-config"],
        Duration::from_secs(60),
    );
    let t = text(&out);
    assert!(!out.status.success(), "--check-config should fail:\n{t}");
    for n in needles {
        assert!(t.contains(n), "expected `{n}` from --check-config in:\n{t}");
    }
}

#[test]
fn missing_config_file() {
    let out = run_switch(
        &["--config", "/nonexistent/switch.toml"],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("cannot read config file /nonexistent/switch.toml"),
        "{}",
        text(&out)
    );
}

/// A quiet time of 0 ms would stop the switch before its first packet (it stopped the demo
/// with nothing received).
#[test]
fn until_idle_zero_is_refused() {
    let out = run_switch(&["--demo", "--until-idle", "0"], Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("--until-idle"), "{t}");
    assert!(!t.contains("replayed"), "nothing ran: {t}");
}

/// Without --config or --demo the switch says what to give; a bad --duration is refused
/// before the demo makes its capture.
#[test]
fn a_switch_with_nothing_to_run_says_what_to_give() {
    let out = run_switch(&[], Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("give --config FILE") && t.contains("or --demo"),
        "{t}"
    );
    let out = run_switch(&["--demo", "--duration", "-1"], Duration::from_secs(30));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("--duration -1"), "{t}");
    assert!(!t.contains("replayed"), "nothing ran: {t}");
}

/// `--demo --check-config` prints the demo's configuration and says that its capture goes
/// when it exits (it said the capture was replayed, and the printed path was gone).
#[test]
fn the_demos_configuration_says_its_capture_is_made_per_run() {
    let out = run_switch(&["--demo", "--check-config"], Duration::from_secs(60));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("replayed"), "{stderr}");
    assert!(stderr.contains("removed when it ends"), "{stderr}");
    let capture = stdout
        .split("rx_pcap=")
        .nth(1)
        .and_then(|r| r.split([',', '"']).next())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(stderr.contains(capture), "{capture}: {stderr}");
    assert!(!std::path::Path::new(capture).exists(), "{capture} removed");
}

#[test]
fn bad_config_names_the_key_and_starts_nothing() {
    let dir = setup("badkey");
    let cfg = base(&dir, "", "net_null0,no-rx=1", worker_lcore())
        .replace("02:00:00:00:01:00", "02:00:00:01:00");
    expect_error(&dir, &cfg, &["ports[1].mac", "is not a MAC address"]);
    let cfg = base(&dir, "", "net_null0,no-rx=1", worker_lcore())
        .replace("role = \"fabric\"", "role = \"core\"");
    expect_error(&dir, &cfg, &["role", "core"]);
    // A config error is found before EAL starts: no DPDK output at all.
    let out = run_switch(
        &["--config", dir.path("bad.toml").to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(!text(&out).contains("EAL"), "{}", text(&out));
}

#[test]
fn unknown_device() {
    let dir = setup("baddev");
    expect_error(
        &dir,
        &base(&dir, "", "net_nosuchdriver0,x=1", worker_lcore()),
        &["ports[1].device", "could not be probed"],
    );
}

/// A driver's bare failure (-1) is not read as an errno: a capture file that cannot be
/// written was reported as "Operation not permitted (EPERM)" (that one is now found before
/// DPDK starts, and named; an interface that does not exist still fails in the driver).
#[test]
fn a_driver_failure_without_a_reason_says_so() {
    let dir = setup("badtx");
    expect_error_checked(
        &dir,
        &base(
            &dir,
            "",
            "net_pcap1,tx_pcap=/nonexistent-dir/out.pcap",
            worker_lcore(),
        ),
        &[
            "ports[1].device",
            "tx_pcap file `/nonexistent-dir/out.pcap` cannot be made: its directory /nonexistent-dir does not exist",
        ],
    );
    // The driver opens the interface only with CAP_NET_RAW (without it, the switch says
    // so first).
    let no_such_interface = "net_pcap1,iface=pint-no-such-if0";
    if dataplane::device_checks::privileges_missing(no_such_interface).is_none() {
        expect_error(
            &dir,
            &base(&dir, "", no_such_interface, worker_lcore()),
            &["ports[1].device", "could not be probed", "gave no reason"],
        );
    }
}

#[test]
fn lcore_that_does_not_exist() {
    let dir = setup("badlcore");
    expect_error_checked(
        &dir,
        &base(&dir, "", "net_null0,no-rx=1", 4000),
        &["workers[0].lcore", "lcore 4000 does not exist"],
    );
}

#[test]
fn too_few_mbufs_for_the_capture() {
    let dir = setup("fewmbufs");
    let cfg = base(
        &dir,
        "[dataplane]\nmbufs = 1000",
        "net_null0,no-rx=1",
        worker_lcore(),
    );
    expect_error_checked(&dir, &cfg, &["dataplane.mbufs", "2000 packets"]);
}

#[test]
fn missing_capture_file() {
    let dir = setup("nocap");
    let cfg =
        base(&dir, "", "net_null0,no-rx=1", worker_lcore()).replace("in.pcap", "missing.pcap");
    expect_error(
        &dir,
        &cfg,
        &["ports[0].device", "missing.pcap", "does not exist"],
    );
}

/// A capture with no frames replayed with `infinite_rx` is refused at start, naming its
/// port: DPDK's pcap driver took a burst of mbufs on every poll of it and gave none back, so
/// the pool ran dry and every other port received nothing.
#[test]
fn an_empty_capture_to_replay_is_refused() {
    let dir = setup("emptycap");
    write_pcap(&dir.path("empty.pcap"), std::iter::empty::<&[u8]>()).unwrap();
    let cfg = base(&dir, "", "net_null0,no-rx=1", worker_lcore()).replace("in.pcap", "empty.pcap");
    expect_error(
        &dir,
        &cfg,
        &["ports[0].device", "empty.pcap", "holds no frames"],
    );
}

#[test]
fn check_config_prints_resolved_defaults() {
    let dir = setup("check");
    let cfg = dir.path("ok.toml");
    write(&cfg, &base(&dir, "", "net_null0,no-rx=1", worker_lcore()));
    let out = run_switch(
        &["--config", cfg.to_str().unwrap(), "--check-config"],
        Duration::from_secs(30),
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for n in [
        "switch_id = 4",
        "mtu = 1500",
        "capacity = 10000000000",
        "idle = \"poll\"",
        "rx = [\"in:0\"]",
        "prefix = \"10.1.0.0/16\"",
        "# [dataplane] mbufs = ",
        "# [eal] memory_mb = ",
    ] {
        assert!(t.contains(n), "expected `{n}` in:\n{t}");
    }
    assert!(!t.contains("EAL"), "--check-config starts nothing:\n{t}");
    assert!(!t.contains("# The query plan"), "telemetry is off:\n{t}");
    // What it prints is a config the switch takes as it is, and prints back the same.
    let printed = dir.path("printed.toml");
    std::fs::write(&printed, &out.stdout).unwrap();
    let again = run_switch(
        &["--config", printed.to_str().unwrap(), "--check-config"],
        Duration::from_secs(30),
    );
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&out.stdout)
    );
    // With telemetry on, the plan a start installs is shown as comments (the config
    // names only its query file, or none for the built-in plan).
    let tele = dir.path("tele.toml");
    write(
        &tele,
        &(base(&dir, "", "net_null0,no-rx=1", worker_lcore()) + "\n[telemetry]\n"),
    );
    let out = run_switch(
        &["--config", tele.to_str().unwrap(), "--check-config"],
        Duration::from_secs(30),
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("# The query plan a start installs (the built-in paper plan):\n# plan ")
            && t.contains(": 16 bits per packet\n#   ")
            && t.contains("path@"),
        "{t}"
    );
    // The capture files are checked too: a missing one fails, naming its key.
    std::fs::remove_file(dir.path("in.pcap")).unwrap();
    let out = run_switch(
        &["--config", cfg.to_str().unwrap(), "--check-config"],
        Duration::from_secs(30),
    );
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("ports[0].device") && t.contains("does not exist"),
        "{t}"
    );
}

/// Where DPDK keeps the runtime files of the process with file prefix `prefix`.
fn dpdk_runtime_dir(prefix: &str) -> std::path::PathBuf {
    // SAFETY: geteuid has no preconditions.
    let base = if unsafe { libc::geteuid() } == 0 {
        std::path::PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| "/tmp".into(), Into::into)
    };
    base.join("dpdk").join(prefix)
}

#[test]
fn sigterm_and_sigint_stop_cleanly_with_a_summary() {
    let dir = setup("signal");
    let cfg = dir.path("ok.toml");
    write(&cfg, &base(&dir, "", "net_null0,no-rx=1", worker_lcore()));
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let child = Command::new(env!("CARGO_BIN_EXE_pint-switch"))
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        // Let it start forwarding, then signal it.
        std::thread::sleep(Duration::from_millis(2500));
        // EAL's runtime directory for this process, there while it runs, gone after.
        let runtime = dpdk_runtime_dir(&format!("pint-switch-4-{}", child.id()));
        assert!(runtime.is_dir(), "{}", runtime.display());
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let t = text(&out);
        assert!(out.status.success(), "signal {sig}: {t}");
        assert!(!runtime.exists(), "{} left behind", runtime.display());
        assert!(t.contains("stopping on signal"), "{t}");
        assert!(t.contains("== summary"), "{t}");
        assert!(t.contains("port out"), "{t}");
        assert!(start.elapsed() < Duration::from_secs(30));
    }
}

/// A port whose link is down (a memif server whose client never comes) takes nothing: its
/// packets are dropped as a full queue's, each burst after one tx call, not after 16.
#[test]
fn a_port_whose_link_is_down_is_not_retried() {
    let dir = setup("link-down");
    let sock = dir.path("nobody.sock");
    let out = format!(
        "net_memif0,role=server,id=0,socket={},socket-abstract=no",
        sock.display()
    );
    let cfg = dir.path("down.toml");
    write(&cfg, &base(&dir, "", &out, worker_lcore()));
    let (t, s) = run_for_summary(
        &dir,
        &["--config", cfg.to_str().unwrap(), "--duration", "2"],
    );
    assert!(t.contains("link down"), "the port starts down: {t}");
    assert!(s.rx_packets > 100_000, "{t}");
    assert_eq!(s.tx_packets, 0, "{t}");
    assert_eq!(s.tx_full_drops, s.rx_packets, "{t}");
    assert_eq!(s.ports[1].tx_full_drops, s.rx_packets, "{t}");
    assert_eq!(s.tx_retries, 0, "a down port is not retried: {t}");
}

/// The embedded demo forwards with the paper's plan on: shims inserted towards the fabric,
/// one-hop digests towards the local hosts, FlowRadar epochs closing, all in its summary.
#[test]
fn demo_runs_with_telemetry_on() {
    let dir = setup("demo");
    let (t, s) = run_for_summary(&dir, &["--demo", "--duration", "2"]);
    assert!(t.contains("telemetry: plan"), "{t}");
    assert!(
        t.contains("path@0..8, latency@8..16"),
        "the plan is described: {t}"
    );
    let ev = &s.telemetry.events;
    use pipeline::TelemetryEvent as E;
    assert!(s.telemetry.enabled);
    assert!(ev.get(E::ShimInserted) > 0, "{t}");
    assert!(
        ev.get(E::OneHop) > 0 && ev.get(E::OneHop) == ev.get(E::DigestRecorded),
        "{t}"
    );
    assert!(ev.get(E::EpochClosed) >= 100, "10 ms epochs over 2 s: {t}");
    // No sink: the summary says where the digests went.
    assert_eq!(s.telemetry.sink, None);
    assert!(
        t.contains("| no sink (telemetry.sink not set): digests and flowsets made and let go"),
        "{t}"
    );
    // Every forwarded packet went one of the two telemetry ways.
    assert_eq!(
        ev.get(E::ShimInserted) + ev.get(E::OneHop),
        s.tx_packets,
        "{t}"
    );
}

/// With `--timestamps` every line the switch prints begins with the time (UTC, RFC 3339,
/// milliseconds); without it none does.
#[test]
fn lines_begin_with_the_time_when_asked() {
    let stamped = |line: &str| {
        let b = line.as_bytes();
        b.len() > 25
            && (b[4], b[7], b[10], b[13], b[16], b[19], b[23], b[24])
                == (b'-', b'-', b'T', b':', b':', b'.', b'Z', b' ')
    };
    for on in [true, false] {
        let mut args = vec!["--demo", "--duration", "1"];
        if on {
            args.push("--timestamps");
        }
        let out = run_switch(&args, std::time::Duration::from_secs(60));
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.is_empty()).collect();
        assert!(lines.len() > 5, "{stdout}");
        let stamped_lines = lines.iter().filter(|l| stamped(l)).count();
        assert_eq!(stamped_lines, if on { lines.len() } else { 0 }, "{stdout}");
    }
}

/// A switch with nothing to forward still closes its epochs, and its stats lines say so as
/// they close: an idle worker published its counters once as it went idle and not again
/// until traffic came, so every line showed `epochs 0` (then a lump when traffic came).
#[test]
fn an_idle_switchs_stats_lines_count_its_epochs_as_they_close() {
    let dir = Scratch::new("idle-epochs");
    for idle in ["poll", "sleep"] {
        let cfg = dir.path(&format!("{idle}.toml"));
        let config = switch_config(
            ("net_null0,no-rx=1", ""),
            &format!("[dataplane]\nidle = \"{idle}\"\n[telemetry]"),
            ("net_null1,no-rx=1", "mtu = 1514"),
            worker_lcore(),
        );
        write(&cfg, &config);
        let out = run_switch(
            &["--config", cfg.to_str().unwrap(), "--duration", "2"],
            Duration::from_secs(60),
        );
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        let epochs: Vec<u64> = t
            .lines()
            .filter_map(|l| l.split(", epochs ").nth(1))
            .filter_map(|rest| rest.split(',').next()?.parse().ok())
            .collect();
        // About 20 epochs of 10 ms in each 200 ms line (the first may hold the start).
        assert!(epochs.len() >= 5, "{idle}: {t}");
        assert!(
            epochs[1..].iter().all(|&n| n > 0),
            "{idle}: {epochs:?}\n{t}"
        );
    }
}

/// The built-in query file is printed whole, for a start of one's own: the file a switch
/// runs when its config names none, compiled to the same plan.
#[test]
fn the_built_in_queries_are_printed() {
    let out = run_switch(&["--print-queries"], Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(printed, control::config::telemetry::PAPER_QUERIES);
    let file = telemetry::pint::query::QueryFile::from_toml(&printed).unwrap();
    assert!(telemetry::pint::plan::Plan::compile(&file).is_ok());
}
