"""Reusable pieces of the workbench: cached data access, session/URL state, links and renderers.

Importing this package has no Streamlit side effects; each module draws only when called.
"""
