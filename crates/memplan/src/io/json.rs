//! Plan JSON (filled in by the formats work).
