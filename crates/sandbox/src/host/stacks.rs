//! Stack traces in the user's own terms. QuickJS names positions in the wrapped, type-stripped
//! script (`code.js`) and in sandgate's own modules; a model reading an error its code logged
//! needs the line and column in the code it wrote, and none of sandgate's frames.

use std::borrow::Cow;
use std::fmt::Write;

use crate::worker::engine::USER_FILE;
use crate::host::transpile::PositionMap;

/// How the frames of sandgate's own modules (the preamble, the web basics) name their file.
const OWN_MODULES: &str = "(sandgate:";

/// The position in the wrapped script that a stack frame names, if the frame is in the user's
/// code: where its `(` starts, and the 1-based line and column.
fn wrapped_position(frame: &str) -> Option<(usize, u32, u32)> {
    let open = frame.rfind('(')?;
    let inner = frame[open + 1..].trim_end().strip_suffix(')')?;
    let (line, column) = inner
        .strip_prefix(USER_FILE)?
        .strip_prefix(':')?
        .split_once(':')?;
    Some((open, line.parse().ok()?, column.parse().ok()?))
}

/// The first position in the user's code that a stack names, as (line, column) in the source.
pub(crate) fn first_user_position(stack: &str, positions: &PositionMap) -> Option<(u32, u32)> {
    stack.lines().find_map(|frame| {
        let (_, line, column) = wrapped_position(frame)?;
        positions.to_source(line, column)
    })
}

/// The frames of the user's code in a stack, innermost first: the function's name (`None` for
/// the top level) and its (line, column) in the source.
pub(crate) fn user_frames(stack: &str, positions: &PositionMap) -> Vec<(Option<String>, u32, u32)> {
    stack
        .lines()
        .filter_map(|frame| {
            let (open, line, column) = wrapped_position(frame)?;
            let (line, column) = positions.to_source(line, column)?;
            let name = frame[..open].trim().strip_prefix("at ")?.trim();
            let named = !name.is_empty() && !name.starts_with('<') && name != "main";
            Some((named.then(|| name.to_string()), line, column))
        })
        .collect()
}

/// `text` (a log line) with every stack frame it holds pointed at the user's code: a frame in
/// the user's code reads `(line L, column C)` in the source's own coordinates, and frames of
/// sandgate's modules and of the wrapper around the code are left out. Text without frames
/// comes back as it was.
pub(crate) fn in_user_terms<'t>(text: &'t str, positions: &PositionMap) -> Cow<'t, str> {
    if !text.contains(USER_FILE) && !text.contains(OWN_MODULES) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let frame = line.trim_end_matches('\n');
        if !frame.trim_start().starts_with("at ") {
            out.push_str(line);
            continue;
        }
        if let Some((open, wrapped_line, wrapped_column)) = wrapped_position(frame) {
            // A position the map cannot place is the wrapper's own code: not the user's.
            if let Some((source_line, source_column)) =
                positions.to_source(wrapped_line, wrapped_column)
            {
                out.push_str(&frame[..open]);
                let _ = write!(out, "(line {source_line}, column {source_column})");
                out.push_str(&line[frame.len()..]);
            }
        } else if !frame.contains(OWN_MODULES) {
            out.push_str(line);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::transpile::transpile;

    #[test]
    fn frames_point_at_the_source_and_sandgate_frames_are_left_out() {
        // Types stripped from line 1 shift columns; the wrapper shifts lines.
        let source = "const a: number = 1;\nfunction f(): never { throw new Error(\"x\"); }\nf();";
        let positions = transpile(source).expect("valid").positions;
        let wrapped = |line: u32, column: u32| -> String {
            // Find the wrapped position the map places at the wanted source position.
            (1..40)
                .flat_map(|l| (1..80).map(move |c| (l, c)))
                .find(|&(l, c)| positions.to_source(l, c) == Some((line, column)))
                .map(|(l, c)| format!("{USER_FILE}:{l}:{c}"))
                .expect("the position is in the map")
        };
        let logged = format!(
            "Error: x\n    at f ({})\n    at ToolError (sandgate:preamble:38:13)\n    at <anonymous> ({})\n    at <eval> ({USER_FILE}:999:1)\n    at map (native)\nafter",
            wrapped(2, 29),
            wrapped(3, 1)
        );
        assert_eq!(
            in_user_terms(&logged, &positions),
            "Error: x\n    at f (line 2, column 29)\n    at <anonymous> (line 3, column 1)\n    at map (native)\nafter"
        );
        assert_eq!(first_user_position(&logged, &positions), Some((2, 29)));
        let plain = "no frames here";
        assert!(matches!(in_user_terms(plain, &positions), Cow::Borrowed(_)));
        let mentions = "code.js is just a word here\n  and (sandgate: too";
        assert_eq!(in_user_terms(mentions, &positions), mentions);
    }
}
