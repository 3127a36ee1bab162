//! DPDK errors as an enum, with DPDK's errno decoded into its name and message.

use core::ffi::CStr;
use core::fmt;

/// An errno value returned by DPDK (as a positive number), printed with its meaning.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// A failure without an errno: the `-1` that buses and many drivers return.
    pub const UNSPECIFIED: Errno = Errno(-1);

    /// From a DPDK return code: negative errno (ethdev style) or positive.
    pub fn from_ret(ret: i32) -> Errno {
        Errno(ret.abs())
    }

    /// From a device probe's return code: `-1` is the bus's or the driver's bare failure
    /// (read as `-EPERM` it said "Operation not permitted" for a capture file that could
    /// not be written), any other negative value an errno.
    pub fn from_probe(ret: i32) -> Errno {
        if ret == -1 {
            Errno::UNSPECIFIED
        } else {
            Errno::from_ret(ret)
        }
    }

    /// The calling thread's `rte_errno` (set by EAL, mempool and similar calls).
    pub fn last() -> Errno {
        // SAFETY: reads a thread-local integer.
        Errno(unsafe { dpdk_sys::pint_rte_errno() })
    }

    /// DPDK's message for this errno (covers DPDK's own codes and libc's).
    pub fn message(&self) -> String {
        // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
        // string that stays valid until the next call on this thread; it is copied at once.
        unsafe {
            let p = dpdk_sys::rte_strerror(self.0);
            if p.is_null() {
                return format!("errno {}", self.0);
            }
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }

    /// The symbolic name of common errno values (`ENOMEM`, ...), when known.
    pub fn name(&self) -> Option<&'static str> {
        Some(match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::EIO => "EIO",
            libc::E2BIG => "E2BIG",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EBUSY => "EBUSY",
            libc::EEXIST => "EEXIST",
            libc::ENODEV => "ENODEV",
            libc::EINVAL => "EINVAL",
            libc::ENOSPC => "ENOSPC",
            libc::ENOTSUP => "ENOTSUP",
            libc::EALREADY => "EALREADY",
            libc::EPROTO => "EPROTO",
            _ => return None,
        })
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Errno::UNSPECIFIED {
            return write!(f, "the driver gave no reason (it returned -1)");
        }
        if self.0 == 0 {
            // EAL fails some checks (another primary process holding the file prefix's
            // lock, for one) without setting rte_errno: its own log line says why.
            return write!(f, "DPDK gave no errno (EAL's own log lines may say why)");
        }
        match self.name() {
            Some(n) => write!(f, "{} ({n}, errno {})", self.message(), self.0),
            None => write!(f, "{} (errno {})", self.message(), self.0),
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What went wrong in the DPDK layer.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    /// `rte_eal_init` failed.
    #[error("DPDK EAL initialisation failed: {errno}{hint}; EAL arguments were: {args}")]
    EalInit {
        /// Decoded rte_errno.
        errno: Errno,
        /// What may be the cause, when something points to one ("; ..."), or empty.
        hint: String,
        /// The arguments passed, space-separated.
        args: String,
    },
    /// EAL was already initialised in this process (it can be only once).
    #[error("DPDK EAL is already initialised in this process")]
    EalAlreadyInitialised,
    /// An argument contained a NUL byte.
    #[error("argument `{0}` contains a NUL byte")]
    NulInArgument(String),
    /// A device could not be probed (unknown driver, bad device arguments, missing file).
    #[error(
        "device `{device}` could not be probed: {errno}{hint} (check the driver name and its arguments; DPDK's log above says more)"
    )]
    Probe {
        /// The device arguments.
        device: String,
        /// Decoded errno.
        errno: Errno,
        /// A likely cause seen from here ("" if none): a memif server's socket file left
        /// behind.
        hint: String,
    },
    /// A device was probed but no ethdev port matches it.
    #[error("device `{0}` created no ethernet port")]
    NoPort(String),
    /// The device's port is already owned by another `Port` of this process.
    #[error("device `{device}` (DPDK port {id}) is already in use by another port")]
    PortOwned {
        /// The device arguments.
        device: String,
        /// DPDK's port id.
        id: u16,
    },
    /// The calling thread already has an lcore id (an EAL thread, or registered before).
    #[error("this thread is already known to EAL as lcore {0}")]
    ThreadRegistered(u32),
    /// The mbuf pool could not be created.
    #[error(
        "cannot create mbuf pool `{name}` of {count} mbufs: {errno} (give EAL more memory: eal.memory_mb, or use fewer mbufs; or DPDK's mempool driver is not installed: Debian's librte-mempool-ring package, which `dpdk` only recommends)"
    )]
    Mempool {
        /// Pool name.
        name: String,
        /// Number of mbufs asked for.
        count: u32,
        /// Decoded rte_errno.
        errno: Errno,
    },
    /// A port set-up step failed.
    #[error("port `{port}`: {step} failed: {errno}")]
    Port {
        /// Port name.
        port: String,
        /// The set-up step (configure, rx queue set-up, start, ...).
        step: &'static str,
        /// Decoded errno.
        errno: Errno,
    },
    /// The device cannot offer what the configuration needs.
    #[error("port `{port}`: {reason}")]
    Capability {
        /// Port name.
        port: String,
        /// What is missing.
        reason: String,
    },
    /// A worker thread could not be set up.
    #[error("worker on lcore {lcore}: {reason}")]
    Worker {
        /// The lcore.
        lcore: u32,
        /// What failed.
        reason: String,
    },
}

/// Result of the DPDK layer.
pub type Result<T> = core::result::Result<T, DpdkError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure without an errno is not printed as "Success".
    #[test]
    fn no_errno_is_not_success() {
        let said = Errno(0).to_string();
        assert!(!said.contains("Success"), "{said}");
        assert!(said.contains("no errno"), "{said}");
        assert!(Errno(libc::ENOMEM).to_string().contains("ENOMEM"));
    }
}
