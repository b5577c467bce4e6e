"""The Plug-ins page's content: every extension point, what is registered in it, and plug-ins that failed."""

from workbench.plugins.tables import edge_failure_rows, extension_rows, failure_rows

__all__ = ["edge_failure_rows", "extension_rows", "failure_rows"]
