//! `[output]`: how results are shaped for the model.

use serde_json::Value;

use crate::error::ConfigError;
use crate::model::*;
use crate::walker::Walker;

const OUTPUT_KEYS: &[&str] = &[
    "max_chars",
    "intent_min_bytes",
    "intent_min_term_ratio",
    "json_chunk_min_bytes",
    "json_sample_items",
    "footer_min_removed_bytes",
    "intent_filter",
    "json_chunking",
];

impl Walker<'_> {
    pub(crate) fn output_section(
        &self,
        value: Option<&Value>,
    ) -> Result<OutputConfig, ConfigError> {
        let Some(value) = value else {
            return Ok(OutputConfig::default());
        };
        let table = self.table("output", value)?;
        let known: Vec<&str> = OUTPUT_KEYS.to_vec();
        self.check_keys("output", table, &known, &[])?;
        let config: OutputConfig = serde_json::from_value(value.clone()).map_err(|e| {
            self.invalid(
                "output",
                format!("has a bad value: {e}"),
                "sizes are whole numbers of bytes or characters, switches true or false, intent_min_term_ratio a number from 0 to 1",
            )
        })?;
        if !(0.0..=1.0).contains(&config.intent_min_term_ratio) {
            return Err(self.invalid(
                "output.intent_min_term_ratio",
                format!("is {}", config.intent_min_term_ratio),
                "use a fraction from 0 to 1, e.g. 0.3",
            ));
        }
        if config.max_chars < 200 {
            return Err(self.invalid(
                "output.max_chars",
                format!("is {}", config.max_chars),
                "use at least 200 characters; 20000 is the default",
            ));
        }
        Ok(config)
    }
}
