//! Ranking behaviour on a small hand-made corpus.

use serde_json::json;

use super::*;

fn corpus() -> Vec<ToolDoc> {
    let tool = |server: &str, v: serde_json::Value| ToolDoc::from_tool(server, None, &v);
    vec![
        tool(
            "filesystem",
            json!({"name": "read_file", "description": "Read the complete contents of a file.",
                   "inputSchema": {"properties": {"path": {"description": "Path of the file"}}}}),
        ),
        tool(
            "filesystem",
            json!({"name": "list_directory", "description": "List the entries of a directory.",
                   "inputSchema": {"properties": {"path": {}}}}),
        ),
        tool(
            "weather",
            json!({"name": "getForecast", "title": "Weather forecast",
                   "description": "Get the weather forecast for a city.",
                   "inputSchema": {"properties": {"city": {"description": "City name"}}}}),
        ),
        tool(
            "github",
            json!({"name": "create_issue", "description": "Open a new issue in a repository."}),
        ),
        tool(
            "github",
            json!({"name": "search_repositories", "description": "Search GitHub repositories."}),
        ),
    ]
}

fn names(index: &Index, hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| {
            format!(
                "{}/{}",
                index.docs()[h.doc].server,
                index.docs()[h.doc].name
            )
        })
        .collect()
}

#[test]
fn from_tool_reads_every_field() {
    let doc = ToolDoc::from_tool(
        "s",
        Some("use me"),
        &json!({"name": "t", "annotations": {"title": "T"}, "description": "d",
                "inputSchema": {"properties": {"a": {"description": "x"}, "b": {}}}}),
    );
    assert_eq!(doc.title.as_deref(), Some("T"));
    assert_eq!(doc.server_instructions.as_deref(), Some("use me"));
    assert_eq!(
        doc.params,
        vec![("a".into(), Some("x".into())), ("b".into(), None)]
    );
}

#[test]
fn finds_by_words_in_any_field() {
    let index = Index::build(corpus());
    let hits = index.search("what will the weather be in Paris tomorrow?", 3, None);
    assert_eq!(names(&index, &hits)[0], "weather/getForecast");
    let hits = index.search("show me the contents of notes.txt file", 3, None);
    assert_eq!(names(&index, &hits)[0], "filesystem/read_file");
    let hits = index.search("open an issue", 3, None);
    assert_eq!(names(&index, &hits)[0], "github/create_issue");
}

#[test]
fn server_filter_and_limit() {
    let index = Index::build(corpus());
    let hits = index.search("search repositories file", 10, Some("github"));
    assert!(
        names(&index, &hits)
            .iter()
            .all(|n| n.starts_with("github/"))
    );
    assert!(index.search("file", 10, Some("nope")).is_empty());
    assert_eq!(index.search("file directory", 1, None).len(), 1);
    assert!(index.search("file", 0, None).is_empty());
    assert!(index.search("zzzz", 10, None).is_empty());
}

#[test]
fn ties_are_ordered_by_server_then_name() {
    let same = |server: &str, name: &str| ToolDoc {
        server: server.into(),
        server_instructions: None,
        name: name.into(),
        title: None,
        description: Some("echo".into()),
        params: vec![],
    };
    let docs = vec![same("b", "x"), same("a", "y"), same("a", "x")];
    let index = Index::build(docs);
    // Names and servers differ in length by nothing, so the scores tie.
    let hits = index.search("echo", 10, None);
    assert_eq!(names(&index, &hits), ["a/x", "a/y", "b/x"]);
}
