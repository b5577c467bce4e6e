"""Answer sources of the harness, one module each (`records`: tool-API records and write rules)."""
