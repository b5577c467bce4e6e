"""Pieces shared by several workbench pages: cached data access, session/URL state, links, paths and text.

Importing this package (or any page's package) has no Streamlit side effects; each module draws only when called.
"""
