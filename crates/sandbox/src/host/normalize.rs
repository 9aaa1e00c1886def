//! What models send, made into the code they meant.
//!
//! Models often wrap code in a markdown fence (```` ```ts ````, ```` ```typescript ````, a bare
//! ```` ``` ````), sometimes after a sentence of prose and before another. Read as code, the
//! fence is a template literal, and the script fails at 1:1 with an error about something else
//! entirely. [`model_code`] takes the fenced code out, and says how many lines came before it,
//! so every position the sandbox reports still points into what the model sent. Every tier
//! reads code through it (the transpiler and the single-call recogniser), so a fenced call
//! means the same wherever it runs.

use std::borrow::Cow;

/// Code as the sandbox reads it, and where it starts in what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCode<'a> {
    /// The code.
    pub code: Cow<'a, str>,
    /// Lines of what was sent before the code (prose and the opening fence).
    pub line_offset: u32,
}

/// The code in `sent`: the contents of its one markdown fence (prose before and after it
/// dropped), or `sent` itself when it has no fence. A fence counts only when the lines before
/// it read as prose, not as code, so a template literal that holds a fence is left alone.
pub fn model_code(sent: &str) -> ModelCode<'_> {
    let unchanged = ModelCode {
        code: Cow::Borrowed(sent),
        line_offset: 0,
    };
    // Line starts, by byte offset.
    let mut starts = vec![0usize];
    starts.extend(sent.match_indices('\n').map(|(at, _)| at + 1));
    let line = |i: usize| -> &str {
        let end = starts.get(i + 1).map_or(sent.len(), |next| next - 1);
        sent[starts[i]..end].trim_end_matches('\r')
    };
    let count = starts.len();
    let Some(open) = (0..count).find(|&i| is_opening_fence(line(i))) else {
        return unchanged;
    };
    if !(0..open).all(|i| reads_as_prose(line(i))) {
        return unchanged;
    }
    let close = (open + 1..count)
        .rev()
        .find(|&i| line(i).trim() == "```" || line(i).trim() == "~~~");
    let body_start = starts.get(open + 1).copied().unwrap_or(sent.len());
    let body_end = match close {
        Some(close) => starts[close],
        // An answer cut off before its closing fence: the rest is the code.
        None => sent.len(),
    };
    ModelCode {
        code: Cow::Borrowed(&sent[body_start..body_end.max(body_start)]),
        line_offset: u32::try_from(open + 1).unwrap_or(u32::MAX),
    }
}

/// ```` ``` ````, ```` ```ts ````, ```` ```typescript ````, `~~~js`: a fence and an optional
/// language tag, alone on the line.
fn is_opening_fence(line: &str) -> bool {
    let line = line.trim();
    let tag = line
        .strip_prefix("```")
        .or_else(|| line.strip_prefix("~~~"));
    tag.is_some_and(|tag| {
        tag.len() <= 20
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '_' | '.'))
    })
}

/// A line before a fence that is prose (or blank), not code.
fn reads_as_prose(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() {
        return true;
    }
    let code_like_end = [';', '{', '}', '(', ')', '[', ']', ',', '`', '=', '+'];
    !line.ends_with(code_like_end)
        && !line.starts_with("//")
        && !line.starts_with("const ")
        && !line.starts_with("let ")
        && !line.starts_with("await ")
        && !line.starts_with("return")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(sent: &str) -> (String, u32) {
        let code = model_code(sent);
        (code.code.into_owned(), code.line_offset)
    }

    #[test]
    fn fences_with_and_without_a_tag_and_prose_around_them() {
        assert_eq!(stripped("```ts\nreturn 1;\n```"), ("return 1;\n".into(), 1));
        assert_eq!(
            stripped("```typescript\nconst a = 1;\nreturn a;\n```\n"),
            ("const a = 1;\nreturn a;\n".into(), 1)
        );
        assert_eq!(stripped("```\nreturn 2\n```"), ("return 2\n".into(), 1));
        assert_eq!(
            stripped("Here is the script:\n\n```js\nreturn 3;\n```\nIt returns 3."),
            ("return 3;\n".into(), 3)
        );
        assert_eq!(
            stripped("```ts\r\nreturn 4;\r\n```\r\n"),
            ("return 4;\r\n".into(), 1)
        );
        assert_eq!(
            stripped("Sure:\n```ts\nreturn 5;"),
            ("return 5;".into(), 2),
            "an answer cut off before its closing fence"
        );
    }

    #[test]
    fn code_without_a_fence_or_with_one_inside_is_left_alone() {
        for code in [
            "return 1;",
            "const md = `\n```js\nx\n```\n`;\nreturn md;",
            "// a comment\n```ts\nreturn 1;\n```",
            "",
        ] {
            assert_eq!(stripped(code), (code.to_string(), 0), "{code:?}");
        }
    }
}
