//! `pint-bench pint-path`: packets needed to decode a flow's path, per path length, for PINT
//! (baseline or interleaved coding, b-bit hashes, several instances, with or without the
//! topology) and for the comparison points PPM and AMS2 (both improved with reservoir
//! sampling), over many runs.

use std::collections::BTreeMap;

use serde::Serialize;
use telemetry::pint::coding::{MAX_HOPS, PathCoding, Scheme};
use telemetry::pint::path_decoder::{PathDecoder, Space};
use telemetry::sim_rng::SimRng;
use telemetry::topology::Topology;

use crate::stats::{mean, median, percentile};

/// Which scheme to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathScheme {
    /// PINT with the given coding scheme.
    Pint(Scheme),
    /// Probabilistic packet marking (Savage et al.), fragment sampling, 16 bits per packet.
    Ppm,
    /// Advanced marking scheme II (Song and Perrig) with `m` hash functions, 16 bits.
    Ams2(u32),
}

impl std::str::FromStr for PathScheme {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "baseline" => PathScheme::Pint(Scheme::Baseline),
            "interleaved" => PathScheme::Pint(Scheme::Interleaved),
            "ppm" => PathScheme::Ppm,
            "ams2-m5" => PathScheme::Ams2(5),
            "ams2-m6" => PathScheme::Ams2(6),
            _ => {
                return Err(format!(
                    "unknown scheme `{s}` (baseline, interleaved, ppm, ams2-m5, ams2-m6)"
                ));
            }
        })
    }
}

impl std::fmt::Display for PathScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathScheme::Pint(Scheme::Baseline) => write!(f, "baseline"),
            PathScheme::Pint(Scheme::Interleaved) => write!(f, "interleaved"),
            PathScheme::Ppm => write!(f, "ppm"),
            PathScheme::Ams2(m) => write!(f, "ams2-m{m}"),
        }
    }
}

/// Which paths flows take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Routes {
    /// Shortest paths (the topology alone then leaves few walks of the path's length between
    /// its ends, which helps the decoder).
    Shortest,
    /// Random simple paths of exactly the length asked for that are not shortest paths
    /// between their ends (the topology helps less).
    Walk,
}

/// Options of the experiment.
#[derive(Debug, Clone)]
pub struct PathOptions {
    /// `line:N`, `fattree:K` or a topology file (GraphML, GML or TOML adjacency).
    pub topology: String,
    /// The scheme.
    pub scheme: PathScheme,
    /// Bits per instance (PINT).
    pub bits: u32,
    /// Independent instances (PINT).
    pub instances: u32,
    /// Path-length bound `d` for the XOR probability (None: the topology's longest path for
    /// lines, 5 for fat trees, 10 otherwise, as in the paper).
    pub d: Option<u32>,
    /// Decode without the topology, with ideal full-width values (the coding scheme alone).
    pub no_topology: bool,
    /// The sink also knows the first hop (the switch that owns the source prefix).
    pub first_hop_known: bool,
    /// Runs per path.
    pub runs: u32,
    /// Paths per path length (sampled among all shortest paths of that length).
    pub paths_per_length: u32,
    /// Only these path lengths (empty: all).
    pub lengths: Vec<usize>,
    /// Seed.
    pub seed: u64,
    /// Give up on a run after this many packets.
    pub max_packets: u64,
    /// Which paths flows take.
    pub routes: Routes,
}

/// Results for one path length.
#[derive(Debug, Clone, Serialize)]
pub struct LengthRow {
    /// Path length in switches.
    pub length: usize,
    /// Paths measured.
    pub paths: usize,
    /// Runs in all.
    pub runs: usize,
    /// Mean packets to decode.
    pub avg: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Runs that hit `max_packets` without decoding.
    pub failed: usize,
    /// Runs that decoded a path other than the true one (must be 0: checked in every run).
    pub wrong: usize,
}

/// The experiment's output.
#[derive(Debug, Clone, Serialize)]
pub struct PathResult {
    /// Topology name.
    pub topology: String,
    /// Switches in the topology.
    pub switches: usize,
    /// Scheme name.
    pub scheme: String,
    /// Bits per instance (PINT) or per packet (PPM, AMS2).
    pub bits: u32,
    /// Instances (PINT).
    pub instances: u32,
    /// `d` used for the XOR probability.
    pub d: u32,
    /// Baseline share and XOR probabilities (PINT).
    pub tau: f64,
    /// XOR layer probabilities.
    pub xor_p: Vec<f64>,
    /// Whether the topology was used.
    pub topology_used: bool,
    /// Whether the first hop was known.
    pub first_hop_known: bool,
    /// Which paths flows took.
    pub routes: String,
    /// Rows by path length.
    pub rows: Vec<LengthRow>,
}

/// Picks the paths to measure: every length's paths (as switch IDs), up to
/// `paths_per_length` of each, sampled deterministically.
fn pick_paths(
    t: &Topology,
    opts: &PathOptions,
    rng: &mut SimRng,
) -> BTreeMap<usize, Vec<Vec<u32>>> {
    pick_paths_keeping(t, opts, rng, MAX_PAIRS_KEPT)
}

/// [`pick_paths`], sampling as the pairs go by past `max_pairs` of them.
fn pick_paths_keeping(
    t: &Topology,
    opts: &PathOptions,
    rng: &mut SimRng,
    max_pairs: usize,
) -> BTreeMap<usize, Vec<Vec<u32>>> {
    let mut by_len: BTreeMap<usize, Vec<(u32, u32)>> = BTreeMap::new();
    // What `Topology::load` generated, by the spec it was given (a file's name or its own
    // `name` may read the same).
    let spec = opts.topology.as_str();
    let ends: Vec<u32> = if let Some(k) = spec.strip_prefix("fattree:") {
        Topology::fat_tree_edges(k.parse().expect("a loaded fat tree's k"))
    } else if spec.starts_with("line:") {
        vec![0, t.len() as u32 - 1]
    } else {
        (0..t.len() as u32).collect()
    };
    // Every pair kept, then shuffled, up to a few million pairs (Kdl has 0.57 M); past
    // that, a uniform sample of each length kept as the pairs go by (a 10,000-switch
    // topology has 10^8 pairs: about a gigabyte kept).
    let sampled = ends.len() * ends.len() > max_pairs;
    let mut seen: BTreeMap<usize, u64> = BTreeMap::new();
    for &s in &ends {
        let (dist, _) = t.bfs(s);
        for &d in &ends {
            if d != s && dist[d as usize] != u32::MAX {
                let len = dist[d as usize] as usize + 1;
                let pairs = by_len.entry(len).or_default();
                if !sampled {
                    pairs.push((s, d));
                    continue;
                }
                let n = seen.entry(len).or_default();
                *n += 1;
                if pairs.len() < opts.paths_per_length as usize {
                    pairs.push((s, d));
                } else {
                    let at = rng.below(*n) as usize;
                    if at < pairs.len() {
                        pairs[at] = (s, d);
                    }
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    if opts.routes == Routes::Walk {
        for &len in by_len.keys() {
            if !opts.lengths.is_empty() && !opts.lengths.contains(&len) {
                continue;
            }
            let walks: Vec<Vec<u32>> = (0..opts.paths_per_length)
                .filter_map(|_| random_walk(t, &ends, len, rng))
                .map(|p| p.into_iter().map(|n| t.switch_id(n)).collect())
                .collect();
            if !walks.is_empty() {
                out.insert(len, walks);
            }
        }
        return out;
    }
    for (len, mut pairs) in by_len {
        if !opts.lengths.is_empty() && !opts.lengths.contains(&len) {
            continue;
        }
        // A deterministic shuffle, then the first few.
        for i in (1..pairs.len()).rev() {
            pairs.swap(i, rng.below(i as u64 + 1) as usize);
        }
        pairs.truncate(opts.paths_per_length as usize);
        let paths = pairs
            .into_iter()
            .filter_map(|(s, d)| t.shortest_path(s, d))
            .map(|p| p.into_iter().map(|n| t.switch_id(n)).collect())
            .collect();
        out.insert(len, paths);
    }
    out
}

/// Most pairs of switches [`pick_paths`] keeps before sampling them (16 M: 128 MB).
const MAX_PAIRS_KEPT: usize = 1 << 24;

/// A random simple path of exactly `len` switches between two of `ends` that is not a
/// shortest path between them: a depth-first search with random neighbour order and a budget
/// of steps, from random starts.
fn random_walk(t: &Topology, ends: &[u32], len: usize, rng: &mut SimRng) -> Option<Vec<u32>> {
    let mut is_end = vec![false; t.len()];
    for &e in ends {
        is_end[e as usize] = true;
    }
    for _ in 0..200 {
        let start = ends[rng.below(ends.len() as u64) as usize];
        // Hops from the start, for whether a walk is a shortest path: one search per start,
        // not one per walk found.
        let dist = t.bfs(start).0;
        let mut path = vec![start];
        let mut on_path = vec![false; t.len()];
        on_path[start as usize] = true;
        // Per depth: the neighbours still to try.
        let mut todo: Vec<Vec<u32>> = vec![shuffled(t.neighbours(start), rng)];
        let mut budget = 20_000u32;
        while let Some(next) = todo.last_mut() {
            budget -= 1;
            if budget == 0 {
                break;
            }
            if path.len() == len {
                let d = path[len - 1];
                if is_end[d as usize] && (dist[d as usize] as usize) + 1 < len {
                    return Some(path);
                }
                on_path[d as usize] = false;
                path.pop();
                todo.pop();
                continue;
            }
            match next.pop() {
                Some(v) if !on_path[v as usize] => {
                    path.push(v);
                    on_path[v as usize] = true;
                    todo.push(shuffled(t.neighbours(v), rng));
                }
                Some(_) => {}
                None => {
                    let last = path.pop().expect("non-empty");
                    on_path[last as usize] = false;
                    todo.pop();
                }
            }
        }
    }
    None
}

fn shuffled(xs: &[u32], rng: &mut SimRng) -> Vec<u32> {
    let mut v = xs.to_vec();
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    v
}

/// How a PINT run ended.
enum Run {
    /// Decoded the true path after this many packets.
    Decoded(u64),
    /// Decoded another path (a decoder bug; reported, must never happen).
    Wrong,
    /// Not decoded within the packet limit.
    Failed,
}

/// Packets until a PINT decoder decodes `path`.
fn pint_run(
    coding: &PathCoding,
    space: Space<'_>,
    path: &[u32],
    first_known: bool,
    rng: &mut SimRng,
    max: u64,
) -> Run {
    let k = path.len();
    let mut d = PathDecoder::new(k, coding, space);
    if !matches!(space, Space::Raw) {
        d.pin(k, path[k - 1]);
        if first_known {
            d.pin(1, path[0]);
        }
    }
    let mut fields = vec![0u64; coding.instances as usize];
    while d.packets() < max {
        let pid = rng.next_u32();
        for (n, f) in fields.iter_mut().enumerate() {
            let mut field = 0;
            for (i, &v) in path.iter().enumerate() {
                field = coding.encode(n as u32, pid, i + 1, v, field);
            }
            *f = field;
        }
        d.feed(pid, &fields);
        if d.is_decoded() {
            if d.path().as_deref() != Some(path) {
                return Run::Wrong;
            }
            return Run::Decoded(d.packets());
        }
    }
    Run::Failed
}

/// The hop a reservoir-sampling marker leaves its mark from (uniform over 1..=k).
fn reservoir_hop(rng: &mut SimRng, k: usize) -> usize {
    // Simulates the per-hop coin flips of reservoir sampling: hop i overwrites with
    // probability 1/i; the survivor is the last hop that flipped heads.
    let mut w = 1;
    for i in 2..=k {
        if rng.below(i as u64) == 0 {
            w = i;
        }
    }
    w
}

/// PPM with fragment sampling (16 bits: 6-bit distance, 2-bit fragment offset, 8-bit
/// fragment of the 32-bit edge id `s_i XOR s_(i+1)`; the last hop's edge is its own id):
/// the path is known once all four fragments of every edge have arrived.
fn ppm_run(k: usize, rng: &mut SimRng, max: u64) -> Option<u64> {
    let mut seen = vec![[false; 4]; k];
    let mut missing = 4 * k;
    let mut packets = 0;
    while packets < max {
        packets += 1;
        let hop = reservoir_hop(rng, k);
        let offset = rng.below(4) as usize;
        let s = &mut seen[hop - 1][offset];
        if !*s {
            *s = true;
            missing -= 1;
            if missing == 0 {
                return Some(packets);
            }
        }
    }
    None
}

/// AMS2 (16 bits: 6-bit distance and a 10-bit hash of the marking router by one of `m` hash
/// functions, chosen per packet). With the upstream map (the topology) the sink walks back
/// from its own switch: the switch at distance `d` is accepted once marks from all `m`
/// functions have arrived for that distance and exactly one neighbour of the switch at
/// distance `d - 1` matches all of them.
fn ams2_run(t: &Topology, path: &[u32], m: u32, rng: &mut SimRng, max: u64) -> Option<u64> {
    let k = path.len();
    let hash = |f: u32, id: u32| {
        (telemetry::hash::hash32(0xa5_0000 + u64::from(f), &[u64::from(id)]) >> 22) as u16
    };
    // marks[d] = per function, the hash seen (hop at distance d from the sink = path[k-1-d]).
    let mut marks: Vec<Vec<Option<u16>>> = vec![vec![None; m as usize]; k];
    let mut decoded: Vec<Option<u32>> = vec![None; k];
    decoded[0] = Some(path[k - 1]);
    let mut packets = 0;
    while packets < max {
        packets += 1;
        let hop = reservoir_hop(rng, k);
        let f = rng.below(u64::from(m)) as u32;
        let dist = k - hop;
        marks[dist][f as usize] = Some(hash(f, path[hop - 1]));
        // Walk back as far as possible.
        let mut d = 1;
        while d < k {
            if decoded[d].is_none() {
                let prev = decoded[d - 1].expect("walk is contiguous");
                if marks[d].iter().any(Option::is_none) {
                    break;
                }
                let node = t.node(prev).expect("switch in topology");
                let matching: Vec<u32> = t
                    .neighbours(node)
                    .iter()
                    .map(|&n| t.switch_id(n))
                    .filter(|&id| (0..m).all(|f| marks[d][f as usize] == Some(hash(f, id))))
                    .collect();
                if matching.len() != 1 {
                    break;
                }
                decoded[d] = Some(matching[0]);
            }
            d += 1;
        }
        if decoded.iter().all(Option::is_some) {
            return Some(packets);
        }
    }
    None
}

/// Runs the experiment.
pub fn run(opts: &PathOptions) -> anyhow::Result<PathResult> {
    let t = Topology::load(&opts.topology)?;
    let mut rng = SimRng::new(opts.seed);
    let d = opts.d.unwrap_or_else(|| {
        if opts.topology.starts_with("line:") {
            t.len() as u32
        } else if opts.topology.starts_with("fattree:") {
            5
        } else {
            10
        }
    });
    let scheme = match opts.scheme {
        PathScheme::Pint(s) => s,
        _ => Scheme::Baseline,
    };
    let mut coding = PathCoding::for_diameter(scheme, opts.bits, opts.instances, d);
    if opts.no_topology {
        coding = coding.with_raw_values();
    }
    let mut paths = pick_paths(&t, opts, &mut rng);
    // A hop index counts at most 255 switches (the decoder's bound too).
    let too_long: Vec<usize> = paths.keys().copied().filter(|&l| l > MAX_HOPS).collect();
    if let (Some(lo), Some(hi)) = (too_long.first(), too_long.last()) {
        eprintln!(
            "pint-path: {}: paths of {lo} to {hi} switches left out: a path is at most {MAX_HOPS} switches",
            t.name
        );
        paths.retain(|&l, _| l <= MAX_HOPS);
        anyhow::ensure!(
            !paths.is_empty(),
            "{}: every path asked for is longer than {MAX_HOPS} switches, so there is nothing to trace",
            t.name
        );
    }
    if paths.values().all(Vec::is_empty) {
        let which = if opts.lengths.is_empty() {
            String::new()
        } else {
            format!(" of the lengths asked for ({:?})", opts.lengths)
        };
        // A line's paths run from one end to the other: its length is the line's.
        if opts.topology.starts_with("line:")
            && opts.routes == Routes::Shortest
            && !opts.lengths.is_empty()
            && t.len() > 1
        {
            anyhow::bail!(
                "{}: a line's one path runs from one end to the other, {} switches, none{which}: take line:N of the length wanted",
                t.name,
                t.len(),
            );
        }
        let what = match opts.routes {
            Routes::Shortest => "no two switches are joined by a path",
            Routes::Walk => "no simple path that is not a shortest one was found",
        };
        anyhow::bail!("{}: {what}{which}, so there is nothing to trace", t.name);
    }
    let mut rows = Vec::new();
    for (len, ps) in &paths {
        let mut samples = Vec::new();
        let (mut failed, mut wrong) = (0, 0);
        for p in ps {
            for _ in 0..opts.runs {
                let r = match opts.scheme {
                    PathScheme::Pint(_) => {
                        let space = if opts.no_topology {
                            Space::Raw
                        } else {
                            Space::Topology(&t)
                        };
                        pint_run(
                            &coding,
                            space,
                            p,
                            opts.first_hop_known,
                            &mut rng,
                            opts.max_packets,
                        )
                    }
                    PathScheme::Ppm => ppm_run(p.len(), &mut rng, opts.max_packets)
                        .map_or(Run::Failed, Run::Decoded),
                    PathScheme::Ams2(m) => ams2_run(&t, p, m, &mut rng, opts.max_packets)
                        .map_or(Run::Failed, Run::Decoded),
                };
                match r {
                    Run::Decoded(n) => samples.push(n as f64),
                    Run::Failed => failed += 1,
                    Run::Wrong => wrong += 1,
                }
            }
        }
        rows.push(LengthRow {
            length: *len,
            paths: ps.len(),
            runs: samples.len() + failed + wrong,
            avg: mean(&samples),
            median: median(&samples),
            p99: percentile(&samples, 0.99),
            failed,
            wrong,
        });
    }
    let pint = matches!(opts.scheme, PathScheme::Pint(_));
    Ok(PathResult {
        topology: t.name.clone(),
        switches: t.len(),
        scheme: opts.scheme.to_string(),
        bits: if pint { coding.bits } else { 16 },
        instances: if pint { coding.instances } else { 1 },
        d,
        tau: if pint { coding.tau() } else { 0.0 },
        xor_p: if pint {
            coding.xor_probabilities().to_vec()
        } else {
            Vec::new()
        },
        topology_used: !opts.no_topology,
        first_hop_known: opts.first_hop_known,
        routes: match opts.routes {
            Routes::Shortest => "shortest".into(),
            Routes::Walk => "walk".into(),
        },
        rows,
    })
}

/// Prints the result as a table.
pub fn print_table(r: &PathResult) {
    let what = if r.scheme == "baseline" || r.scheme == "interleaved" {
        format!(
            "PINT {} {}x(b={}), d={}, tau={:.2}, xor p={:?}, {}{}",
            r.scheme,
            r.instances,
            r.bits,
            r.d,
            r.tau,
            r.xor_p
                .iter()
                .map(|p| (p * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            if r.topology_used {
                "with topology"
            } else {
                "no topology, raw values"
            },
            if r.first_hop_known {
                ", first hop known"
            } else {
                ""
            }
        )
    } else {
        format!("{} (16 bits per packet)", r.scheme)
    };
    println!(
        "{} ({} switches), {} paths: {what}",
        r.topology, r.switches, r.routes
    );
    println!(
        "{:>7} {:>6} {:>7} {:>9} {:>8} {:>8} {:>7} {:>6}",
        "length", "paths", "runs", "avg", "median", "p99", "failed", "wrong"
    );
    for row in &r.rows {
        println!(
            "{:>7} {:>6} {:>7} {:>9.1} {:>8.1} {:>8.1} {:>7} {:>6}",
            row.length, row.paths, row.runs, row.avg, row.median, row.p99, row.failed, row.wrong
        );
    }
    let wrong: usize = r.rows.iter().map(|row| row.wrong).sum();
    if wrong > 0 {
        println!("warning: {wrong} runs decoded a wrong path");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(topology: &str) -> PathOptions {
        PathOptions {
            topology: topology.into(),
            scheme: PathScheme::Pint(Scheme::Baseline),
            bits: 8,
            instances: 1,
            d: None,
            no_topology: false,
            first_hop_known: false,
            runs: 5,
            paths_per_length: 2,
            lengths: Vec::new(),
            seed: 1,
            max_packets: 100_000,
            routes: Routes::Shortest,
        }
    }

    #[test]
    fn every_decode_is_checked_and_a_topology_without_paths_is_an_error() {
        let r = run(&opts("line:4")).unwrap();
        let lengths: Vec<usize> = r.rows.iter().map(|row| row.length).collect();
        assert_eq!(lengths, [4], "a line is traced end to end");
        assert!(r.rows.iter().all(|row| row.wrong == 0 && row.runs > 0));
        let e = run(&opts("line:1")).unwrap_err().to_string();
        assert!(e.contains("no two switches are joined"), "{e}");
        let mut o = opts("line:4");
        o.lengths = vec![9];
        let e = run(&o).unwrap_err().to_string();
        assert!(e.contains("lengths asked for ([9])"), "{e}");
        // A line longer than a path can be: refused, not a panic.
        let e = run(&opts("line:300")).unwrap_err().to_string();
        assert!(e.contains("longer than 255 switches"), "{e}");
        // A line has no path that is not a shortest one.
        o.lengths.clear();
        o.routes = Routes::Walk;
        let e = run(&o).unwrap_err().to_string();
        assert!(e.contains("not a shortest one"), "{e}");
    }

    /// Past the pairs it keeps, each length's paths are a sample taken as the pairs go by:
    /// as many as asked, each a shortest path of its length.
    #[test]
    fn many_pairs_are_sampled_as_they_go_by() {
        let t = Topology::fat_tree(8);
        let mut o = opts("fattree:8");
        o.paths_per_length = 3;
        let kept = pick_paths(&t, &o, &mut SimRng::new(5));
        let sampled = pick_paths_keeping(&t, &o, &mut SimRng::new(5), 100);
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            sampled.keys().collect::<Vec<_>>()
        );
        for (len, paths) in &sampled {
            assert_eq!(paths.len(), 3, "length {len}");
            for p in paths {
                assert_eq!(p.len(), *len);
                let (a, b) = (t.node(p[0]).unwrap(), t.node(p[len - 1]).unwrap());
                assert_eq!(t.bfs(a).0[b as usize] as usize + 1, *len, "a shortest path");
            }
        }
    }

    /// A topology file whose name reads like a generated topology's is a file: its ends
    /// are all its switches (a fat tree's edge switches were taken from its name, past its
    /// nodes: a panic).
    #[test]
    fn a_files_name_does_not_make_it_a_generated_topology() {
        let dir = crate::scratch::Scratch::new("pint-path-name").unwrap();
        let path = dir.path("t.toml");
        std::fs::write(
            &path,
            "name = \"fattree:4\"\nlinks = [[1, 2], [2, 3], [3, 4], [4, 5], [5, 6]]\n",
        )
        .unwrap();
        let mut o = opts(path.to_str().unwrap());
        o.lengths = vec![6];
        let r = run(&o).unwrap();
        assert_eq!(r.rows.len(), 1);
        assert!(r.rows[0].runs > 0 && r.rows[0].wrong == 0);
    }
}
