//! GraphML, as the Topology Zoo and graph tools (NetworkX, yEd, igraph) write it.
//!
//! Every `<node>` is a switch, numbered in file order, named by its `id`; every `<edge>` a
//! link between its `source` and `target`, whatever the graph's `edgedefault` (links carry
//! traffic both ways). Elements are matched by local name, so a file that gives the GraphML
//! namespace a prefix (`<g:node>`) reads the same. Nodes of nested graphs (yEd's groups)
//! count as nodes of the whole. A `<hyperedge>` is refused rather than dropped: it names a
//! link between more than two switches, which a topology of point-to-point links cannot hold.

use quick_xml::events::Event;

use super::Topology;

impl Topology {
    /// Parses GraphML text.
    pub fn parse_graphml(name: &str, text: &str) -> Result<Topology, String> {
        let mut reader = quick_xml::Reader::from_str(text);
        let mut names: Vec<String> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut raw_edges: Vec<(String, String)> = Vec::new();
        let mut saw_graph = false;
        loop {
            let at = reader.buffer_position();
            match reader.read_event() {
                Err(e) => {
                    return Err(format!(
                        "XML error at byte {}: {e}",
                        reader.buffer_position()
                    ));
                }
                Ok(Event::Eof) => break,
                Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                    let attr = |key: &[u8]| -> Result<Option<String>, String> {
                        for a in e.attributes() {
                            let a = a.map_err(|e| format!("at byte {at}: {e}"))?;
                            if a.key.local_name().as_ref() == key {
                                return Ok(Some(
                                    a.unescape_value()
                                        .map_err(|e| format!("at byte {at}: {e}"))?
                                        .into_owned(),
                                ));
                            }
                        }
                        Ok(None)
                    };
                    match e.local_name().as_ref() {
                        b"graph" => saw_graph = true,
                        b"node" => {
                            let id = attr(b"id")?
                                .ok_or_else(|| format!("a <node> at byte {at} has no id"))?;
                            if index.insert(id.clone(), names.len() as u32).is_some() {
                                return Err(format!("node id `{id}` appears twice"));
                            }
                            names.push(id);
                        }
                        b"edge" => {
                            let s = attr(b"source")?
                                .ok_or_else(|| format!("an <edge> at byte {at} has no source"))?;
                            let t = attr(b"target")?
                                .ok_or_else(|| format!("an <edge> at byte {at} has no target"))?;
                            raw_edges.push((s, t));
                        }
                        b"hyperedge" => {
                            return Err(format!(
                                "a <hyperedge> at byte {at}: links join exactly two switches"
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
        for (s, t) in raw_edges {
            let a = *index
                .get(&s)
                .ok_or_else(|| format!("edge source `{s}` is not a node"))?;
            let b = *index
                .get(&t)
                .ok_or_else(|| format!("edge target `{t}` is not a node"))?;
            edges.push((a, b));
        }
        Ok(Topology::from_edges(name, names, &edges))
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

    #[test]
    fn hyperedges_and_nodes_without_ids_are_refused_with_where() {
        let h = r#"<graphml><graph><node id="a"/><node id="b"/><node id="c"/>
            <hyperedge><endpoint node="a"/><endpoint node="b"/><endpoint node="c"/></hyperedge>
            </graph></graphml>"#;
        let e = Topology::parse_graphml("g", h).unwrap_err();
        assert!(e.contains("hyperedge") && e.contains("byte"), "{e}");
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
