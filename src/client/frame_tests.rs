//! The fast line reader against the reference reader, on a corpus of odd
//! lines and every prefix and byte-flip of them.

use serde_json::Value;

use super::super::wire::{parse_server_line, ServerFrame};
use super::parse_server_line_fast;

fn never(_: &Value) -> bool {
    false
}

fn always(_: &Value) -> bool {
    true
}

fn nested(depth: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth))
}

fn corpus() -> Vec<Vec<u8>> {
    let mut v: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"id":1,"jsonrpc":"2.0","result":{"history":{"mode":"snapshot","snapshot":{"state":{"revision":3}}},"viewCursor":"v:1"}}"#,
        r#"{"jsonrpc":"2.0","id":"b9","error":{"code":-32030,"data":{"kind":"commandRejected"}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"approval/request","params":{"sessionId":"s","approvalId":"a"}}"#,
        r#"{"emittedAtMs":1754590931189,"jsonrpc":"2.0","method":"turn/started","params":{"sessionId":"s","turnId":"t"}}"#,
        r#"{"jsonrpc":"2.0","method":"turn/started"}"#,
        r#"{"jsonrpc":"2.0","method":"x","params":null}"#,
        // Duplicate members: the last one wins.
        r#"{"id":1,"id":2,"result":{}}"#,
        r#"{"id":1,"result":1,"result":2}"#,
        r#"{"id":1,"result":{"a":1,"a":2},"jsonrpc":"2.0","jsonrpc":"1"}"#,
        r#"{"method":"a","method":"b","params":1,"params":[2]}"#,
        r#"{"id":1,"result":5,"id":"x"}"#,
        r#"{"result":5,"id":1}"#,
        r#"{"error":{},"id":1}"#,
        r#"{"id":1,"method":"m","result":3}"#,
        // Numbers.
        r#"{"id":1,"result":1e400}"#,
        r#"{"id":1,"result":[1,2,-1e400]}"#,
        r#"{"id":1,"result":{},"jsonrpc":1e400}"#,
        r#"{"method":"m","params":{},"emittedAtMs":1e400}"#,
        r#"{"method":"m","params":{"x":1e400}}"#,
        r#"{"id":1e400,"result":1}"#,
        r#"{"id":-0,"result":-0.0}"#,
        r#"{"id":18446744073709551616,"result":-9223372036854775809}"#,
        r#"{"id":18446744073709551615,"result":1.5e3}"#,
        r#"{"id":01,"result":1}"#,
        r#"{"id":1,"result":1.}"#,
        // Escapes.
        r#"{"\u0069d":1,"result":"\u00e9\n\t\"\\\/"}"#,
        r#"{"id":1,"result":"\ud800"}"#,
        r#"{"id":1,"result":"\ud83d\ude00"}"#,
        r#"{"id":1,"result":"\udc00x"}"#,
        r#"{"id":1,"result":"\x"}"#,
        r#"{"id":1,"result":"\u12"}"#,
        r#"{"id":1,"x":"\ud800","result":1}"#,
        "{\"id\":1,\"result\":\"a\u{1}b\"}",
        "{\"id\":1,\"x\":\"a\u{1}b\",\"result\":1}",
        "{\"id\":1,\"result\":\"h\u{e9}\u{1F600}\"}",
        // serde_json's raw-value token as a first key.
        r#"{"$serde_json::private::RawValue":"{\"id\":1,\"result\":2}"}"#,
        r#"{"id":1,"result":{"$serde_json::private::RawValue":"[1]"}}"#,
        r#"{"id":1,"result":{"$serde_json::private::RawValue":"[1"}}"#,
        r#"{"id":1,"x":{"$serde_json::private::RawValue":"[1]"},"result":1}"#,
        r#"{"id":1,"x":{"$serde_json::private::RawValue":"nope"},"result":1}"#,
        r#"{"id":1,"result":{"a":1,"$serde_json::private::RawValue":"[1]"}}"#,
        // Results a skip must scan plainly or leave alone.
        r#"{"id":1,"result":{"a":"x\"e1\\","b":[true,false,null,-1.5,0,-0,0.25]}}"#,
        r#"{"id":1,"result":[1e5,2E-3,3e+2]}"#,
        r#"{"id":1,"result":{"k":"$serde_json::private::RawValue","$":"$"}}"#,
        r#"{"id":1,"result":["\\u0041","\n\t\/\b\f\r"]}"#,
        r#"{"id":1,"result":"\u0041"}"#,
        r#"{"id":1,"result":-}"#,
        r#"{"id":1,"result":[1,]}"#,
        r#"{"id":1,"result":{"a":1,}}"#,
        r#"{"id":1,"result":{"a" 1}}"#,
        r#"{"id":1,"result":{1:1}}"#,
        r#"{"id":1,"result":tru}"#,
        r#"{"id":1,"result":[01]}"#,
        r#"{"id":1,"result":[1.]}"#,
        r#"{"id":1,"result":[.5]}"#,
        r#"{"id":1,"result":[1e]}"#,
        r#"{"id":1,"result":"\q"}"#,
        // Shapes.
        r#"{"id":null,"result":1}"#,
        r#"{"id":null,"method":"x"}"#,
        r#"{"id":1,"result":1,"error":2}"#,
        r#"{"id":1}"#,
        r#"{"method":3}"#,
        r#"{"method":null,"id":1,"result":1}"#,
        r#"{}"#,
        r#"[]"#,
        r#""x""#,
        r#"3"#,
        r#"null"#,
        "",
        " ",
        "nope",
        r#" {"id":1,"result":1} "#,
        r#"{"id":1,"result":1} x"#,
        r#"{"id":1,"result":1}{}"#,
        r#"{"id":1,"result":1,}"#,
        r#"{"id":1 "result":1}"#,
        r#"{id:1}"#,
        "\u{feff}{\"id\":1,\"result\":1}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Nesting around serde_json's limit, in each member.
    for n in [299, 300, 301, 309, 310, 400] {
        let big = "9".repeat(n);
        v.push(format!(r#"{{"id":1,"result":[{big},-{big},0.{big}]}}"#));
        v.push(format!(r#"{{"id":1,"result":{big}.5}}"#));
    }
    for d in [1, 99, 100, 101, 126, 127, 128, 129, 200] {
        v.push(format!(r#"{{"id":1,"result":{}}}"#, nested(d, "1")));
        v.push(format!(r#"{{"id":1,"x":{},"result":1}}"#, nested(d, "")));
        v.push(format!(r#"{{"method":"m","params":{}}}"#, nested(d, "{}")));
        v.push(format!(r#"{{"id":{},"result":1}}"#, nested(d, "")));
    }
    let mut out: Vec<Vec<u8>> = v.into_iter().map(String::into_bytes).collect();
    // Not UTF-8.
    out.push(b"{\"id\":1,\"result\":\"\xff\"}".to_vec());
    out.push(b"{\"id\":1,\"x\":\"\xc3\",\"result\":1}".to_vec());
    out.push(b"\xff".to_vec());
    out
}

/// What the reference reader gives with the result of a response whose
/// result is unwanted read as `Null`.
fn result_nulled(
    r: Result<ServerFrame, super::super::wire::BadFrame>,
) -> Result<ServerFrame, super::super::wire::BadFrame> {
    match r {
        Ok(ServerFrame::Response { id, answer: Ok(_) }) => Ok(ServerFrame::Response {
            id,
            answer: Ok(Value::Null),
        }),
        other => other,
    }
}

/// The fast reader agrees with the reference one on `line`, when it
/// answers at all; returns whether it did.
fn agrees(line: &[u8]) -> bool {
    let reference = parse_server_line(line);
    let fast = parse_server_line_fast(line, &never);
    if let Some(f) = &fast {
        assert_eq!(f, &reference, "{}", String::from_utf8_lossy(line));
    }
    // With every result unwanted: the same, results aside, which the core
    // reads as `Null` whichever reader read them.
    if let Some(f) = parse_server_line_fast(line, &always) {
        assert_eq!(
            result_nulled(f),
            result_nulled(reference),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    fast.is_some()
}

#[test]
fn the_fast_reader_agrees_with_the_reference_on_odd_lines() {
    for line in corpus() {
        agrees(&line);
    }
}

#[test]
fn the_fast_reader_agrees_on_every_prefix_and_byte_flip() {
    let flips: &[u8] = b"\"{}[],:\\0e-.u \xff";
    for line in corpus() {
        for n in 0..line.len() {
            agrees(&line[..n]);
            for &b in flips {
                let mut l = line.clone();
                l[n] = b;
                agrees(&l);
            }
        }
    }
}

#[test]
fn ordinary_lines_take_the_fast_path() {
    for line in [
        &br#"{"jsonrpc":"2.0","id":1,"result":{"a":[1,2.5,"x",null,true]}}"#[..],
        br#"{"id":2,"jsonrpc":"2.0","error":{"code":-32024,"message":"m","data":{}}}"#,
        br#"{"jsonrpc":"2.0","id":7,"method":"approval/request","params":{}}"#,
        br#"{"emittedAtMs":1,"jsonrpc":"2.0","method":"turn/started","params":{}}"#,
        br#"{"id":1,"result":1e400,"jsonrpc":"2.0"}"#,
    ] {
        let fast_ok = parse_server_line(line).is_ok();
        assert_eq!(agrees(line), fast_ok, "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn an_unwanted_result_is_checked_not_built() {
    let line = br#"{"id":3,"jsonrpc":"2.0","result":{"big":[1,2,3]}}"#;
    let unwanted = |id: &Value| id.as_u64() == Some(3);
    assert_eq!(
        parse_server_line_fast(line, &unwanted),
        Some(Ok(ServerFrame::Response {
            id: serde_json::json!(3),
            answer: Ok(Value::Null),
        }))
    );
    // Still checked: a bad number in it leaves the line to the reference
    // reader, which refuses it.
    let bad = br#"{"id":3,"result":{"big":[1e400]}}"#;
    assert_eq!(parse_server_line_fast(bad, &unwanted), None);
    assert!(parse_server_line(bad).is_err());
    // Plain values of every kind are scanned, not left to the reference.
    let plain = br#"{"id":3,"result":{"a":"x\"y\\","b":[true,false,null,-1.5,0,12345678901234567890],"c":{"d":"cafe \n"}},"jsonrpc":"2.0"}"#;
    assert_eq!(
        parse_server_line_fast(plain, &unwanted),
        Some(Ok(ServerFrame::Response {
            id: serde_json::json!(3),
            answer: Ok(Value::Null),
        }))
    );
    // A later `id` the skip was not decided on: the reference reader.
    let moved = br#"{"id":3,"result":{},"id":4}"#;
    assert_eq!(parse_server_line_fast(moved, &unwanted), None);
}
