"""The Evaluate page's pieces: launching eval jobs, reading runs, their tables, charts and failure clusters."""
