//! `pint-sink detect` on measurement files: a flat series gives no event, a loaded one a
//! delay event with its start and end, owamp text works the same, bad input names its line.

use std::process::Command;

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pint-detect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// 10 Hz for `secs` s from t = 1700000000: (seq, send time, delay ms).
fn probes(secs: u32, delay: impl Fn(f64, u32) -> f64) -> Vec<(u32, f64, f64)> {
    (0..secs * 10)
        .map(|q| {
            let t = 1_700_000_000.0 + f64::from(q) * 0.1;
            // A deterministic jitter of up to 0.4 ms.
            let jitter = f64::from((q * 7919) % 100) / 250.0;
            (q, t, delay(f64::from(q) * 0.1, q) + jitter)
        })
        .collect()
}

fn csv(rows: &[(u32, f64, f64)]) -> String {
    let mut s = String::from("seq,send_time,delay_ms,comment\n");
    for (q, t, d) in rows {
        s.push_str(&format!("{q},{t:.3},{d:.3},x\n"));
    }
    s
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .arg("detect")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flat_and_loaded_series_from_csv() {
    let dir = scratch("csv");
    // Flat: 10 ms with under 1 ms of jitter, 2 minutes.
    let flat = dir.join("flat.csv");
    std::fs::write(&flat, csv(&probes(120, |_, _| 10.0))).unwrap();
    let (ok, out, err) = run(&["--input", flat.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(out, "", "no event");
    assert!(
        err.contains("1200 samples, 0 lost, 24 windows of 5 s, 0 events"),
        "{err}"
    );

    // Loaded: from 30 s to 75 s delays rise 20 to 60 ms over the baseline.
    let loaded = dir.join("loaded.csv");
    std::fs::write(
        &loaded,
        csv(&probes(120, |t, q| {
            if (30.0..75.0).contains(&t) {
                30.0 + f64::from(q % 40)
            } else {
                10.0
            }
        })),
    )
    .unwrap();
    let (ok, out, err) = run(&["--input", loaded.to_str().unwrap(), "--format", "csv"]);
    assert!(ok, "{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{out}");
    let e = &events[0];
    assert_eq!(e["kind"], "delay");
    let start = e["start"].as_f64().unwrap() - 1_700_000_000.0;
    let end = e["end"].as_f64().unwrap() - 1_700_000_000.0;
    assert!((start - 30.0).abs() < 0.11, "{e}");
    assert!((end - 74.9).abs() < 0.11, "{e}");
    assert!(
        (e["baseline_ms"].as_f64().unwrap() - 10.2).abs() < 0.5,
        "{e}"
    );
    assert!(e["peak_ms"].as_f64().unwrap() > 65.0, "{e}");
    assert!(
        e["labels"]
            .as_array()
            .unwrap()
            .contains(&"congestion_overload".into()),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn owamp_text_and_bad_input() {
    let dir = scratch("owamp");
    let mut text = String::from(
        "--- owping statistics from [10.0.0.1]:8852 to [10.0.0.2]:8933 ---\nSID:\tc0a80001\n",
    );
    for (q, t, d) in probes(
        60,
        |t, _| if (20.0..40.0).contains(&t) { 50.0 } else { 5.0 },
    ) {
        if (300..310).contains(&q) {
            text.push_str(&format!("seq_no={q:<10} *LOST*\n"));
            continue;
        }
        // Microseconds this time.
        text.push_str(&format!(
            "seq_no={q} delay={:e} us (sync, err=19.1 us) sent={t:.6} recv={:.6}\n",
            d * 1000.0,
            t + d / 1000.0
        ));
    }
    let f = dir.join("owstats.txt");
    std::fs::write(&f, text).unwrap();
    let (ok, out, err) = run(&["--input", f.to_str().unwrap(), "--format", "owamp"]);
    assert!(ok, "{err}");
    assert!(err.contains("590 samples, 10 lost"), "{err}");
    // The same file without --format: told apart by its lines.
    let (ok, same, err) = run(&["--input", f.to_str().unwrap()]);
    assert!(ok && same == out, "{err}");
    assert!(err.contains("owamp text, 590 samples"), "{err}");
    let kinds: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"].to_string())
        .collect();
    assert!(kinds.contains(&"\"loss\"".to_owned()), "{out}");

    // owping's default: the other direction follows as a session of its own, without loss.
    // Each is judged alone (merged, its records hid the first's loss), and the events say
    // whose they are.
    let mut both = std::fs::read_to_string(&f).unwrap();
    both.push_str(
        "\n--- owping statistics from [10.0.0.2]:8934 to [10.0.0.1]:8853 ---\nSID:\tc0a80002\n",
    );
    for (q, t, d) in probes(60, |_, _| 7.0) {
        both.push_str(&format!(
            "seq_no={q} delay={d:e} ms (sync, err=0.02 ms) sent={t:.6} recv={:.6}\n",
            t + d / 1000.0
        ));
    }
    let f2 = dir.join("both.txt");
    std::fs::write(&f2, both).unwrap();
    let (ok, out2, err) = run(&["--input", f2.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        err.contains("(from [10.0.0.1]:8852 to [10.0.0.2]:8933), 590 samples, 10 lost")
            && err.contains("(from [10.0.0.2]:8934 to [10.0.0.1]:8853), 600 samples, 0 lost"),
        "{err}"
    );
    let series: Vec<String> = out2
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["series"].to_string())
        .collect();
    assert!(!series.is_empty(), "{out2}");
    assert!(
        series.iter().all(|s| s.contains("from [10.0.0.1]:8852")),
        "only the first direction had problems: {out2}"
    );

    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "seq,send_time,delay_ms\n1,2.0,3\n2,2.1,three\n").unwrap();
    let (ok, _, err) = run(&["--input", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("line 3") && err.contains("three"), "{err}");
    let (ok, _, err) = run(&["--input", bad.to_str().unwrap(), "--sensitivity", "loud"]);
    assert!(!ok);
    assert!(err.contains("--sensitivity"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ping -D -i 0.1` output: a round-trip rise and a run of lost requests are found, with the
/// sequence numbers unwrapped across 65535 (the run starts near the wrap).
#[test]
fn ping_output_gives_delay_and_loss_events() {
    let dir = scratch("ping");
    let mut text = String::from("PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n");
    // Queueing from 30 s to 60 s: round trips 25 to 64 ms over a 4 ms baseline.
    for (q, t, d) in probes(90, |t, q| {
        if (30.0..60.0).contains(&t) {
            25.0 + f64::from(q % 40)
        } else {
            4.0
        }
    }) {
        let seq = (q + 65_000) % 65_536;
        if (700..720).contains(&q) {
            if q % 4 == 0 {
                text.push_str(&format!(
                    "[{:.6}] no answer yet for icmp_seq={seq}\n",
                    t + 1.0
                ));
            }
            continue;
        }
        text.push_str(&format!(
            "[{:.6}] 64 bytes from 10.0.0.2: icmp_seq={seq} ttl=62 time={d:.3} ms\n",
            t + d / 1000.0
        ));
    }
    text.push_str("\n--- 10.0.0.2 ping statistics ---\n900 packets transmitted, 880 received\n");
    let f = dir.join("ping.txt");
    std::fs::write(&f, text).unwrap();
    let (ok, out, err) = run(&["--input", f.to_str().unwrap(), "--format", "ping"]);
    assert!(ok, "{err}");
    assert!(err.contains("880 samples, 20 lost"), "{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let delay = events
        .iter()
        .find(|e| e["kind"] == "delay")
        .unwrap_or_else(|| panic!("a delay event: {out}"));
    let start = delay["start"].as_f64().unwrap() - 1_700_000_000.0;
    assert!((start - 30.0).abs() < 0.2, "{delay}");
    let loss = events
        .iter()
        .find(|e| e["kind"] == "loss")
        .unwrap_or_else(|| panic!("a loss event: {out}"));
    let (ls, le) = (
        loss["start"].as_f64().unwrap() - 1_700_000_000.0,
        loss["end"].as_f64().unwrap() - 1_700_000_000.0,
    );
    assert!(
        (69.5..=72.5).contains(&ls) && (69.5..=72.5).contains(&le),
        "{loss}"
    );

    let bare = dir.join("bare.txt");
    std::fs::write(
        &bare,
        "64 bytes from 10.0.0.2: icmp_seq=1 ttl=62 time=1.0 ms\n",
    )
    .unwrap();
    let (ok, _, err) = run(&["--input", bare.to_str().unwrap(), "--format", "ping"]);
    assert!(!ok);
    assert!(err.contains("line 1") && err.contains("-D"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The output of the real `ping -D` (Debian's iputils-ping, installed by
/// `scripts/setup.sh`) on loopback reads as its replies: every one a sample, none lost.
#[test]
fn real_ping_output_reads_back() {
    let dir = scratch("real-ping");
    let out = Command::new("ping")
        .env("LC_ALL", "C")
        .args(["-D", "-O", "-n", "-c", "8", "-i", "0.2", "127.0.0.1"])
        .output()
        .expect("ping runs (scripts/setup.sh installs Debian's iputils-ping)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ping: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = dir.join("ping.txt");
    std::fs::write(&f, &text).unwrap();
    let (ok, events, err) = run(&["--input", f.to_str().unwrap()]);
    assert!(ok, "{err}\n{text}");
    assert!(
        err.contains("ping -D output, 8 samples, 0 lost"),
        "{err}\n{text}"
    );
    assert_eq!(events, "", "loopback has no event");
    let _ = std::fs::remove_dir_all(&dir);
}
