//! A child process's standard error, read for as long as the child lives, in bounded lines.
//!
//! sandgate starts two kinds of children, backends and sandbox workers, and reads what each
//! writes to its standard error. Both readings need the same bounds, so both use this one:
//! - **It reads to the end.** Reading stops only when the child closes the pipe. A reader that
//!   stopped early would leave the child blocked on a full pipe, or kill it with `SIGPIPE` on
//!   its next write.
//! - **A line costs at most [`MAX_LINE_BYTES`].** A longer line is handed on cut, as soon as it
//!   reaches the bound, and the rest of it is skipped up to its newline: one 1 GB line without
//!   a newline once took the gateway to 2 GB.
//! - **Any bytes are read.** Bytes that are not UTF-8 are replaced, never an error, and a
//!   trailing `\r` is dropped.
//!
//! What happens to a line (a ring buffer, the log, a budget) is the caller's.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};

/// The longest line handed on whole; a longer one is cut to this many bytes.
pub const MAX_LINE_BYTES: usize = 2048;

/// Reads `stderr` until it ends (the child closed it or exited), handing each line to
/// `on_line` within the bounds in the module docs. A last line without a newline is handed
/// on too.
pub async fn read_lines(stderr: impl AsyncRead + Unpin, on_line: impl FnMut(&str)) {
    read_buffered(BufReader::with_capacity(16 * 1024, stderr), on_line).await;
}

async fn read_buffered(mut reader: impl AsyncBufRead + Unpin, mut on_line: impl FnMut(&str)) {
    let mut line: Vec<u8> = Vec::with_capacity(256);
    // The current line was already cut and handed on: skip to its newline.
    let mut skipping = false;
    loop {
        let (used, ended) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(bytes) => {
                let newline = bytes.iter().position(|b| *b == b'\n');
                let text = newline.map_or(bytes, |at| &bytes[..at]);
                if !skipping {
                    let room = MAX_LINE_BYTES.saturating_sub(line.len());
                    line.extend_from_slice(&text[..text.len().min(room)]);
                }
                (newline.map_or(bytes.len(), |at| at + 1), newline.is_some())
            }
        };
        reader.consume(used);
        let full = !skipping && line.len() >= MAX_LINE_BYTES;
        if (ended || full) && !skipping {
            hand_on(&line, &mut on_line);
            line.clear();
        }
        skipping = if ended { false } else { skipping || full };
    }
    if !line.is_empty() && !skipping {
        hand_on(&line, &mut on_line);
    }
}

fn hand_on(line: &[u8], on_line: &mut impl FnMut(&str)) {
    on_line(String::from_utf8_lossy(line).trim_end_matches('\r'));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// The lines `chunks` make, each chunk written on its own.
    async fn lines_of(chunks: Vec<Vec<u8>>) -> Vec<String> {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let reading = tokio::spawn(async move {
            let mut lines = Vec::new();
            read_lines(reader, |line| lines.push(line.to_string())).await;
            lines
        });
        for chunk in chunks {
            if writer.write_all(&chunk).await.is_err() {
                break;
            }
        }
        drop(writer);
        reading.await.unwrap_or_default()
    }

    #[tokio::test]
    async fn lines_are_joined_across_reads_and_a_last_one_without_a_newline_counts() {
        let chunks = vec![
            b"err".to_vec(),
            b"or: x\nsecond\r\n".to_vec(),
            b"tail".to_vec(),
        ];
        assert_eq!(lines_of(chunks).await, ["error: x", "second", "tail"]);
    }

    #[tokio::test]
    async fn bytes_that_are_not_utf8_are_replaced_and_reading_goes_on() {
        let chunks = vec![b"not utf-8: \xff\xfe end\nnext\n".to_vec()];
        assert_eq!(
            lines_of(chunks).await,
            ["not utf-8: \u{fffd}\u{fffd} end", "next"]
        );
    }

    #[tokio::test]
    async fn a_flood_without_a_newline_is_read_through_and_handed_on_cut() {
        // 20 MB with no newline: the writer never blocks, and one cut line is handed on.
        let mut chunks = vec![b"first\n".to_vec()];
        chunks.extend((0..20).map(|_| vec![b'x'; 1024 * 1024]));
        chunks.push(b"\nafter the flood\n".to_vec());
        let lines = lines_of(chunks).await;
        assert_eq!(
            lines.len(),
            3,
            "{:?}",
            lines.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "x".repeat(MAX_LINE_BYTES));
        assert_eq!(lines[2], "after the flood");
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_bound_is_whole_and_the_next_is_not_lost() {
        let mut exact = vec![b'a'; MAX_LINE_BYTES];
        exact.extend_from_slice(b"\nb\n");
        let lines = lines_of(vec![exact]).await;
        assert_eq!(lines, ["a".repeat(MAX_LINE_BYTES), "b".to_string()]);
    }
}
