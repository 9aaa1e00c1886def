//! The options several commands share.

use std::path::PathBuf;

/// The `--config` option shared by the commands.
#[derive(Debug, clap::Args)]
pub struct ConfigArg {
    /// A sandgate.toml or an mcpServers JSON file (claude_desktop_config.json, .mcp.json).
    /// Default: ./sandgate.toml, then ./.mcp.json.
    #[arg(long, short, env = "SANDGATE_CONFIG")]
    pub config: Option<PathBuf>,
}
