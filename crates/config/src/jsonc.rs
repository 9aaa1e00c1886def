//! JSON with comments, as VS Code's `mcp.json` and Claude Desktop users write it: `//` and
//! `/* */` comments and trailing commas are removed (outside strings) before the JSON parser
//! sees the text. Line breaks are kept, so the parser's line numbers still point at the file.

/// `text` without comments and trailing commas.
pub fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            let len = utf8_len(c);
            out.push_str(&text[i..i + len]);
            if c == b'\\' && i + 1 < bytes.len() {
                let next = utf8_len(bytes[i + 1]);
                out.push_str(&text[i + 1..i + 1 + next]);
                i += 1 + next;
                continue;
            }
            if c == b'"' {
                in_string = false;
            }
            i += len;
            continue;
        }
        match (c, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                out.push('"');
                i += 1;
            }
            (b'/', Some(b'/' | b'*')) => {
                let end = comment_end(bytes, i);
                // Line breaks inside a block comment stay, so line numbers do.
                out.extend(bytes[i..end].iter().filter(|&&b| b == b'\n').map(|_| '\n'));
                i = end;
            }
            (b',', _) => {
                // A comma followed only by blanks (or comments) and a closing bracket is dropped.
                if !matches!(next_significant(bytes, i + 1), Some(b'}' | b']')) {
                    out.push(',');
                }
                i += 1;
            }
            _ => {
                let len = utf8_len(c);
                out.push_str(&text[i..i + len]);
                i += len;
            }
        }
    }
    out
}

/// The first byte at or after `i` that is neither a blank nor inside a comment.
fn next_significant(bytes: &[u8], mut i: usize) -> Option<u8> {
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b' ' | b'\t' | b'\r' | b'\n', _) => i += 1,
            (b'/', Some(b'/' | b'*')) => i = comment_end(bytes, i),
            (c, _) => return Some(c),
        }
    }
    None
}

/// Where the comment that starts at `i` (`//` or `/*`) ends: at its line break (kept), or
/// after its `*/`, or at the end of the text.
fn comment_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i + 2;
    if bytes[i + 1] == b'/' {
        while j < bytes.len() && bytes[j] != b'\n' {
            j += 1;
        }
        return j;
    }
    while j < bytes.len() && !(bytes[j] == b'*' && bytes.get(j + 1) == Some(&b'/')) {
        j += 1;
    }
    (j + 2).min(bytes.len())
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_and_trailing_commas_go_and_strings_stay() {
        let text = "{\n  // a comment\n  \"a\": \"http://x//y\", /* block\n */ \"b\": [1, 2,],\n  \"c\": \"q\\\"//\",\n}";
        let value: serde_json::Value = serde_json::from_str(&strip(text)).expect("json");
        assert_eq!(value["a"], "http://x//y");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        assert_eq!(value["c"], "q\"//");
        assert_eq!(strip(text).lines().count(), text.lines().count());
        assert_eq!(strip("{\"é\": \"ü,\"}"), "{\"é\": \"ü,\"}");
    }
}
