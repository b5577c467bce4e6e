"""The Collect and Play pages' pieces: the environment and task pickers, an episode's transcript."""
