//! The process's limits: open files, raised to what the system allows (a sink takes a
//! connection per switch and per HTTP client, and `pint-lab` holds three descriptors per
//! process it runs (a log and two pipes), past the usual soft limit of 1024 in a large lab),
//! and the address space, said when it cannot hold the flowsets the sink may keep.

/// Raises the soft limit on open files to the hard one; returns the limit now in force.
pub fn raise_open_files() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit, read by the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok(lim.rlim_cur)
}

/// Descriptors a sink holds besides its connections: its listeners, output files, the
/// IPFIX socket, the runtime's own (epoll, eventfd), with room to spare.
const BESIDES_CONNECTIONS: u64 = 64;

/// A warning when `limit` open files cannot hold every connection `config` allows (the
/// switches', and the HTTP API's when it is on): past it, new connections wait in the
/// backlog until one closes.
pub fn too_few_files(limit: u64, config: &crate::config::SinkConfig) -> Option<String> {
    let http = if config.http.is_some() {
        crate::http::Limits::default().max_connections as u64
    } else {
        0
    };
    let need = config.max_connections as u64 + http + BESIDES_CONNECTIONS;
    (limit < need).then(|| {
        format!(
            "the limit on open files is {limit}, below the {need} that --max-connections {} and {http} HTTP connections may take: past it new connections wait until one closes (raise the hard limit: ulimit -Hn, or LimitNOFILE= in a systemd unit)",
            config.max_connections
        )
    })
}

/// The soft limit on the process's address space (`ulimit -v`), None when unlimited or
/// unreadable.
pub fn address_space() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the call to fill.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
    (read && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// A warning when an address-space limit of `limit` bytes cannot hold the flowsets
/// `config` lets the sink keep: past it flowsets are dropped undecoded (counted), and other
/// allocations may fail outright.
pub fn too_little_address_space(limit: u64, config: &crate::config::SinkConfig) -> Option<String> {
    let budget = config.flowset_memory_bytes as u64;
    (limit < budget).then(|| {
        format!(
            "the address-space limit (ulimit -v) is {} MiB, below the {} MiB --flowset-memory-mb lets flowsets take: flowsets past the limit are dropped undecoded (counted in pint_sink_flowsets_dropped_total), and the sink may abort on another allocation; lower --flowset-memory-mb to about half the limit, or raise the limit",
            limit >> 20,
            budget >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_address_space_below_the_flowset_budget_is_said() {
        let c = crate::config::SinkConfig {
            flowset_memory_bytes: 1 << 30,
            ..Default::default()
        };
        assert_eq!(super::too_little_address_space(2 << 30, &c), None);
        let w = super::too_little_address_space(512 << 20, &c).unwrap();
        assert!(w.contains("is 512 MiB, below the 1024 MiB"), "{w}");
    }

    #[test]
    fn a_limit_below_the_connections_allowed_is_said() {
        let mut c = crate::config::SinkConfig {
            max_connections: 1024,
            http: None,
            ..Default::default()
        };
        assert_eq!(super::too_few_files(1024 + 64, &c), None);
        let w = super::too_few_files(32, &c).unwrap();
        assert!(w.contains("is 32, below the 1088"), "{w}");
        c.http = Some("127.0.0.1:0".parse().unwrap());
        assert!(super::too_few_files(1024 + 64, &c).is_some());
    }

    #[test]
    fn the_soft_limit_becomes_the_hard_one() {
        let n = super::raise_open_files().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!((lim.rlim_cur, lim.rlim_max), (n, n));
    }
}
