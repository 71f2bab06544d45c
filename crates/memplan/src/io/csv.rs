//! minimalloc CSV (filled in by the formats work).
