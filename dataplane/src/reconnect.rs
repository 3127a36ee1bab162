//! A memif client port whose server left connects again once the server is back: DPDK's
//! memif client connects only when its port starts, so the control thread, once a second,
//! sees the link down, closes the port to the workers ([`PortGate`]), and once they have
//! all passed, stops and starts it until it connects.

use crate::gate::PortGate;

/// Seconds (control ticks) a client's link stays down before the port is restarted: the
/// server's leaving is seen at once, and a link that is only slow to come up is left alone.
const DOWN_TICKS: u32 = 2;
/// Ticks a restarted port may take to connect before it is restarted again.
const CONNECT_TICKS: u32 = 5;

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
    /// Running; its link down for this many ticks in a row.
    Running { down: u32 },
    /// Closed to the workers at this generation of the gate, until they have passed it.
    Closing { generation: u64 },
    /// Stopped: its server was not there at the last start.
    Stopped,
    /// Started again this many ticks ago, its link not up yet.
    Connecting { ticks: u32 },
}

/// Connects one memif client port again when its server comes back.
#[derive(Debug)]
pub struct Reconnector {
    port: usize,
    name: String,
    /// Its memif socket, to say where the server is missing.
    socket: String,
    state: State,
    /// Whether this outage's failed start was said already.
    said: bool,
    /// Times the port was started again and connected.
    reconnects: u64,
    /// Whether the port has been connected (it may have started without its server).
    connected_once: bool,
}

impl Reconnector {
    /// The reconnector of port `port` (index into the switch's ports), named `name`, whose
    /// server listens at `socket`.
    pub fn new(port: usize, name: &str, socket: &str) -> Reconnector {
        Reconnector {
            port,
            name: name.to_owned(),
            socket: socket.to_owned(),
            state: State::Running { down: 0 },
            said: false,
            reconnects: 0,
            connected_once: true,
        }
    }

    /// The reconnector of a port whose first start failed (its server was not there): it is
    /// closed to the workers (which have not started yet) and started once a second until it
    /// connects. Returns it with the line that says so.
    pub fn waiting(
        port: usize,
        name: &str,
        socket: &str,
        gate: &PortGate,
    ) -> (Reconnector, String) {
        gate.close(port);
        let r = Reconnector {
            state: State::Stopped,
            said: true,
            connected_once: false,
            ..Reconnector::new(port, name, socket)
        };
        let line = format!(
            "port {name}: its memif server is not there yet (nothing takes a connection at {socket}); the port connects once it is, trying every second"
        );
        (r, line)
    }

    /// The index of the port it restarts.
    pub fn port(&self) -> usize {
        self.port
    }

    /// Times the port connected again after a restart.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// One control tick (about a second): watches the link, closes the port to the workers,
    /// restarts it once they have passed, opens it again. Returns a line to log, if any.
    pub fn tick(&mut self, port: &impl Restartable, gate: &PortGate) -> Option<String> {
        match self.state {
            State::Running { down } => {
                let down = if port.link_up() { 0 } else { down + 1 };
                self.state = if down >= DOWN_TICKS {
                    State::Closing {
                        generation: gate.close(self.port),
                    }
                } else {
                    State::Running { down }
                };
                None
            }
            State::Closing { generation } if gate.passed(generation) => self.start(port, gate),
            State::Closing { .. } => None,
            State::Stopped => self.start(port, gate),
            State::Connecting { ticks } => {
                if port.link_up() {
                    self.state = State::Running { down: 0 };
                    self.said = false;
                    let again = if std::mem::replace(&mut self.connected_once, true) {
                        self.reconnects += 1;
                        " again"
                    } else {
                        ""
                    };
                    return Some(format!(
                        "port {}: connected to its memif server{again}",
                        self.name
                    ));
                }
                self.state = if ticks + 1 >= CONNECT_TICKS {
                    State::Closing {
                        generation: gate.close(self.port),
                    }
                } else {
                    State::Connecting { ticks: ticks + 1 }
                };
                None
            }
        }
    }

    /// Starts the closed, passed port again.
    fn start(&mut self, port: &impl Restartable, gate: &PortGate) -> Option<String> {
        // SAFETY: the port is closed to the workers and each has passed the gate since (or
        // it stayed closed since such a pass): none is inside a call on it, and none makes
        // one until it opens, below, once the port runs again.
        match unsafe { port.restart() } {
            Ok(()) => {
                gate.open(self.port);
                self.state = State::Connecting { ticks: 0 };
                None
            }
            // The driver says only that the start failed: it could not connect.
            Err(_) => {
                self.state = State::Stopped;
                (!std::mem::replace(&mut self.said, true)).then(|| {
                    format!(
                        "port {}: its memif server is not back yet (nothing takes a connection at {}); trying again every second",
                        self.name, self.socket
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::{Reconnector, Restartable};
    use crate::gate::PortGate;

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
                Err("connect: no such file".into())
            }
        }
    }

    #[test]
    fn a_client_connects_again_once_its_server_is_back() {
        let gate = PortGate::new(1);
        let mut worker = gate.slot(0);
        let port = FakeClient::default();
        port.server.set(true);
        port.up.set(true);
        let mut r = Reconnector::new(1, "fab0", "/run/l.sock");
        for _ in 0..5 {
            assert_eq!(r.tick(&port, &gate), None);
            assert_eq!(worker.pass(), 0);
        }
        // The server leaves: the link is down two ticks before the port closes.
        port.server.set(false);
        port.up.set(false);
        assert_eq!(r.tick(&port, &gate), None);
        assert_eq!(gate.closed(), 0);
        assert_eq!(r.tick(&port, &gate), None);
        assert_eq!(gate.closed(), 0b10, "closed to the workers");
        // Not restarted while the worker has not passed the gate.
        assert_eq!(r.tick(&port, &gate), None);
        assert_eq!(port.restarts.get(), 0);
        assert_eq!(worker.pass(), 0b10);
        // Restarted: the server is not there, said once, tried every tick.
        let said = r.tick(&port, &gate).expect("a failed start is said");
        assert!(
            said.contains("fab0") && said.contains("not back yet") && said.contains("/run/l.sock"),
            "{said}"
        );
        assert_eq!(port.restarts.get(), 1);
        for n in 2..5 {
            assert_eq!(r.tick(&port, &gate), None, "said once an outage");
            assert_eq!(port.restarts.get(), n);
            assert_eq!(gate.closed(), 0b10, "stays closed while stopped");
        }
        // The server is back: started, opened, then connected.
        port.server.set(true);
        assert_eq!(r.tick(&port, &gate), None);
        assert_eq!(gate.closed(), 0, "opened once started");
        assert_eq!(worker.pass(), 0);
        port.up.set(true);
        let said = r.tick(&port, &gate).expect("the reconnection is said");
        assert!(said.contains("connected"), "{said}");
        assert_eq!(r.reconnects(), 1);
        let restarts = port.restarts.get();
        for _ in 0..5 {
            assert_eq!(r.tick(&port, &gate), None);
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
        let (mut r, said) = Reconnector::waiting(2, "fab2", "/run/l.sock", &gate);
        assert!(
            said.contains("not there yet") && said.contains("/run/l.sock"),
            "{said}"
        );
        assert_eq!(gate.closed(), 0b100);
        let mut worker = gate.slot(0);
        assert_eq!(
            worker.pass(),
            0b100,
            "the workers start with the port closed"
        );
        for n in 1..4 {
            assert_eq!(r.tick(&port, &gate), None, "said at the start only");
            assert_eq!(port.restarts.get(), n);
        }
        port.server.set(true);
        r.tick(&port, &gate);
        assert_eq!(gate.closed(), 0);
        port.up.set(true);
        let said = r.tick(&port, &gate).unwrap();
        assert_eq!(said, "port fab2: connected to its memif server");
        assert_eq!(r.reconnects(), 0);
    }

    /// A port started again whose link does not come up is restarted again, after a while;
    /// a link down for a single tick is left alone.
    #[test]
    fn a_restart_that_does_not_connect_is_tried_again() {
        let gate = PortGate::new(1);
        let mut worker = gate.slot(0);
        let port = FakeClient::default();
        port.server.set(true);
        port.up.set(true);
        let mut r = Reconnector::new(0, "fab1", "/run/l.sock");
        port.up.set(false);
        r.tick(&port, &gate);
        port.up.set(true);
        r.tick(&port, &gate);
        port.up.set(false);
        r.tick(&port, &gate);
        assert_eq!(gate.closed(), 0, "down one tick at a time");
        r.tick(&port, &gate);
        assert_eq!(gate.closed(), 1);
        worker.pass();
        r.tick(&port, &gate);
        assert_eq!((port.restarts.get(), gate.closed()), (1, 0));
        // The server takes the connection but the link never comes up.
        for _ in 0..5 {
            worker.pass();
            r.tick(&port, &gate);
        }
        assert_eq!(gate.closed(), 1, "closed again to be restarted");
        worker.pass();
        r.tick(&port, &gate);
        assert_eq!(port.restarts.get(), 2);
        assert_eq!(r.reconnects(), 0);
    }
}
