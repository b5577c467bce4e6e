"""The Traces page's pieces: importing trace files, dataset and episode pickers, the turn-by-turn timeline."""
