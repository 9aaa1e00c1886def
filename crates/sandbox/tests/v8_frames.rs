//! The V8 worker's frame codec (`worker/v8/frames.js`) against the Rust one (`wire/protocol.rs`),
//! for every frame kind each side sends the other: host frames the Rust encoder writes are read
//! by the JavaScript decoder, and worker frames the JavaScript encoder writes are read by the
//! Rust decoder, with ids at the edge of what a JavaScript number holds, text outside ASCII,
//! every call-failure kind, a frame over the size limit and one cut short. Runs where
//! `SANDGATE_DENO` names a `deno` (`scripts/test`'s V8 stage sets it).

#![allow(clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine as _;
use sandgate_sandbox::protocol::{
    CallFailure, Callee, FailureKind, Frame, HostFrame, RunMode, ToolBinding, WorkerFrame,
};
use sandgate_sandbox::{Fault, Limits};
use serde_json::{Value, json};

/// The largest id the worker's ids reach exactly: a JavaScript number holds integers to 2^53.
const EDGE: u64 = (1 << 53) - 1;

/// What the harness does after `frames.js`: reads every host frame on stdin, answers each as
/// `{Host: <what readHostFrame read>}`, reports a frame over the limit and a frame cut short,
/// then sends one worker frame of every kind.
const HARNESS: &str = r#"
const chunks = [];
for await (const chunk of Deno.stdin.readable) chunks.push(chunk);
const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
let put = 0;
for (const c of chunks) { all.set(c, put); put += c.length; }
const out = [];
const at = takeFrames(all, all.length, (body) => out.push(jsonFrame({ Host: readHostFrame(body) })));
out.push(jsonFrame({ Left: all.length - at }));
const huge = new Uint8Array(8);
new DataView(huge.buffer).setUint32(0, MAX_FRAME_BYTES + 1, true);
try { takeFrames(huge, huge.length, () => {}); out.push(jsonFrame({ Refused: null })); }
catch (e) { out.push(jsonFrame({ Refused: String(e.message) })); }
const EDGE = 9007199254740991;
out.push(callFrame(EDGE, EDGE - 1, true, 4294967295, '{"text":"é ✓ \\u0000 😀"}', [12, 5]));
out.push(callFrame(1, 2, false, 0, "[]", null));
out.push(jsonFrame({ Ready: { protections: [["seccomp", true], ["landlock", false]], template_bytes: null, fresh_per_run: true } }));
out.push(jsonFrame({ CancelCall: { run: 3, id: EDGE } }));
out.push(jsonFrame({ Log: { run: 3, level: "warn", message: "ü\nline two" } }));
out.push(jsonFrame({ Done: { run: 3, outcome: { Ok: "{\"a\":[1,2]}" }, stats: { memory_bytes: 1048576, calls: 2 } } }));
out.push(jsonFrame({ Done: { run: EDGE, outcome: { Err: { kind: "timeout", name: "TimeoutError", message: "out of time", stack: "" } }, stats: { memory_bytes: 0, calls: 0 } } }));
out.push(jsonFrame({ Done: { run: 4, outcome: { Err: { kind: null, name: "ReferenceError", message: "x is not defined", stack: "at code.js:1:1", fault: { fault: "not_defined", name: "x" } } }, stats: { memory_bytes: 0, calls: 0 } } }));
for (const frame of out) {
  let written = 0;
  while (written < frame.length) written += Deno.stdout.writeSync(frame.subarray(written));
}
"#;

fn framed(frame: &HostFrame) -> Vec<u8> {
    let mut body = Vec::new();
    frame.encode_body(&mut body).expect("encoded");
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend(body);
    out
}

fn bodies(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    while bytes.len() >= 4 {
        let length = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        found.push(bytes[4..4 + length].to_vec());
        bytes = &bytes[4 + length..];
    }
    assert!(
        bytes.is_empty(),
        "the harness's output ends in a partial frame"
    );
    found
}

fn host_frames() -> Vec<HostFrame> {
    let mut frames = vec![
        HostFrame::Run {
            run: EDGE,
            js: "return \"é ✓ 😀\";".into(),
            tools: Some(vec![ToolBinding {
                backend: "my-server".into(),
                name: "get-sum".into(),
                js_backend: "my_server".into(),
                js_tool: "get_sum".into(),
                declaration: "function get_sum(args: { a: number }): Promise<unknown>;".into(),
            }]),
            host_functions: vec!["fetch".into(), "state.get".into()],
            env: vec![
                ("HOME".into(), Some("/nowhere".into())),
                ("UNSET".into(), None),
            ],
            context: Some(json!({"input": {"n": 1}})),
            limits: Limits::default(),
            reply_spin_micros: 30,
            mode: RunMode::Tool,
        },
        HostFrame::Reply {
            run: EDGE,
            id: EDGE - 1,
            result: Ok(r#"{"content":[{"type":"text","text":"é ✓ \u0000 😀"}]}"#.into()),
        },
        HostFrame::Cancel { run: 7 },
    ];
    for kind in FailureKind::ALL {
        frames.push(HostFrame::Reply {
            run: 2,
            id: 3,
            result: Err(CallFailure::new(
                kind,
                format!("{} — “quoted”", kind.as_str()),
            )),
        });
    }
    frames
}

/// What `readHostFrame` must read from `frame`: a reply as `{run, id, ok | err: {kind,
/// message}}`, any other frame as its JSON.
fn expected(frame: &HostFrame) -> Value {
    match frame {
        HostFrame::Reply { run, id, result } => match result {
            Ok(text) => json!({"Reply": {"run": run, "id": id, "ok": text}}),
            Err(failure) => json!({"Reply": {"run": run, "id": id, "err": {
                "kind": failure.kind.as_str(), "message": failure.message,
            }}}),
        },
        other => serde_json::to_value(other).expect("a JSON frame"),
    }
}

#[test]
fn the_v8_worker_reads_and_writes_frames_as_the_host_does() {
    #[expect(clippy::disallowed_methods, reason = "the test finds deno")]
    let Ok(deno) = std::env::var("SANDGATE_DENO") else {
        eprintln!("SANDGATE_DENO is not set: the V8 frame test runs in scripts/test's V8 stage");
        return;
    };
    let codec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/worker/v8/frames.js"
    ))
    .expect("frames.js");
    let script = format!(
        "data:text/javascript;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(format!("{codec}\n{HARNESS}"))
    );
    let mut child = Command::new(deno)
        .args(["run", "--quiet", "--no-prompt", "--no-config", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deno starts");
    let frames = host_frames();
    let mut input: Vec<u8> = frames.iter().flat_map(framed).collect();
    // A frame cut short: its length says 10 bytes, 3 follow.
    input.extend(10u32.to_le_bytes());
    input.extend(b"{\"C");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&input).expect("frames written");
    drop(stdin);
    let output = child.wait_with_output().expect("deno ends");
    assert!(
        output.status.success(),
        "the harness failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut answers = bodies(&output.stdout).into_iter();

    // Host frames, as the JavaScript decoder read them.
    for frame in &frames {
        let read: Value =
            serde_json::from_slice(&answers.next().expect("an answer")).expect("JSON");
        assert_eq!(read, json!({"Host": expected(frame)}), "{frame:?}");
    }
    let left: Value = serde_json::from_slice(&answers.next().expect("left")).expect("JSON");
    assert_eq!(left, json!({"Left": 7}), "the frame cut short stays unread");
    let refused: Value = serde_json::from_slice(&answers.next().expect("refused")).expect("JSON");
    assert!(
        refused["Refused"]
            .as_str()
            .is_some_and(|m| m.contains("over the limit")),
        "a frame over the limit is refused: {refused}"
    );

    // Worker frames, as the Rust decoder reads them.
    let worker: Vec<WorkerFrame> = answers
        .map(|body| WorkerFrame::decode_body(&body).expect("a worker frame"))
        .collect();
    assert_eq!(worker.len(), 8, "{worker:?}");
    assert!(
        matches!(&worker[0], WorkerFrame::Call { run: EDGE, id, callee: Callee::Tool(u32::MAX), args, site: Some((12, 5)) }
        if *id == EDGE - 1 && args == "{\"text\":\"é ✓ \\u0000 😀\"}"),
        "{:?}",
        worker[0]
    );
    assert!(
        matches!(&worker[1], WorkerFrame::Call { run: 1, id: 2, callee: Callee::Host(0), args, site: None } if args == "[]"),
        "{:?}",
        worker[1]
    );
    assert!(
        matches!(&worker[2], WorkerFrame::Ready { protections, template_bytes: None, fresh_per_run: true }
        if *protections == vec![("seccomp".to_string(), true), ("landlock".to_string(), false)]),
        "{:?}",
        worker[2]
    );
    assert!(
        matches!(&worker[3], WorkerFrame::CancelCall { run: 3, id: EDGE }),
        "{:?}",
        worker[3]
    );
    assert!(
        matches!(&worker[4], WorkerFrame::Log { run: 3, level, message } if level == "warn" && message == "ü\nline two"),
        "{:?}",
        worker[4]
    );
    assert!(
        matches!(&worker[5], WorkerFrame::Done { run: 3, outcome: Ok(text), stats } if text == "{\"a\":[1,2]}" && stats.memory_bytes == 1 << 20 && stats.calls == 2),
        "{:?}",
        worker[5]
    );
    assert!(
        matches!(&worker[6], WorkerFrame::Done { run: EDGE, outcome: Err(e), .. }
        if e.kind == Some(sandgate_sandbox::ErrorKind::Timeout) && e.message == "out of time" && e.fault.is_none()),
        "{:?}",
        worker[6]
    );
    assert!(
        matches!(&worker[7], WorkerFrame::Done { run: 4, outcome: Err(e), .. }
        if e.kind.is_none() && e.fault == Some(Fault::NotDefined { name: "x".into() })),
        "{:?}",
        worker[7]
    );
}
