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

/// Writes a 4-token, 2-dimension model: `car` and `automobile` point the
/// same way, `weather` elsewhere.
fn tiny_model(dir: &std::path::Path) {
    let rows: [[f32; 2]; 4] = [[0.0, 0.0], [1.0, 0.1], [0.9, 0.2], [0.0, 1.0]];
    let data: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let head =
        json!({"embeddings": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, data.len()]}})
            .to_string();
    let mut file = (head.len() as u64).to_le_bytes().to_vec();
    file.extend(head.as_bytes());
    file.extend(&data);
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
    let tok = json!({"model": {"type": "WordPiece", "unk_token": "[UNK]",
        "vocab": {"[UNK]": 0, "car": 1, "automobile": 2, "weather": 3}}});
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
}

#[test]
fn a_model_finds_what_words_alone_miss() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let model = StaticEmbeddings::load(dir.path()).unwrap();
    assert_eq!(model.dim(), 2);
    let docs = vec![
        ToolDoc::from_tool(
            "w",
            None,
            &json!({"name": "forecast", "description": "weather"}),
        ),
        ToolDoc::from_tool("c", None, &json!({"name": "rent", "description": "car"})),
    ];
    let plain = Index::build(docs.clone());
    assert!(plain.search("automobile", 5, None).is_empty());
    let index = Index::build(docs).with_model(model);
    let hits = index.search("automobile", 5, None);
    assert_eq!(names(&index, &hits)[0], "c/rent");
}

#[test]
fn a_broken_model_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    std::fs::write(dir.path().join("model.safetensors"), b"short").unwrap();
    let err = StaticEmbeddings::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("model.safetensors") && err.contains("header"),
        "{err}"
    );
    let missing = StaticEmbeddings::load(&dir.path().join("nope.safetensors")).unwrap_err();
    assert!(matches!(
        missing,
        SearchError::Format { .. } | SearchError::Io { .. }
    ));
}

#[test]
fn only_the_head_of_a_long_query_is_read() {
    let index = Index::build(corpus());
    let blob = "é".repeat(MAX_QUERY);
    let hits = index.search(&format!("weather forecast {blob} repositories"), 10, None);
    assert_eq!(names(&index, &hits), ["weather/getForecast"]);
}

#[test]
fn an_index_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Index>();
    shared::<StaticEmbeddings>();
}

/// Writes `tiny_model`'s tokenizer with an I8 matrix: rows as int8 with a
/// per-row factor, optionally without the `scales` tensor.
fn tiny_i8_model(dir: &std::path::Path, with_scales: bool) {
    tiny_model(dir);
    let rows: [[i8; 2]; 4] = [[0, 0], [127, 13], [127, 28], [0, 127]];
    let scales: [f32; 4] = [1.0, 0.5, 2.0, 1.0];
    let mut data: Vec<u8> = rows.iter().flatten().map(|&v| v as u8).collect();
    let mut head = json!({"embeddings": {"dtype": "I8", "shape": [4, 2], "data_offsets": [0, 8]}});
    if with_scales {
        data.extend(scales.iter().flat_map(|v| v.to_le_bytes()));
        head["scales"] = json!({"dtype": "F32", "shape": [4], "data_offsets": [8, 24]});
    }
    let head = head.to_string();
    let mut file = (head.len() as u64).to_le_bytes().to_vec();
    file.extend(head.as_bytes());
    file.extend(&data);
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
}

#[test]
fn an_int8_model_reads_its_rows_times_their_scales() {
    let dir = tempfile::tempdir().unwrap();
    tiny_i8_model(dir.path(), true);
    let model = StaticEmbeddings::load(dir.path()).unwrap();
    // "car automobile": 0.5 × (127, 13) + 2.0 × (127, 28), normalised.
    let v = model.embed("car automobile");
    let (x, y) = (0.5 * 127.0 + 2.0 * 127.0, 0.5 * 13.0 + 2.0 * 28.0);
    let n = f32::hypot(x, y);
    assert!(
        (v[0] - x / n).abs() < 1e-6 && (v[1] - y / n).abs() < 1e-6,
        "{v:?}"
    );
    let docs = vec![
        ToolDoc::from_tool(
            "w",
            None,
            &json!({"name": "forecast", "description": "weather"}),
        ),
        ToolDoc::from_tool("c", None, &json!({"name": "rent", "description": "car"})),
    ];
    let index = Index::build(docs).with_model(model);
    let hits = index.search("automobile", 5, None);
    assert_eq!(names(&index, &hits)[0], "c/rent");
}

#[test]
fn an_int8_model_without_scales_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    tiny_i8_model(dir.path(), false);
    let err = StaticEmbeddings::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("model.safetensors") && err.contains("scales"),
        "{err}"
    );
}
