//! The process's limit on open files, raised to what the system allows: a sink takes a
//! connection per switch and per HTTP client, and `pint-lab` holds three descriptors per
//! process it runs (a log and two pipes), past the usual soft limit of 1024 in a large lab.

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

#[cfg(test)]
mod tests {
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
