//! `pint-bench` refuses arguments its experiments cannot run with, naming the flag: they
//! panicked (a coding of 0 bits, a base RTT of 0), asked for memory beyond any machine (4
//! billion hops or instances) or printed rows of NaN.

use std::process::Command;

#[test]
fn arguments_no_experiment_runs_with_name_their_flag() {
    for (args, want) in [
        (&["pint-path", "--bits", "0"][..], "--bits 0"),
        (&["pint-path", "--bits", "33"], "--bits 33"),
        (&["pint-path", "--instances", "4294967295"], "--instances"),
        (&["pint-path", "--d", "0"], "--d 0"),
        (&["pint-path", "--runs", "0"], "--runs"),
        // A line's one path is as long as the line.
        (
            &["pint-path", "--lengths", "10"],
            "a line's one path runs from one end to the other, 25 switches, none of the lengths asked for ([10])",
        ),
        (
            &["pint-latency", "--packets", "18446744073709551615"],
            "--packets",
        ),
        (&["pint-hpcc", "--rtt-ns", "0"], "--rtt-ns 0"),
        // What the flowradar sweep does not use is refused with it.
        (
            &["flowradar", "--sweep", "--k", "4"],
            "'--sweep' cannot be used with '--k <K>'",
        ),
        (&["flowradar", "--seeds", "3"], "--sweep"),
        (
            &["flowradar", "--lossy-links", "16-0"],
            "--lossy-links: with --loss above 0",
        ),
        // A negative number is a value, refused by its flag's own check.
        (&["pint-hpcc", "--rtt-ns", "-5"], "--rtt-ns -5"),
        (&["pint-path", "--paths", "0"], "'0' for '--paths <PATHS>'"),
        (&["pint-hpcc", "--rtt-ns", "nan"], "--rtt-ns NaN"),
        (&["pint-hpcc", "--hops", "4294967295"], "--hops 1 to 64"),
        (
            &["flowradar", "--cells-per-flow", "inf"],
            "--cells-per-flow",
        ),
        (&["flowradar", "--k", "4294967294"], "--k even, 2 to 64"),
        (&["flowradar", "--loads", "nan"], "--loads NaN"),
        (&["flowradar", "--loads", "0"], "--loads 0"),
        (&["flowradar", "--loss", "2"], "--loss 2"),
        (
            &[
                "flowradar",
                "--k",
                "4",
                "--loss",
                "0.1",
                "--lossy-links",
                "99-0",
            ],
            "99-0 is no link of the K = 4 fat tree",
        ),
        (&["flowradar", "--sweep", "--seeds", "0"], "--seeds"),
        (
            &["sink", "--flowset-flows", "20", "--sweep-flows", "0"],
            "--flowset-flows 20",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // 1: refused by the experiment's check; 2: by the parser (a flag's range).
        assert!(matches!(out.status.code(), Some(1 | 2)), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
