"""The worldsmith Streamlit workbench, an installed package: `app.py` is the entry (`worldsmith workbench`, or
`streamlit run workbench/app.py` in a checkout); each page's pieces are in its own subpackage (`traces`,
`worldbook`, `simulate`, `evaluate`, `train`, `collect`, `home`), those several pages share in `common`.
The page scripts themselves are `pages/*.py` (`worldsmith._resources.pages_root`)."""
