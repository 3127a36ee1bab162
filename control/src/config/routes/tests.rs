//! The routes file: its format, its errors (each naming the file and the line), and the
//! sharing of next-hop groups between routes.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{Config, ConfigError};

/// Two ports and one `[[routes]]` route; `routes_file` is added per test.
const SWITCH: &str = r#"
[[ports]]
name = "hosts"
device = "net_null0"
role = "edge"
mac = "02:00:00:00:00:01"

[[ports]]
name = "up"
device = "net_null1"
role = "fabric"
mac = "02:00:00:00:00:02"

[[workers]]
lcore = 1
rx = ["hosts", "up"]

[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{ port = "up", mac = "02:00:00:00:09:01" }]
"#;

/// A test's directory, removed when the test ends.
struct Dir(PathBuf);

impl std::ops::Deref for Dir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory of its own for each test.
fn dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("pint-routes-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// Reads a switch whose routes file (`table.routes`, beside the config) holds `routes`.
fn load(dir: &std::path::Path, routes: &[u8]) -> Result<Config, ConfigError> {
    std::fs::write(dir.join("table.routes"), routes).unwrap();
    let cfg = dir.join("switch.toml");
    std::fs::write(
        &cfg,
        format!("switch_id = 3\nroutes_file = \"table.routes\"\n{SWITCH}"),
    )
    .unwrap();
    Config::from_file(&cfg)
}

#[test]
fn a_routes_file_adds_its_routes_after_the_config_files() {
    let d = dir("good");
    let c = load(
        &d,
        b"# prefix  port  MAC  [port MAC ...]\n\
          \n\
          192.168.0.0/16 hosts 02:00:00:00:08:01\n\
          \t 0.0.0.0/0   up 02:00:00:00:09:01   # the default: the same group as 10/8\n\
          172.16.0.0/12 up 02:00:00:00:09:01 hosts 02:00:00:00:08:02\n\
          172.16.5.0/24 up 02:00:00:00:09:01 hosts 02:00:00:00:08:02\n",
    )
    .unwrap();
    let prefixes: Vec<String> = c.routes.iter().map(|r| r.prefix.to_string()).collect();
    assert_eq!(
        prefixes,
        [
            "10.0.0.0/8",
            "192.168.0.0/16",
            "0.0.0.0/0",
            "172.16.0.0/12",
            "172.16.5.0/24"
        ]
    );
    assert_eq!(c.file_routes, 4);
    assert_eq!(
        c.routes_file.as_deref(),
        Some(d.join("table.routes").as_path())
    );
    let ecmp = &c.routes[3].next_hops;
    assert_eq!(ecmp.len(), 2);
    assert_eq!((ecmp[1].port.as_str(), ecmp[1].port_index), ("hosts", 0));
    assert_eq!(ecmp[1].mac.to_string(), "02:00:00:00:08:02");
    // Routes with the same group share one copy, whichever part of the config they are in,
    // and so do the pipeline's tables built from them.
    assert!(Arc::ptr_eq(&c.routes[0].next_hops, &c.routes[2].next_hops));
    assert!(Arc::ptr_eq(&c.routes[3].next_hops, &c.routes[4].next_hops));
    assert!(!Arc::ptr_eq(&c.routes[1].next_hops, &c.routes[2].next_hops));
    let t = c.tables();
    assert_eq!(t.routes.len(), 5);
    assert!(Arc::ptr_eq(&t.routes[3].next_hops, &t.routes[4].next_hops));
    assert_eq!(t.routes[1].addr, 0xc0a8_0000);
    assert_eq!((t.routes[3].next_hops[1].port, t.routes[1].len), (0, 16));

    // The printed config names the file (absolute) and keeps its routes out of the TOML;
    // read from elsewhere it is the same switch.
    let printed = c.to_toml();
    assert!(
        printed.contains(&format!(
            "routes_file = {:?}",
            d.join("table.routes").display().to_string()
        )),
        "{printed}"
    );
    assert!(!printed.contains("192.168.0.0/16"), "{printed}");
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    let again = d.join("elsewhere/printed.toml");
    std::fs::write(&again, &printed).unwrap();
    let c2 = Config::from_file(&again).unwrap();
    assert_eq!(format!("{c:?}"), format!("{c2:?}"));
}

#[test]
fn windows_line_ends_and_a_byte_order_mark_are_taken() {
    let d = dir("crlf");
    let c = load(
        &d,
        "\u{feff}10.1.0.0/16 up 02:00:00:00:09:01\r\n# note\r\n\r\n10.2.0.0/16 hosts 02:00:00:00:08:01\r\n"
            .as_bytes(),
    )
    .unwrap();
    let prefixes: Vec<String> = c.routes.iter().map(|r| r.prefix.to_string()).collect();
    assert_eq!(prefixes, ["10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16"]);
    assert_eq!(
        c.routes[2].next_hops[0].mac.to_string(),
        "02:00:00:00:08:01"
    );
    // A mark is taken only where editors write it, at the start.
    let e = load(
        &d,
        "10.1.0.0/16 up 02:00:00:00:09:01\n\u{feff}10.2.0.0/16 up 02:00:00:00:09:01\n".as_bytes(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("line 2: "), "{e}");
}

#[test]
fn an_empty_routes_file_adds_nothing() {
    let d = dir("empty");
    let c = load(&d, b"\n# nothing yet\n   \n").unwrap();
    assert_eq!((c.routes.len(), c.file_routes), (1, 0));
}

#[test]
fn a_bad_line_names_the_file_the_line_and_why() {
    let d = dir("bad");
    let path = d.join("table.routes").display().to_string();
    let cases: &[(&[u8], &str)] = &[
        (b"10.1.0.0/16", "line 1: 10.1.0.0/16 has no next hop"),
        (
            b"# ok\n10.1.0.0/16 # none",
            "line 2: 10.1.0.0/16 has no next hop",
        ),
        (
            b"10.1.0.0 up 02:00:00:00:09:01",
            "line 1: `10.1.0.0` is not a prefix",
        ),
        (
            b"10.1.0.1/16 up 02:00:00:00:09:01",
            "has host bits set (did you mean 10.1.0.0/16?)",
        ),
        (
            b"10.1.0.0/33 up 02:00:00:00:09:01",
            "`33` is not a prefix length",
        ),
        (
            b"10.1.0.0/16 down 02:00:00:00:09:01",
            "line 1: next hop 1: no port is named `down`",
        ),
        (
            b"10.1.0.0/16 up 02:00:00:00:09:01 hosts",
            "next hop 2: port `hosts` has no MAC after it",
        ),
        // A comment where the MAC belongs ends the line, as anywhere after a space.
        (
            b"10.1.0.0/16 up # the uplink",
            "line 1: next hop 1: port `up` has no MAC after it",
        ),
        (b"10.1.0.0/16 up 02:00:00:00:09", "line 1: next hop 1: "),
        (
            b"10.1.0.0/16 up 01:00:5e:00:00:01",
            "is a multicast address",
        ),
        (
            b"10.1.0.0/16 up 02:00:00:00:09:01#glued",
            "line 1: next hop 1: ",
        ),
        (
            b"10.1.0.0/16 up 00:00:00:00:00:00",
            "is no station's address",
        ),
        (
            b"10.1.0.0/16 up 02:00:00:00:09:01 up 02:00:00:00:09:01",
            "next hop 2 is the same as next hop 1",
        ),
        (
            b"10.0.0.0/8 up 02:00:00:00:09:01",
            "line 1: 10.0.0.0/8 is already routed by routes[0]",
        ),
        (
            b"\n10.2.0.0/16 up 02:00:00:00:09:01\n10.2.0.0/16 hosts 02:00:00:00:08:01\n",
            "line 3: 10.2.0.0/16 is already routed by line 2 of routes_file",
        ),
        (
            b"10.1.0.0/16 up 02:00:00:00:09:01\n\xff\n",
            "line 2: not UTF-8 text",
        ),
    ];
    for (text, want) in cases {
        let e = load(&d, text).expect_err(want);
        let ConfigError::Key { key, reason } = &e else {
            panic!("{want}: not a key error: {e}");
        };
        assert_eq!(key, "routes_file", "{want}");
        assert!(reason.starts_with(&path), "{want}: {reason}");
        assert!(reason.contains(want), "{want}: {reason}");
    }
    // At most 64 next hops to a route, as in [[routes]].
    let hops: String = (1..=65)
        .map(|i| format!(" up 02:00:00:00:0a:{i:02x}"))
        .collect();
    let e = load(&d, format!("10.1.0.0/16{hops}\n").as_bytes()).unwrap_err();
    assert!(
        e.to_string().contains("line 1: more than 64 next hops"),
        "{e}"
    );
    let hops: String = (1..=64)
        .map(|i| format!(" up 02:00:00:00:0a:{i:02x}"))
        .collect();
    assert_eq!(
        load(&d, format!("10.1.0.0/16{hops}\n").as_bytes())
            .unwrap()
            .routes[1]
            .next_hops
            .len(),
        64
    );
}

#[test]
fn a_missing_routes_file_is_named() {
    let d = dir("missing");
    let cfg = d.join("switch.toml");
    std::fs::write(
        &cfg,
        format!("switch_id = 3\nroutes_file = \"nowhere.routes\"\n{SWITCH}"),
    )
    .unwrap();
    let e = Config::from_file(&cfg).unwrap_err();
    let ConfigError::Key { key, reason } = &e else {
        panic!("{e}");
    };
    assert_eq!(key, "routes_file");
    assert!(
        reason.starts_with(&format!(
            "cannot read {}",
            d.join("nowhere.routes").display()
        )),
        "{reason}"
    );
}

#[test]
fn own_mac_warnings_name_the_routes_file_route() {
    let d = dir("own");
    let c = load(
        &d,
        b"10.9.0.0/16 up 02:00:00:00:09:01 hosts 02:00:00:00:00:02\n",
    )
    .unwrap();
    let w = c.own_mac_next_hop_warnings();
    assert_eq!(
        w,
        [
            "config key `routes_file` (the route for 10.9.0.0/16, next hop 2): 02:00:00:00:00:02 is one of this switch's own port MACs (frames sent there come back to the switch or go nowhere)"
        ]
    );
}
