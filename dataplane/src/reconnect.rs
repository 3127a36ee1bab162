//! A memif client port connects whenever its server is there: DPDK's memif client connects
//! only when its port starts, so the control thread, on its ticks (about once a second),
//! sees the link down for a while, closes the port to the workers ([`PortGate`]), and once
//! they have all passed, stops and starts it until it connects.

use std::time::{Duration, Instant};

use crate::gate::PortGate;

/// How long a client's link stays down before the port is started again: the server's
/// leaving is seen at once, and a handshake that is only slow is left alone.
const DOWN_FOR: Duration = Duration::from_secs(3);
/// How long a started port may take to connect before it is started again.
const CONNECT_FOR: Duration = Duration::from_secs(5);
/// How often a stopped port's start is tried while its server is away.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// A port the reconnector restarts.
pub trait Restartable {
    /// Whether its link is up.
    fn link_up(&self) -> bool;

    /// Stops the port (if it runs) and starts it again; an error (its server is not there)
    /// leaves it stopped.
    ///
    /// # Safety
    /// No worker may be inside, or begin, a receive or transmit call on the port until this
    /// returns Ok (see [`crate::dpdk::Port::restart`]).
    unsafe fn restart(&self) -> Result<(), String>;
}

impl Restartable for crate::dpdk::Port<'_> {
    fn link_up(&self) -> bool {
        self.link().up
    }

    unsafe fn restart(&self) -> Result<(), String> {
        crate::dpdk::port::with_memif_log_quiet(|| {
            // SAFETY: passed on to the caller.
            unsafe { crate::dpdk::Port::restart(self) }.map_err(|e| e.to_string())
        })
    }
}

/// Where a client port stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Running; its link down since then, if it is down.
    Running { down_since: Option<Instant> },
    /// Closed to the workers at this generation of the gate, until they have passed it.
    Closing { generation: u64 },
    /// Stopped: its server was not there at the start tried then.
    Stopped { tried: Instant },
    /// Started then, its link not up yet.
    Connecting { since: Instant },
}

/// Connects one memif client port whenever its server is there.
#[derive(Debug)]
pub struct Reconnector {
    port: usize,
    name: String,
    /// The port's device arguments, to say why its server cannot be reached.
    device: String,
    state: State,
    /// Whether this outage's failed start was said already.
    said: bool,
    /// Whether the port has been connected (it may have started without its server).
    connected_once: bool,
}

impl Reconnector {
    /// The reconnector of port `port` (index into the switch's ports), named `name`, a
    /// memif client with the device arguments `device`, started and running.
    pub fn new(port: usize, name: &str, device: &str) -> Reconnector {
        Reconnector {
            port,
            name: name.to_owned(),
            device: device.to_owned(),
            state: State::Running { down_since: None },
            said: false,
            connected_once: true,
        }
    }

    /// The reconnector of a port whose first start failed (its server was not there): it is
    /// closed to the workers (which have not started yet) and started about once a second
    /// until it connects. Returns it with the line that says so.
    pub fn waiting(
        port: usize,
        name: &str,
        device: &str,
        gate: &PortGate,
        now: Instant,
    ) -> (Reconnector, String) {
        gate.close(port);
        let r = Reconnector {
            state: State::Stopped { tried: now },
            said: true,
            connected_once: false,
            ..Reconnector::new(port, name, device)
        };
        let line = format!(
            "port {name}: its memif server is not there yet ({}); the port connects once it is, trying every second",
            crate::dpdk::port::memif_client_trouble(device)
        );
        (r, line)
    }

    /// The index of the port it restarts.
    pub fn port(&self) -> usize {
        self.port
    }

    /// One control tick at `now`: watches the link, closes the port to the workers, starts
    /// it again once they have passed, opens it again. Returns a line to log, if any.
    pub fn tick(
        &mut self,
        now: Instant,
        port: &impl Restartable,
        gate: &PortGate,
    ) -> Option<String> {
        match self.state {
            State::Running { down_since } => {
                if port.link_up() {
                    self.state = State::Running { down_since: None };
                    return None;
                }
                let since = down_since.unwrap_or(now);
                self.state = if now.duration_since(since) >= DOWN_FOR {
                    State::Closing {
                        generation: gate.close(self.port),
                    }
                } else {
                    State::Running {
                        down_since: Some(since),
                    }
                };
                None
            }
            // Connected after all, while closing (a slow handshake): left running.
            State::Closing { .. } if port.link_up() => {
                gate.open(self.port);
                self.state = State::Running { down_since: None };
                self.connected()
            }
            State::Closing { generation } if gate.passed(generation) => self.start(now, port, gate),
            State::Closing { .. } => None,
            State::Stopped { tried } if now.duration_since(tried) >= RETRY_EVERY => {
                self.start(now, port, gate)
            }
            State::Stopped { .. } => None,
            State::Connecting { .. } if port.link_up() => {
                self.state = State::Running { down_since: None };
                self.connected()
            }
            State::Connecting { since } => {
                if now.duration_since(since) >= CONNECT_FOR {
                    self.state = State::Closing {
                        generation: gate.close(self.port),
                    };
                }
                None
            }
        }
    }

    /// The line that says the port connected, if it was down for a restart.
    fn connected(&mut self) -> Option<String> {
        self.said = false;
        let again = if std::mem::replace(&mut self.connected_once, true) {
            " again"
        } else {
            ""
        };
        Some(format!(
            "port {}: connected to its memif server{again}",
            self.name
        ))
    }

    /// Starts the closed, passed port again.
    fn start(&mut self, now: Instant, port: &impl Restartable, gate: &PortGate) -> Option<String> {
        // SAFETY: the port is closed to the workers and each has passed the gate since (or
        // it stayed closed since such a pass): none is inside a call on it, and none makes
        // one until it opens, below, once the port runs again.
        match unsafe { port.restart() } {
            Ok(()) => {
                gate.open(self.port);
                self.state = State::Connecting { since: now };
                None
            }
            // The driver says only that the start failed: it could not connect.
            Err(_) => {
                self.state = State::Stopped { tried: now };
                (!std::mem::replace(&mut self.said, true)).then(|| {
                    format!(
                        "port {}: its memif server is not back yet ({}); trying again every second",
                        self.name,
                        crate::dpdk::port::memif_client_trouble(&self.device)
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    use super::{Reconnector, Restartable};
    use crate::gate::PortGate;

    const DEVICE: &str = "net_memif0,role=client,socket=/nonexistent/l.sock,socket-abstract=no";

    /// A memif client as the reconnector sees it: its server there or not, its link.
    #[derive(Default)]
    struct FakeClient {
        server: Cell<bool>,
        up: Cell<bool>,
        restarts: Cell<u32>,
    }

    impl Restartable for FakeClient {
        fn link_up(&self) -> bool {
            self.up.get()
        }
        unsafe fn restart(&self) -> Result<(), String> {
            self.restarts.set(self.restarts.get() + 1);
            self.up.set(false);
            if self.server.get() {
                Ok(())
            } else {
                Err("start failed".into())
            }
        }
    }

    /// Ticks at 0.5 s steps from a start.
    struct Clock(Instant);

    impl Clock {
        fn next(&mut self) -> Instant {
            self.0 += Duration::from_millis(500);
            self.0
        }
    }

    /// A client port whose server is there and whose link is up, and a clock.
    fn connected_client() -> (FakeClient, Clock) {
        let port = FakeClient::default();
        port.server.set(true);
        port.up.set(true);
        (port, Clock(Instant::now()))
    }

    #[test]
    fn a_client_connects_again_once_its_server_is_back() {
        let gate = PortGate::new(1);
        let mut worker = gate.slot(0);
        let (port, mut t) = connected_client();
        let mut r = Reconnector::new(1, "fab0", DEVICE);
        for _ in 0..5 {
            assert_eq!(r.tick(t.next(), &port, &gate), None);
            assert_eq!(worker.pass(), 0);
        }
        // The server leaves: the link is down 3 s before the port closes.
        port.server.set(false);
        port.up.set(false);
        for _ in 0..6 {
            assert_eq!(r.tick(t.next(), &port, &gate), None);
            assert_eq!(gate.closed(), 0);
        }
        assert_eq!(r.tick(t.next(), &port, &gate), None);
        assert_eq!(gate.closed(), 0b10, "closed to the workers");
        // Not restarted while the worker has not passed the gate.
        assert_eq!(r.tick(t.next(), &port, &gate), None);
        assert_eq!(port.restarts.get(), 0);
        assert_eq!(worker.pass(), 0b10);
        // Restarted: the server is not there, said once (with why), tried every second.
        let said = r
            .tick(t.next(), &port, &gate)
            .expect("a failed start is said");
        assert!(
            said.contains("fab0")
                && said.contains("not back yet")
                && said.contains("no socket file at /nonexistent/l.sock"),
            "{said}"
        );
        assert_eq!(port.restarts.get(), 1);
        for n in 2..5 {
            assert_eq!(r.tick(t.next(), &port, &gate), None, "said once an outage");
            assert_eq!(r.tick(t.next(), &port, &gate), None);
            assert_eq!(port.restarts.get(), n, "once a second");
            assert_eq!(gate.closed(), 0b10, "stays closed while stopped");
        }
        // The server is back: started, opened, then connected.
        port.server.set(true);
        r.tick(t.next(), &port, &gate);
        r.tick(t.next(), &port, &gate);
        assert_eq!(gate.closed(), 0, "opened once started");
        assert_eq!(worker.pass(), 0);
        port.up.set(true);
        let said = r
            .tick(t.next(), &port, &gate)
            .expect("the reconnection is said");
        assert_eq!(said, "port fab0: connected to its memif server again");
        let restarts = port.restarts.get();
        for _ in 0..20 {
            assert_eq!(r.tick(t.next(), &port, &gate), None);
        }
        assert_eq!(
            port.restarts.get(),
            restarts,
            "a connected port is left alone"
        );
    }

    /// A port whose server was not there at the switch's start waits for it, closed to the
    /// workers, and then connects as a reconnected one does.
    #[test]
    fn a_client_started_before_its_server_waits_for_it() {
        let gate = PortGate::new(1);
        let port = FakeClient::default();
        let mut t = Clock(Instant::now());
        let (mut r, said) = Reconnector::waiting(2, "fab2", DEVICE, &gate, t.0);
        assert!(
            said.contains("not there yet") && said.contains("/nonexistent/l.sock"),
            "{said}"
        );
        assert_eq!(gate.closed(), 0b100);
        let mut worker = gate.slot(0);
        assert_eq!(
            worker.pass(),
            0b100,
            "the workers start with the port closed"
        );
        for _ in 0..6 {
            assert_eq!(
                r.tick(t.next(), &port, &gate),
                None,
                "said at the start only"
            );
        }
        assert_eq!(port.restarts.get(), 3);
        port.server.set(true);
        r.tick(t.next(), &port, &gate);
        r.tick(t.next(), &port, &gate);
        assert_eq!(gate.closed(), 0);
        port.up.set(true);
        let said = r.tick(t.next(), &port, &gate).unwrap();
        assert_eq!(said, "port fab2: connected to its memif server");
    }

    /// A port started again whose link does not come up is started again, after a while; a
    /// link down for less than the wait is left alone; a port that connects while it is
    /// being closed is left running, not started again.
    #[test]
    fn a_restart_that_does_not_connect_is_tried_again() {
        let gate = PortGate::new(1);
        let mut worker = gate.slot(0);
        let (port, mut t) = connected_client();
        let mut r = Reconnector::new(0, "fab1", DEVICE);
        for up in [false, false, true, false, false, false, false, false, false] {
            port.up.set(up);
            r.tick(t.next(), &port, &gate);
        }
        assert_eq!(gate.closed(), 0, "down less than 3 s at a time");
        port.up.set(false);
        r.tick(t.next(), &port, &gate);
        assert_eq!(gate.closed(), 1);
        // It connects before the workers have passed: opened again, not restarted.
        port.up.set(true);
        let said = r.tick(t.next(), &port, &gate);
        assert_eq!(
            said.as_deref(),
            Some("port fab1: connected to its memif server again")
        );
        assert_eq!((port.restarts.get(), gate.closed()), (0, 0));
        // Down again for good: closed, passed, restarted.
        port.up.set(false);
        for _ in 0..7 {
            worker.pass();
            r.tick(t.next(), &port, &gate);
        }
        worker.pass();
        r.tick(t.next(), &port, &gate);
        assert_eq!((port.restarts.get(), gate.closed()), (1, 0));
        // The server takes the connection but the link never comes up: after 5 s, again.
        for _ in 0..10 {
            worker.pass();
            r.tick(t.next(), &port, &gate);
        }
        assert_eq!(gate.closed(), 1, "closed again to be restarted");
        worker.pass();
        r.tick(t.next(), &port, &gate);
        assert_eq!(port.restarts.get(), 2);
    }
}
