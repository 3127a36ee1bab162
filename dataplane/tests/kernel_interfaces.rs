//! A port on a kernel interface (`net_af_packet` on one end of a veth pair) leaves the
//! interface as the switch found it: a promiscuous port never takes the interface's MAC
//! address (the kernel would take the switch's frames for its own, and route them too where
//! it forwards), and whatever the switch turned on or set is put back when it stops.
//! Needs root and a kernel with veth: elsewhere the test says why it did nothing.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, switch_config, text, worker_lcore, write};

/// IFF_PROMISC in an interface's flags.
const IFF_PROMISC: u32 = 0x100;

/// A veth pair made for one test, deleted on drop.
struct Veth {
    name: String,
}

impl Veth {
    /// A pair `pk<pid><tag>a` / `...b`, both up; None (saying why) where it cannot be made.
    fn new(tag: char) -> Option<Veth> {
        let name = format!("pk{}{tag}a", std::process::id() % 1_000_000);
        let peer = name.replace(&format!("{tag}a"), &format!("{tag}b"));
        let ip = |args: &[&str]| Command::new("ip").args(args).output();
        match ip(&["link", "add", &name, "type", "veth", "peer", "name", &peer]) {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                eprintln!(
                    "skipped: `ip link add` failed (needs root and veth): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                return None;
            }
            Err(e) => {
                eprintln!("skipped: no `ip` command: {e}");
                return None;
            }
        }
        let veth = Veth { name };
        for i in [&veth.name, &peer] {
            let out = ip(&["link", "set", i, "up"]).expect("ip");
            assert!(out.status.success(), "{out:?}");
        }
        Some(veth)
    }

    /// The interface's MAC address and flags, as the kernel has them.
    fn state(&self) -> (String, u32) {
        let read = |f: &str| {
            std::fs::read_to_string(format!("/sys/class/net/{}/{f}", self.name))
                .unwrap()
                .trim()
                .to_owned()
        };
        let flags = read("flags");
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap();
        (read("address"), flags)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.name])
            .output();
    }
}

/// Runs a switch whose edge port `in` is `net_af_packet` on `veth` for a few seconds, the
/// port promiscuous or not; returns every state of the interface seen while it ran.
fn run_on(veth: &Veth, dir: &Scratch, promiscuous: bool) -> Vec<(String, u32)> {
    let config = switch_config(
        (
            &format!("net_af_packet0,iface={}", veth.name),
            &format!("promiscuous = {promiscuous}"),
        ),
        "[dataplane]\nidle = \"sleep\"",
        ("net_null0,no-rx=1", ""),
        worker_lcore(),
    );
    let path = dir.path(&format!("switch-{promiscuous}.toml"));
    write(&path, &config);
    let child = Command::new(env!("CARGO_BIN_EXE_pint-switch"))
        .args(["--config", path.to_str().unwrap(), "--duration", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pint-switch");
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("wait"));
    let mut seen = Vec::new();
    let start = Instant::now();
    while !waiter.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the switch hangs"
        );
        let s = veth.state();
        if seen.last() != Some(&s) {
            seen.push(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = waiter.join().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    seen
}

#[test]
fn a_kernel_interface_is_left_as_the_switch_found_it() {
    let Some(veth) = Veth::new('p') else {
        return;
    };
    let dir = Scratch::new("kernel-iface");
    let (mac, flags) = veth.state();
    assert_eq!(flags & IFF_PROMISC, 0, "a new interface is not promiscuous");
    // A promiscuous port: the interface keeps its address all along, is promiscuous while
    // the switch runs, and not after.
    let seen = run_on(&veth, &dir, true);
    assert!(seen.iter().all(|(m, _)| *m == mac), "{seen:?}");
    assert!(seen.iter().any(|(_, f)| f & IFF_PROMISC != 0), "{seen:?}");
    assert_eq!(veth.state(), (mac.clone(), flags), "put back: {seen:?}");
    // A port that is not promiscuous: the switch's address is the interface's while it
    // runs (its receive filter), and the interface's own again after.
    let seen = run_on(&veth, &dir, false);
    assert!(
        seen.iter().any(|(m, _)| m == "02:00:00:00:00:01"),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(_, f)| f & IFF_PROMISC == 0), "{seen:?}");
    assert_eq!(veth.state(), (mac, flags), "put back: {seen:?}");
}
