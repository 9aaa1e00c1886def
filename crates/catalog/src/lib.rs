//! The tool catalog: everything sandgate knows about the tools of all backends, as pure data.
//!
//! It turns backend tool lists into qualified names (`backend.tool`), JavaScript identifiers
//! for the sandbox, a BM25 search index, TypeScript declarations, and the return shapes
//! learned from results of tools that declare none. It is pure (no I/O, no
//! async) so the server, the call tiers and the sandbox can all share one immutable snapshot,
//! and so every behaviour here is unit-testable without a backend.

mod arguments;
mod catalog;
mod error;
mod names;
mod python;
mod search;
mod shapes;
mod synonyms;
mod terms;
mod tool_ref;
mod typescript;

pub use arguments::argument_problems;
pub use catalog::{Catalog, Collision, Entry, ToolSpec};
pub use error::CatalogError;
pub use names::{is_reserved_word, sanitize_ident};
pub use python::PyDecl;
pub use search::{SearchHit, SearchIndex};
pub use shapes::{
    LearnedShape, MAX_SHAPE_DEPTH, MAX_SHAPE_FIELDS, MAX_SHAPE_NODES, Observed, is_field_name,
    is_vocabulary_word, names_a_secret,
};
pub use tool_ref::{Origin, ToolRef};
pub use typescript::{Detail, TsDecl};
