//! GraphML, as the Topology Zoo and graph tools (NetworkX, yEd, igraph) write it.
//!
//! Every `<node>` is a switch, numbered in file order, named by its `id` and labelled by its
//! `<data>` for the node key whose `attr.name` is `label` (the Topology Zoo's place names,
//! NetworkX's labels), else by yEd's `<y:NodeLabel>`, else by its `<data>` for a key named
//! `name` (igraph's vertex names), if any (a node without its own takes the key's
//! `<default>`, as GraphML has it); every `<edge>` a
//! link between its `source` and `target`, whatever the graph's `edgedefault` (links carry
//! traffic both ways). Elements are matched by local name, so a file that gives the GraphML
//! namespace a prefix (`<g:node>`) reads the same. Nodes of nested graphs (yEd's groups)
//! count as nodes of the whole. A `<hyperedge>` is refused rather than dropped: it names a
//! link between more than two switches, which a topology of point-to-point links cannot hold.

use quick_xml::events::Event;

use super::Topology;
use super::text::Lines;

/// A node label being read: its node ([`KEY_DEFAULT`]: the `<default>` of the key), the
/// element it is the text of, the text so far, and whether it is only a name (a label wins
/// over it).
struct Reading {
    node: usize,
    element: &'static [u8],
    label: String,
    fallback: bool,
}

/// The node of a [`Reading`] of a key's `<default>`.
const KEY_DEFAULT: usize = usize::MAX - 1;

impl Topology {
    /// Parses GraphML text.
    pub fn parse_graphml(name: &str, text: &str) -> Result<Topology, String> {
        let mut reader = quick_xml::Reader::from_str(text);
        let mut names: Vec<String> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut labels: Vec<Option<String>> = Vec::new();
        let mut raw_edges: Vec<(String, String, usize)> = Vec::new();
        let mut saw_graph = false;
        // The ids of the keys that label nodes; the open nodes, graphs and edges, innermost
        // last (a node by its number, the others as `OTHER`); the label being read (its
        // node) while inside its `<data>`.
        const OTHER: usize = usize::MAX;
        let mut label_keys: Vec<String> = Vec::new();
        let mut name_keys: Vec<String> = Vec::new();
        let mut fallback_labels: Vec<Option<String>> = Vec::new();
        // The open `<key>` that labels (false) or names (true) nodes, and the first such
        // key's `<default>` of each.
        let mut open_key: Option<bool> = None;
        let (mut label_default, mut name_default): (Option<String>, Option<String>) = (None, None);
        let mut open_nodes: Vec<usize> = Vec::new();
        let mut reading: Option<Reading> = None;
        // The line of a byte of the text, for errors (whatever the file's encoding was).
        let mut lines = Lines::new(text);
        let mut line = |pos: u64| lines.at(usize::try_from(pos).unwrap_or(usize::MAX));
        loop {
            let at = line(reader.buffer_position());
            match reader.read_event() {
                Err(e) => {
                    return Err(format!(
                        "line {}: not XML: {e}",
                        line(reader.buffer_position())
                    ));
                }
                Ok(Event::Eof) => break,
                Ok(Event::Text(t)) => {
                    if let Some(Reading { label, .. }) = &mut reading {
                        label.push_str(&t.unescape().map_err(|e| format!("line {at}: {e}"))?);
                    }
                }
                Ok(Event::CData(t)) => {
                    if let Some(Reading { label, .. }) = &mut reading {
                        label.push_str(&String::from_utf8_lossy(&t));
                    }
                }
                Ok(Event::End(e)) => match e.local_name().as_ref() {
                    b"node" | b"graph" | b"edge" => {
                        open_nodes.pop();
                    }
                    b"key" => open_key = None,
                    name @ (b"data" | b"NodeLabel" | b"default")
                        if reading.as_ref().is_some_and(|r| r.element == name) =>
                    {
                        let r = reading.take().expect("checked");
                        if let Some(label) = super::label_of(&r.label) {
                            let slot = if r.node == KEY_DEFAULT {
                                if r.fallback {
                                    &mut name_default
                                } else {
                                    &mut label_default
                                }
                            } else if r.fallback {
                                &mut fallback_labels[r.node]
                            } else {
                                &mut labels[r.node]
                            };
                            *slot = Some(label);
                        }
                    }
                    _ => {}
                },
                Ok(ev @ (Event::Start(_) | Event::Empty(_))) => {
                    let opens = matches!(ev, Event::Start(_));
                    let (Event::Start(e) | Event::Empty(e)) = ev else {
                        unreachable!("matched above")
                    };
                    let attr = |key: &[u8]| -> Result<Option<String>, String> {
                        for a in e.attributes() {
                            let a = a.map_err(|e| format!("line {at}: {e}"))?;
                            if a.key.local_name().as_ref() == key {
                                return Ok(Some(
                                    a.unescape_value()
                                        .map_err(|e| format!("line {at}: {e}"))?
                                        .into_owned(),
                                ));
                            }
                        }
                        Ok(None)
                    };
                    match e.local_name().as_ref() {
                        b"graph" => {
                            saw_graph = true;
                            if opens {
                                open_nodes.push(OTHER);
                            }
                        }
                        b"node" => {
                            let id = attr(b"id")?
                                .ok_or_else(|| format!("line {at}: a <node> has no id"))?;
                            if index.insert(id.clone(), names.len() as u32).is_some() {
                                return Err(format!("line {at}: node id `{id}` appears twice"));
                            }
                            if opens {
                                open_nodes.push(names.len());
                            }
                            names.push(id);
                            labels.push(None);
                            fallback_labels.push(None);
                        }
                        b"key" => {
                            let for_nodes = matches!(
                                attr(b"for")?.as_deref(),
                                None | Some("node") | Some("all")
                            );
                            if for_nodes && let Some(id) = attr(b"id")? {
                                match attr(b"attr.name")?.as_deref() {
                                    Some("label") => {
                                        label_keys.push(id);
                                        open_key = opens.then_some(false);
                                    }
                                    Some("name") => {
                                        name_keys.push(id);
                                        open_key = opens.then_some(true);
                                    }
                                    _ => {}
                                }
                            }
                        }
                        b"default" if opens => {
                            if let Some(fallback) = open_key
                                && reading.is_none()
                                && (if fallback {
                                    &name_default
                                } else {
                                    &label_default
                                })
                                .is_none()
                            {
                                reading = Some(Reading {
                                    node: KEY_DEFAULT,
                                    element: b"default",
                                    label: String::new(),
                                    fallback,
                                });
                            }
                        }
                        b"data" if opens => {
                            // A node's own data: the innermost open node's, outside edges.
                            if let Some(&node) = open_nodes.last()
                                && node != OTHER
                                && let Some(k) = attr(b"key")?
                                && (label_keys.contains(&k) || name_keys.contains(&k))
                            {
                                reading = Some(Reading {
                                    node,
                                    element: b"data",
                                    label: String::new(),
                                    fallback: !label_keys.contains(&k),
                                });
                            }
                        }
                        b"NodeLabel" if opens => {
                            // yEd's label, in its node graphics: when no label key gave one.
                            if let Some(&node) = open_nodes.last()
                                && node != OTHER
                                && labels[node].is_none()
                                && reading.is_none()
                            {
                                reading = Some(Reading {
                                    node,
                                    element: b"NodeLabel",
                                    label: String::new(),
                                    fallback: false,
                                });
                            }
                        }
                        b"edge" => {
                            let s = attr(b"source")?
                                .ok_or_else(|| format!("line {at}: an <edge> has no source"))?;
                            let t = attr(b"target")?
                                .ok_or_else(|| format!("line {at}: an <edge> has no target"))?;
                            raw_edges.push((s, t, at));
                            if opens {
                                open_nodes.push(OTHER);
                            }
                        }
                        b"hyperedge" => {
                            return Err(format!(
                                "line {at}: a <hyperedge>: links join exactly two switches"
                            ));
                        }
                        _ => {}
                    }
                }
                Ok(_) => {}
            }
        }
        if !saw_graph {
            return Err("no <graph> element".into());
        }
        if names.is_empty() {
            return Err("the graph has no nodes".into());
        }
        let mut edges = Vec::with_capacity(raw_edges.len());
        for (s, t, at) in raw_edges {
            let a = *index
                .get(&s)
                .ok_or_else(|| format!("line {at}: edge source `{s}` is not a node"))?;
            let b = *index
                .get(&t)
                .ok_or_else(|| format!("line {at}: edge target `{t}` is not a node"))?;
            edges.push((a, b));
        }
        let mut t = Topology::from_edges(name, names, &edges);
        t.labels = labels
            .into_iter()
            .zip(fallback_labels)
            .map(|(l, n)| {
                l.or_else(|| label_default.clone())
                    .or(n)
                    .or_else(|| name_default.clone())
            })
            .collect();
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::Topology;

    #[test]
    fn graphml_parsing() {
        let g = r#"<?xml version="1.0"?><graphml><graph edgedefault="undirected">
            <node id="a"><data key="label">A</data></node><node id="b"/><node id="c"/>
            <edge source="a" target="b"/><edge source="b" target="a"/><edge source="b" target="c"/><edge source="c" target="c"/>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.edges(), 2, "parallel edges and self-loops are dropped");
        assert_eq!(t.neighbours(1), &[0, 2]);
        assert!(Topology::parse_graphml("g", "<graphml></graphml>").is_err());
        assert!(
            Topology::parse_graphml(
                "g",
                r#"<graphml><graph><node id="a"/><edge source="a" target="z"/></graph></graphml>"#
            )
            .is_err()
        );
        assert!(Topology::parse_graphml("g", "<graphml><graph><node").is_err());
        // Errors about nodes and edges give their line.
        let twice = "<graphml><graph>\n<node id=\"a\"/>\n<node id=\"a\"/></graph></graphml>";
        let e = Topology::parse_graphml("g", twice).unwrap_err();
        assert!(e.starts_with("line 3:") && e.contains("twice"), "{e}");
        let stray = "<graphml><graph>\n<node id=\"a\"/>\n\n<edge source=\"a\" target=\"z\"/></graph></graphml>";
        let e = Topology::parse_graphml("g", stray).unwrap_err();
        assert!(e.starts_with("line 4:") && e.contains("`z`"), "{e}");
    }

    /// igraph's vertex names (a key named `name`) label nodes that no `label` key labels.
    #[test]
    fn names_label_nodes_a_label_does_not() {
        let g = r#"<graphml>
            <key id="v_name" for="node" attr.name="name" attr.type="string"/>
            <key id="v_label" for="node" attr.name="label" attr.type="string"/>
            <graph edgedefault="undirected">
              <node id="n0"><data key="v_name">Berlin</data></node>
              <node id="n1"><data key="v_name">Paris</data><data key="v_label">FR-1</data></node>
              <node id="n2"/>
              <edge source="n0" target="n1"/><edge source="n1" target="n2"/>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        assert_eq!(
            t.labels,
            [Some("Berlin".to_owned()), Some("FR-1".to_owned()), None]
        );
    }

    #[test]
    fn prefixed_nested_and_directed_graphml() {
        // The GraphML namespace under a prefix, a directed graph, a yEd-style group whose
        // nested graph holds two of the nodes, and ports on an edge.
        let g = r#"<?xml version="1.0" encoding="UTF-8"?>
            <g:graphml xmlns:g="http://graphml.graphdrawing.org/xmlns">
              <g:key id="d0" for="node" attr.name="label" attr.type="string"/>
              <g:graph id="G" edgedefault="directed">
                <g:node id="r1"><g:data key="d0">Router &amp; one</g:data></g:node>
                <g:node id="pop">
                  <g:graph id="pop:" edgedefault="directed">
                    <g:node id="pop::a"/><g:node id="pop::b"/>
                  </g:graph>
                </g:node>
                <g:edge source="r1" target="pop::a" g:sourceport="p0"/>
                <g:edge g:source="pop::a" g:target="pop::b"/>
              </g:graph>
            </g:graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        assert_eq!(t.names, ["r1", "pop", "pop::a", "pop::b"]);
        assert_eq!(t.labels[0].as_deref(), Some("Router & one"));
        assert!(t.labels[1..].iter().all(Option::is_none));
        assert_eq!(t.neighbours(0), &[2]);
        assert_eq!(
            t.neighbours(2),
            &[0, 3],
            "a directed edge is a link both ways"
        );
        assert!(
            t.neighbours(1).is_empty(),
            "the group node itself has no link"
        );
    }

    /// A node without its own label takes the label key's `<default>` (GraphML's rule), and
    /// without either the name key's own value or default.
    #[test]
    fn a_label_keys_default_labels_the_nodes_without_one() {
        let g = r#"<graphml>
            <key id="l" for="node" attr.name="label" attr.type="string"><default>Unknown</default></key>
            <key id="x" for="node" attr.name="name"><default> somewhere </default></key>
            <graph>
              <node id="a"><data key="l">Ay</data></node>
              <node id="b"/>
              <edge source="a" target="b"/>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        assert_eq!(
            t.labels,
            [Some("Ay"), Some("Unknown")].map(|l| l.map(String::from))
        );
        let names_only = g.replace("<default>Unknown</default>", "");
        let t = Topology::parse_graphml("g", &names_only).unwrap();
        assert_eq!(
            t.labels,
            [Some("Ay"), Some("somewhere")].map(|l| l.map(String::from))
        );
    }

    #[test]
    fn labels_come_from_the_node_label_key_then_a_name_key() {
        // A label key for all elements: the edge's and the nested graph's labels are not the
        // node's; a key called `name` labels only a node no label key labels; CDATA reads as
        // text.
        let g = r#"<graphml>
            <key id="l" for="all" attr.name="label"/><key id="x" for="node" attr.name="name"/>
            <graph>
              <data key="l">the graph</data>
              <node id="a"><data key="x">not a label</data><data key="l"> <![CDATA[A & co]]> </data></node>
              <node id="g">
                <graph><data key="l">inner graph</data>
                  <node id="b"><data key="l">Bee</data></node>
                  <edge source="b" target="a"><data key="l">edge label</data></edge>
                </graph>
              </node>
              <node id="c"><data key="x">named</data></node>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("g", g).unwrap();
        assert_eq!(t.names, ["a", "g", "b", "c"]);
        assert_eq!(
            t.labels,
            [Some("A & co"), None, Some("Bee"), Some("named")].map(|l| l.map(String::from))
        );
    }

    #[test]
    fn yed_node_labels_when_no_label_key_gives_one() {
        let g = r#"<graphml xmlns:y="http://www.yworks.com/xml/graphml">
            <key for="node" id="d6" yfiles.type="nodegraphics"/>
            <key id="l" for="node" attr.name="label"/>
            <graph edgedefault="directed">
              <node id="n0"><data key="d6"><y:ShapeNode><y:Geometry x="1"/>
                <y:NodeLabel alignment="center">Core  1</y:NodeLabel><y:NodeLabel>second</y:NodeLabel>
              </y:ShapeNode></data></node>
              <node id="n1"><data key="l">Keyed</data><data key="d6"><y:ShapeNode>
                <y:NodeLabel>graphics</y:NodeLabel></y:ShapeNode></data></node>
              <node id="n2"><data key="d6"><y:ShapeNode><y:NodeLabel/></y:ShapeNode></data></node>
              <edge source="n0" target="n1"><data key="d7"><y:PolyLineEdge>
                <y:EdgeLabel>an edge</y:EdgeLabel></y:PolyLineEdge></data></edge>
            </graph></graphml>"#;
        let t = Topology::parse_graphml("yed", g).unwrap();
        assert_eq!(
            t.labels,
            [Some("Core  1"), Some("Keyed"), None].map(|l| l.map(String::from))
        );
        assert_eq!(t.neighbours(0), &[1]);
    }

    #[test]
    fn hyperedges_and_nodes_without_ids_are_refused_with_where() {
        let h = r#"<graphml><graph><node id="a"/><node id="b"/><node id="c"/>
            <hyperedge><endpoint node="a"/><endpoint node="b"/><endpoint node="c"/></hyperedge>
            </graph></graphml>"#;
        let e = Topology::parse_graphml("g", h).unwrap_err();
        assert!(e.contains("hyperedge") && e.starts_with("line 2:"), "{e}");
        let e = Topology::parse_graphml("g", r#"<graphml><graph><node/></graph></graphml>"#)
            .unwrap_err();
        assert!(e.contains("has no id"), "{e}");
        let e = Topology::parse_graphml(
            "g",
            r#"<graphml><graph><node id="a"/><edge target="a"/></graph></graphml>"#,
        )
        .unwrap_err();
        assert!(e.contains("no source"), "{e}");
    }
}
