"""Real multi-label data: file formats, stores and sources."""
