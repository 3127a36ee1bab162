//! The route table from `[[routes]]` and from `routes_file`: each prefix once, every next hop
//! checked, and routes with the same next-hop group sharing one copy of it (a table of a
//! million routes usually has a few groups).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use ::telemetry::wire::MacAddr;

use super::raw::RawRoute;
use super::{ConfigError, Ipv4Prefix, NextHopConfig, RouteConfig, key_err};

/// Most next hops of one route (an ECMP group).
pub const MAX_NEXT_HOPS: usize = 64;

/// Where a route was written, for naming it in errors.
#[derive(Debug, Clone, Copy)]
enum Origin {
    /// `routes[i]` in the config file.
    Toml(u32),
    /// A line (from 1) of the routes file.
    Line(u32),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Toml(i) => write!(f, "routes[{i}]"),
            Origin::Line(n) => write!(f, "line {n} of routes_file"),
        }
    }
}

/// Collects and checks routes in the order they are written.
pub(super) struct RouteTable<'a> {
    port_names: &'a [String],
    routes: Vec<RouteConfig>,
    prefixes: HashMap<Ipv4Prefix, Origin>,
    groups: HashSet<Arc<[NextHopConfig]>>,
    /// Next-hop entries the distinct groups take in the table.
    entries: usize,
}

impl<'a> RouteTable<'a> {
    /// An empty table for a switch with these ports.
    pub(super) fn new(port_names: &'a [String]) -> Self {
        RouteTable {
            port_names,
            routes: Vec::new(),
            prefixes: HashMap::new(),
            groups: HashSet::new(),
            entries: 0,
        }
    }

    /// Adds the `[[routes]]` tables of the config file.
    pub(super) fn add_toml(&mut self, raw: Vec<RawRoute>) -> Result<(), ConfigError> {
        self.routes.reserve(raw.len());
        for (r, rr) in raw.into_iter().enumerate() {
            let k = |f: &str| format!("routes[{r}].{f}");
            let text = rr.prefix.ok_or_else(|| key_err(k("prefix"), "missing"))?;
            let prefix: Ipv4Prefix = text.parse().map_err(|e| key_err(k("prefix"), e))?;
            self.claim(prefix, Origin::Toml(r as u32))
                .map_err(|e| key_err(k("prefix"), e))?;
            let Some(raw_hops) = rr.next_hops else {
                return Err(key_err(
                    k("next_hops"),
                    "missing (a list of { port = \"...\", mac = \"...\" })",
                ));
            };
            if raw_hops.is_empty() {
                return Err(key_err(
                    k("next_hops"),
                    "no next hop (list { port = \"...\", mac = \"...\" })",
                ));
            }
            if raw_hops.len() > MAX_NEXT_HOPS {
                return Err(key_err(
                    k("next_hops"),
                    format!("more than {MAX_NEXT_HOPS} next hops"),
                ));
            }
            let mut hops = Vec::with_capacity(raw_hops.len());
            for (n, nh) in raw_hops.into_iter().enumerate() {
                let nk = |f: &str| format!("routes[{r}].next_hops[{n}].{f}");
                let port = nh.port.ok_or_else(|| key_err(nk("port"), "missing"))?;
                let port_index = self.port(&port).map_err(|e| key_err(nk("port"), e))?;
                let mac = nh
                    .mac
                    .ok_or_else(|| key_err(nk("mac"), "missing (the next hop's MAC address)"))?;
                let hop = self
                    .next_hop(port_index, &mac)
                    .map_err(|e| key_err(nk("mac"), e))?;
                if let Some(j) = hops.iter().position(|h| *h == hop) {
                    return Err(key_err(
                        nk("port"),
                        format!("the same next hop as next_hops[{j}] (each next hop once)"),
                    ));
                }
                hops.push(hop);
            }
            self.push(prefix, hops);
        }
        Ok(())
    }

    /// Adds the routes of the routes file at `path`, one per line (docs/config.md).
    pub(super) fn add_file(&mut self, path: &Path) -> Result<usize, ConfigError> {
        let shown = path.display();
        let file = std::fs::File::open(path)
            .map_err(|e| key_err("routes_file", format!("cannot read {shown}: {e}")))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
        let before = self.routes.len();
        let mut line = String::new();
        let mut number = 0u32;
        loop {
            line.clear();
            number += 1;
            let at =
                |reason: String| key_err("routes_file", format!("{shown} line {number}: {reason}"));
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err(at("not UTF-8 text".into()));
                }
                Err(e) => return Err(key_err("routes_file", format!("cannot read {shown}: {e}"))),
            }
            // A byte-order mark, as some editors write, is no part of the first route.
            let text = if number == 1 {
                line.strip_prefix('\u{feff}').unwrap_or(&line)
            } else {
                &line
            };
            self.add_line(text, number).map_err(at)?;
        }
        Ok(self.routes.len() - before)
    }

    /// One line of the routes file: `PREFIX PORT MAC [PORT MAC ...]`, blank, or a comment.
    fn add_line(&mut self, line: &str, number: u32) -> Result<(), String> {
        let mut words = line.split_ascii_whitespace();
        let Some(first) = words.next().filter(|w| !w.starts_with('#')) else {
            return Ok(());
        };
        let prefix: Ipv4Prefix = first.parse()?;
        self.claim(prefix, Origin::Line(number))?;
        let mut hops: Vec<NextHopConfig> = Vec::with_capacity(4);
        while let Some(port) = words.next() {
            let n = hops.len() + 1;
            if port.starts_with('#') {
                break;
            }
            if n > MAX_NEXT_HOPS {
                return Err(format!("more than {MAX_NEXT_HOPS} next hops"));
            }
            // A comment where the MAC belongs ends the line there too.
            let mac = words.next().filter(|w| !w.starts_with('#')).ok_or_else(|| {
                format!("next hop {n}: port `{port}` has no MAC after it (PREFIX PORT MAC [PORT MAC ...])")
            })?;
            let hop = self
                .port(port)
                .and_then(|p| self.next_hop(p, mac))
                .map_err(|e| format!("next hop {n}: {e}"))?;
            if let Some(j) = hops.iter().position(|h| *h == hop) {
                return Err(format!(
                    "next hop {n} is the same as next hop {} (each next hop once)",
                    j + 1
                ));
            }
            hops.push(hop);
        }
        if hops.is_empty() {
            return Err(format!(
                "{prefix} has no next hop (PREFIX PORT MAC [PORT MAC ...])"
            ));
        }
        self.push(prefix, hops);
        Ok(())
    }

    /// Takes `prefix` for the route at `origin`, unless an earlier route has it.
    fn claim(&mut self, prefix: Ipv4Prefix, origin: Origin) -> Result<(), String> {
        match self.prefixes.entry(prefix) {
            Entry::Occupied(earlier) => {
                Err(format!("{prefix} is already routed by {}", earlier.get()))
            }
            Entry::Vacant(v) => {
                v.insert(origin);
                Ok(())
            }
        }
    }

    /// The index of the port called `name`.
    fn port(&self, name: &str) -> Result<usize, String> {
        self.port_names
            .iter()
            .position(|p| p == name)
            .ok_or_else(|| format!("no port is named `{name}`"))
    }

    /// One next hop through port `port_index`, checked: the MAC is a station's.
    fn next_hop(&self, port_index: usize, mac: &str) -> Result<NextHopConfig, String> {
        let mac: MacAddr = mac
            .parse()
            .map_err(|e: ::telemetry::wire::ethernet::MacParseError| e.to_string())?;
        // A typo here is a silent black hole (the port counts the packets as sent).
        if mac.is_multicast() {
            return Err(format!("{mac} is a multicast address, not a next hop's"));
        }
        if mac == MacAddr([0; 6]) {
            return Err("00:00:00:00:00:00 is no station's address".into());
        }
        Ok(NextHopConfig {
            port: self.port_names[port_index].clone(),
            port_index,
            mac,
        })
    }

    /// Appends a checked route, sharing its group with earlier routes of the same group.
    fn push(&mut self, prefix: Ipv4Prefix, hops: Vec<NextHopConfig>) {
        let next_hops = match self.groups.get(&hops[..]) {
            Some(g) => Arc::clone(g),
            None => {
                let g: Arc<[NextHopConfig]> = hops.into();
                self.entries += g.len();
                self.groups.insert(Arc::clone(&g));
                g
            }
        };
        self.routes.push(RouteConfig { prefix, next_hops });
    }

    /// The routes in the order written, once the distinct groups are known to fit the table.
    pub(super) fn finish(self) -> Result<Vec<RouteConfig>, ConfigError> {
        // Bounded room; checked here so that a config that passes does not fail at the start.
        if self.entries > pipeline::fib::MAX_NEXT_HOP_ENTRIES {
            return Err(key_err(
                "routes",
                format!(
                    "their {} distinct next-hop groups (`[[routes]]` and `routes_file` together) hold {} next hops together, more than the {} the route table holds (routes with the same group share it)",
                    self.groups.len(),
                    self.entries,
                    pipeline::fib::MAX_NEXT_HOP_ENTRIES
                ),
            ));
        }
        Ok(self.routes)
    }
}

#[cfg(test)]
mod tests;
