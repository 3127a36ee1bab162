//! A port on a kernel interface (`net_af_packet` on one end of a veth pair) leaves the
//! interface as the switch found it: a promiscuous port never gives the interface its MAC
//! address (the kernel would take the switch's frames for its own, and route them too where
//! it forwards), and the MAC, MTU and promiscuous mode the switch set are put back when it
//! stops.
//! Needs root and a kernel with veth: elsewhere the test says why it did nothing.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Scratch, run_switch_watching, switch_config, text, worker_lcore, write};

/// IFF_UP and IFF_PROMISC in an interface's flags.
const IFF_UP: u32 = 0x1;
const IFF_PROMISC: u32 = 0x100;

/// The test interface's own MAC address.
const VETH_MAC: &str = "02:00:00:00:5e:01";

/// The test interface's own MTU (neither the ports' default nor DPDK's).
const VETH_MTU: u32 = 1450;

/// A veth pair made for one test, deleted on drop.
struct Veth {
    name: String,
}

impl Veth {
    /// A pair `pk<pid><tag>a` / `...b`, both up, the first with MAC [`VETH_MAC`] (given,
    /// so that no udev policy changes it meanwhile) and MTU [`VETH_MTU`]; None (saying why)
    /// where it cannot be made. One left by a killed run of the same number goes first.
    fn new(tag: char) -> Option<Veth> {
        let name = format!("pk{}{tag}a", std::process::id() % 1_000_000);
        let peer = name.replace(&format!("{tag}a"), &format!("{tag}b"));
        let ip = |args: &[&str]| Command::new("ip").args(args).output();
        let mtu = VETH_MTU.to_string();
        let add = [
            "link", "add", &name, "address", VETH_MAC, "mtu", &mtu, "type", "veth", "peer", "name",
            &peer,
        ];
        if std::path::Path::new("/sys/class/net").join(&name).exists() {
            let _ = ip(&["link", "del", &name]);
        }
        match ip(&add) {
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

    /// The interface's MAC address, flags and MTU, as the kernel has them.
    fn state(&self) -> (String, u32, u32) {
        state_of(&self.name).expect("the veth is there")
    }
}

/// Interface `name`'s MAC address, flags and MTU, as the kernel has them (None while there
/// is no such interface).
fn state_of(name: &str) -> Option<(String, u32, u32)> {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/{f}"))
            .ok()
            .map(|s| s.trim().to_owned())
    };
    let flags = u32::from_str_radix(read("flags")?.trim_start_matches("0x"), 16).ok()?;
    Some((read("address")?, flags, read("mtu")?.parse().ok()?))
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.name])
            .output();
    }
}

/// Runs a switch whose edge port `in` is `net_af_packet` on `veth` for a few seconds, the
/// port promiscuous or not, with MTU `mtu`; returns every state of the interface seen while
/// it ran.
fn run_on(veth: &Veth, dir: &Scratch, promiscuous: bool, mtu: u16) -> Vec<(String, u32, u32)> {
    let device = format!("net_af_packet0,iface={}", veth.name);
    let keys = format!("promiscuous = {promiscuous}\nmtu = {mtu}");
    run_with(&device, &keys, &veth.name, dir)
}

/// Runs a switch whose edge port `in` is `device` (with the port's extra `keys`) for a few
/// seconds; returns every state of interface `iface` seen while it ran.
fn run_with(device: &str, keys: &str, iface: &str, dir: &Scratch) -> Vec<(String, u32, u32)> {
    let config = switch_config(
        (device, keys),
        "[dataplane]\nidle = \"sleep\"",
        ("net_null0,no-rx=1", ""),
        worker_lcore(),
    );
    let path = dir.path("switch.toml");
    write(&path, &config);
    let mut seen = Vec::new();
    let args = ["--config", path.to_str().unwrap(), "--duration", "3"];
    let out = run_switch_watching(&args, Duration::from_secs(60), || {
        if let Some(s) = state_of(iface).filter(|s| seen.last() != Some(s)) {
            seen.push(s);
        }
    });
    assert!(out.status.success(), "{}", text(&out));
    seen
}

#[test]
fn a_kernel_interface_is_left_as_the_switch_found_it() {
    let Some(veth) = Veth::new('p') else {
        return;
    };
    let dir = Scratch::new("kernel-iface");
    let before = veth.state();
    let (mac, flags, mtu) = before.clone();
    assert_eq!(
        (mac.as_str(), flags & IFF_PROMISC, mtu),
        (VETH_MAC, 0, VETH_MTU)
    );
    // A promiscuous port: the interface keeps its address all along, is promiscuous while
    // the switch runs, and not after; the MTU the port sets is put back.
    let seen = run_on(&veth, &dir, true, 1400);
    assert!(seen.iter().all(|(m, ..)| *m == mac), "{seen:?}");
    assert!(
        seen.iter().any(|(_, f, _)| f & IFF_PROMISC != 0),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(.., m)| *m == 1400), "{seen:?}");
    assert_eq!(veth.state(), before, "put back: {seen:?}");
    // A port that is not promiscuous: the switch's address is the interface's while it
    // runs (its receive filter), and the interface's own again after; so is the MTU.
    let seen = run_on(&veth, &dir, false, 1500);
    assert!(seen.iter().any(|(.., m)| *m == 1500), "{seen:?}");
    assert!(
        seen.iter().any(|(m, ..)| m == "02:00:00:00:00:01"),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|(_, f, _)| f & IFF_PROMISC == 0),
        "{seen:?}"
    );
    assert_eq!(veth.state(), before, "put back: {seen:?}");
}

/// A tap's MAC address is the host's side of the link: the switch never programs its own
/// into it, promiscuous or not (it gave the host's interface the switch port's address).
#[test]
fn a_taps_address_stays_the_hosts() {
    let iface = format!("pk{}t", std::process::id() % 1_000_000);
    // Where no tap can be made (no /dev/net/tun, not root, no CAP_NET_ADMIN), nothing to do.
    let ip = |args: &[&str]| Command::new("ip").args(args).output();
    match ip(&["tuntap", "add", "dev", &iface, "mode", "tap"]) {
        Ok(out) if out.status.success() => {
            let _ = ip(&["link", "del", &iface]);
        }
        Ok(out) => {
            eprintln!(
                "skipped: no tap can be made here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: no `ip` command: {e}");
            return;
        }
    }
    let dir = Scratch::new("tap-mac");
    let device = format!("net_tap0,iface={iface},mac=02:00:00:00:5e:02");
    for keys in ["promiscuous = true", "promiscuous = false"] {
        // The driver makes the tap, then gives it its `mac`: from when it is up.
        let seen = run_with(&device, keys, &iface, &dir);
        let up: Vec<_> = seen.iter().filter(|(_, f, _)| f & IFF_UP != 0).collect();
        assert!(
            !up.is_empty(),
            "{keys}: the tap was never seen up: {seen:?}"
        );
        assert!(
            up.iter().all(|(m, ..)| m == "02:00:00:00:5e:02"),
            "{keys}: {seen:?}"
        );
    }
}
