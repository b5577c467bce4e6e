"""The Simulate page's pieces: a session's turns and the side-by-side view against a recorded episode."""
