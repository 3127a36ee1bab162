//! GML (Graph Modelling Language), the Topology Zoo's other format and NetworkX's
//! `write_gml`.
//!
//! A GML file is a list of `key value` pairs, a value being an integer, a real, a quoted
//! string or a bracketed list of pairs; lines starting with `#` are comments. The topology
//! is the list under the top-level `graph` key: each `node [ id N ... ]` is a switch,
//! numbered in file order, named by its id (as the Topology Zoo's GraphML names the same
//! nodes, so both files of a network give one topology) and labelled by its `label` (with
//! the HTML character references GML defines for what ASCII lacks, `&uuml;`, `&#252;` or
//! `&amp;`, resolved); each `edge [ source A target
//! B ... ]` a link, whatever `directed` says (links carry traffic both ways). Every other
//! key is read and skipped. The readers on crates.io are either unmaintained or bring a
//! parser generator and regular expressions; the grammar is a dozen lines, so it is here.

use std::collections::HashMap;

use super::Topology;
use super::text::line_of;

/// Lists nested deeper than this are refused (the Zoo's files nest three deep).
const MAX_DEPTH: usize = 64;

/// A parsed GML value (reals and strings other than ids are kept only as text).
#[derive(Debug, Clone, PartialEq)]
enum Value<'a> {
    Int(i64),
    /// An integer beyond 64 bits, as written (still a fine id).
    BigInt(&'a str),
    Real,
    Str(&'a str),
    List(Vec<(&'a str, Value<'a>)>),
}

impl Value<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::BigInt(_) => "an integer",
            Value::Real => "a real",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
        }
    }
}

/// A cursor over the text, with the line of each error.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, what: impl std::fmt::Display) -> String {
        format!("line {}: {what}", line_of(self.text, self.at))
    }

    /// Skips white space and `#` comment lines.
    fn skip_space(&mut self) {
        loop {
            let rest = &self.text[self.at..];
            let trimmed = rest.trim_start();
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with('#') {
                self.at += trimmed.find('\n').unwrap_or(trimmed.len());
            } else {
                return;
            }
        }
    }

    /// Pairs up to the end of the text (`depth` 0) or to the `]` that closes the list.
    fn list(&mut self, depth: usize) -> Result<Vec<(&'a str, Value<'a>)>, String> {
        let mut pairs = Vec::new();
        loop {
            self.skip_space();
            let rest = &self.text[self.at..];
            if rest.is_empty() {
                if depth > 0 {
                    return Err(self.error("a list is not closed (`]` missing)"));
                }
                return Ok(pairs);
            }
            if rest.starts_with(']') {
                if depth == 0 {
                    return Err(self.error("`]` closes no list"));
                }
                self.at += 1;
                return Ok(pairs);
            }
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let key = &rest[..len];
            if len == 0 || !key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                let found: String = rest.chars().take(12).collect();
                return Err(self.error(format!("expected a key, found `{found}`")));
            }
            self.at += len;
            self.skip_space();
            let value = self.value(key, depth)?;
            pairs.push((key, value));
        }
    }

    fn value(&mut self, key: &str, depth: usize) -> Result<Value<'a>, String> {
        let rest = &self.text[self.at..];
        if let Some(body) = rest.strip_prefix('"') {
            let end = body
                .find('"')
                .ok_or_else(|| self.error(format!("`{key}`: a string is not closed")))?;
            self.at += end + 2;
            return Ok(Value::Str(&body[..end]));
        }
        if rest.starts_with('[') {
            if depth + 1 > MAX_DEPTH {
                return Err(self.error(format!("lists nested deeper than {MAX_DEPTH}")));
            }
            self.at += 1;
            return self.list(depth + 1).map(Value::List);
        }
        let len = rest
            .find(|c: char| c.is_whitespace() || c == '[' || c == ']')
            .unwrap_or(rest.len());
        let token = &rest[..len];
        if token.is_empty() {
            return Err(self.error(format!("`{key}` has no value")));
        }
        let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
        let value = if let Ok(i) = token.parse::<i64>() {
            Value::Int(i)
        } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            Value::BigInt(token)
        } else if token.parse::<f64>().is_ok() || is_special_real(token) {
            Value::Real
        } else {
            return Err(self.error(format!(
                "`{key}`: `{token}` is not a number, a quoted string or a list"
            )));
        };
        self.at += len;
        Ok(value)
    }
}

/// NetworkX writes infinities and NaN as `INF`, `+INF`, `-INF` and `NAN`.
fn is_special_real(token: &str) -> bool {
    let t = token.trim_start_matches(['+', '-']);
    t.eq_ignore_ascii_case("inf") || t.eq_ignore_ascii_case("nan")
}

/// A node's or an edge end's id as text: integers as written, strings as they are.
fn id_text(key: &str, owner: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::Int(i) => Ok(i.to_string()),
        Value::BigInt(s) => Ok((*s).to_owned()),
        Value::Str(s) => Ok((*s).to_owned()),
        other => Err(format!(
            "{owner}: `{key}` is {}, not an integer or a string",
            other.kind()
        )),
    }
}

impl Topology {
    /// Parses GML text.
    pub fn parse_gml(name: &str, text: &str) -> Result<Topology, String> {
        let mut parser = Parser { text, at: 0 };
        let root = parser.list(0)?;
        let mut graphs = root.iter().filter(|(k, _)| *k == "graph");
        let graph = match (graphs.next(), graphs.next()) {
            (None, _) => return Err("no `graph [ ... ]` list".into()),
            (Some(_), Some(_)) => return Err("more than one `graph` (one topology a file)".into()),
            (Some((_, Value::List(g))), None) => g,
            (Some((_, v)), None) => return Err(format!("`graph` is {}, not a list", v.kind())),
        };
        let mut names: Vec<String> = Vec::new();
        let mut labels: Vec<Option<String>> = Vec::new();
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut raw_edges: Vec<(String, String, usize)> = Vec::new();
        for (key, value) in graph {
            let (is_node, is_edge) = (*key == "node", *key == "edge");
            if !is_node && !is_edge {
                continue;
            }
            let Value::List(pairs) = value else {
                return Err(format!("a `{key}` is {}, not a list", value.kind()));
            };
            let field = |want: &str, owner: &str| -> Result<String, String> {
                let v = pairs
                    .iter()
                    .find(|(k, _)| *k == want)
                    .map(|(_, v)| v)
                    .ok_or_else(|| format!("{owner} has no `{want}`"))?;
                id_text(want, owner, v)
            };
            if is_node {
                let owner = format!("node {} (in file order)", names.len() + 1);
                let id = field("id", &owner)?;
                if index.insert(id.clone(), names.len() as u32).is_some() {
                    return Err(format!("{owner}: node id `{id}` appears twice"));
                }
                names.push(id);
                labels.push(pairs.iter().find_map(|(k, v)| match v {
                    Value::Str(l) if *k == "label" => {
                        super::label_of(&html_escape::decode_html_entities(l))
                    }
                    // A number is a label too (GraphML's typed labels are kept as text).
                    Value::Int(i) if *k == "label" => Some(i.to_string()),
                    Value::BigInt(i) if *k == "label" => Some((*i).to_owned()),
                    _ => None,
                }));
            } else {
                let owner = format!("edge {} (in file order)", raw_edges.len() + 1);
                let s = field("source", &owner)?;
                let t = field("target", &owner)?;
                raw_edges.push((s, t, raw_edges.len() + 1));
            }
        }
        if names.is_empty() {
            return Err("the graph has no nodes".into());
        }
        let mut edges = Vec::with_capacity(raw_edges.len());
        for (s, t, n) in raw_edges {
            let end = |id: &str, which: &str| {
                index
                    .get(id)
                    .copied()
                    .ok_or_else(|| format!("edge {n}: {which} `{id}` is not a node"))
            };
            edges.push((end(&s, "source")?, end(&t, "target")?));
        }
        let mut t = Topology::from_edges(name, names, &edges);
        t.labels = labels;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::Topology;

    /// A small network in the layout the Topology Zoo's GML files have.
    const ZOO_STYLE: &str = r#"graph [
  DateObtained "1/01/11"
  Network "Test"
  Backbone 1
  label "Test"
  node [
    id 0
    label "First City"
    Longitude -74.1
    Internal 1
    Latitude 40.7
  ]
  node [
    id 1
    label "Second"
    Longitude 2.35
    Latitude 48.85
  ]
  node [
    id 2
    label "Third"
  ]
  node [
    id 3
    label "Alone"
  ]
  edge [
    source 0
    target 1
    LinkLabel "OC-192c"
  ]
  edge [
    source 1
    target 2
    key 0
  ]
  edge [
    source 1
    target 2
    key 1
  ]
]
"#;

    const SAME_AS_GRAPHML: &str = r#"<graphml><graph edgedefault="undirected">
        <node id="0"/><node id="1"/><node id="2"/><node id="3"/>
        <edge source="0" target="1"/><edge source="1" target="2"/><edge source="1" target="2"/>
        </graph></graphml>"#;

    #[test]
    fn zoo_gml_reads_as_the_same_network_in_graphml() {
        let gml = Topology::parse_gml("t", ZOO_STYLE).unwrap();
        let xml = Topology::parse_graphml("t", SAME_AS_GRAPHML).unwrap();
        assert_eq!(gml.names, ["0", "1", "2", "3"]);
        assert_eq!(gml.names, xml.names);
        assert_eq!(gml.adjacency, xml.adjacency);
        assert_eq!(gml.edges(), 2, "parallel edges are one link");
        assert_eq!(gml.switch_ids(), [1, 2, 3, 4]);
        assert_eq!(
            gml.labels,
            [
                Some("First City"),
                Some("Second"),
                Some("Third"),
                Some("Alone")
            ]
            .map(|l| l.map(String::from))
        );
        // Parsed the same way whatever the file is called.
        assert_eq!(
            Topology::parse_text("t", ZOO_STYLE).unwrap().adjacency,
            gml.adjacency
        );
        assert_eq!(
            Topology::parse_text("t", SAME_AS_GRAPHML)
                .unwrap()
                .adjacency,
            gml.adjacency
        );
    }

    #[test]
    fn networkx_style_gml() {
        // Comments, a `Creator` line before the graph, ids in any order and not from 0,
        // string ids, nested lists, reals in every form NetworkX writes, `directed 1`.
        let g = "# written by a tool\nCreator \"x\"\ngraph [\n  directed 1\n  multigraph 1\n\
                 node [ id 17 label \"a\" graphics [ x 1.5e3 y -2.0 w INF h +INF ] ]\n\
                 node [ id 4 label \"b\" weight NAN ]\n  node [ id \"c\" ]\n\
                 # a comment inside\n  edge [ source 17 target 4 weight -1.25E-3 ]\n\
                 edge [ source 4 target \"c\" ]\n]\n";
        let t = Topology::parse_gml("nx", g).unwrap();
        assert_eq!(t.names, ["17", "4", "c"]);
        let big = Topology::parse_gml("big", "graph [ node [ id 99999999999999999999 ] ]").unwrap();
        assert_eq!(
            big.names,
            ["99999999999999999999"],
            "an id beyond 64 bits, as written"
        );
        assert_eq!(t.labels, [Some("a".to_owned()), Some("b".to_owned()), None]);
        assert_eq!(
            t.neighbours(1),
            &[0, 2],
            "directed edges are links both ways"
        );
        // Character references in labels, numbered (NetworkX) and named (the GML report's
        // `M&uuml;nchen`); an unknown one stays as written, the others around it resolved.
        let g = "graph [ node [ id 0 label \"Z&#252;rich &amp; M&uuml;nchen\" ] \
                 node [ id 1 label \"&quot;x&quot;&bogus;&#x41;\" ] node [ id 2 label \"  \" ] \
                 node [ id 3 label \"None\" ] ]";
        let t = Topology::parse_gml("refs", g).unwrap();
        assert_eq!(t.labels[0].as_deref(), Some("Zürich & München"));
        assert_eq!(t.labels[1].as_deref(), Some("\"x\"&bogus;A"));
        assert_eq!(t.labels[2], None, "a blank label is none");
        assert_eq!(t.labels[3], None, "the Zoo's `None` is none");
        // A label over lines is one line (a summary line per link); a number is a label.
        let g = "graph [ node [ id 0 label \"New\n  York\" ] node [ id 1 label 42 ] ]";
        let t = Topology::parse_gml("lines", g).unwrap();
        assert_eq!(t.labels[0].as_deref(), Some("New   York"));
        assert_eq!(t.labels[1].as_deref(), Some("42"));
    }

    #[test]
    fn malformed_gml_is_refused_with_the_line() {
        let cases: &[(&str, &str)] = &[
            ("graph [ node [ id 0 ]", "line 1: a list is not closed"),
            ("graph [ node [ id 0 ] ] ]", "`]` closes no list"),
            (
                "graph [\n node [ id 0 label \"open ]\n]",
                "line 2: `label`: a string is not closed",
            ),
            (
                "graph [\n\n node [ id zero ] ]",
                "line 3: `id`: `zero` is not a number",
            ),
            ("graph [ 7 ]", "expected a key"),
            ("graph [ node [ id ] ]", "`id` has no value"),
            ("node [ id 0 ]", "no `graph"),
            ("graph [ ] graph [ ]", "more than one `graph`"),
            ("graph 3", "`graph` is an integer"),
            ("graph [ node 1 ]", "a `node` is an integer"),
            (
                "graph [ node [ label \"x\" ] ]",
                "node 1 (in file order) has no `id`",
            ),
            ("graph [ node [ id 0.5 ] ]", "`id` is a real"),
            ("graph [ node [ id 1e3 ] ]", "`id` is a real"),
            (
                "graph [ node [ id 0 ] node [ id 0 ] ]",
                "node id `0` appears twice",
            ),
            (
                "graph [ node [ id 0 ] edge [ source 0 ] ]",
                "edge 1 (in file order) has no `target`",
            ),
            (
                "graph [ node [ id 0 ] edge [ source 0 target 9 ] ]",
                "edge 1: target `9` is not a node",
            ),
            ("graph [ directed 0 ]", "no nodes"),
        ];
        for (text, want) in cases {
            let e = Topology::parse_gml("bad", text).unwrap_err();
            assert!(e.contains(want), "{text:?}: got `{e}`, want `{want}`");
        }
        let deep = format!("graph [ node [ id 0 x {} ] ]", "[ a ".repeat(70));
        let e = Topology::parse_gml("deep", &deep).unwrap_err();
        assert!(e.contains("nested deeper"), "{e}");
    }
}
