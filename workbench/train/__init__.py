"""The Train page's pieces: the run and sweep forms, background jobs, the views of runs and sweeps."""
