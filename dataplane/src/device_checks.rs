//! What a port's device needs from the system, checked before EAL starts: the files it
//! writes or the sockets it creates or connects to, and the privileges of drivers that open
//! kernel interfaces. DPDK's drivers report these only as a failed probe ("invalid
//! argument", or no reason at all); checked here, the error names the path and the cause,
//! and `pint-switch --check-config` finds them too.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::dpdk::port::devarg_pairs;

/// The longest path a Unix socket's address holds (108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Linux capability numbers (`linux/capability.h`).
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;

/// Checks what device `device` (a DPDK device argument string) needs from this process
/// and its file system; the error says what is missing, for the caller to prefix with the
/// config key.
pub fn check_device(device: &str) -> Result<(), String> {
    check_device_as(device, &Identity::current())
}

/// Who the process is, as far as devices care.
struct Identity {
    /// Effective user ID.
    euid: u32,
    /// Effective capabilities (None: unknown).
    caps: Option<u64>,
}

impl Identity {
    fn current() -> Identity {
        Identity {
            // SAFETY: no arguments, cannot fail.
            euid: unsafe { libc::geteuid() },
            caps: std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| capabilities_in(&s)),
        }
    }
}

/// The driver's name, DPDK's `eth_` aliases read as the `net_` names.
fn driver_of(device: &str) -> String {
    let driver = device.split(',').next().unwrap_or("").trim();
    match driver.strip_prefix("eth_") {
        Some(rest) => format!("net_{rest}"),
        None => driver.to_owned(),
    }
}

/// Why this process may not open device `device` (a kernel interface without the
/// capability for it), if it may not: a start as this user fails, while the configuration
/// itself is fine (`--check-config` says it as a warning).
pub fn privileges_missing(device: &str) -> Option<String> {
    privileges_missing_as(device, &Identity::current())
}

fn privileges_missing_as(device: &str, me: &Identity) -> Option<String> {
    let driver = driver_of(device);
    let (cap, name, what) = if driver.starts_with("net_tap") || driver.starts_with("net_tun") {
        (
            CAP_NET_ADMIN,
            "CAP_NET_ADMIN",
            "a TAP or TUN device".to_owned(),
        )
    } else if driver.starts_with("net_af_packet") {
        (CAP_NET_RAW, "CAP_NET_RAW", "an AF_PACKET device".to_owned())
    } else if driver.starts_with("net_pcap") {
        let iface = devarg_pairs(device).find_map(|(k, v)| {
            matches!(k, "iface" | "rx_iface" | "rx_iface_in" | "tx_iface").then_some(v)
        })?;
        (
            CAP_NET_RAW,
            "CAP_NET_RAW",
            format!("a pcap device on interface `{iface}`"),
        )
    } else {
        return None;
    };
    match me.caps {
        Some(caps) if caps & (1 << cap) == 0 => Some(if me.euid == 0 {
            format!(
                "{what} needs the {name} capability, which this process does not have although it runs as root (a container that drops it? grant it to the container)"
            )
        } else {
            format!(
                "{what} needs root or the {name} capability, which this process does not have (run as root, or grant it: `setcap cap_net_raw,cap_net_admin+ep` on the binary)"
            )
        }),
        _ => None,
    }
}

fn check_device_as(device: &str, me: &Identity) -> Result<(), String> {
    let driver = driver_of(device);
    // DPDK splits a value at the next `=` (dropping the rest) and trims nothing: a file name
    // with `=`, or a space around a key or value, would reach the driver as something else.
    for part in device.split(',').skip(1).filter(|p| !p.is_empty()) {
        if part.matches('=').count() > 1 {
            return Err(format!(
                "device argument `{part}` holds a second `=`: DPDK's device arguments cannot carry `=` or `,` in a value (rename the file or directory)"
            ));
        }
        if part.split('=').any(|s| s.trim() != s) {
            return Err(format!(
                "device argument `{part}` has a space around its key or value, which DPDK takes as part of it"
            ));
        }
    }
    if driver.starts_with("net_pcap") {
        for (k, v) in devarg_pairs(device) {
            match k {
                "tx_pcap" => {
                    writable_file(Path::new(v)).map_err(|e| format!("tx_pcap file `{v}` {e}"))?
                }
                "rx_pcap" => readable_file(v).map_err(|e| format!("rx_pcap file `{v}` {e}"))?,
                _ => {}
            }
        }
    } else if driver.starts_with("net_memif") {
        check_memif(device, me.euid)?;
    }
    Ok(())
}

/// A memif port's socket file (`socket-abstract=no`): a server creates it, so its directory
/// must exist and take new files, and one already there must not be another user's (it
/// could neither be tested for a server nor removed); a client's must be in a directory
/// that exists, and be one it may connect to. Abstract sockets have no files (nor
/// permissions).
fn check_memif(device: &str, me: u32) -> Result<(), String> {
    let arg = |key: &str| crate::dpdk::port::devarg(device, key);
    let socket = arg("socket").unwrap_or_else(|| "/run/memif.sock".to_owned());
    if socket.len() > MAX_SOCKET_PATH {
        return Err(format!(
            "its memif socket path {socket} is {} bytes long, more than the {MAX_SOCKET_PATH} a Unix socket takes",
            socket.len()
        ));
    }
    if arg("socket-abstract").is_none_or(|v| v != "no") {
        return Ok(());
    }
    let server = crate::dpdk::port::is_memif_server(device);
    let role = if server { "made" } else { "reached" };
    match std::fs::symlink_metadata(&socket) {
        Ok(m) => {
            if me != 0 && m.uid() != me {
                let what = if server {
                    "its server may be running, and this user can neither test nor remove it"
                } else {
                    "this user may not be allowed to connect to it"
                };
                // A client allowed to connect (the owner made it so) is fine.
                if server || !access(Path::new(&socket), libc::W_OK) {
                    return Err(format!(
                        "its memif socket {socket} belongs to another user (uid {}): {what}; choose another path",
                        m.uid()
                    ));
                }
            }
            Ok(())
        }
        // Neither role makes the directory.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check_dir(parent(Path::new(&socket)), server)
                .map_err(|why| format!("its memif socket {socket} cannot be {role}: {why}"))
        }
        Err(e) => Err(format!("its memif socket {socket} cannot be reached: {e}")),
    }
}

/// Whether a file at `path` exists and is no directory, as a capture the driver reads: the
/// error completes "file `PATH` ..." (whether libpcap can read it is checked with the
/// capture's scan).
pub fn readable_file(path: &str) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err("is a directory, not a capture file".to_owned()),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("does not exist{}", relative_to_here(path)))
        }
        // A directory on its path this user may not enter, for one.
        Err(e) => Err(format!("cannot be reached: {e}")),
    }
}

/// For a relative path, where it was looked for.
fn relative_to_here(path: &str) -> String {
    match std::env::current_dir() {
        Ok(here) if Path::new(path).is_relative() => {
            format!(
                " (relative paths are read from where the program runs: {})",
                here.display()
            )
        }
        _ => String::new(),
    }
}

/// Whether a file at `path` can be written (made anew or truncated), as a capture the
/// driver opens for writing or the switch's summary: the error completes "file `PATH` ..."
/// (a link is followed; nothing is made or changed).
pub fn writable_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err("is a directory".to_owned()),
        Ok(_) if !access(path, libc::W_OK) => {
            Err("cannot be written: this user has no permission".to_owned())
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check_dir(parent(path), true).map_err(|why| format!("cannot be made: {why}"))
        }
        Err(e) => Err(format!("cannot be reached: {e}")),
    }
}

/// Whether `dir` is a directory that exists and (with `write`) takes new files from this
/// user; why not, as a phrase.
fn check_dir(dir: &Path, write: bool) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("its directory {} does not exist", dir.display()))
        }
        Err(e) => Err(format!(
            "its directory {} cannot be reached: {e}",
            dir.display()
        )),
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", dir.display())),
        Ok(_) if write && !access(dir, libc::W_OK | libc::X_OK) => Err(format!(
            "this user may not create files in {}",
            dir.display()
        )),
        Ok(_) => Ok(()),
    }
}

/// The directory a path's file is in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether this process may access `path` as `mode` asks (`access(2)`, by its real IDs,
/// which are its effective ones unless it is set-user-ID).
fn access(path: &Path, mode: i32) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

/// The `CapEff` line of a `/proc/PID/status` text.
fn capabilities_in(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Where a file is, to tell whether two paths name it: an existing regular file by device
/// and inode, one not made yet by its directory's canonical path and its name; None for a
/// device, a pipe or a socket (any number may write them) or a path that cannot be made.
#[derive(Debug, PartialEq, Eq)]
pub enum FileIdentity {
    /// An existing regular file.
    Inode(u64, u64),
    /// A file not made yet.
    ToBe(std::path::PathBuf),
}

/// The identity of the file at `path` ([`FileIdentity`]).
pub fn file_identity(path: &Path) -> Option<FileIdentity> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Some(FileIdentity::Inode(m.dev(), m.ino())),
        Ok(_) => None,
        Err(_) => Some(FileIdentity::ToBe(
            parent(path).canonicalize().ok()?.join(path.file_name()?),
        )),
    }
}

/// Why `hugepages = true` cannot work here, if it cannot: no hugepage of any size is free
/// (DPDK then fails with "Cannot get hugepage information", read as a permission error).
pub fn hugepages_missing() -> Option<String> {
    let dir = std::fs::read_dir("/sys/kernel/mm/hugepages").ok()?;
    let mut free = 0u64;
    for size in dir.flatten() {
        let n = std::fs::read_to_string(size.path().join("free_hugepages")).ok()?;
        free += n.trim().parse::<u64>().ok()?;
    }
    (free == 0).then(|| {
        "no hugepage is free on this machine (free_hugepages is 0 for every size under /sys/kernel/mm/hugepages): reserve some (`HUGEPAGES=1024 make setup`), or set it to false".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        crate::temp_dir::private_temp_dir(&format!("pint-devchecks-{name}")).unwrap()
    }

    #[test]
    fn a_capture_written_where_it_cannot_be_is_said() {
        let d = dir("pcap");
        let ok = format!(
            "net_pcap0,rx_pcap=/dev/null,tx_pcap={}/out.pcap",
            d.display()
        );
        assert_eq!(check_device(&ok), Ok(()));
        let missing = format!("net_pcap0,tx_pcap={}/no/out.pcap", d.display());
        let e = check_device(&missing).unwrap_err();
        assert!(e.contains("/no does not exist"), "{e}");
        let e = check_device(&format!("net_pcap0,tx_pcap={}", d.display())).unwrap_err();
        assert!(e.ends_with("is a directory"), "{e}");
        let file = d.join("f");
        std::fs::write(&file, b"").unwrap();
        let e = check_device(&format!("net_pcap0,tx_pcap={}/x.pcap", file.display())).unwrap_err();
        assert!(e.contains("cannot be reached: Not a directory"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_memif_socket_where_none_can_be_is_said() {
        let d = dir("memif");
        let server = |s: &str| format!("net_memif0,role=server,socket={s},socket-abstract=no");
        let client = |s: &str| format!("net_memif0,role=client,socket={s},socket-abstract=no");
        let ok = format!("{}/m.sock", d.display());
        assert_eq!(check_device(&server(&ok)), Ok(()));
        assert_eq!(check_device(&client(&ok)), Ok(()));
        let missing = format!("{}/none/m.sock", d.display());
        for dev in [server(&missing), client(&missing)] {
            let e = check_device(&dev).unwrap_err();
            assert!(
                e.contains(&format!(
                    "its directory {}/none does not exist",
                    d.display()
                )),
                "{e}"
            );
        }
        let long = format!("/tmp/{}.sock", "s".repeat(98));
        assert_eq!(long.len(), 108);
        for dev in [
            server(&long),
            client(&long),
            format!("net_memif0,socket={long}"),
        ] {
            let e = check_device(&dev).unwrap_err();
            assert!(e.contains("is 108 bytes long, more than the 107"), "{e}");
        }
        let longest = format!("/tmp/{}.sock", "s".repeat(97));
        assert_eq!(check_device(&server(&longest)), Ok(()));
        // Abstract sockets have no files to check.
        assert_eq!(
            check_device(&format!("net_memif0,role=server,socket={missing}")),
            Ok(())
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Another user's socket: a server could neither test nor remove it; a client that may
    /// connect to it (root here) may use it. Without the capabilities, kernel interfaces
    /// are refused before the driver tries.
    #[test]
    fn another_users_socket_and_missing_capabilities_are_said() {
        let d = dir("owner");
        let sock = d.join("m.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let owner = std::fs::metadata(&sock).unwrap().uid();
        let other = Identity {
            euid: owner + 1,
            caps: Some(0),
        };
        let server = format!(
            "net_memif0,role=server,socket={},socket-abstract=no",
            sock.display()
        );
        let e = check_device_as(&server, &other).unwrap_err();
        assert!(
            e.contains(&format!("belongs to another user (uid {owner})")),
            "{e}"
        );
        let same = Identity {
            euid: owner,
            caps: None,
        };
        assert_eq!(check_device_as(&server, &same), Ok(()));
        for (dev, cap) in [
            ("net_tap0,iface=t0", "CAP_NET_ADMIN"),
            ("eth_af_packet0,iface=lo", "CAP_NET_RAW"),
            ("net_pcap0,iface=lo", "CAP_NET_RAW"),
        ] {
            let e = privileges_missing_as(dev, &other).unwrap();
            assert!(
                e.contains(&format!("needs root or the {cap}")),
                "{dev}: {e}"
            );
            let root = Identity {
                euid: 0,
                caps: Some(0),
            };
            let e = privileges_missing_as(dev, &root).unwrap();
            assert!(e.contains("although it runs as root"), "{dev}: {e}");
            let all = Identity {
                euid: 1000,
                caps: Some(!0),
            };
            assert_eq!(privileges_missing_as(dev, &all), None, "{dev}");
        }
        assert_eq!(
            privileges_missing_as("net_pcap0,rx_pcap=a.pcap", &other),
            None
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// What DPDK would read as another argument than the one written is refused: a second
    /// `=` (DPDK drops what follows it), spaces around a key or value (kept by DPDK).
    #[test]
    fn arguments_dpdk_would_misread_are_refused() {
        for (dev, said) in [
            ("net_pcap0,rx_pcap=a=b.pcap", "holds a second `=`"),
            (
                "net_memif0,role=server,socket=/tmp/a=b.sock,socket-abstract=no",
                "holds a second `=`",
            ),
            ("net_memif0,socket= /tmp/a.sock", "has a space around"),
            ("net_memif0, role=client", "has a space around"),
            ("net_null0,no-rx =1", "has a space around"),
        ] {
            let e = check_device(dev).unwrap_err();
            assert!(e.contains(said), "{dev}: {e}");
        }
        assert_eq!(check_device("net_null0,no-rx=1,"), Ok(()));
    }

    #[test]
    fn a_capture_to_read_that_is_not_there_is_said() {
        let e = check_device("net_pcap0,rx_pcap=pint-no-such.pcap").unwrap_err();
        assert!(
            e.starts_with("rx_pcap file `pint-no-such.pcap` does not exist (relative paths are read from where the program runs: /"),
            "{e}"
        );
        let e = check_device("net_pcap0,rx_pcap=/tmp").unwrap_err();
        assert!(e.ends_with("is a directory, not a capture file"), "{e}");
    }

    #[test]
    fn capabilities_are_read_from_the_status_text() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000003000\n";
        let caps = capabilities_in(status).unwrap();
        assert_ne!(caps & (1 << CAP_NET_ADMIN), 0);
        assert_ne!(caps & (1 << CAP_NET_RAW), 0);
        assert_eq!(capabilities_in("CapEff:\t0000000000000000\n"), Some(0));
        assert_eq!(capabilities_in("Name:\tx\n"), None);
    }
}
