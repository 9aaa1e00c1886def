//! Full outputs: the text of every result that shaping shortened, readable whole or by byte
//! range. Ranges are moved to character boundaries, so a slice is always valid UTF-8 and the
//! slices of a walk through the output join back to the exact original.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::error::StoreError;
use crate::ids::now_ms;
use crate::sqlite::Store;

/// Part of a stored output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputSlice {
    /// The text of `start..end`.
    pub text: String,
    /// First byte (inclusive).
    pub start: usize,
    /// Last byte (exclusive); read on from here.
    pub end: usize,
    /// Size of the whole output, in bytes.
    pub total_bytes: usize,
}

impl Store {
    /// Keeps `body` as the full output of execution `id`.
    pub fn save_output(&mut self, id: &str, body: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO outputs (execution_id, created_at_ms, body) VALUES (?1, ?2, ?3)",
            params![id, now_ms(), body],
        )?;
        self.wrote()
    }

    /// The whole stored output of execution `id`.
    pub fn output(&self, id: &str) -> Result<String, StoreError> {
        self.conn
            .query_row(
                "SELECT body FROM outputs WHERE execution_id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::NoOutput { id: id.to_string() })
    }

    /// The whole stored output `id` for the operator, whoever's it is: `id` itself, else the
    /// same id stored for an HTTP caller (`id@owner`, see the gateway's `Caller`).
    pub fn output_for_operator(&self, id: &str) -> Result<String, StoreError> {
        if let Ok(body) = self.output(id) {
            return Ok(body);
        }
        self.conn
            .query_row(
                "SELECT body FROM outputs WHERE execution_id > ?1 AND execution_id < ?2 ORDER BY execution_id LIMIT 1",
                [format!("{id}@"), format!("{id}A")],
                |row| row.get(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::NoOutput { id: id.to_string() })
    }

    /// Bytes `offset..offset + length` of the output (to the end when `length` is `None`),
    /// with both ends moved back to the nearest character boundary.
    pub fn output_range(
        &self,
        id: &str,
        offset: usize,
        length: Option<usize>,
    ) -> Result<OutputSlice, StoreError> {
        let body = self.output(id)?;
        slice(&body, offset, length)
    }
}

/// Cuts `offset..offset + length` out of `body` on character boundaries.
pub fn slice(body: &str, offset: usize, length: Option<usize>) -> Result<OutputSlice, StoreError> {
    let total = body.len();
    if offset > total || (offset == total && total > 0) {
        return Err(StoreError::Range { offset, total });
    }
    let start = floor_boundary(body, offset);
    let wanted_end = length.map_or(total, |l| offset.saturating_add(l).min(total));
    let mut end = floor_boundary(body, wanted_end);
    if end <= start && start < total {
        // The range was inside one character: return that character whole.
        end = body[start..]
            .chars()
            .next()
            .map_or(total, |c| start + c.len_utf8());
    }
    Ok(OutputSlice {
        text: body[start..end].to_string(),
        start,
        end,
        total_bytes: total,
    })
}

/// The bytes around a byte range that [`slice_window`] needs: from three bytes before `offset`
/// (a character has at most three continuation bytes) to four past the range's end. Returns
/// the window's first byte and its length (`None`: to the end).
pub(crate) fn window_for(offset: usize, length: Option<usize>) -> (usize, Option<usize>) {
    let start = offset.saturating_sub(3);
    let length = length.map(|l| offset.saturating_add(l).saturating_add(4) - start);
    (start, length)
}

/// What [`slice`] cuts out of the whole output, cut out of the [`window_for`] the range
/// instead (bytes `window_start..` of an output of `total` bytes): an engine that reads part of
/// an output reads only the window.
pub(crate) fn slice_window(
    window: &[u8],
    window_start: usize,
    total: usize,
    offset: usize,
    length: Option<usize>,
) -> Result<OutputSlice, StoreError> {
    if offset > total || (offset == total && total > 0) {
        return Err(StoreError::Range { offset, total });
    }
    let window_end = window_start + window.len();
    let byte = |at: usize| window.get(at.wrapping_sub(window_start)).copied();
    // A boundary is the end, or a byte that does not continue a character.
    let is_boundary = |at: usize| at == total || byte(at).is_some_and(|b| b & 0xC0 != 0x80);
    let floor = |mut at: usize| {
        while at > window_start && !is_boundary(at) {
            at -= 1;
        }
        at
    };
    let start = floor(offset);
    let wanted_end = length.map_or(total, |l| offset.saturating_add(l).min(total));
    let mut end = floor(wanted_end.min(window_end));
    if end <= start && start < total {
        let width = match byte(start) {
            Some(b) if b >= 0xF0 => 4,
            Some(b) if b >= 0xE0 => 3,
            Some(b) if b >= 0xC0 => 2,
            _ => 1,
        };
        end = (start + width).min(total);
    }
    let text = window
        .get(start - window_start..end - window_start)
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .ok_or(StoreError::Corrupt {
            what: "a stored output is not UTF-8 text",
        })?;
    Ok(OutputSlice {
        text: text.to_string(),
        start,
        end,
        total_bytes: total,
    })
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_never_split_a_character_and_join_back() {
        let body = "aé😀b漢字\nend";
        for step in 1..6 {
            let mut joined = String::new();
            let mut at = 0;
            while at < body.len() {
                let part = slice(body, at, Some(step)).unwrap();
                assert!(part.end > at, "progress at {at} step {step}");
                joined.push_str(&part.text);
                at = part.end;
            }
            assert_eq!(joined, body);
        }
        assert!(matches!(
            slice(body, 999, None),
            Err(StoreError::Range { .. })
        ));
        assert_eq!(slice("", 0, None).unwrap().text, "");
    }

    #[test]
    fn a_slice_of_the_window_is_the_slice_of_the_whole() {
        let body = "aé😀b漢字\nend😀😀é";
        for offset in 0..=body.len() + 1 {
            for length in (0..8).map(Some).chain([None]) {
                let (start, window_length) = window_for(offset, length);
                let bytes = body.as_bytes();
                let window_end =
                    window_length.map_or(bytes.len(), |l| (start + l).min(bytes.len()));
                let window = bytes.get(start.min(bytes.len())..window_end).unwrap_or(&[]);
                let whole = slice(body, offset, length);
                let part = slice_window(window, start, bytes.len(), offset, length);
                match (whole, part) {
                    (Ok(whole), Ok(part)) => assert_eq!(whole, part, "{offset} {length:?}"),
                    (Err(_), Err(_)) => {}
                    (whole, part) => panic!("{offset} {length:?}: {whole:?} against {part:?}"),
                }
            }
        }
    }
}
