//! Network topologies: Topology Zoo files (GraphML or GML), the TOML adjacency form,
//! generated fat trees and lines, and shortest-path routing over them.
//!
//! Nodes are numbered 0..n in file order; each node's switch ID (the value path tracing
//! carries) is its number plus one, unless the topology names its switches by ID (the TOML
//! adjacency form, [`Topology::parse_toml`]). Edges are undirected; parallel edges and
//! self-loops are dropped.

mod gml;
mod graphml;
mod text;

use std::collections::VecDeque;
use std::path::Path;

/// Why a topology could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is malformed.
    #[error("{path}: not a topology: {reason}")]
    Format {
        /// The path (or `<text>`).
        path: String,
        /// Why.
        reason: String,
    },
    /// A topology specification such as `fattree:8` is not understood.
    #[error(
        "`{0}` is not a topology (use a GraphML, GML or TOML file, fattree:K with even K >= 2, or line:N with N >= 1)"
    )]
    Spec(String),
}

/// The label a topology file's `text` gives its node, trimmed, its control characters
/// (line breaks, tabs) made spaces: a label is shown on one line. None when blank, nor when
/// it is `None`, which the Topology Zoo's files give the nodes they could not name.
pub(super) fn label_of(text: &str) -> Option<String> {
    let label: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    (!label.is_empty() && label != "None").then_some(label)
}

/// Why [`Topology::find`] found no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    /// No node has that name or label.
    #[error("no switch is called that")]
    Unknown,
    /// Several nodes have that label (their names).
    #[error("the label of several switches ({}): name one by its id", .0.join(", "))]
    AmbiguousLabel(Vec<String>),
}

/// An undirected graph of switches.
#[derive(Debug, Clone)]
pub struct Topology {
    /// A name for reports (file stem, `fattree:8`, `line:25`).
    pub name: String,
    /// Node names (a file's node ids or generated names), by node number.
    pub names: Vec<String>,
    /// Node labels a file gives besides the ids (the Topology Zoo's place names), by node
    /// number (one per node; None where the file gives none).
    pub labels: Vec<Option<String>>,
    /// Sorted neighbour lists, by node number.
    pub adjacency: Vec<Vec<u32>>,
    /// Switch IDs by node number, when they are not the node numbers plus one.
    ids: Option<SwitchIds>,
}

/// Explicit switch IDs of a topology's nodes.
#[derive(Debug, Clone)]
struct SwitchIds {
    of_node: Vec<u32>,
    node_of: rustc_hash::FxHashMap<u32, u32>,
}

impl Topology {
    /// Number of switches.
    pub fn len(&self) -> usize {
        self.adjacency.len()
    }

    /// Whether the graph has no switch.
    pub fn is_empty(&self) -> bool {
        self.adjacency.is_empty()
    }

    /// The switch ID of node `n` (its number plus one, unless the topology names IDs).
    #[inline]
    pub fn switch_id(&self, n: u32) -> u32 {
        match &self.ids {
            None => n + 1,
            Some(ids) => ids.of_node[n as usize],
        }
    }

    /// The node of switch ID `id`.
    #[inline]
    pub fn node(&self, id: u32) -> Option<u32> {
        match &self.ids {
            None => (id >= 1 && (id as usize) <= self.len()).then(|| id - 1),
            Some(ids) => ids.node_of.get(&id).copied(),
        }
    }

    /// Whether the file gave the switch IDs (the TOML adjacency form), not node order.
    pub fn has_own_ids(&self) -> bool {
        self.ids.is_some()
    }

    /// Switch IDs of all nodes, by node number.
    pub fn switch_ids(&self) -> Vec<u32> {
        (0..self.len() as u32).map(|n| self.switch_id(n)).collect()
    }

    /// Reads the TOML adjacency form: links between switch IDs, and optionally names and
    /// labels (as a topology file's place names: see [`Topology::display_name`]).
    ///
    /// ```toml
    /// name = "lab"                 # optional
    /// links = [[1, 2], [2, 3]]     # undirected, by switch ID (1 .. 2^32 - 1)
    /// [names]                      # optional (default: s1, s2, ...)
    /// 1 = "edge-a"
    /// [labels]                     # optional
    /// 1 = "New York"
    /// ```
    pub fn parse_toml(name: &str, text: &str) -> Result<Topology, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            name: Option<String>,
            links: Vec<[u32; 2]>,
            #[serde(default)]
            names: std::collections::BTreeMap<String, String>,
            #[serde(default)]
            labels: std::collections::BTreeMap<String, String>,
        }
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        if f.links.is_empty() {
            return Err("`links` lists no link".into());
        }
        let mut of_node: Vec<u32> = Vec::new();
        let mut node_of: rustc_hash::FxHashMap<u32, u32> = rustc_hash::FxHashMap::default();
        let mut edges = Vec::with_capacity(f.links.len());
        for [a, b] in &f.links {
            let mut node = |id: u32| -> Result<u32, String> {
                if id == 0 {
                    return Err("`links`: switch ID 0 is not a switch".into());
                }
                Ok(*node_of.entry(id).or_insert_with(|| {
                    of_node.push(id);
                    (of_node.len() - 1) as u32
                }))
            };
            edges.push((node(*a)?, node(*b)?));
        }
        let node_of_key = |table: &str, id: &str| -> Result<usize, String> {
            let id: u32 = id
                .parse()
                .map_err(|_| format!("`{table}`: `{id}` is not a switch ID"))?;
            node_of
                .get(&id)
                .map(|&n| n as usize)
                .ok_or_else(|| format!("`{table}`: switch {id} is on no link"))
        };
        let mut names: Vec<String> = of_node.iter().map(|id| format!("s{id}")).collect();
        for (id, n) in f.names {
            names[node_of_key("names", &id)?] = n;
        }
        // Names tell switches apart (in files, messages and reports): each once.
        let mut seen = rustc_hash::FxHashMap::default();
        for (node, n) in names.iter().enumerate() {
            if let Some(other) = seen.insert(n.as_str(), node) {
                return Err(format!(
                    "`names`: switches {} and {} are both named `{n}`",
                    of_node[other], of_node[node]
                ));
            }
        }
        let mut labels = vec![None; names.len()];
        for (id, l) in f.labels {
            labels[node_of_key("labels", &id)?] = Some(l);
        }
        let mut t = Topology::from_edges(f.name.as_deref().unwrap_or(name), names, &edges);
        t.labels = labels;
        t.ids = Some(SwitchIds { of_node, node_of });
        Ok(t)
    }

    /// Loads a topology: a file, read as the TOML adjacency form when its name ends in
    /// `.toml`, otherwise by its content ([`Topology::parse_text`]): GraphML, GML (both as
    /// the Topology Zoo ships them; switch ID = node number plus one) or TOML; or, where no
    /// file has that name, a generated one (`fattree:K`, `line:N`).
    pub fn load(spec: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        let path = spec.as_ref();
        // A path that is not UTF-8 is a file's (the generated ones' names are ASCII).
        let Some(spec) = path.to_str().filter(|_| !path.exists()) else {
            return Topology::load_file(path);
        };
        if let Some(k) = spec.strip_prefix("fattree:") {
            let k: u32 = k
                .parse()
                .map_err(|_| TopologyError::Spec(spec.to_owned()))?;
            if k < 2 || k % 2 == 1 || k > 64 {
                return Err(TopologyError::Spec(spec.to_owned()));
            }
            return Ok(Topology::fat_tree(k));
        }
        if let Some(n) = spec.strip_prefix("line:") {
            let n: u32 = n
                .parse()
                .map_err(|_| TopologyError::Spec(spec.to_owned()))?;
            if n == 0 || n > 100_000 {
                return Err(TopologyError::Spec(spec.to_owned()));
            }
            return Ok(Topology::line(n));
        }
        Topology::load_file(Path::new(spec))
    }

    /// Loads a topology file (see [`Topology::load`]).
    pub fn load_file(path: &Path) -> Result<Topology, TopologyError> {
        let bytes = std::fs::read(path).map_err(|e| TopologyError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let format_err = |reason: String| TopologyError::Format {
            path: path.display().to_string(),
            reason,
        };
        let name = path
            .file_stem()
            .map_or_else(|| "graph".to_owned(), |s| s.to_string_lossy().into_owned());
        let text = text::decode(&bytes).map_err(format_err)?;
        if path.extension().is_some_and(|e| e == "toml") {
            return Topology::parse_toml(&name, &text).map_err(format_err);
        }
        Topology::parse_text(&name, &text).map_err(format_err)
    }

    /// Parses a topology file's text by its first line that is not blank or a `#` comment:
    /// GraphML when it starts with `<`, the TOML adjacency form when it is a TOML table
    /// header or `key = value`, else GML (whose lines are `key value`).
    pub fn parse_text(name: &str, text: &str) -> Result<Topology, String> {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        let Some(first) = first else {
            return Err("the file is empty".into());
        };
        let key_len = first
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(first.len());
        let toml = first.starts_with('[')
            || (key_len > 0 && first[key_len..].trim_start().starts_with('='));
        if first.starts_with('<') {
            Topology::parse_graphml(name, text)
        } else if toml {
            Topology::parse_toml(name, text)
        } else {
            Topology::parse_gml(name, text)
        }
    }

    /// The node a user means by `name`: the node of that name, else the one node with that
    /// label (so a Topology Zoo network's switches can be named by place).
    pub fn find(&self, name: &str) -> Result<u32, FindError> {
        if let Some(n) = self.names.iter().position(|x| x == name) {
            return Ok(n as u32);
        }
        let labelled: Vec<u32> = (0..self.len() as u32)
            .filter(|&n| self.labels[n as usize].as_deref() == Some(name))
            .collect();
        match labelled[..] {
            [] => Err(FindError::Unknown),
            [n] => Ok(n),
            _ => Err(FindError::AmbiguousLabel(
                labelled
                    .iter()
                    .map(|&n| self.names[n as usize].clone())
                    .collect(),
            )),
        }
    }

    /// How reports name node `n`: its name, and its label when it has one that differs.
    pub fn display_name(&self, n: u32) -> String {
        let name = &self.names[n as usize];
        match &self.labels[n as usize] {
            Some(l) if l != name => format!("{name} ({l})"),
            _ => name.clone(),
        }
    }

    /// Neighbours of node `n`.
    pub fn neighbours(&self, n: u32) -> &[u32] {
        &self.adjacency[n as usize]
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> usize {
        self.adjacency.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// Builds a graph from named nodes and edges between node numbers.
    pub fn from_edges(name: &str, names: Vec<String>, edges: &[(u32, u32)]) -> Topology {
        let mut adjacency = vec![Vec::new(); names.len()];
        for &(a, b) in edges {
            if a != b {
                adjacency[a as usize].push(b);
                adjacency[b as usize].push(a);
            }
        }
        for list in &mut adjacency {
            list.sort_unstable();
            list.dedup();
        }
        Topology {
            name: name.to_owned(),
            labels: vec![None; names.len()],
            names,
            adjacency,
            ids: None,
        }
    }

    /// A line of `n` switches (0 - 1 - ... - n-1).
    pub fn line(n: u32) -> Topology {
        let names = (0..n).map(|i| format!("s{i}")).collect();
        let edges: Vec<(u32, u32)> = (1..n).map(|i| (i - 1, i)).collect();
        Topology::from_edges(&format!("line:{n}"), names, &edges)
    }

    /// A K-ary fat tree: (K/2)^2 core switches, then K pods of K/2 aggregation and K/2 edge
    /// switches (5K^2/4 switches; K^3/4 hosts hang off the edge switches). Node numbers: core
    /// first, then per pod its aggregation then edge switches.
    pub fn fat_tree(k: u32) -> Topology {
        let half = k / 2;
        let cores = half * half;
        let mut names = Vec::new();
        for c in 0..cores {
            names.push(format!("core{c}"));
        }
        let agg = |pod: u32, i: u32| cores + pod * k + i;
        let edge = |pod: u32, i: u32| cores + pod * k + half + i;
        let mut edges = Vec::new();
        for pod in 0..k {
            for i in 0..half {
                names.push(format!("pod{pod}-agg{i}"));
            }
            for i in 0..half {
                names.push(format!("pod{pod}-edge{i}"));
            }
            for a in 0..half {
                for e in 0..half {
                    edges.push((agg(pod, a), edge(pod, e)));
                }
                for c in 0..half {
                    edges.push((agg(pod, a), a * half + c));
                }
            }
        }
        Topology::from_edges(&format!("fattree:{k}"), names, &edges)
    }

    /// The edge (top-of-rack) switches of a fat tree built by [`Topology::fat_tree`].
    pub fn fat_tree_edges(k: u32) -> Vec<u32> {
        let half = k / 2;
        let cores = half * half;
        (0..k)
            .flat_map(|pod| (0..half).map(move |i| cores + pod * k + half + i))
            .collect()
    }

    /// Breadth-first distances and parents from `src` (parents pick the lowest-numbered
    /// neighbour on a shortest path, so routing is deterministic). Unreachable: u32::MAX.
    pub fn bfs(&self, src: u32) -> (Vec<u32>, Vec<u32>) {
        self.bfs_from(&[src])
    }

    /// Hops from the nearest of `sources` to every switch (u32::MAX: none of them reaches
    /// it).
    pub fn distances_from(&self, sources: &[u32]) -> Vec<u32> {
        self.bfs_from(sources).0
    }

    /// [`Topology::bfs`] from several sources at once.
    fn bfs_from(&self, sources: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let n = self.len();
        let mut dist = vec![u32::MAX; n];
        let mut parent = vec![u32::MAX; n];
        let mut q = VecDeque::new();
        for &src in sources {
            if dist[src as usize] == u32::MAX {
                dist[src as usize] = 0;
                q.push_back(src);
            }
        }
        while let Some(u) = q.pop_front() {
            for &v in self.neighbours(u) {
                if dist[v as usize] == u32::MAX {
                    dist[v as usize] = dist[u as usize] + 1;
                    parent[v as usize] = u;
                    q.push_back(v);
                }
            }
        }
        (dist, parent)
    }

    /// A shortest path from `src` to `dst` as node numbers (both included), or None.
    pub fn shortest_path(&self, src: u32, dst: u32) -> Option<Vec<u32>> {
        // Search from the destination so that parents point towards it.
        let (dist, parent) = self.bfs(dst);
        if dist[src as usize] == u32::MAX {
            return None;
        }
        let mut path = vec![src];
        let mut u = src;
        while u != dst {
            u = parent[u as usize];
            path.push(u);
        }
        Some(path)
    }

    /// The topology without its switches on no link (a file's nodes without an edge, which
    /// carry no traffic), and the node numbers left out. Every other switch keeps its name,
    /// its switch ID and its order; node numbers close up.
    pub fn without_isolated(&self) -> (Topology, Vec<u32>) {
        let (kept, left_out): (Vec<u32>, Vec<u32>) =
            (0..self.len() as u32).partition(|&n| !self.neighbours(n).is_empty());
        if left_out.is_empty() {
            return (self.clone(), left_out);
        }
        let mut renumbered = vec![u32::MAX; self.len()];
        for (new, &old) in kept.iter().enumerate() {
            renumbered[old as usize] = new as u32;
        }
        // Renumbering keeps the order, so the neighbour lists stay sorted.
        let adjacency = kept
            .iter()
            .map(|&n| {
                self.neighbours(n)
                    .iter()
                    .map(|&m| renumbered[m as usize])
                    .collect()
            })
            .collect();
        let of_node: Vec<u32> = kept.iter().map(|&n| self.switch_id(n)).collect();
        let node_of = of_node
            .iter()
            .enumerate()
            .map(|(node, &id)| (id, node as u32))
            .collect();
        let t = Topology {
            name: self.name.clone(),
            names: kept
                .iter()
                .map(|&n| self.names[n as usize].clone())
                .collect(),
            labels: kept
                .iter()
                .map(|&n| self.labels[n as usize].clone())
                .collect(),
            adjacency,
            ids: Some(SwitchIds { of_node, node_of }),
        };
        (t, left_out)
    }

    /// The longest shortest path, in switches (the diameter plus one), over connected pairs.
    pub fn longest_shortest_path(&self) -> usize {
        (0..self.len() as u32)
            .map(|s| {
                self.bfs(s)
                    .0
                    .into_iter()
                    .filter(|d| *d != u32::MAX)
                    .max()
                    .unwrap_or(0) as usize
                    + 1
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_adjacency_names_switches_by_id() {
        let t = Topology::parse_toml(
            "x",
            "links = [[10, 20], [20, 30], [30, 10], [20, 10]]\n[names]\n20 = \"core\"\n\
             [labels]\n20 = \"Denver\"\n30 = \"s30\"\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.edges(), 3);
        let core = t.node(20).unwrap();
        assert_eq!(t.switch_id(core), 20);
        assert_eq!(t.names[core as usize], "core");
        assert_eq!(t.display_name(core), "core (Denver)");
        let (n10, n30) = (t.node(10).unwrap(), t.node(30).unwrap());
        assert_eq!(t.labels[n10 as usize], None);
        // A label that only repeats the name is not shown twice.
        assert_eq!(t.display_name(n30), "s30");
        assert_eq!(t.node(2), None);
        let mut around: Vec<u32> = t.neighbours(core).iter().map(|&n| t.switch_id(n)).collect();
        around.sort();
        assert_eq!(around, vec![10, 30]);
        for bad in [
            "links = []",
            "links = [[0, 1]]",
            "links = [[1, 2]]\n[names]\n3 = \"x\"",
            "links = [[1, 2]]\n[labels]\n3 = \"x\"",
            "links = [[1, 2]]\n[labels]\none = \"x\"",
            "links = [[1, 2]]\nextra = 1",
            // Two switches of one name (or a name another switch has by default).
            "links = [[1, 2], [2, 3]]\n[names]\n1 = \"core\"\n3 = \"core\"",
            "links = [[1, 2]]\n[names]\n1 = \"s2\"",
        ] {
            assert!(Topology::parse_toml("x", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fat_tree_shape() {
        let t = Topology::fat_tree(8);
        assert_eq!(t.len(), 80);
        assert_eq!(t.edges(), 8 * 4 * 4 + 8 * 4 * 4);
        let edges = Topology::fat_tree_edges(8);
        assert_eq!(edges.len(), 32);
        // Edge switches in different pods are 5 switches apart.
        let p = t.shortest_path(edges[0], edges[31]).unwrap();
        assert_eq!(p.len(), 5);
        // In the same pod, 3.
        assert_eq!(t.shortest_path(edges[0], edges[1]).unwrap().len(), 3);
        assert_eq!(t.longest_shortest_path(), 5);
    }

    #[test]
    fn line_and_specs() {
        let t = Topology::load("line:25").unwrap();
        assert_eq!(t.len(), 25);
        assert!(t.labels.iter().all(Option::is_none));
        assert_eq!((t.find("s3"), t.display_name(3)), (Ok(3), "s3".to_owned()));
        assert_eq!(t.shortest_path(0, 24).unwrap().len(), 25);
        assert_eq!(t.switch_id(0), 1);
        assert_eq!(t.node(25), Some(24));
        assert_eq!(t.node(0), None);
        assert!(Topology::load("fattree:7").is_err());
        assert!(Topology::load("line:0").is_err());
        assert!(matches!(
            Topology::load("/nonexistent.graphml"),
            Err(TopologyError::Io { .. })
        ));
    }

    /// A file whose name reads as a generated topology's is the file's (the name is what
    /// the user has, in the directory they run in).
    #[test]
    fn a_file_comes_before_a_generated_name() {
        let name = "line:2";
        let gml = "graph [\n node [ id 0 ]\n node [ id 1 ]\n node [ id 2 ]\n edge [ source 0 target 1 ]\n edge [ source 1 target 2 ]\n]\n";
        std::fs::write(name, gml).unwrap();
        let t = Topology::load(name);
        std::fs::remove_file(name).unwrap();
        assert_eq!(t.unwrap().len(), 3);
        assert_eq!(Topology::load(name).unwrap().len(), 2);
    }

    #[test]
    fn switches_on_no_link_are_left_out_keeping_ids_and_names() {
        // Nodes 0 and 3 are on no link (3 only on a self-loop).
        let g = r#"<graphml><graph>
            <node id="lone"/><node id="a"/><node id="b"/><node id="loop"/><node id="c"/>
            <edge source="a" target="b"/><edge source="b" target="c"/><edge source="loop" target="loop"/>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        let (kept, left_out) = t.without_isolated();
        assert_eq!(left_out, vec![0, 3]);
        assert_eq!(kept.names, vec!["a", "b", "c"]);
        assert_eq!(kept.switch_ids(), vec![2, 3, 5]);
        assert_eq!(kept.node(5), Some(2));
        assert_eq!(kept.node(1), None);
        assert_eq!(kept.node(4), None);
        assert_eq!(kept.neighbours(1), &[0, 2]);
        assert_eq!(
            kept.shortest_path(0, 2).unwrap(),
            vec![0, 1, 2],
            "routing sees the same links"
        );
        assert_eq!(kept.edges(), t.edges());
        // Nothing to leave out: the same topology.
        let (same, none) = kept.without_isolated();
        assert!(none.is_empty());
        assert_eq!(same.switch_ids(), kept.switch_ids());
    }

    #[test]
    fn topology_zoo_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/topologies");
        let kdl = Topology::load_file(&dir.join("Kdl.graphml")).unwrap();
        assert_eq!(kdl.len(), 754);
        assert_eq!(kdl.longest_shortest_path(), 59);
        let us = Topology::load_file(&dir.join("UsCarrier.graphml")).unwrap();
        assert_eq!(us.len(), 158);
        assert_eq!(us.longest_shortest_path(), 36);
        // Every node has its place name as its label, but those the Zoo could not name
        // (labelled `None`); a switch is found by name or by a label no other switch has.
        let unnamed: Vec<usize> = (0..us.len()).filter(|&n| us.labels[n].is_none()).collect();
        assert_eq!(unnamed.len(), 6, "{unnamed:?}");
        assert!(unnamed.contains(&85));
        assert_eq!(us.display_name(85), "85");
        assert_eq!(us.find("None"), Err(FindError::Unknown));
        assert_eq!(us.labels[0].as_deref(), Some("Orangeburg"));
        assert_eq!(us.find("0"), Ok(0));
        assert_eq!(us.find("Orangeburg"), Ok(0));
        assert_eq!(us.display_name(0), "0 (Orangeburg)");
        assert_eq!(
            us.find("Jacksonville"),
            Err(FindError::AmbiguousLabel(vec!["5".into(), "15".into()]))
        );
        assert_eq!(us.find("Atlantis"), Err(FindError::Unknown));
        assert_eq!(kdl.labels.iter().filter(|l| l.is_none()).count(), 28);
    }

    /// Kdl written out as GML (in ISO 8859-1, with a label that needs it) and as UTF-16
    /// GraphML, under names that say nothing of the format: each loads as the same network.
    #[test]
    fn files_are_read_by_content_in_their_encoding() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/topologies");
        let kdl = Topology::load_file(&dir.join("Kdl.graphml")).unwrap();
        let mut gml = String::from("# Kdl, rewritten\ngraph [\n  directed 0\n");
        let mut xml = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<graphml><graph edgedefault=\"undirected\">\n",
        );
        for (n, name) in kdl.names.iter().enumerate() {
            gml += &format!("  node [\n    id {name}\n    label \"Z\u{fc}rich {n}\"\n  ]\n");
            xml += &format!("<node id=\"{name}\"/>\n");
        }
        for a in 0..kdl.len() as u32 {
            for &b in kdl.neighbours(a).iter().filter(|&&b| b > a) {
                let (s, t) = (&kdl.names[a as usize], &kdl.names[b as usize]);
                gml += &format!("  edge [\n    source {s}\n    target {t}\n  ]\n");
                xml += &format!("<edge source=\"{s}\" target=\"{t}\"/>\n");
            }
        }
        gml += "]\n";
        xml += "</graph></graphml>\n";
        let latin1: Vec<u8> = gml
            .chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap())
            .collect();
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(xml.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let tmp = std::env::temp_dir().join(format!("topology-files-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        for (file, bytes) in [
            ("Kdl.gml", &latin1),
            ("kdl-export.txt", &latin1),
            ("kdl.xml", &utf16),
        ] {
            let path = tmp.join(file);
            std::fs::write(&path, bytes).unwrap();
            let t =
                Topology::load(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(t.names, kdl.names, "{file}");
            if file.ends_with("txt") {
                assert_eq!(t.labels[3].as_deref(), Some("Z\u{fc}rich 3"), "{file}");
            }
            assert_eq!(t.adjacency, kdl.adjacency, "{file}");
            assert_eq!(t.longest_shortest_path(), 59, "{file}");
        }
        let empty = tmp.join("empty.gml");
        std::fs::write(&empty, "\n# nothing\n").unwrap();
        let e = Topology::load(empty.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty.gml") && e.contains("empty"), "{e}");
        // The TOML adjacency form under another name is still TOML, its switch IDs kept.
        for text in [
            "# lab\nlinks = [[10, 20], [20, 30]]\n",
            "[names]\n20 = \"core\"\n\n[other]\n",
        ] {
            let path = tmp.join("links.txt");
            std::fs::write(&path, text).unwrap();
            let r = Topology::load(path.to_str().unwrap());
            match r {
                Ok(t) => assert_eq!(t.switch_ids(), [10, 20, 30]),
                Err(e) => assert!(e.to_string().contains("links"), "read as TOML: {e}"),
            }
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// A topology read from any text is well formed: links both ways, sorted, no
    /// self-loops, a label slot per node.
    fn assert_well_formed(t: &Topology) {
        assert_eq!(t.labels.len(), t.names.len());
        for n in 0..t.len() as u32 {
            let nb = t.neighbours(n);
            assert!(nb.windows(2).all(|w| w[0] < w[1]));
            assert!(!nb.contains(&n));
            assert!(nb.iter().all(|&m| t.neighbours(m).contains(&n)));
        }
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// The `topology_text` fuzz target's property on token soup from both grammars
        /// (which reaches their deeper states far more often than arbitrary bytes) and on
        /// arbitrary text.
        #[test]
        fn any_text_reads_as_an_error_or_a_well_formed_topology(
            tokens in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        "graph", "node", "edge", "id", "source", "target", "label", "[", "]",
                        "\"", "\"a b\"", "0", "1", "2", "-3", "1.5", "INF", "#c\n", "\n",
                        "<graphml>", "<graph>", "</graph>", "<node id=\"0\"/>",
                        "<node id=\"1\">", "</node>", "<edge source=\"0\" target=\"1\"/>",
                        "<key id=\"l\" for=\"node\" attr.name=\"label\"/>",
                        "<data key=\"l\">", "</data>", "&amp;", "&#252;", "<hyperedge/>",
                    ]).prop_map(str::to_owned),
                    ".{0,6}",
                ],
                0..60,
            ),
            sep in proptest::sample::select(vec![" ", "\n", ""]),
            raw in ".{0,80}",
        ) {
            let text = tokens.join(sep);
            for t in [&text, &raw] {
                let parsed = [
                    Topology::parse_text("p", t),
                    Topology::parse_gml("p", t),
                    Topology::parse_graphml("p", t),
                ];
                for topo in parsed.iter().flatten() {
                    assert_well_formed(topo);
                }
            }
        }
    }
}
