//! Where the topology drawing puts each switch: in layers by hops from a few roots (the
//! switches with hosts, or a centre), each layer a row, and within a row in the order that
//! keeps linked switches of neighbouring rows close (so that links cross less).

use telemetry::topology::Topology;

/// Node positions for drawing, `(name, x, y)` with `x` and `y` in 0..=1: switches with
/// hosts in the bottom row, each row above them one hop further away; when two switches
/// with hosts are linked (a topology file whose every switch has hosts, say) or none has
/// hosts, each part of the topology is drawn from its centre instead (the switch with the
/// fewest hops to the farthest one), since a bottom row of linked switches draws its links
/// through one another. A part that no root reaches is drawn from its own centre. Each node is named by `name` (the name the page's switch and link
/// rows use for it).
pub fn layout(
    topology: &Topology,
    hosts: &[u32],
    name: impl Fn(u32) -> String,
) -> Vec<(String, f64, f64)> {
    let n = topology.len();
    let mut host = vec![false; n];
    for &h in hosts {
        if let Some(x) = host.get_mut(h as usize) {
            *x = true;
        }
    }
    let is_host = |v: u32| host[v as usize];
    let from_hosts = !hosts.is_empty()
        && !hosts
            .iter()
            .any(|&h| topology.neighbours(h).iter().any(|&w| is_host(w)));
    let mut layer = vec![u32::MAX; n];
    if from_hosts {
        spread(topology, hosts, &mut layer);
    }
    while let Some(v) = layer.iter().position(|&l| l == u32::MAX) {
        let part = reachable(topology, v as u32);
        let centre = if part.len() <= EXACT_CENTRE_UP_TO {
            part.iter()
                .copied()
                .min_by_key(|&c| (eccentricity(topology, c), c))
                .expect("a part holds its first switch")
        } else {
            middle_of_a_longest_path(topology, v as u32)
        };
        spread(topology, &[centre], &mut layer);
    }
    let rows = order_rows(topology, &layer);
    let top = rows.len().saturating_sub(1);
    let mut out = vec![(String::new(), 0.5, 0.5); n];
    for (l, row) in rows.iter().enumerate() {
        let y = if top == 0 {
            0.5
        } else {
            1.0 - l as f64 / top as f64
        };
        for (i, &v) in row.iter().enumerate() {
            let x = (i as f64 + 0.5) / row.len() as f64;
            out[v as usize] = (name(v), x, y);
        }
    }
    out
}

/// Largest part whose centre is found exactly (a breadth-first search from each switch);
/// a larger one is drawn from the middle of a longest shortest path found by two searches
/// (a tree's exact centre; near it otherwise).
const EXACT_CENTRE_UP_TO: usize = 1000;

/// The switch halfway along a long shortest path of `v`'s part: from the farthest switch
/// from `v` to the farthest from that one.
fn middle_of_a_longest_path(topology: &Topology, v: u32) -> u32 {
    let farthest = |dist: &[u32]| -> u32 {
        (0..dist.len() as u32)
            .filter(|&w| dist[w as usize] != u32::MAX)
            .max_by_key(|&w| (dist[w as usize], std::cmp::Reverse(w)))
            .expect("the part holds its first switch")
    };
    let (dist, _) = topology.bfs(v);
    let a = farthest(&dist);
    let (dist, parent) = topology.bfs(a);
    let mut at = farthest(&dist);
    for _ in 0..dist[at as usize] / 2 {
        at = parent[at as usize];
    }
    at
}

/// Gives every switch not yet layered that `roots` reach its hops from the nearest root
/// (the roots themselves 0). Called for parts of the topology no root before reached, so
/// the switches it layers are exactly those of the roots' parts.
fn spread(topology: &Topology, roots: &[u32], layer: &mut [u32]) {
    for (l, d) in layer.iter_mut().zip(topology.distances_from(roots)) {
        if *l == u32::MAX {
            *l = d;
        }
    }
}

/// The switches linked to `v`, directly or not (`v` first).
fn reachable(topology: &Topology, v: u32) -> Vec<u32> {
    let (dist, _) = topology.bfs(v);
    let mut part = vec![v];
    part.extend((0..topology.len() as u32).filter(|&w| w != v && dist[w as usize] != u32::MAX));
    part
}

/// Hops from `v` to the farthest switch it reaches.
fn eccentricity(topology: &Topology, v: u32) -> u32 {
    let (dist, _) = topology.bfs(v);
    dist.into_iter()
        .filter(|&d| d != u32::MAX)
        .max()
        .unwrap_or(0)
}

/// The switches of each layer, as rows in drawing order: the rows sorted by the mean place
/// of each switch's links in the row before (down the layers, back up, and down again: the
/// usual sweeps that uncross a layered drawing).
fn order_rows(topology: &Topology, layer: &[u32]) -> Vec<Vec<u32>> {
    let top = layer.iter().copied().max().unwrap_or(0) as usize;
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); top + 1];
    for (v, &l) in layer.iter().enumerate() {
        rows[l as usize].push(v as u32);
    }
    let mut place = vec![0.0f64; layer.len()];
    let set_places = |row: &[u32], place: &mut [f64]| {
        for (i, &v) in row.iter().enumerate() {
            place[v as usize] = i as f64;
        }
    };
    for row in &rows {
        set_places(row, &mut place);
    }
    let sweep = |rows: &mut Vec<Vec<u32>>, place: &mut Vec<f64>, l: usize, by: usize| {
        let key = |v: u32| -> f64 {
            let linked: Vec<f64> = topology
                .neighbours(v)
                .iter()
                .filter(|&&w| layer[w as usize] as usize == by)
                .map(|&w| place[w as usize])
                .collect();
            if linked.is_empty() {
                place[v as usize]
            } else {
                linked.iter().sum::<f64>() / linked.len() as f64
            }
        };
        let mut keyed: Vec<(f64, u32)> = rows[l].iter().map(|&v| (key(v), v)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        rows[l] = keyed.into_iter().map(|(_, v)| v).collect();
        set_places(&rows[l], place);
    };
    for l in 1..=top {
        sweep(&mut rows, &mut place, l, l - 1);
    }
    for l in (0..top).rev() {
        sweep(&mut rows, &mut place, l, l + 1);
    }
    for l in 1..=top {
        sweep(&mut rows, &mut place, l, l - 1);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(u32, u32)]) -> Topology {
        let n = edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0);
        Topology::from_edges("t", (0..n).map(|i| i.to_string()).collect(), edges)
    }

    fn ring6() -> Topology {
        graph(&[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)])
    }

    /// The drawing's rows, bottom first, each left to right.
    fn rows(drawn: &[(String, f64, f64)]) -> Vec<Vec<String>> {
        let mut ys: Vec<f64> = drawn.iter().map(|d| d.2).collect();
        ys.sort_by(|a, b| b.total_cmp(a));
        ys.dedup();
        ys.iter()
            .map(|&y| {
                let mut row: Vec<&(String, f64, f64)> = drawn.iter().filter(|d| d.2 == y).collect();
                row.sort_by(|a, b| a.1.total_cmp(&b.1));
                row.into_iter().map(|d| d.0.clone()).collect()
            })
            .collect()
    }

    #[test]
    fn hosts_at_the_bottom_when_they_are_few() {
        // A line of five with hosts at both ends: the ends at the bottom, the middle on top.
        let line = Topology::line(5);
        let drawn = layout(&line, &[0, 4], |n| n.to_string());
        assert_eq!(rows(&drawn), [vec!["0", "4"], vec!["1", "3"], vec!["2"]]);
    }

    #[test]
    fn from_the_centre_when_switches_with_hosts_are_linked() {
        // A ring of six, every switch with hosts: one row would draw every link through the
        // boxes between its ends; from the centre (switch 0, the first of equals) it is
        // four rows, none holding two linked switches.
        let ring = ring6();
        let all: Vec<u32> = (0..6).collect();
        let drawn = layout(&ring, &all, |n| n.to_string());
        assert_eq!(
            rows(&drawn),
            [vec!["0"], vec!["1", "5"], vec!["2", "4"], vec!["3"]]
        );
    }

    #[test]
    fn every_part_is_drawn_from_its_centre_and_none_piles_up() {
        // Two separate lines of three, hosts only on the first: the second is drawn from
        // its own centre, and no two switches share a place.
        let t = graph(&[(0, 1), (1, 2), (3, 4), (4, 5)]);
        let drawn = layout(&t, &[0, 2], |n| n.to_string());
        let mut places: Vec<(u64, u64)> = drawn
            .iter()
            .map(|d| (d.1.to_bits(), d.2.to_bits()))
            .collect();
        places.sort_unstable();
        places.dedup();
        assert_eq!(places.len(), 6, "{drawn:?}");
        let r = rows(&drawn);
        assert!(
            r[0].contains(&"4".to_owned()) && r[0].contains(&"0".to_owned()),
            "{r:?}"
        );
    }

    /// A part too large to find its centre exactly is drawn from the middle of a longest
    /// path: a long ring of switches that all have hosts, drawn from one switch, in half its
    /// length of rows.
    #[test]
    fn a_large_part_is_drawn_from_near_its_centre() {
        let n = 3 * EXACT_CENTRE_UP_TO as u32;
        let edges: Vec<(u32, u32)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
        let ring = graph(&edges);
        let line = Topology::line(n);
        let all: Vec<u32> = (0..n).collect();
        let r = rows(&layout(&ring, &all, |n| n.to_string()));
        assert_eq!(r.len() as u32, n / 2 + 1);
        assert_eq!(r[0].len(), 1);
        // A line's middle switch is its centre.
        let r = rows(&layout(&line, &all, |n| n.to_string()));
        assert_eq!(r[0], [((n - 1) / 2).to_string()]);
    }

    #[test]
    fn linked_switches_of_neighbouring_rows_sit_close() {
        // Two spines, four leaves each linked to one spine: each spine sits above its
        // leaves, whatever the switches' numbering.
        let t = graph(&[(0, 3), (0, 5), (1, 2), (1, 4)]);
        let drawn = layout(&t, &[2, 3, 4, 5], |n| n.to_string());
        let r = rows(&drawn);
        assert_eq!(r[1], ["1", "0"]);
        assert_eq!(r[0], ["2", "4", "3", "5"]);
    }
}
