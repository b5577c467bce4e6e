"""The Home page's pieces: the overview of the workspace's datasets."""
