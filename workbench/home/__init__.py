"""The Home page's pieces: running jobs, datasets, worldbooks and evaluation runs of the workspace."""
