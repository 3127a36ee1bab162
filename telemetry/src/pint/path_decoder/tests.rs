use super::*;
use crate::pint::coding::Scheme;
use crate::sim_rng::SimRng;

/// Encodes one packet along `path` (switch IDs) and returns its fields.
fn encode(coding: &PathCoding, pid: u32, path: &[u32]) -> Vec<u64> {
    (0..coding.instances)
        .map(|n| {
            let mut field = 0;
            for (i, &v) in path.iter().enumerate() {
                field = coding.encode(n, pid, i + 1, v, field);
            }
            field
        })
        .collect()
}

/// Feeds random packets until decoded (or `limit`), checking every decoded hop on the way.
/// Returns the packets needed, or None.
fn decode(
    coding: &PathCoding,
    space: Space<'_>,
    path: &[u32],
    pin_last: bool,
    rng: &mut SimRng,
    limit: u64,
) -> Option<u64> {
    let mut d = PathDecoder::new(path.len(), coding, space);
    if pin_last {
        d.pin(path.len(), *path.last().unwrap());
    }
    while d.packets() < limit {
        let pid = rng.next_u32();
        d.feed(pid, &encode(coding, pid, path));
        assert!(!d.conflict(), "digests of one path never conflict");
        for i in 1..=path.len() {
            if let Some(v) = d.hop(i) {
                assert_eq!(
                    v,
                    path[i - 1],
                    "hop {i} decoded wrongly after {} packets",
                    d.packets()
                );
            }
        }
        if d.is_decoded() {
            assert_eq!(d.path().unwrap(), path);
            return Some(d.packets());
        }
    }
    None
}

#[test]
fn raw_values_on_a_line_without_topology() {
    let path: Vec<u32> = (100..125).collect();
    let mut rng = SimRng::new(1);
    for scheme in [Scheme::Baseline, Scheme::Interleaved] {
        let coding = PathCoding::for_diameter(scheme, 32, 1, 25).with_raw_values();
        for _ in 0..20 {
            assert!(decode(&coding, Space::Raw, &path, false, &mut rng, 5000).is_some());
        }
    }
}

#[test]
fn hashed_ids_without_topology() {
    let ids: Vec<u32> = (1..=300).collect();
    let path: Vec<u32> = vec![17, 250, 3, 99, 42, 7, 180, 181];
    let coding = PathCoding::for_diameter(Scheme::Interleaved, 8, 2, 10);
    let mut rng = SimRng::new(2);
    for _ in 0..20 {
        assert!(decode(&coding, Space::Ids(&ids), &path, false, &mut rng, 5000).is_some());
    }
}

#[test]
fn fat_tree_paths_with_one_bit() {
    let t = Topology::fat_tree(8);
    let edges = Topology::fat_tree_edges(8);
    let coding = PathCoding::for_diameter(Scheme::Interleaved, 1, 1, 5);
    let mut rng = SimRng::new(3);
    for r in 0..30 {
        let (a, b) = (edges[r % 32], edges[(r * 7 + 5) % 32]);
        let nodes = t.shortest_path(a, b).unwrap();
        let path: Vec<u32> = nodes.iter().map(|&n| t.switch_id(n)).collect();
        assert!(decode(&coding, Space::Topology(&t), &path, true, &mut rng, 10_000).is_some());
    }
}

/// A decoded path holds a switch per hop and nothing else: what decoding took (candidate
/// sets of hundreds on a large topology, XOR digests) goes back.
#[test]
fn a_decoded_path_gives_back_what_decoding_took() {
    let t = Topology::fat_tree(16);
    let edges = Topology::fat_tree_edges(16);
    let coding = PathCoding::for_diameter(Scheme::Interleaved, 8, 1, 5);
    let mut rng = SimRng::new(4);
    let nodes = t.shortest_path(edges[0], edges[100]).unwrap();
    let path: Vec<u32> = nodes.iter().map(|&n| t.switch_id(n)).collect();
    let k = path.len();
    let mut d = PathDecoder::new(k, &coding, Space::Topology(&t));
    d.pin(k, path[k - 1]);
    let mut most = 0;
    while !d.is_decoded() && d.packets() < 10_000 {
        let pid = rng.next_u32();
        d.feed(pid, &encode(&coding, pid, &path));
        most = most.max(d.state.heap_bytes());
    }
    assert_eq!(d.path().unwrap(), path);
    let per_hop = std::mem::size_of::<Cands>() + 4;
    assert!(most > k * per_hop, "decoding took room: {most}");
    assert_eq!(d.state.heap_bytes(), k * per_hop);
}

#[test]
fn pinned_endpoints_and_conflicts() {
    let t = Topology::line(5);
    let coding = PathCoding::for_diameter(Scheme::Baseline, 8, 1, 5);
    // Hop 3 is switch 3 and hop 1 switch 5: hop 2 must neighbour both, so it is switch 4.
    let mut d = PathDecoder::new(3, &coding, Space::Topology(&t));
    d.pin(3, 3);
    d.pin(1, 5);
    assert!(!d.conflict());
    assert_eq!(d.hop(2), Some(4));
    assert_eq!(d.path(), Some(vec![5, 4, 3]));
    let mut e = PathDecoder::new(2, &coding, Space::Topology(&t));
    e.pin(2, 1);
    e.pin(1, 5); // switches 1 and 5 are not neighbours
    assert!(e.conflict());
}

/// A random connected graph: a random tree plus extra edges (average degree about 2.4).
fn random_graph(n: u32, rng: &mut SimRng) -> Topology {
    let mut edges = Vec::new();
    for v in 1..n {
        edges.push((v, rng.below(u64::from(v)) as u32));
    }
    for _ in 0..n / 5 {
        edges.push((
            rng.below(u64::from(n)) as u32,
            rng.below(u64::from(n)) as u32,
        ));
    }
    Topology::from_edges("random", (0..n).map(|i| i.to_string()).collect(), &edges)
}

/// No false decode: over random topologies, paths and packet streams, a decoded hop or path
/// always equals the truth (checked after every packet by `decode`).
#[test]
fn no_false_decode_over_random_topologies() {
    let trials: u64 = if cfg!(debug_assertions) {
        100_000
    } else {
        200_000
    };
    let mut rng = SimRng::new(0x5eed);
    let mut done = 0u64;
    let mut decoded = 0u64;
    while done < trials {
        let t = random_graph(20 + rng.below(200) as u32, &mut rng);
        let bits = [1, 2, 4, 8, 8, 8][rng.below(6) as usize];
        let instances = 1 + rng.below(2) as u32;
        let scheme = if rng.below(4) == 0 {
            Scheme::Baseline
        } else {
            Scheme::Interleaved
        };
        let coding = PathCoding::for_diameter(scheme, bits, instances, 10);
        for _ in 0..50 {
            let a = rng.below(t.len() as u64) as u32;
            let b = rng.below(t.len() as u64) as u32;
            let nodes = t.shortest_path(a, b).unwrap();
            if nodes.len() > 40 {
                continue;
            }
            let path: Vec<u32> = nodes.iter().map(|&n| t.switch_id(n)).collect();
            // Short decodes (few packets) are where a false decode would show.
            let limit = 1 + rng.below(60);
            if decode(
                &coding,
                Space::Topology(&t),
                &path,
                rng.below(2) == 0,
                &mut rng,
                limit,
            )
            .is_some()
            {
                decoded += 1;
            }
            done += 1;
        }
    }
    assert!(
        decoded > trials / 10,
        "a good share of trials decode ({decoded} of {done})"
    );
}

/// On a decoded path, `check` agrees with `feed`: packets of the same path never conflict,
/// and a packet of another route conflicts under `check` exactly when it does under `feed`.
#[test]
fn check_on_a_decoded_path_is_feed_without_candidate_work() {
    let t = Topology::fat_tree(4);
    let edges = Topology::fat_tree_edges(4);
    let mut rng = SimRng::new(11);
    let mut conflicts = 0;
    for scheme in [Scheme::Baseline, Scheme::Interleaved] {
        for bits in [1, 8] {
            let coding = PathCoding::for_diameter(scheme, bits, 2, 5);
            let cx = PathContext {
                coding: &coding,
                space: Space::Topology(&t),
            };
            for r in 0..16 {
                let (a, b) = (edges[r % 8], edges[(r * 3 + 5) % 8]);
                let Some(nodes) = t.shortest_path(a, b) else {
                    continue;
                };
                if nodes.len() < 3 {
                    continue;
                }
                let path: Vec<u32> = nodes.iter().map(|&n| t.switch_id(n)).collect();
                let mut s = PathState::new(path.len());
                s.pin(cx, path.len(), *path.last().unwrap());
                while !s.is_decoded() {
                    let pid = rng.next_u32();
                    s.feed(cx, pid, encode(&coding, pid, &path));
                    assert!(!s.conflict());
                }
                // The same path: never a conflict.
                for _ in 0..200 {
                    let pid = rng.next_u32();
                    s.check(cx, pid, encode(&coding, pid, &path));
                    assert!(!s.conflict() && s.is_decoded());
                }
                // Another route of the same length (a middle hop moved): both agree.
                let mut other = path.clone();
                other[1] = if other[1] == path[0] { 1 } else { other[1] + 1 };
                for _ in 0..50 {
                    let pid = rng.next_u32();
                    let fields = encode(&coding, pid, &other);
                    let (mut fed, mut checked) = (s.clone(), s.clone());
                    fed.feed(cx, pid, fields.iter().copied());
                    checked.check(cx, pid, fields);
                    assert_eq!(fed.conflict(), checked.conflict(), "pid {pid}");
                    assert_eq!(checked.is_decoded(), !checked.conflict());
                    conflicts += usize::from(checked.conflict());
                }
            }
        }
    }
    assert!(conflicts > 100, "route changes show: {conflicts}");
}

#[test]
fn feeding_settles_as_an_exhaustive_pass_would() {
    // Without a topology (IDs from hellos) and with one, XOR layers on: after every packet
    // the incremental decoder's state is the one a full pass over everything gives.
    let ids: Vec<u32> = (1..=40).collect();
    let t = Topology::fat_tree(4);
    // A walk of five switches in the fat tree, as switch IDs.
    let mut walk = vec![0u32];
    while walk.len() < 5 {
        let last = *walk.last().unwrap();
        let next = t.neighbours(last).iter().find(|n| !walk.contains(n));
        walk.push(*next.expect("a fat tree has room for a five-switch walk"));
    }
    let walk: Vec<u32> = walk.into_iter().map(|n| t.switch_id(n)).collect();
    let mut rng = SimRng::new(9);
    for (space, path) in [
        (Space::Ids(&ids), vec![3u32, 17, 29, 8, 40]),
        (Space::Topology(&t), walk),
    ] {
        for bits in [1, 4, 8] {
            let coding = PathCoding::for_diameter(Scheme::Interleaved, bits, 1, 5);
            let cx = PathContext {
                coding: &coding,
                space,
            };
            let (mut fast, mut full) = (PathState::new(path.len()), PathState::new(path.len()));
            for _ in 0..400 {
                let pid = rng.next_u32();
                let fields = encode(&coding, pid, &path);
                fast.feed(cx, pid, fields.iter().copied());
                full.feed_exhaustively(cx, pid, &fields);
                assert_eq!(
                    fast.cands, full.cands,
                    "{bits} bits, {} packets",
                    fast.packets
                );
                assert_eq!(fast.equations.len(), full.equations.len());
                assert_eq!(fast.is_decoded(), full.is_decoded());
                assert!(!fast.conflict());
            }
        }
    }
}
