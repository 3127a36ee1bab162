//! Ethernet ports: probe, configure, start, statistics, and the rx/tx queue handles that
//! exactly one worker owns each.

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use super::burst::Burst;
use super::eal::Eal;
use super::error::{DpdkError, Errno, Result};
use super::mempool::Mempool;

/// What a port needs to be configured.
#[derive(Debug, Clone)]
pub struct PortSetup {
    /// Rx queues.
    pub rx_queues: u16,
    /// Tx queues (one per worker).
    pub tx_queues: u16,
    /// Rx descriptors per queue (adjusted to the device's limits).
    pub rx_descriptors: u16,
    /// Tx descriptors per queue (adjusted to the device's limits).
    pub tx_descriptors: u16,
    /// MTU to set (devices that cannot set it keep theirs; see [`PortReport`]).
    pub mtu: u16,
    /// The port's MAC address, programmed into the device where it can take it; but not into
    /// a host's kernel interface where the port needs it for no receive filter
    /// ([`programs_mac`]): the host would take the switch's frames for its own.
    pub mac: [u8; 6],
    /// Enable promiscuous mode.
    pub promiscuous: bool,
}

/// Why the queues `setup` polls cannot work on a device of driver `driver`, if they cannot:
/// an af_packet device's kernel spreads packets over all of its sockets (fanout), so one
/// whose queues are not all polled loses what lands on the others, uncounted; a tap device
/// takes as many rx queues as tx queues (one per worker).
fn queue_layout_refused(
    driver: &str,
    setup: &PortSetup,
    info: &dpdk_sys::rte_eth_dev_info,
) -> Option<String> {
    match driver {
        "net_af_packet" if setup.rx_queues < info.max_rx_queues => Some(format!(
            "the device has {} queue pairs (qpairs) but {} of its rx queues are polled: the kernel spreads packets over every queue's socket, and those on a queue no worker polls would be lost; poll queues 0 to {}{}",
            info.max_rx_queues,
            setup.rx_queues,
            info.max_rx_queues - 1,
            // Fewer queue pairs only where each worker still has its tx queue.
            if setup.rx_queues >= setup.tx_queues {
                format!(" or give qpairs={}", setup.rx_queues)
            } else {
                String::new()
            }
        )),
        "net_tap" if setup.rx_queues != setup.tx_queues => Some(format!(
            "a tap device needs as many rx queues polled as it has tx queues (one per worker): {} polled, {} workers; poll queues 0 to {} of this port",
            setup.rx_queues,
            setup.tx_queues,
            setup.tx_queues - 1
        )),
        _ => None,
    }
}

/// Whether a port of driver `driver` programs its MAC address into the device. A tap's
/// address is the host's side of the link (the tap driver receives every frame the host
/// sends); a packet socket's interface (`net_af_packet`) is a host's, needed only by a port
/// that is not promiscuous, whose interface receives by it; any other device takes it.
pub fn programs_mac(driver: &str, promiscuous: bool) -> bool {
    match driver {
        "net_tap" => false,
        "net_af_packet" => !promiscuous,
        _ => true,
    }
}

/// The MTU of the host's network interface of index `if_index` (a device bound to one:
/// `net_af_packet`, `net_tap`, a bifurcated NIC); None for 0 (none) or one it cannot read.
fn host_interface_mtu(if_index: u32) -> Option<u16> {
    if if_index == 0 {
        return None;
    }
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` holds IF_NAMESIZE bytes, as if_indextoname needs.
    let p = unsafe { libc::if_indextoname(if_index, name.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into `name`.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_str().ok()?;
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What configuring a port did, for the start-up report.
#[derive(Debug, Clone, Default)]
pub struct PortReport {
    /// The driver's name.
    pub driver: String,
    /// Rx/tx descriptors actually used.
    pub descriptors: (u16, u16),
    /// Steps the device does not support, which were skipped (e.g. "set MTU").
    pub unsupported: Vec<&'static str>,
}

/// Link state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkStatus {
    /// Whether the link is up (false where the driver cannot say).
    pub up: bool,
    /// Whether the driver could say.
    pub known: bool,
    /// Speed in Mbit/s (0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

impl LinkStatus {
    /// Whether the driver says the link is down (one that cannot say is not taken as down:
    /// the workers would give up on its bursts sooner).
    pub fn down(&self) -> bool {
        self.known && !self.up
    }
}

pub use control::summary::PortStats;

/// One Ethernet port. Stopped and closed on drop (which frees the mbufs in its rings), so it
/// must drop before the mempool its queues use.
pub struct Port<'eal> {
    id: u16,
    name: String,
    started: std::cell::Cell<bool>,
    rx_queues: u16,
    tx_queues: u16,
    rx_taken: AtomicU64,
    tx_taken: AtomicU64,
    /// What configuring changed in the device, put back when the port closes: its MAC
    /// address and MTU before, and whether promiscuous mode was turned on (a kernel
    /// interface behind `net_af_packet` keeps them after the process ends).
    restore_mac: Option<[u8; 6]>,
    restore_mtu: Option<u16>,
    restore_promiscuous_off: bool,
    _eal: PhantomData<&'eal Eal>,
    /// Not Sync: DPDK's ethdev control calls (stats, link, MAC) are not safe from two
    /// threads at once on one port.
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

fn check(ret: i32, port: &str, step: &'static str) -> Result<()> {
    if ret < 0 {
        Err(DpdkError::Port {
            port: port.to_owned(),
            step,
            errno: Errno::from_ret(ret),
        })
    } else {
        Ok(())
    }
}

/// The ethdev name of the device in `devargs` (text before the first comma; PCI addresses
/// in DPDK's form, with their domain and in lower case).
pub fn device_name(devargs: &str) -> String {
    control::config::device_name(devargs)
}

/// The DPDK port ids a [`Port`] owns: one `Port` per device, so that no two values can hand
/// out the same queue or close a port another still uses (probing a device again succeeds
/// in DPDK, with the same port id).
static OWNED_PORTS: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Whether `devargs` names a memif device in the server role (memif's default), whose
/// listening socket outlives the port in EAL's interrupt thread ([`Eal::keep_memory_at_exit`]).
pub(crate) fn is_memif_server(devargs: &str) -> bool {
    let mut parts = devargs.split(',').map(str::trim);
    let driver = parts.next().unwrap_or("");
    driver.starts_with("net_memif")
        && !parts.any(|kv| {
            kv.split_once('=')
                .is_some_and(|(k, v)| k.trim() == "role" && v.trim() == "client")
        })
}

/// Whether `devargs` are a memif client's (`role=client`).
pub fn is_memif_client(devargs: &str) -> bool {
    devargs.trim_start().starts_with("net_memif") && !is_memif_server(devargs)
}

/// Where a memif server's socket file would be, if it is a file (`socket-abstract=no`)
/// that exists already, and whether it is a socket: a server killed without closing its
/// port leaves one, and a new server of the same socket then cannot start; anything else
/// there (a directory, a regular file) is a path mistaken.
fn memif_socket_left(devargs: &str) -> Option<(String, bool)> {
    use std::os::unix::fs::FileTypeExt;
    if !is_memif_server(devargs) {
        return None;
    }
    let socket = devarg(devargs, "socket")?;
    let is_file = devarg(devargs, "socket-abstract").is_some_and(|v| v == "no");
    let kind = std::fs::symlink_metadata(&socket).ok()?.file_type();
    is_file.then_some((socket, kind.is_socket()))
}

/// Removes a memif server's socket file that a server killed without closing its port left
/// (nothing accepts connections on it), so that a switch restarted by a supervisor after a
/// kill starts; what it removed (or could not), to be said. A socket that a running process
/// serves is left (the probe then fails, saying so).
#[cold]
pub fn remove_stale_memif_socket(devargs: &str) -> Option<String> {
    let (socket, true) = memif_socket_left(devargs)? else {
        return None;
    };
    match std::os::unix::net::UnixStream::connect(&socket) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Some(match std::fs::remove_file(&socket) {
                Ok(()) => format!(
                    "removed the memif socket {socket}, left by a server that did not close it (nothing served it)"
                ),
                Err(e) => format!(
                    "cannot remove the memif socket {socket} that a server killed before left (nothing serves it): {e}"
                ),
            })
        }
        _ => None,
    }
}

/// Whether a process listens on the Unix socket at `path`, as far as this process can
/// tell.
#[derive(Debug, PartialEq, Eq)]
enum Served {
    /// A stream connection is taken, or refused for its type (memif's sockets are of
    /// sequenced packets), not for want of a listener.
    Yes,
    /// Refused: nothing listens.
    No,
    /// This process may not connect to it (another user's socket).
    Unknown,
}

fn served(path: &str) -> Served {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Served::Yes,
        Err(e) if e.raw_os_error() == Some(libc::EPROTOTYPE) => Served::Yes,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Served::Unknown,
        Err(_) => Served::No,
    }
}

/// A device's `key=value` arguments (after the driver's name), trimmed.
pub(crate) fn devarg_pairs(devargs: &str) -> impl Iterator<Item = (&str, &str)> {
    devargs
        .split(',')
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
}

/// The value of `key` in a device's arguments.
pub(crate) fn devarg(devargs: &str, key: &str) -> Option<String> {
    devarg_pairs(devargs).find_map(|(k, v)| (k == key).then(|| v.to_owned()))
}

/// Why a memif client's connection to its server may have failed, as far as its socket says
/// (the driver's start says only that it failed).
pub fn memif_client_trouble(devargs: &str) -> String {
    use std::os::unix::fs::FileTypeExt;
    // DPDK's defaults: /run/memif.sock, in the abstract namespace.
    let socket = devarg(devargs, "socket").unwrap_or_else(|| "/run/memif.sock".to_owned());
    if socket.len() > crate::device_checks::MAX_SOCKET_PATH {
        return format!(
            "its socket path {socket} is longer than the {} bytes a Unix socket takes",
            crate::device_checks::MAX_SOCKET_PATH
        );
    }
    if devarg(devargs, "socket-abstract").is_none_or(|v| v != "no") {
        return format!("nothing listens on the abstract socket {socket}");
    }
    match std::fs::metadata(&socket) {
        Err(_) => match std::path::Path::new(&socket).parent() {
            // A server cannot make its socket there either: likely a typo in the path.
            Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => format!(
                "no socket file at {socket}, and its directory {} does not exist (is the path right?)",
                dir.display()
            ),
            _ => format!("no socket file at {socket}"),
        },
        Ok(m) if !m.file_type().is_socket() => format!("{socket} is not a socket"),
        Ok(_) => {
            let path = std::ffi::CString::new(socket.as_bytes()).unwrap_or_default();
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::access(path.as_ptr(), libc::W_OK) } != 0 {
                format!("no permission to connect to {socket}")
            } else {
                format!(
                    "nothing takes a connection at {socket}: a server killed without closing its port leaves its file"
                )
            }
        }
    }
}

/// Runs `f` with the memif driver's log limited to critical errors: a client port started
/// again every second while its server is away would log a failed connection each time
/// (the switch says it once).
#[cold]
pub fn with_memif_log_quiet<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: a NUL-terminated name; an existing type's id comes back (or a new type's).
    let id = unsafe { dpdk_sys::rte_log_register(c"pmd.net.memif".as_ptr()) };
    let Ok(id) = u32::try_from(id) else {
        return f();
    };
    // SAFETY: a registered log type.
    let before = unsafe { dpdk_sys::rte_log_get_level(id) };
    // SAFETY: as above.
    unsafe { dpdk_sys::rte_log_set_level(id, dpdk_sys::RTE_LOG_CRIT) };
    let out = f();
    if let Ok(before) = u32::try_from(before) {
        // SAFETY: as above.
        unsafe { dpdk_sys::rte_log_set_level(id, before) };
    }
    out
}

impl<'eal> Port<'eal> {
    /// Probes the device described by `devargs` (a virtual device such as
    /// `net_pcap0,rx_pcap=in.pcap` or a PCI address) and finds its port. `name` is the
    /// port's name in messages.
    #[cold]
    pub fn probe(eal: &'eal Eal, name: &str, devargs: &str) -> Result<Self> {
        if is_memif_server(devargs) {
            eal.keep_memory_at_exit();
        }
        let c = CString::new(devargs).map_err(|_| DpdkError::NulInArgument(devargs.to_owned()))?;
        // SAFETY: EAL is initialised; devargs is a valid C string.
        let ret = unsafe { dpdk_sys::rte_dev_probe(c.as_ptr()) };
        if ret < 0 && ret != -libc::EEXIST {
            return Err(DpdkError::Probe {
                device: devargs.to_owned(),
                errno: Errno::from_probe(ret),
                hint: memif_socket_left(devargs).map_or_else(String::new, |(s, socket)| {
                    let served = if socket { served(&s) } else { Served::No };
                    if served == Served::Yes {
                        format!(
                            "; its memif socket {s} is in use: another process (a switch still running?) serves it"
                        )
                    } else if served == Served::Unknown {
                        format!(
                            "; its memif socket {s} exists and this user may not connect to it: another user's server may serve it; choose another path"
                        )
                    } else if socket {
                        format!(
                            "; its memif socket {s} exists already: left by a memif server that was killed? Remove it if no process uses it"
                        )
                    } else {
                        format!(
                            "; its memif socket path {s} is taken by a file or directory that is no socket: choose another path"
                        )
                    }
                }),
            });
        }
        let dev = CString::new(device_name(devargs))
            .map_err(|_| DpdkError::NulInArgument(devargs.to_owned()))?;
        let mut id = 0u16;
        // SAFETY: valid C string and out pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(dev.as_ptr(), &mut id) };
        if ret < 0 {
            return Err(DpdkError::NoPort(devargs.to_owned()));
        }
        if !OWNED_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id)
        {
            return Err(DpdkError::PortOwned {
                device: devargs.to_owned(),
                id,
            });
        }
        Ok(Port {
            id,
            name: name.to_owned(),
            started: std::cell::Cell::new(false),
            rx_queues: 0,
            tx_queues: 0,
            rx_taken: AtomicU64::new(0),
            tx_taken: AtomicU64::new(0),
            restore_mac: None,
            restore_mtu: None,
            restore_promiscuous_off: false,
            _eal: PhantomData,
            _not_sync: PhantomData,
        })
    }

    /// DPDK's port id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The port's name from the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> Result<dpdk_sys::rte_eth_dev_info> {
        let mut info = dpdk_sys::rte_eth_dev_info::default();
        // SAFETY: valid port id and out pointer.
        check(
            unsafe { dpdk_sys::rte_eth_dev_info_get(self.id, &mut info) },
            &self.name,
            "reading device info",
        )?;
        Ok(info)
    }

    /// Configures queues, descriptors, MTU, MAC and promiscuous mode, and sets up every
    /// queue with `pool`. The port is not started. The port borrows the pool for as long as
    /// it lives: its rx rings take mbufs from it, and closing the port gives them back.
    ///
    /// ```compile_fail,E0505
    /// # use dataplane::dpdk::{Eal, Mempool, Port, PortSetup};
    /// # fn f(eal: &Eal, setup: &PortSetup) -> dataplane::dpdk::error::Result<()> {
    /// let mut port = Port::probe(eal, "p", "net_null0")?;
    /// let pool = Mempool::new(eal, "pool", 1023, 0, 2048, 0)?;
    /// port.configure(setup, &pool)?;
    /// drop(pool); // refused: the port still uses it
    /// # Ok(()) }
    /// ```
    #[cold]
    pub fn configure(&mut self, setup: &PortSetup, pool: &'eal Mempool<'_>) -> Result<PortReport> {
        let info = self.info()?;
        let mut report = PortReport::default();
        if !info.driver_name.is_null() {
            // SAFETY: the driver name is a static C string.
            report.driver = unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned();
        }
        if setup.rx_queues > info.max_rx_queues {
            return Err(DpdkError::Capability {
                port: self.name.clone(),
                reason: format!(
                    "{} rx queues are polled but the device ({}) has at most {}",
                    setup.rx_queues, report.driver, info.max_rx_queues
                ),
            });
        }
        if setup.tx_queues > info.max_tx_queues {
            return Err(DpdkError::Capability {
                port: self.name.clone(),
                reason: format!(
                    "each of the {} workers needs its own tx queue but the device ({}) has at most {} (for net_pcap, give one tx_pcap/tx_iface per worker; for net_af_packet, qpairs={} in its device arguments, and poll each queue)",
                    setup.tx_queues, report.driver, info.max_tx_queues, setup.tx_queues
                ),
            });
        }
        if let Some(reason) = queue_layout_refused(&report.driver, setup, &info) {
            return Err(DpdkError::Capability {
                port: self.name.clone(),
                reason,
            });
        }
        let mut conf = dpdk_sys::rte_eth_conf::default();
        if setup.rx_queues > 1 && info.flow_type_rss_offloads != 0 {
            conf.rxmode.mq_mode = dpdk_sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
            // Every hash type the device has, without the modifiers some devices list with
            // them (bits 50 to 63 of rte_ethdev.h: L3/L4/L2 source- or destination-only,
            // prefix lengths, encapsulation level), which would narrow the hash to part of
            // the flow and put a source's flows on one queue.
            conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads & RSS_TYPES;
        }
        // SAFETY: valid port id and configuration.
        let ret = unsafe {
            dpdk_sys::rte_eth_dev_configure(self.id, setup.rx_queues, setup.tx_queues, &conf)
        };
        check(ret, &self.name, "configure")?;

        let (mut nrx, mut ntx) = (setup.rx_descriptors, setup.tx_descriptors);
        // SAFETY: valid port id and in/out pointers.
        let ret =
            unsafe { dpdk_sys::rte_eth_dev_adjust_nb_rx_tx_desc(self.id, &mut nrx, &mut ntx) };
        check(ret, &self.name, "adjusting descriptor counts")?;
        report.descriptors = (nrx, ntx);

        // A host interface's own MTU (DPDK's stored one is its default after configuring).
        let mtu_before = host_interface_mtu(info.if_index);
        // SAFETY: valid port id.
        let ret = unsafe { dpdk_sys::rte_eth_dev_set_mtu(self.id, setup.mtu) };
        if ret == -libc::ENOTSUP {
            report.unsupported.push("set MTU");
        } else {
            check(ret, &self.name, "setting the MTU")?;
            if mtu_before.is_some_and(|m| m != setup.mtu) {
                self.restore_mtu = mtu_before;
            }
        }
        if programs_mac(&report.driver, setup.promiscuous) {
            let before = self.mac();
            if before != Some(setup.mac) {
                if self.set_mac(setup.mac) < 0 {
                    report.unsupported.push("set MAC address");
                } else {
                    self.restore_mac = before;
                }
            }
        }

        // SAFETY: valid port id.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(self.id) };
        let socket = if socket < 0 { 0 } else { socket as u32 };
        for q in 0..setup.rx_queues {
            // SAFETY: valid port, queue, pool; null rxconf means driver defaults.
            let ret = unsafe {
                dpdk_sys::rte_eth_rx_queue_setup(
                    self.id,
                    q,
                    nrx,
                    socket,
                    core::ptr::null(),
                    pool.as_ptr(),
                )
            };
            check(ret, &self.name, "rx queue set-up")?;
        }
        for q in 0..setup.tx_queues {
            // SAFETY: valid port and queue; null txconf means driver defaults.
            let ret = unsafe {
                dpdk_sys::rte_eth_tx_queue_setup(self.id, q, ntx, socket, core::ptr::null())
            };
            check(ret, &self.name, "tx queue set-up")?;
        }
        // SAFETY: valid port id.
        if setup.promiscuous && unsafe { dpdk_sys::rte_eth_promiscuous_get(self.id) } != 1 {
            // SAFETY: valid port id.
            let ret = unsafe { dpdk_sys::rte_eth_promiscuous_enable(self.id) };
            if ret < 0 {
                report.unsupported.push("promiscuous mode");
            } else {
                self.restore_promiscuous_off = true;
            }
        }
        self.rx_queues = setup.rx_queues;
        self.tx_queues = setup.tx_queues;
        Ok(report)
    }

    /// Starts the port.
    #[cold]
    pub fn start(&mut self) -> Result<()> {
        // SAFETY: `&mut self`: no queue of the port is borrowed, so none is in a call.
        unsafe { self.restart() }
    }

    /// Stops the port (queues stop; counters stay readable).
    #[cold]
    pub fn stop(&mut self) {
        // SAFETY: `&mut self`: no queue of the port is borrowed, so none is in a call.
        unsafe { self.stop_shared() }
    }

    /// Stops the port if it runs, from a shared borrow.
    ///
    /// # Safety
    /// No receive or transmit call on the port's queues may be in progress, or begin before
    /// the port has started again: stopping a memif port unmaps the rings such a call reads.
    #[cold]
    unsafe fn stop_shared(&self) {
        if self.started.replace(false) {
            // SAFETY: valid, started port; the caller keeps the queues out of calls.
            unsafe { dpdk_sys::rte_eth_dev_stop(self.id) };
        }
    }

    /// Stops the port (if it runs) and starts it again, while workers own its queues: a
    /// memif client connects to its server only when its port starts. On an error the port
    /// is left stopped.
    ///
    /// # Safety
    /// No receive or transmit call on the port's queues may be in progress, or begin until
    /// this returns Ok (the workers' [`crate::gate::PortGate`] keeps them out): stopping a
    /// memif port unmaps the rings such a call reads, and a stopped port's calls go to
    /// DPDK's placeholders, which log an error each.
    #[cold]
    pub unsafe fn restart(&self) -> Result<()> {
        // SAFETY: the caller keeps the queues out of calls.
        unsafe { self.stop_shared() };
        // SAFETY: valid, configured port, stopped.
        check(
            unsafe { dpdk_sys::rte_eth_dev_start(self.id) },
            &self.name,
            "start",
        )?;
        self.started.set(true);
        Ok(())
    }

    /// Programs `mac` as the device's address; DPDK's return value (negative: refused).
    fn set_mac(&self, mac: [u8; 6]) -> i32 {
        let mut mac = dpdk_sys::rte_ether_addr { addr_bytes: mac };
        // SAFETY: valid port id and address.
        unsafe { dpdk_sys::rte_eth_dev_default_mac_addr_set(self.id, &mut mac) }
    }

    /// The device's MAC address, if it can say.
    pub fn mac(&self) -> Option<[u8; 6]> {
        let mut mac = dpdk_sys::rte_ether_addr::default();
        // SAFETY: valid port id and out pointer.
        let ret = unsafe { dpdk_sys::rte_eth_macaddr_get(self.id, &mut mac) };
        (ret == 0).then_some(mac.addr_bytes)
    }

    /// Current link state, without waiting (down where the driver cannot say).
    pub fn link(&self) -> LinkStatus {
        let mut link = dpdk_sys::rte_eth_link::default();
        // SAFETY: valid port and out pointer.
        let ret = unsafe { dpdk_sys::rte_eth_link_get_nowait(self.id, &mut link) };
        if ret < 0 {
            return LinkStatus {
                up: false,
                known: false,
                speed_mbps: 0,
                full_duplex: false,
            };
        }
        LinkStatus {
            up: u32::from(link.link_status()) == dpdk_sys::RTE_ETH_LINK_UP,
            known: true,
            speed_mbps: if link.link_speed == u32::MAX {
                0
            } else {
                link.link_speed
            },
            full_duplex: link.link_duplex() == 1,
        }
    }

    /// The driver's counters (None when it cannot give them now).
    pub fn stats(&self) -> Option<PortStats> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port and out pointer.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.id, &mut s) };
        if ret < 0 {
            return None;
        }
        Some(PortStats {
            rx_packets: s.ipackets,
            rx_bytes: s.ibytes,
            tx_packets: s.opackets,
            tx_bytes: s.obytes,
            rx_missed: s.imissed,
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
            queue_rx_packets: s.q_ipackets[..usize::from(self.rx_queues.min(16))].to_vec(),
            queue_tx_packets: s.q_opackets[..usize::from(self.tx_queues.min(16))].to_vec(),
        })
    }

    /// The rx queue `q`, for exactly one worker: a second request for the same queue fails.
    pub fn rx_queue(&self, q: u16) -> Result<RxQueue<'_>> {
        take(&self.rx_taken, q, self.rx_queues, &self.name, "rx")?;
        Ok(RxQueue {
            port: self.id,
            queue: q,
            _port: PhantomData,
        })
    }

    /// The tx queue `q`, for exactly one worker: a second request for the same queue fails.
    pub fn tx_queue(&self, q: u16) -> Result<TxQueue<'_>> {
        take(&self.tx_taken, q, self.tx_queues, &self.name, "tx")?;
        Ok(TxQueue {
            port: self.id,
            queue: q,
            _port: PhantomData,
        })
    }
}

fn take(bits: &AtomicU64, q: u16, n: u16, port: &str, kind: &str) -> Result<()> {
    if q >= n || q >= 64 {
        return Err(DpdkError::Capability {
            port: port.to_owned(),
            reason: format!("{kind} queue {q} does not exist"),
        });
    }
    let bit = 1u64 << q;
    if bits.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
        return Err(DpdkError::Capability {
            port: port.to_owned(),
            reason: format!("{kind} queue {q} is already owned by a worker"),
        });
    }
    Ok(())
}

/// The RSS hash-type bits of `rte_eth_rss_conf.rss_hf` (bits 0 to 49); bits 50 to 63 are
/// modifiers (`RTE_ETH_RSS_L3_SRC_ONLY` = bit 63 ... `RTE_ETH_RSS_LEVEL_MASK` = bits 50-51).
const RSS_TYPES: u64 = (1 << 50) - 1;

impl Drop for Port<'_> {
    #[cold]
    fn drop(&mut self) {
        self.stop();
        if let Some(before) = self.restore_mac.take() {
            self.set_mac(before);
        }
        if let Some(mtu) = self.restore_mtu.take() {
            // SAFETY: valid port id.
            unsafe { dpdk_sys::rte_eth_dev_set_mtu(self.id, mtu) };
        }
        if std::mem::take(&mut self.restore_promiscuous_off) {
            // SAFETY: valid port id.
            unsafe { dpdk_sys::rte_eth_promiscuous_disable(self.id) };
        }
        // SAFETY: valid, stopped port; closing frees its queues and their mbufs.
        unsafe { dpdk_sys::rte_eth_dev_close(self.id) };
        OWNED_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

/// An rx queue, owned by one worker (Send, not Sync, not Clone).
pub struct RxQueue<'p> {
    port: u16,
    queue: u16,
    _port: PhantomData<&'p Port<'p>>,
}

impl RxQueue<'_> {
    /// DPDK port id.
    pub fn port_id(&self) -> u16 {
        self.port
    }

    /// Receives into the free slots of `burst`; returns how many arrived.
    #[inline(always)]
    pub fn rx<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let (ptr, room) = burst.spare_raw();
        if room == 0 {
            return 0;
        }
        // SAFETY: the queue is set up and owned by this thread; ptr has `room` free slots.
        let n = usize::from(unsafe {
            dpdk_sys::rte_eth_rx_burst(self.port, self.queue, ptr, room as u16)
        });
        // SAFETY: the driver filled n slots with mbufs it gives up, each with data of its
        // own (what `Mbuf::from_raw` asks).
        unsafe { burst.commit(n) };
        n
    }
}

/// A tx queue, owned by one worker (Send, not Sync, not Clone).
pub struct TxQueue<'p> {
    port: u16,
    queue: u16,
    _port: PhantomData<&'p Port<'p>>,
}

impl TxQueue<'_> {
    /// DPDK port id.
    pub fn port_id(&self) -> u16 {
        self.port
    }

    /// Sends the mbufs of `burst` in order; returns how many were sent. What could not be
    /// sent stays in `burst` (moved to its front) for the caller to retry or drop.
    #[inline(always)]
    pub fn tx<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let (ptr, len) = burst.filled_raw();
        if len == 0 {
            return 0;
        }
        // SAFETY: the queue is set up and owned by this thread; the driver takes ownership of
        // the first n mbufs.
        let n = usize::from(unsafe {
            dpdk_sys::rte_eth_tx_burst(self.port, self.queue, ptr, len as u16)
        });
        burst.consume_front(n);
        n
    }
}

// SAFETY: a queue handle is only used by the thread that owns it; moving it is fine.
unsafe impl Send for RxQueue<'_> {}
// SAFETY: as above.
unsafe impl Send for TxQueue<'_> {}

#[cfg(test)]
mod tests {
    use super::{
        PortSetup, Served, is_memif_server, memif_client_trouble, memif_socket_left,
        queue_layout_refused, remove_stale_memif_socket, served,
    };

    /// What a memif client's socket shows when its server is not there: each case in its
    /// own words, a directory that does not exist (a typo) among them.
    #[test]
    fn a_missing_memif_server_is_told_by_its_socket() {
        let dir = std::env::temp_dir().join(format!("memif-trouble-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let client =
            |path: &str| format!("net_memif0,role=client,socket={path},socket-abstract=no");
        let missing = dir.join("none.sock").display().to_string();
        assert_eq!(
            memif_client_trouble(&client(&missing)),
            format!("no socket file at {missing}")
        );
        let typo = dir.join("no-such-dir/a.sock").display().to_string();
        assert_eq!(
            memif_client_trouble(&client(&typo)),
            format!(
                "no socket file at {typo}, and its directory {} does not exist (is the path right?)",
                dir.join("no-such-dir").display()
            )
        );
        let plain = dir.join("plain");
        std::fs::write(&plain, b"").unwrap();
        let plain = plain.display().to_string();
        assert_eq!(
            memif_client_trouble(&client(&plain)),
            format!("{plain} is not a socket")
        );
        assert_eq!(
            memif_client_trouble("net_memif0,role=client,socket=/tmp/x.sock"),
            "nothing listens on the abstract socket /tmp/x.sock"
        );
        let long = format!("/tmp/{}", "a".repeat(110));
        assert!(memif_client_trouble(&client(&long)).contains("longer than the 107 bytes"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A memif server's socket file that exists is named when its probe fails (a socket,
    /// or something else in its place); an abstract socket, a client's, or a file that is
    /// not there is not.
    #[test]
    fn a_memif_socket_left_behind_is_named() {
        let dir = std::env::temp_dir().join(format!("memif-left-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("link.sock");
        let s = sock.display();
        let server = format!("net_memif0,role=server,socket={s},socket-abstract=no");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(memif_socket_left(&server), Some((s.to_string(), true)));
        drop(listener);
        std::fs::remove_file(&sock).unwrap();
        std::fs::write(&sock, b"").unwrap();
        assert_eq!(memif_socket_left(&server), Some((s.to_string(), false)));
        let abstract_ = format!("net_memif0,socket={s}");
        assert_eq!(memif_socket_left(&abstract_), None);
        let client = format!("net_memif0,role=client,socket={s},socket-abstract=no");
        assert_eq!(memif_socket_left(&client), None);
        std::fs::remove_file(&sock).unwrap();
        assert_eq!(memif_socket_left(&server), None);
        std::fs::remove_dir(&dir).unwrap();
    }

    /// A socket nothing serves (its server killed) is removed before the probe, so that a
    /// restarted switch starts; one a process serves, or a file that is no socket, stays.
    #[test]
    fn a_memif_socket_nothing_serves_is_removed() {
        let dir = std::env::temp_dir().join(format!("memif-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("link.sock");
        let server = format!(
            "net_memif0,role=server,socket={},socket-abstract=no",
            sock.display()
        );
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(remove_stale_memif_socket(&server), None, "served");
        assert!(sock.exists() && served(&sock.display().to_string()) == Served::Yes);
        // Closed without removing its file, as by a kill.
        drop(listener);
        assert_eq!(served(&sock.display().to_string()), Served::No);
        let said = remove_stale_memif_socket(&server).unwrap();
        assert!(said.contains("removed the memif socket"), "{said}");
        assert!(!sock.exists());
        std::fs::write(&sock, b"").unwrap();
        assert_eq!(remove_stale_memif_socket(&server), None, "no socket");
        assert!(sock.exists());
        std::fs::remove_file(&sock).unwrap();
        // As memif serves it: sequenced packets, bound and then listening.
        let fd = seqpacket_bound(&sock);
        assert_eq!(
            remove_stale_memif_socket(&server),
            None,
            "bound, not listening yet"
        );
        // SAFETY: a socket of ours.
        assert_eq!(unsafe { libc::listen(fd, 1) }, 0);
        assert_eq!(remove_stale_memif_socket(&server), None, "listening");
        assert!(sock.exists());
        // SAFETY: as above.
        unsafe { libc::close(fd) };
        assert!(remove_stale_memif_socket(&server).is_some(), "closed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A Unix socket of sequenced packets bound at `path`, as DPDK's memif server makes one.
    fn seqpacket_bound(path: &std::path::Path) -> i32 {
        // SAFETY: plain socket calls on a zeroed address filled in below.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            assert!(fd >= 0);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, s) in addr
                .sun_path
                .iter_mut()
                .zip(path.as_os_str().as_encoded_bytes())
            {
                *d = *s as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(libc::bind(fd, (&raw const addr).cast(), len), 0);
            fd
        }
    }

    #[test]
    fn memif_servers_are_told_from_clients_and_other_devices() {
        assert!(is_memif_server("net_memif0,role=server,socket=/tmp/a.sock"));
        assert!(is_memif_server("net_memif3,socket=/tmp/a.sock"));
        assert!(is_memif_server("net_memif0"));
        assert!(!is_memif_server(
            "net_memif0,role=client,socket=/tmp/a.sock"
        ));
        assert!(!is_memif_server("net_memif1, role = client"));
        assert!(!is_memif_server("net_pcap0,rx_pcap=a.pcap"));
        assert!(!is_memif_server("0000:3b:00.0"));
    }

    /// An af_packet device must have every queue polled (the kernel spreads packets over
    /// them all), a tap device as many rx queues as tx queues; other devices take any layout
    /// within their limits.
    #[test]
    fn queue_layouts_that_lose_packets_are_refused() {
        let setup = |rx, tx| PortSetup {
            rx_queues: rx,
            tx_queues: tx,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            mtu: 1500,
            mac: [2, 0, 0, 0, 0, 1],
            promiscuous: true,
        };
        let info = |queues| dpdk_sys::rte_eth_dev_info {
            max_rx_queues: queues,
            max_tx_queues: queues,
            ..Default::default()
        };
        let why = queue_layout_refused("net_af_packet", &setup(1, 2), &info(2)).unwrap();
        assert!(why.contains("poll queues 0 to 1"), "{why}");
        assert!(
            !why.contains("qpairs=1"),
            "two workers need two tx queues: {why}"
        );
        let why = queue_layout_refused("net_af_packet", &setup(1, 1), &info(2)).unwrap();
        assert!(why.contains("or give qpairs=1"), "{why}");
        assert_eq!(
            queue_layout_refused("net_af_packet", &setup(2, 2), &info(2)),
            None
        );
        let why = queue_layout_refused("net_tap", &setup(1, 2), &info(16)).unwrap();
        assert!(why.contains("1 polled, 2 workers"), "{why}");
        assert_eq!(
            queue_layout_refused("net_tap", &setup(2, 2), &info(16)),
            None
        );
        assert_eq!(
            queue_layout_refused("net_memif", &setup(1, 2), &info(2)),
            None
        );
    }
}
