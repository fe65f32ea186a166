//! PROTOCOL.md section 5, the scripted agent, as the model expects it:
//! directives at the start of the input text, and what a turn emits.

/// The directives of an input text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// `!sleep N` (summed).
    pub sleep_ms: u64,
    /// `!fail-launch`.
    pub fail_launch: bool,
    /// `!effect PROVIDER ACTION`.
    pub effect: Option<(String, String)>,
    /// `!task N`.
    pub task_ms: Option<u64>,
    /// `!retry N`: the first N model attempts fail retryably.
    pub retry_failures: u64,
}

/// `!retry N`: model attempts per turn; the failure of the last one ends
/// the turn `failed` with a `modelError`.
pub const RETRY_ATTEMPTS_MAX: u64 = 3;
/// `!retry N`: the wait before each retried attempt (host ms).
pub const RETRY_DELAY_MS: u64 = 2000;

/// Reads the directives at the start of `text`: each a `!word` and its
/// arguments, separated by whitespace; the first other word ends them.
pub fn script(text: &str) -> Script {
    let mut s = Script::default();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "!sleep" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => s.sleep_ms = s.sleep_ms.saturating_add(n),
                None => break,
            },
            "!fail-launch" => s.fail_launch = true,
            "!effect" => match (words.next(), words.next()) {
                (Some(p), Some(a)) => s.effect = Some((p.to_string(), a.to_string())),
                _ => break,
            },
            "!task" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => s.task_ms = Some(n),
                None => break,
            },
            "!retry" => match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => s.retry_failures = n,
                None => break,
            },
            _ => break,
        }
    }
    s
}

/// The text of a turn's agent message: `"echo: " + input`, then each
/// steered input joined by `" | "`.
pub fn message(input: &str, steers: &[String]) -> String {
    let mut m = format!("echo: {input}");
    for s in steers {
        m.push_str(" | ");
        m.push_str(s);
    }
    m
}

/// The input text of `input: [{type: "text", text}]` (parts joined by a
/// newline).
pub fn input_text(params: &serde_json::Value) -> String {
    params["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Longest delta, in characters.
pub const DELTA_CHARS_MAX: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_and_message() {
        let s = script("!sleep 10 !sleep 5 !effect keyed a-1 rest");
        assert_eq!(s.sleep_ms, 15);
        assert_eq!(s.effect, Some(("keyed".into(), "a-1".into())));
        assert!(!script("x !fail-launch").fail_launch);
        assert_eq!(script("!task 40").task_ms, Some(40));
        assert_eq!(script("!retry 2 x").retry_failures, 2);
        assert_eq!(message("a", &["b".into(), "c".into()]), "echo: a | b | c");
    }
}
