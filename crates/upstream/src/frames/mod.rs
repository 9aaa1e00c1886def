//! The inspector between a stdio backend's stdout and the MCP client: every line the backend
//! writes is checked and parsed here, and rmcp reads only what this passes on, so no message
//! can be lost without an answer.
//!
//! rmcp's own reader drops a line it cannot parse (too long, nested deeper than serde's 128 levels, not
//! UTF-8) and the call that waited for it only ends at its timeout, with a misleading message.
//! Here each line is read with a bound (the backend's `max_result_bytes`) and scanned once:
//! - a response that is too large, too deep or not UTF-8 is replaced by a JSON-RPC error for
//!   the same id, which the call reports at once ([`REFUSED_CODE`]);
//! - a `tools/list` page that is too deep has its deep parts cut to `null`, so only the tools
//!   they belong to lose their schema (the catalog then renders it as `unknown`);
//! - a lone UTF-16 surrogate escape (Node writes them for text cut mid-emoji) is replaced with
//!   `\ufffd` in place, as the sandbox does for strings;
//! - a tool result with content items of a type MCP does not define (rmcp cannot read it, and
//!   the whole answer used to be lost) keeps its other items; each unknown one is replaced by a
//!   text item that says what was not passed on;
//! - a line that is not JSON (a stray `console.log`) is counted and logged, never passed on.
//!
//! The scan is linear and keeps no more than one line (at most `max_result_bytes`); a line
//! over the bound is streamed through the scanner for its id and never held.
//!
//! Two kinds of message skip rmcp and are delivered here, in the order the backend wrote them:
//! the answers to direct calls (see `direct_call`), and progress notices for the calls that
//! asked for them. rmcp hands each notification to its own task, so a notice sent just before
//! an answer could reach its call after it, and the client never heard where the backend got.

mod scan;
mod tool_result;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{JsonRpcMessage, ServerNotification};

use scan::{Scanner, cut_deeper_than};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::direct_call::Waiting;

/// The JSON-RPC error code of a response sandgate wrote in place of one it refused.
pub(crate) const REFUSED_CODE: i32 = -32099;
/// The key in the refusal's `data` that marks it as sandgate's own.
pub(crate) const REFUSED_MARK: &str = "sandgate_refused";
/// Deepest message passed on (serde, inside rmcp, refuses past 128; the envelope takes a few).
pub(crate) const MAX_MESSAGE_DEPTH: usize = 100;
/// The most buffer kept between lines; a larger line's buffer is released after it.
const KEPT_LINE_CAPACITY: usize = 1024 * 1024;
/// How much of a held line is scanned between two yields, when it turns out too large.
const SCAN_CHUNK_BYTES: usize = 64 * 1024;
/// Lines up to this size are judged on the reading task; larger ones on a blocking thread.
const JUDGE_IN_PLACE_BYTES: usize = 256 * 1024;

/// Counts stdout lines that were not protocol messages.
#[derive(Debug, Default)]
pub(crate) struct StdoutNoise {
    lines: AtomicU64,
}

impl StdoutNoise {
    /// Number of non-protocol lines seen so far.
    pub(crate) fn count(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }
}

/// A message read from a backend, as rmcp takes it.
pub(crate) use crate::direct_call::Incoming;

/// Reads a backend's stdout line by line, inspects each (see the module docs) and sends the
/// messages on to rmcp, parsed. Ends when either side closes.
pub(crate) async fn inspect(
    stdout: impl AsyncRead + Unpin,
    mut out: futures::channel::mpsc::Sender<Incoming>,
    max_bytes: usize,
    noise: Arc<StdoutNoise>,
    backend: String,
    waiting: Arc<Waiting>,
    progress: ProgressDispatcher,
) {
    // However this ends, the calls still waiting for an answer end with it.
    let _closed = CloseOnDrop(waiting.clone());
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::with_capacity(4096);
    loop {
        if line.capacity() > KEPT_LINE_CAPACITY {
            line = Vec::with_capacity(4096);
        }
        line.clear();
        let decision = match read_line(&mut reader, &mut line, max_bytes).await {
            Ok(Line::End) | Err(_) => return,
            Ok(Line::Held) if line.len() <= JUDGE_IN_PLACE_BYTES => decide(&mut line),
            Ok(Line::Held) => {
                // Scanning and parsing a large line takes milliseconds: off the async threads,
                // so other backends' calls do not wait behind it.
                let mut held = std::mem::take(&mut line);
                match tokio::task::spawn_blocking(move || {
                    let decision = decide(&mut held);
                    (held, decision)
                })
                .await
                {
                    Ok((held, decision)) => {
                        line = held;
                        decision
                    }
                    Err(_) => return,
                }
            }
            Ok(Line::Oversized { scanner, bytes }) => refusal(
                &scanner,
                &Refusal::TooLarge {
                    bytes,
                    limit: max_bytes,
                },
            ),
        };
        match decision {
            Decision::Pass(message) => {
                if let Some(message) = hand_over(*message, &waiting, &progress).await
                    && futures::SinkExt::send(&mut out, message).await.is_err()
                {
                    return;
                }
            }
            Decision::Drop(Dropped::NotJson) => {
                noise.lines.fetch_add(1, Ordering::Relaxed);
                let shown = String::from_utf8_lossy(&line[..line.len().min(200)]);
                tracing::warn!(backend = %backend, "backend wrote a non-MCP line to stdout (MCP servers must log to stderr): {}", shown.trim_end());
            }
            Decision::Drop(why) => {
                tracing::debug!(backend = %backend, "dropped a backend message: {why:?}");
            }
        }
        // Lines come from a 64 KiB buffer, so reading thousands of them may touch the pipe
        // only a few times, and tokio's cooperative budget counts only those. Each line counts
        // here too: a backend that floods its stdout (200,000 lines of noise) then yields every
        // 128 lines, and the runtime polls its I/O in between, so clients whose requests arrive
        // on a socket or a pipe meanwhile are not held up for the whole flood.
        tokio::task::coop::consume_budget().await;
    }
}

/// The longest the inspector waits for a call to take a progress notice; past it the notice
/// is dropped. The call takes its notices while it waits for its answer, so this is only
/// reached by a call that stopped listening without dropping its subscription.
const PROGRESS_HANDOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Delivers `message` itself when it is an answer to a direct call or a progress notice for
/// a call that asked for progress; gives anything else back, for rmcp.
async fn hand_over(
    message: Incoming,
    waiting: &Waiting,
    progress: &ProgressDispatcher,
) -> Option<Incoming> {
    let message = waiting.deliver(message)?;
    if let JsonRpcMessage::Notification(notification) = &message
        && let ServerNotification::ProgressNotification(notice) = &notification.notification
    {
        let handed = progress.handle_notification(notice.params.clone());
        let _ = tokio::time::timeout(PROGRESS_HANDOVER_WAIT, handed).await;
        return None;
    }
    Some(message)
}

/// Ends the waiting direct calls when the inspector ends.
struct CloseOnDrop(Arc<Waiting>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// What becomes of one line.
#[derive(Debug)]
enum Decision {
    /// This message goes to rmcp.
    Pass(Box<Incoming>),
    /// Nothing does.
    Drop(Dropped),
}

/// Judges a held line and parses what is to be passed on.
fn decide(line: &mut [u8]) -> Decision {
    let forward = judge(line);
    let bytes: &[u8] = match &forward {
        Forward::Line => line,
        Forward::Replacement(bytes) => bytes,
        Forward::Nothing { why } => return Decision::Drop(*why),
    };
    parsed(bytes, || {
        let mut scanner = Scanner::default();
        scanner.feed_streaming(bytes);
        scanner
    })
}

/// The message in `bytes`, parsed once (a tool call's answer by `tool_result`, anything else by
/// rmcp's reader); if rmcp could not read it, a refusal for the id that
/// `scan` finds (the scan runs only then).
fn parsed(bytes: &[u8], scan: impl FnOnce() -> Scanner) -> Decision {
    if let Some(answer) = tool_result::tool_answer(bytes) {
        return Decision::Pass(Box::new(answer));
    }
    match serde_json::from_slice::<Incoming>(bytes) {
        Ok(message) => Decision::Pass(Box::new(keep_known_content(message))),
        Err(error) => refusal(
            &scan(),
            &Refusal::Invalid {
                detail: crate::error::bounded(&error.to_string()),
            },
        ),
    }
}

/// The refusal of the response the scanner read, parsed for rmcp (or nothing, when there is
/// no id to answer).
fn refusal(scanner: &Scanner, why: &Refusal) -> Decision {
    match refuse(scanner, why) {
        Forward::Replacement(bytes) => serde_json::from_slice::<Incoming>(&bytes)
            .map_or(Decision::Drop(Dropped::Unanswerable), |message| {
                Decision::Pass(Box::new(message))
            }),
        _ => Decision::Drop(Dropped::Unanswerable),
    }
}

/// A result rmcp read as no known kind (so not as a tool result) whose `content` holds items
/// of types MCP does not define: those items become text that says they were not passed on
/// (`crate::content`), and the rest is read again as a tool result. Any other message is
/// returned as it is (the check costs nothing for results rmcp reads).
fn keep_known_content(message: Incoming) -> Incoming {
    use rmcp::model::{CustomResult, JsonRpcMessage, ServerResult};
    let JsonRpcMessage::Response(mut response) = message else {
        return message;
    };
    if let ServerResult::CustomResult(CustomResult(serde_json::Value::Object(result))) =
        &response.result
        && let Some(repaired) = crate::content::with_known_content(result)
        && let Ok(read) =
            serde_json::from_value::<ServerResult>(serde_json::Value::Object(repaired))
        && !matches!(read, ServerResult::CustomResult(_))
    {
        response.result = read;
    }
    JsonRpcMessage::Response(response)
}

enum Line {
    /// The whole line (without its newline) is in the buffer.
    Held,
    /// The line passed the bound; it was scanned for its envelope and discarded.
    Oversized { scanner: Scanner, bytes: usize },
    /// The backend closed stdout.
    End,
}

/// Reads one line into `line`, holding at most `max_bytes` of it.
async fn read_line(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    line: &mut Vec<u8>,
    max_bytes: usize,
) -> std::io::Result<Line> {
    let mut over: Option<(Scanner, usize)> = None;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match over {
                Some((scanner, bytes)) => Line::Oversized { scanner, bytes },
                None if line.is_empty() => Line::End,
                None => Line::Held,
            });
        }
        let newline = memchr::memchr(b'\n', available);
        let take = newline.unwrap_or(available.len());
        match &mut over {
            Some((scanner, bytes)) => {
                scanner.feed_streaming(&available[..take]);
                *bytes += take;
            }
            None if line.len() + take > max_bytes => {
                // What was held (up to `max_bytes`) is scanned a chunk at a time, letting
                // other tasks run between chunks.
                let mut scanner = Scanner::default();
                for part in line.chunks(SCAN_CHUNK_BYTES) {
                    scanner.feed_streaming(part);
                    tokio::task::yield_now().await;
                }
                scanner.feed_streaming(&available[..take]);
                over = Some((scanner, line.len() + take));
                line.clear();
                line.shrink_to(4096);
            }
            None => line.extend_from_slice(&available[..take]),
        }
        let consumed = newline.map_or(take, |n| n + 1);
        reader.consume(consumed);
        if over.is_some() {
            // Scanning a huge line runs chunk after chunk while the pipe stays full: let other
            // tasks (other backends' calls) run between chunks.
            tokio::task::yield_now().await;
        }
        if newline.is_some() {
            return Ok(match over {
                Some((scanner, bytes)) => Line::Oversized { scanner, bytes },
                None => Line::Held,
            });
        }
    }
}

/// What to send on in place of a line.
#[derive(Debug, PartialEq)]
enum Forward {
    /// The line itself (possibly repaired in place).
    Line,
    /// A different message (a refusal, or the line with its deep parts cut).
    Replacement(Vec<u8>),
    /// Nothing.
    Nothing { why: Dropped },
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Dropped {
    /// Blank.
    Blank,
    /// Not a JSON-RPC message at all.
    NotJson,
    /// A request or notification from the backend that could not be passed on.
    Unanswerable,
}

/// Why a response was refused.
#[derive(Debug, Clone, PartialEq)]
enum Refusal {
    TooLarge {
        bytes: usize,
        limit: usize,
    },
    TooDeep,
    NotUtf8 {
        offset: usize,
    },
    /// Well-formed JSON that is not a JSON-RPC message rmcp can read.
    Invalid {
        detail: String,
    },
}

impl Refusal {
    fn kind(&self) -> &'static str {
        match self {
            Refusal::TooLarge { .. } => "too_large",
            Refusal::TooDeep => "too_deep",
            Refusal::NotUtf8 { .. } => "not_utf8",
            Refusal::Invalid { .. } => "invalid",
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::TooLarge { bytes, limit } => format!(
                "the result was {bytes} bytes, over this backend's max_result_bytes ({limit}). Ask for less (a page, a filter), or raise max_result_bytes for this backend in the config"
            ),
            Refusal::TooDeep => format!(
                "the result nests deeper than {MAX_MESSAGE_DEPTH} levels, which sandgate does not pass on. Ask the tool for a flatter shape"
            ),
            Refusal::NotUtf8 { offset } => format!(
                "the result is not valid UTF-8 (the first bad byte is at offset {offset}); MCP messages must be UTF-8 JSON, so this is a bug in the backend"
            ),
            Refusal::Invalid { detail } => format!(
                "the response is not a valid JSON-RPC message ({detail}), so this is a bug in the backend"
            ),
        }
    }
}

/// Decides what becomes of a line held whole, repairing lone surrogates in place.
fn judge(line: &mut [u8]) -> Forward {
    // A UTF-8 byte order mark may open a line (RFC 8259 lets parsers ignore it).
    if line.starts_with(b"\xEF\xBB\xBF") {
        line[..3].copy_from_slice(b"   ");
    }
    let Some(&first) = line.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Forward::Nothing {
            why: Dropped::Blank,
        };
    };
    if first != b'{' && first != b'[' {
        return Forward::Nothing {
            why: Dropped::NotJson,
        };
    }
    let mut scanner = Scanner::default();
    scanner.feed_repairing(line);
    if let Err(e) = std::str::from_utf8(line) {
        return refuse(
            &scanner,
            &Refusal::NotUtf8 {
                offset: e.valid_up_to(),
            },
        );
    }
    if scanner.max_depth <= MAX_MESSAGE_DEPTH {
        return Forward::Line;
    }
    if scanner.is_response() && scanner.result_lists_tools {
        return Forward::Replacement(cut_deeper_than(line, MAX_MESSAGE_DEPTH));
    }
    refuse(&scanner, &Refusal::TooDeep)
}

/// A JSON-RPC error for the refused response's id, or nothing if the line was not a response
/// with an id a client could have sent.
fn refuse(scanner: &Scanner, refusal: &Refusal) -> Forward {
    let id = match serde_json::from_slice::<serde_json::Value>(&scanner.id) {
        Ok(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_)))
            if scanner.is_response() =>
        {
            id
        }
        _ => {
            return Forward::Nothing {
                why: Dropped::Unanswerable,
            };
        }
    };
    let message = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": REFUSED_CODE,
            "message": refusal.message(),
            "data": { REFUSED_MARK: refusal.kind() },
        },
    });
    Forward::Replacement(message.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(text: &str) -> (Forward, String) {
        let mut line = text.as_bytes().to_vec();
        let forward = judge(&mut line);
        (forward, String::from_utf8_lossy(&line).into_owned())
    }

    fn replacement(forward: Forward) -> serde_json::Value {
        match forward {
            Forward::Replacement(bytes) => serde_json::from_slice(&bytes).expect("valid JSON"),
            other => panic!("expected a replacement, got {other:?}"),
        }
    }

    #[test]
    fn plain_messages_pass_untouched() {
        let text = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a \"quoted\" \ud83d\ude00 ok"}]}}"#;
        let (forward, line) = judged(text);
        assert_eq!(forward, Forward::Line);
        assert_eq!(line, text);
    }

    #[test]
    fn lone_surrogates_are_replaced_in_place() {
        let (forward, line) = judged(
            r#"{"result":{"content":[{"type":"text","text":"cut \ud83d","b":"\ude00x","c":"\ud83d\u0041"}]},"jsonrpc":"2.0","id":1}"#,
        );
        assert_eq!(forward, Forward::Line);
        let value: serde_json::Value = serde_json::from_str(&line).expect("parses");
        let item = &value["result"]["content"][0];
        assert_eq!(item["text"], "cut \u{fffd}");
        assert_eq!(item["b"], "\u{fffd}x");
        assert_eq!(item["c"], "\u{fffd}A");
    }

    #[test]
    fn a_too_deep_result_is_refused_for_its_id_even_when_the_id_comes_last() {
        let deep = format!("{}{}", "[".repeat(500), "]".repeat(500));
        let text = format!(
            r#"{{"result":{{"structuredContent":{{"x":{deep}}}}},"jsonrpc":"2.0","id":"req-7"}}"#
        );
        let error = replacement(judged(&text).0);
        assert_eq!(error["id"], "req-7");
        assert_eq!(error["error"]["code"], REFUSED_CODE);
        assert_eq!(error["error"]["data"][REFUSED_MARK], "too_deep");
    }

    #[test]
    fn a_too_deep_tool_list_keeps_its_shallow_parts() {
        let deep = format!(
            "{}{}",
            "{\"a\":".repeat(300),
            "1".to_string() + &"}".repeat(300)
        );
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"ok","inputSchema":{{"type":"object"}}}},{{"name":"deep","inputSchema":{deep}}}]}}}}"#
        );
        let value = replacement(judged(&text).0);
        assert_eq!(value["result"]["tools"][0]["name"], "ok");
        assert_eq!(value["result"]["tools"][1]["name"], "deep");
        let mut schema = &value["result"]["tools"][1]["inputSchema"];
        let mut levels = 0;
        while let Some(inner) = schema.get("a") {
            schema = inner;
            levels += 1;
        }
        assert!(schema.is_null(), "the deep part is cut to null");
        assert!(levels < MAX_MESSAGE_DEPTH, "{levels}");
    }

    #[test]
    fn invalid_utf8_is_refused_with_its_offset() {
        let mut line =
            br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"ab"#.to_vec();
        let offset = line.len();
        line.extend_from_slice(b"\xff\xfe\"}]}}");
        let error = replacement(judge(&mut line));
        assert_eq!(error["id"], 9);
        assert_eq!(error["error"]["data"][REFUSED_MARK], "not_utf8");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("offset {offset}"))
        );
    }

    #[test]
    fn requests_and_notifications_that_cannot_pass_are_dropped() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        let (forward, _) = judged(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{deep}}}"#
        ));
        assert_eq!(
            forward,
            Forward::Nothing {
                why: Dropped::Unanswerable
            }
        );
        let (forward, _) = judged("Server listening on port 3000");
        assert_eq!(
            forward,
            Forward::Nothing {
                why: Dropped::NotJson
            }
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_never_held_and_is_answered() {
        let body = "x".repeat(300_000);
        let input = format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{body}\"}}]}},\"jsonrpc\":\"2.0\",\"id\":41}}\n{{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{{}}}}\n"
        );
        let (out, received) = futures::channel::mpsc::channel(4);
        let noise = Arc::new(StdoutNoise::default());
        inspect(
            input.as_bytes(),
            out,
            100_000,
            noise,
            "t".into(),
            Waiting::new(),
            ProgressDispatcher::new(),
        )
        .await;
        let lines: Vec<serde_json::Value> = futures::StreamExt::collect::<Vec<_>>(received)
            .await
            .iter()
            .map(|m| serde_json::to_value(m).expect("serializable"))
            .collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["id"], 41);
        assert_eq!(lines[0]["error"]["data"][REFUSED_MARK], "too_large");
        assert!(
            lines[0]["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(&format!(
                    "{} bytes",
                    input.lines().next().map_or(0, str::len)
                )),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1]["id"], 42, "the next message still passes");
    }

    #[test]
    fn unknown_content_items_are_marked_and_the_rest_is_kept() {
        let mut line = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"kept"},{"type":"video","data":"AAAA","mimeType":"video/mp4"}]}}"#.to_vec();
        let Decision::Pass(message) = decide(&mut line) else {
            panic!("passed on");
        };
        let rmcp::model::JsonRpcMessage::Response(response) = *message else {
            panic!("a response");
        };
        let rmcp::model::ServerResult::CallToolResult(result) = response.result else {
            panic!("read as a tool result: {:?}", response.result);
        };
        let value = serde_json::to_value(&result).expect("serializable");
        assert_eq!(value["content"][0]["text"], "kept", "{value}");
        let marked = value["content"][1]["text"].as_str().unwrap_or("");
        assert!(marked.contains("\"video\" was not passed on"), "{value}");
    }

    #[test]
    fn a_response_rmcp_cannot_read_is_refused_for_its_id() {
        let mut line =
            br#"{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"both"}}"#.to_vec();
        let decided = decide(&mut line);
        let Decision::Pass(message) = decided else {
            panic!("expected a refusal, got {decided:?}");
        };
        let value = serde_json::to_value(&*message).expect("serializable");
        assert_eq!(value["id"], 5, "{value}");
        assert_eq!(value["error"]["data"][REFUSED_MARK], "invalid", "{value}");
    }
}
