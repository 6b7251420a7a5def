use super::*;

fn why(s: &[u8]) -> Why {
    check(s).expect_err(&String::from_utf8_lossy(s)).why
}

#[test]
fn what_some_parsers_accept_is_refused() {
    assert_eq!(why(br#"{"n": NaN}"#), Why::NotANumber);
    assert_eq!(why(br#"{"n": Infinity}"#), Why::NotANumber);
    assert_eq!(why(br#"{"n": -Infinity}"#), Why::NotANumber);
    assert_eq!(why(br#"{"s": "\ud800"}"#), Why::LoneSurrogate);
    assert_eq!(why(br#"{"s": "\udc00"}"#), Why::LoneSurrogate);
    assert_eq!(why(br#"{"s": "\ud800\u0041"}"#), Why::LoneSurrogate);
    assert_eq!(why(br#"{"\ud800": 1}"#), Why::LoneSurrogate);
    assert_eq!(why(b"\xEF\xBB\xBF{}"), Why::ByteOrderMark);
    assert_eq!(why(b"{\"s\": \"\xff\"}"), Why::NotUtf8);
    assert_eq!(why(br#"{"a": 1, "a": 2}"#), Why::DuplicateKey("a".into()));
    // The same key spelt two ways is still the same key.
    assert_eq!(
        why(br#"{"a": 1, "\u0061": 2}"#),
        Why::DuplicateKey("a".into())
    );
    assert_eq!(why(br#"{"n": 1e400}"#), Why::NumberOutOfRange);
    assert_eq!(why(b"{\"s\": \"a\tb\"}"), Why::ControlCharacter);
    assert_eq!(why(br#"{} x"#), Why::TrailingBytes);
    assert_eq!(why(br#"{}{}"#), Why::TrailingBytes);
    assert_eq!(why(b"  "), Why::Empty);
    assert!(matches!(
        why(br#"{"n": 01}"#),
        Why::TrailingBytes | Why::Syntax(_)
    ));
    assert!(matches!(why(br#"{"n": +1}"#), Why::Syntax(_)));
    assert!(matches!(why(br#"{"s": "\x"}"#), Why::Syntax(_)));
    assert!(matches!(why(br#"{"a": 1,}"#), Why::Syntax(_)));
    assert!(matches!(why(br#"{'a': 1}"#), Why::Syntax(_)));
    let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
    assert_eq!(why(deep.as_bytes()), Why::TooDeep);
}

#[test]
fn many_keys_find_their_duplicate_too() {
    let mut s = String::from("{");
    for i in 0..40 {
        s.push_str(&format!("\"k{i}\": {i},"));
    }
    s.push_str("\"k3\": 0}");
    assert_eq!(why(s.as_bytes()), Why::DuplicateKey("k3".into()));
    // The same key in different objects is fine.
    check(br#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#).unwrap();
}

#[test]
fn exact_json_passes_and_reads_as_serde_json_reads_it() {
    let ok: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"s":"\ud83d\ude00 \u00e9 \" \\ \/ \b\f\n\r\t","n":-0.5e-3,"big":123456789012345678901234567890,"t":true,"f":false,"z":null,"a":[],"o":{}}}}"#,
        b"\n\t{ \"a\" : [ 1 , 2 ] }\r\n",
        br#"{"s": "\u0000"}"#,
        br#"{"n": 1e-400}"#,
        br#"[1, "x", null]"#,
        "{\"s\": \"é 😀\"}".as_bytes(),
    ];
    for s in ok {
        let (v, _) = read(s).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(s)));
        assert_eq!(v, serde_json::from_slice::<Value>(s).unwrap());
    }
    let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
    read(deep.as_bytes()).unwrap();
}

#[test]
fn the_routing_fields_are_found() {
    let m = br#"{"params":{"arguments":{"name":"no"},"name":"wipe"},"jsonrpc":"2.0","method":"tools/call","id":12}"#;
    let f = check(m).unwrap();
    assert_eq!(f.method(m), Some("tools/call"));
    assert_eq!(f.number_id(m), Some(12));
    assert_eq!(f.name(m).as_deref(), Some("wipe"));
    assert_eq!(f.id_value(m), Some(serde_json::json!(12)));
    // A nested `id` or `method` is not the message's.
    let m = br#"{"result":{"id":3,"method":"x"}}"#;
    assert_eq!(check(m).unwrap(), Fields::default());
}

#[test]
fn a_refused_message_is_still_glimpsed() {
    let m = br#"{"result":{"content":[{"type":"text","text":"\ud800"}]},"jsonrpc":"2.0","id":41}"#;
    assert_eq!(why(m), Why::LoneSurrogate);
    assert_eq!(glimpse(m).number_id(m), Some(41));
    let m = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"wipe_disk","arguments":{"n":NaN,"m":-Infinity}}}"#;
    let f = glimpse(m);
    assert_eq!(f.method(m), Some("tools/call"));
    assert_eq!(f.name(m).as_deref(), Some("wipe_disk"));
    assert_eq!(f.id_value(m), Some(serde_json::json!("a")));
    let m = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"w\ud800"}}"#;
    assert_eq!(glimpse(m).name(m).as_deref(), Some("w\u{FFFD}"));
    // A first part only: what was seen before it ends.
    let m = br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"text":"xxxx"#;
    assert_eq!(glimpse(m).number_id(m), Some(9));
}

#[test]
fn a_trailing_id_is_read_from_the_last_bytes() {
    assert_eq!(trailing_id(br#"xx"}]},"jsonrpc":"2.0","id":17}"#), Some(17));
    assert_eq!(trailing_id(b"x\"}, \"id\" : 17 }\n"), Some(17));
    assert_eq!(trailing_id(br#"xx"},"xid":17}"#), None);
    assert_eq!(trailing_id(br#"xx"},"id":"a"}"#), None);
    assert_eq!(trailing_id(br#"xx"}"#), None);
}

#[test]
fn errors_say_where() {
    let e = check(b"{\n  \"n\": NaN}").unwrap_err();
    assert_eq!((e.line, e.column), (2, 8));
    assert!(e.to_string().contains("NaN"), "{e}");
    assert!(e.to_string().ends_with("line 2, column 8"), "{e}");
}

/// What the strict read costs (`cargo test -p xy-actors --release --lib
/// mcp::strict::tests::bench -- --ignored --nocapture`): a typical
/// `tools/call`, a `tools/list` answer of 100 tools, and a 1 MiB call.
#[test]
#[ignore = "a benchmark"]
#[allow(clippy::print_stderr)]
fn bench() {
    use std::time::Instant;
    let call = br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"tool_42","arguments":{"path":"/tmp","query":"x","limit":5}}}"#.to_vec();
    let tools: Vec<Value> = (0..100)
        .map(|i| serde_json::json!({"name": format!("tool_{i}"),
            "description": format!("Does thing number {i} with the given path, query and limit; returns what it found."),
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "Where to look"},
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100}}}}))
        .collect();
    let list = serde_json::to_vec(
        &serde_json::json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": tools}}),
    )
    .unwrap();
    let big = serde_json::to_vec(
        &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "w", "arguments": {"text": "é\"x".repeat(1 << 18)}}}),
    )
    .unwrap();
    for (what, msg, n) in [
        ("tools/call", &call, 200_000),
        ("tools/list of 100", &list, 2_000),
        ("1 MiB call", &big, 50),
    ] {
        let mut times: Vec<f64> = (0..n)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(check(std::hint::black_box(msg)).unwrap());
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let mut serde: Vec<f64> = (0..n)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(serde_json::from_slice::<Value>(msg).unwrap());
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        serde.sort_by(f64::total_cmp);
        eprintln!(
            "strict bench: {what} ({} bytes): check p50 {:.2} µs; serde_json Value p50 {:.2} µs",
            msg.len(),
            times[n / 2],
            serde[n / 2]
        );
    }
}
