//! Fuzz logic shared by the `fuzz/` targets and the smoke tests (filled in by the formats work).
